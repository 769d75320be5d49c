/*! retail-media beacon.js: the browser side of the beacon contract (spec "Events",
 * rules 2, 8, 9, 10). Dependency-free ES2017, no build step; served by the api at
 * /sdk/beacon.js. Every event is a GET to <endpoint>/v1/events/ad/interaction with
 * each value encodeURIComponent'ed, timestamp = new Date().toISOString() when fired,
 * and the session's one tracking id (given, or random and kept in sessionStorage).
 * Bad input (a negative or fractional cart count, a missing id) sends nothing: the
 * call returns false and onError (default console.warn) gets the reason; tracking
 * never throws into the page.
 *
 * Viewability (rule 9), per product key (adId, catalogId, productCode), however many
 * elements show it: an element is "in view" while at least `threshold` of it is
 * visible (IntersectionObserver). An occurrence starts when the key comes in view;
 * productImpression fires once the key has been in view continuously for
 * `durationMs` (any dip out of view before that restarts the count). The occurrence
 * ends only after the key has been out of view for `graceMs` without a break: dips
 * shorter than that (scroll jitter) and re-renders (the element replaced, or the same
 * key observed again) stay in the same occurrence and never fire twice.
 *
 * HTML5 video without VAST (rule 8), trackVideo: one view per call. creativeView on
 * the first frame (loadeddata), play on the first 'playing', quartiles and complete
 * only when playback itself crosses the mark (two timeupdates, or the last one and
 * 'ended' / a loop wrap, with no seek between), each after its predecessor: a seek
 * past a mark never synthesises it nor anything after it. Every milestone fires at
 * most once per view, so loops and replays repeat nothing. Pause/resume and
 * mute/unmute report the settled state controlDebounceMs after the last toggle
 * (rapid toggles that end where they started send nothing); the pause at the end of
 * playback is not a pause. skip() sends videoSkip once, never after complete, and
 * ends the view (pending control toggles are dropped). The milestones sent are kept
 * in sessionStorage per (adId, videoId): a reload that keeps the realised ad id is
 * still the same view (rule 3) and repeats none. */
(function (root) {
  'use strict';
  var PATH = '/v1/events/ad/interaction';
  var cfg = null, trackingId = null, io = null, visWired = false, onError = null;
  var keys = new Map(), elKey = new WeakMap(), cartUnits = new Map();

  function warn(msg) {
    var e = new Error('RetailMediaBeacon: ' + msg);
    (onError || function (x) { if (root.console) root.console.warn(x.message); })(e);
    return false;
  }
  function nonEmpty(v) { return typeof v === 'string' && v.length > 0; }
  function randomId() {
    var c = root.crypto;
    if (c && c.randomUUID) return c.randomUUID();
    var b = new Uint8Array(16);
    if (c && c.getRandomValues) c.getRandomValues(b);
    else for (var i = 0; i < 16; i++) b[i] = Math.floor(Math.random() * 256);
    return Array.from(b, function (x) { return (x + 256).toString(16).slice(1); }).join('');
  }
  function sessionTrackingId(key) {
    try {
      var s = root.sessionStorage, v = s.getItem(key);
      if (!v) { v = randomId(); s.setItem(key, v); }
      return v;
    } catch (e) { return randomId(); } // storage disabled: one id for this page
  }

  function init(o) {
    o = o || {};
    if (typeof o.onError === 'function') onError = o.onError;
    var v = o.viewability || {};
    var dur = v.durationMs == null ? 1000 : v.durationMs;
    var tp = o.trackingParam || 'sessionId';
    if (['sessionId', 'customerId', 'dtmToken'].indexOf(tp) < 0) return warn('trackingParam must be sessionId, customerId or dtmToken');
    var c = {
      endpoint: String(o.endpoint || '').replace(/\/+$/, ''),
      trackingParam: tp,
      threshold: v.threshold == null ? 0.5 : v.threshold,
      durationMs: dur,
      graceMs: v.graceMs == null ? dur : v.graceMs,
      controlDebounceMs: o.controlDebounceMs == null ? 300 : o.controlDebounceMs,
      transport: o.transport || (typeof root.fetch === 'function' ? 'fetch' : 'image'),
    };
    if (!(c.threshold > 0 && c.threshold <= 1)) return warn('viewability.threshold must be in (0, 1]');
    var bad = ['durationMs', 'graceMs', 'controlDebounceMs'].filter(function (k) { return !(c[k] >= 0 && isFinite(c[k])); });
    if (bad.length) return warn(bad.join(', ') + ' must be a number of milliseconds >= 0');
    cfg = c;
    trackingId = nonEmpty(o.trackingId) ? o.trackingId : sessionTrackingId('rmBeacon.' + tp);
    if (root.document && !visWired) {
      visWired = true; // time on a hidden tab does not count as time in view
      root.document.addEventListener('visibilitychange', function () {
        keys.forEach(function (s) {
          if (!hidden()) startDwell(s);
          else if (s.dwell) { clearTimeout(s.dwell); s.dwell = null; }
        });
      });
    }
    return api;
  }

  /** Fires one event now; returns the URL sent, or false. */
  function send(type, fields) {
    if (!cfg) return warn('call init() first');
    if (!nonEmpty(fields.adId)) return warn(type + ': adId is required');
    var p = [['adId', fields.adId], ['interactionType', type],
      ['timestamp', new Date().toISOString()], [cfg.trackingParam, trackingId]];
    Object.keys(fields).forEach(function (k) {
      if (k !== 'adId' && fields[k] != null) p.push([k, String(fields[k])]);
    });
    var url = cfg.endpoint + PATH + '?' + p.map(function (kv) {
      return encodeURIComponent(kv[0]) + '=' + encodeURIComponent(kv[1]);
    }).join('&');
    try {
      if (typeof cfg.transport === 'function') cfg.transport(url);
      else if (cfg.transport === 'fetch') root.fetch(url, { mode: 'no-cors', keepalive: true, credentials: 'omit' }).catch(function () {});
      else { var img = new root.Image(1, 1); img.src = url; }
    } catch (e) { return warn('send failed: ' + e.message); }
    return url;
  }

  function product(type, o) {
    o = o || {};
    if (!nonEmpty(o.productCode) || !nonEmpty(o.catalogId)) return warn(type + ': productCode and catalogId are required');
    return send(type, { adId: o.adId, productCode: o.productCode, catalogId: o.catalogId });
  }

  // ---- viewability (rule 9) ----
  function keyState(o) {
    var k = [o.adId, o.catalogId, o.productCode].join('\u0000');
    var s = keys.get(k);
    if (!s) { s = { o: o, inView: new Set(), fired: false, dwell: null, grace: null }; keys.set(k, s); }
    return s;
  }
  function hidden() { return root.document && root.document.visibilityState === 'hidden'; }
  function startDwell(s) {
    if (s.fired || s.dwell || s.inView.size === 0 || hidden()) return;
    s.dwell = setTimeout(function () {
      s.dwell = null;
      if (s.inView.size > 0 && !s.fired && !hidden()) { s.fired = true; product('productImpression', s.o); }
    }, cfg.durationMs);
  }
  function setInView(s, el, visible) {
    var before = s.inView.size;
    s.inView.forEach(function (x) { if (!x.isConnected) s.inView.delete(x); }); // removed without a notification
    if (visible) {
      s.inView.add(el);
      if (s.grace) { clearTimeout(s.grace); s.grace = null; }
      startDwell(s);
    } else {
      s.inView.delete(el);
      if (before > 0 && s.inView.size === 0) { // the key just left view
        if (s.dwell) { clearTimeout(s.dwell); s.dwell = null; }
        s.grace = setTimeout(function () { s.grace = null; s.fired = false; }, cfg.graceMs);
      }
    }
  }
  function onIntersect(entries) {
    entries.forEach(function (e) {
      var s = elKey.get(e.target);
      if (!s) return;
      setInView(s, e.target, e.isIntersecting && e.intersectionRatio >= cfg.threshold - 1e-6);
      if (!e.target.isConnected) { io.unobserve(e.target); elKey.delete(e.target); }
    });
  }

  /** Observes a product tile; `click: true` also wires productClick on it. */
  function observeProduct(el, o) {
    o = o || {};
    if (!cfg) return warn('call init() first');
    if (!el || el.nodeType !== 1) return warn('observeProduct: an element is required');
    if (!nonEmpty(o.adId) || !nonEmpty(o.productCode) || !nonEmpty(o.catalogId)) return warn('observeProduct: adId, productCode and catalogId are required');
    if (typeof root.IntersectionObserver !== 'function') return warn('IntersectionObserver is not available');
    var s = keyState(o), old = elKey.get(el);
    if (old === s) return true;
    if (!io) io = new root.IntersectionObserver(onIntersect, { threshold: [0, cfg.threshold, 1] });
    if (old) { setInView(old, el, false); io.unobserve(el); } // re-keyed: observe afresh
    elKey.set(el, s);
    io.observe(el);
    if (o.click && !el.__rmClick) {
      el.__rmClick = true;
      el.addEventListener('click', function () { var k = elKey.get(el); product('productClick', k ? k.o : o); });
    }
    return true;
  }

  /** Wires every [data-rm-ad-id] tile (data-rm-product-code, data-rm-catalog-id) or
   * creative (data-rm-creative-id) under `scope`; `watch` also wires later ones. */
  function autoWire(scope, watch) {
    scope = scope || root.document;
    function wire(n) {
      if (n.nodeType !== 1) return;
      var all = [n].concat(Array.from(n.querySelectorAll('[data-rm-ad-id]')));
      all.forEach(function (el) {
        var d = el.dataset || {};
        if (!d.rmAdId) return;
        if (d.rmProductCode) observeProduct(el, { adId: d.rmAdId, productCode: d.rmProductCode, catalogId: d.rmCatalogId, click: true });
        else if (d.rmCreativeId && !el.__rmClick) {
          el.__rmClick = true;
          el.addEventListener('click', function () { creativeClick({ adId: d.rmAdId, creativeId: d.rmCreativeId }); });
        }
      });
    }
    wire(scope.documentElement || scope);
    if (watch && root.MutationObserver) {
      new root.MutationObserver(function (ms) {
        ms.forEach(function (m) { m.addedNodes.forEach(wire); });
      }).observe(scope.documentElement || scope, { childList: true, subtree: true });
    }
  }

  function creativeClick(o) {
    o = o || {};
    if (!nonEmpty(o.creativeId)) return warn('creativeClick: creativeId is required');
    return send('creativeClick', { adId: o.adId, creativeId: o.creativeId });
  }

  // ---- cart (rule 10) ----
  /** Sends the line's absolute units (0 on removal), never a delta. */
  function cart(o) {
    o = o || {};
    var u = typeof o.units === 'string' && /^\d+$/.test(o.units) ? Number(o.units) : o.units;
    if (!Number.isInteger(u) || u < 0 || u > 1e6) return warn('cart: units must be the absolute count, an integer from 0 to 1000000 (never a delta), got ' + o.units);
    var cv = o.conversionValue;
    if (cv != null && (typeof cv !== 'number' || !isFinite(cv))) return warn('cart: conversionValue must be a finite number');
    if (!nonEmpty(o.productCode) || !nonEmpty(o.catalogId)) return warn('cart: productCode and catalogId are required');
    var url = send('cart', { adId: o.adId, productCode: o.productCode, catalogId: o.catalogId, units: u,
      conversionValue: cv == null ? null : String(cv).replace('e+', 'e') });
    if (url) cartUnits.set(o.catalogId + '\u0000' + o.productCode, u);
    return url;
  }
  /** Like cart(), but sends nothing when the units equal the last sent for the line. */
  function cartChanged(o) {
    o = o || {};
    var last = cartUnits.get(o.catalogId + '\u0000' + o.productCode);
    return last !== undefined && last === Number(o.units) ? false : cart(o);
  }

  // ---- HTML5 video without VAST (rule 8) ----
  var MARKS = [[0.25, 'videoFirstQuartile'], [0.5, 'videoMidpoint'], [0.75, 'videoThirdQuartile'], [1, 'videoComplete']];
  /** Tracks one view of `video`; returns {skip(), detach()}. */
  function trackVideo(video, o) {
    o = o || {};
    if (!cfg) return warn('call init() first');
    if (!video || typeof video.addEventListener !== 'function') return warn('trackVideo: a video element is required');
    if (!nonEmpty(o.adId) || !nonEmpty(o.videoId)) return warn('trackVideo: adId and videoId are required');
    // Milestones sent for this (adId, videoId) in this session: a reload of a page
    // that kept the same realised ad id is the same view to the aggregator.
    var skey = 'rmBeacon.video.' + o.adId + '\u0000' + o.videoId;
    var sent = {};
    try { sent = JSON.parse(root.sessionStorage.getItem(skey)) || {}; } catch (e) { sent = {}; }
    var next = 0, last = null, started = false, seeking = false, on = [];
    while (next < MARKS.length && sent[MARKS[next][1]]) next++;
    var ctl = {
      pause: { now: false, told: false, t: null, yes: 'videoPause', no: 'videoResume' },
      mute: { now: isMuted(), told: isMuted(), t: null, yes: 'videoMute', no: 'videoUnmute' },
    };
    function isMuted() { return !!video.muted || video.volume === 0; }
    function once(type) {
      if (sent[type]) return;
      sent[type] = true;
      try { root.sessionStorage.setItem(skey, JSON.stringify(sent)); } catch (e) { /* memory only */ }
      send(type, { adId: o.adId, videoId: o.videoId });
    }
    function control(c, state) {
      c.now = state;
      if (c.t) clearTimeout(c.t);
      c.t = setTimeout(function () {
        c.t = null;
        if (c.now !== c.told) { c.told = c.now; send(c.now ? c.yes : c.no, { adId: o.adId, videoId: o.videoId }); }
      }, cfg.controlDebounceMs);
    }
    function progress(to) {
      var d = video.duration;
      if (!started || !(d > 0) || !isFinite(d)) return;
      if (last !== null && !seeking && to >= last) {
        while (next < MARKS.length && last < MARKS[next][0] * d && to >= MARKS[next][0] * d) once(MARKS[next++][1]);
      }
      last = to; seeking = false;
    }
    function listen(name, fn) { video.addEventListener(name, fn); on.push([name, fn]); }
    function detach() {
      on.forEach(function (x) { video.removeEventListener(x[0], x[1]); });
      on = [];
      [ctl.pause, ctl.mute].forEach(function (c) { if (c.t) clearTimeout(c.t); });
    }
    listen('loadeddata', function () { once('videoCreativeView'); });
    listen('playing', function () {
      if (started) return;
      started = true; last = video.currentTime;
      once('videoCreativeView'); once('videoPlay');
    });
    listen('timeupdate', function () { progress(video.currentTime); });
    listen('ended', function () { progress(video.duration); });
    listen('seeking', function () {
      var d = video.duration;
      // A loop wraps by seeking to the start: playback did reach the end.
      if (video.loop && last !== null && !seeking && last >= d - 0.5 && video.currentTime < 0.5) progress(d);
      seeking = true;
    });
    listen('pause', function () { if (started && !video.ended) control(ctl.pause, true); });
    listen('play', function () { if (started) control(ctl.pause, false); });
    listen('volumechange', function () { if (isMuted() !== ctl.mute.now) control(ctl.mute, isMuted()); });
    if (video.readyState >= 2) once('videoCreativeView');
    return {
      /** Sends videoSkip (not after complete) and ends the view. */
      skip: function () {
        if (sent.videoComplete || sent.videoSkip || !on.length) return false;
        detach(); once('videoSkip');
        return true;
      },
      detach: detach,
    };
  }

  var api = {
    init: init, send: send, observeProduct: observeProduct, autoWire: autoWire,
    productClick: function (o) { return product('productClick', o); },
    creativeClick: creativeClick, cart: cart, cartChanged: cartChanged, trackVideo: trackVideo,
    trackingId: function () { return trackingId; },
  };
  root.RetailMediaBeacon = root.rmBeacon = api;
  if (typeof module === 'object' && module.exports) module.exports = api;
})(typeof window !== 'undefined' ? window : globalThis);
