// Unit tests of api/sdk/beacon.js's rules in Node, with mocked timers and clock: a
// fake IntersectionObserver drives viewability, a fake <video> (an EventTarget with
// currentTime, duration, muted...) drives trackVideo, and a transport function
// captures every URL. Each test loads a fresh copy of the snippet into a fake window.
// Run: node --test tests/js/sdk_units.test.mjs (tests/it/sdk_browser.rs runs it too).

import { test, mock, beforeEach, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const SRC = readFileSync(fileURLToPath(new URL('../../api/sdk/beacon.js', import.meta.url)), 'utf8');

class Storage {
  constructor() { this.m = new Map(); }
  getItem(k) { return this.m.has(k) ? this.m.get(k) : null; }
  setItem(k, v) { this.m.set(k, String(v)); }
}

class FakeIO {
  constructor(cb, opts) { this.cb = cb; this.opts = opts; this.targets = new Set(); FakeIO.last = this; }
  observe(el) { this.targets.add(el); }
  unobserve(el) { this.targets.delete(el); }
  disconnect() { this.targets.clear(); }
  // Reports `el` at `ratio` visible, as the browser would on a threshold crossing.
  show(el, ratio) { this.cb([{ target: el, isIntersecting: ratio > 0, intersectionRatio: ratio }]); }
}

function el() { return { nodeType: 1, isConnected: true, addEventListener() {} }; }

/** A fresh snippet in a fake window; returns {sdk, sent, win}. */
function load({ storage = new Storage(), init = {}, document } = {}) {
  const win = { sessionStorage: storage, crypto: globalThis.crypto, IntersectionObserver: FakeIO, console, document };
  new Function('window', SRC)(win);
  const sent = [];
  const errors = [];
  const sdk = win.RetailMediaBeacon;
  sdk.init({ endpoint: 'http://edge.test/', transport: (u) => sent.push(u), onError: (e) => errors.push(e.message), ...init });
  const events = () => sent.map((u) => Object.fromEntries(new URL(u).searchParams));
  const types = () => events().map((e) => e.interactionType);
  return { sdk, sent, errors, events, types, win };
}

beforeEach(() => mock.timers.enable({ apis: ['setTimeout', 'Date'], now: Date.parse('2026-11-22T10:00:00Z') }));
afterEach(() => mock.timers.reset());
const tick = (ms) => mock.timers.tick(ms);

test('every value is URL-encoded, the timestamp is the firing time, one tracking id per session', () => {
  const storage = new Storage();
  const { sdk, sent, events } = load({ storage });
  tick(250);
  assert.ok(sdk.productClick({ adId: 'rm1.c 1.a', productCode: 'p&q=1+é/x', catalogId: 'cat 1' }));
  const url = sent[0];
  assert.ok(url.startsWith('http://edge.test/v1/events/ad/interaction?adId=rm1.c%201.a&interactionType=productClick&timestamp=2026-11-22T10%3A00%3A00.250Z&sessionId='), url);
  assert.ok(url.includes('&productCode=p%26q%3D1%2B%C3%A9%2Fx&catalogId=cat%201'), url);
  const id = events()[0].sessionId;
  assert.match(id, /^[0-9a-f-]{32,36}$/);
  // Another page of the same session (same sessionStorage) keeps the id.
  const again = load({ storage });
  assert.equal(again.sdk.trackingId(), id);
  // A given id wins, under the configured parameter.
  const cust = load({ init: { trackingParam: 'customerId', trackingId: 'cust-9' } });
  cust.sdk.creativeClick({ adId: 'a', creativeId: 'cr-1' });
  assert.deepEqual(cust.events()[0], { adId: 'a', interactionType: 'creativeClick', timestamp: '2026-11-22T10:00:00.250Z', customerId: 'cust-9', creativeId: 'cr-1' });
});

test('bad input sends nothing and says why; the page never sees an exception', () => {
  const { sdk, sent, errors } = load();
  assert.equal(sdk.productClick({ adId: 'a', productCode: 'p' }), false);
  assert.equal(sdk.creativeClick({ creativeId: 'c' }), false);
  for (const units of [-1, 1.5, NaN, '1e2', '-3', 1000001, null, undefined]) {
    assert.equal(sdk.cart({ adId: 'a', productCode: 'p', catalogId: 'c', units }), false, String(units));
  }
  assert.equal(sdk.cart({ adId: 'a', productCode: 'p', catalogId: 'c', units: 1, conversionValue: Infinity }), false);
  assert.equal(sdk.cart(), false);
  assert.equal(sdk.cartChanged(), false);
  assert.equal(sdk.productClick(), false);
  assert.equal(sdk.observeProduct(null, {}), false);
  assert.equal(sdk.trackVideo({}, { adId: 'a', videoId: 'v' }), false);
  assert.equal(sent.length, 0);
  assert.match(errors.find((e) => e.includes('units')), /absolute count, an integer from 0 to 1000000 \(never a delta\), got -1/);
  const fresh = load();
  assert.equal(fresh.sdk.init({ trackingParam: 'userId' }), false);
  assert.equal(fresh.sdk.init({ viewability: { threshold: 0 } }), false);
  assert.equal(fresh.sdk.init({ viewability: { durationMs: -1, graceMs: 'x' } }), false);
  assert.deepEqual(fresh.errors.slice(-3), [
    'RetailMediaBeacon: trackingParam must be sessionId, customerId or dtmToken',
    'RetailMediaBeacon: viewability.threshold must be in (0, 1]',
    'RetailMediaBeacon: durationMs, graceMs must be a number of milliseconds >= 0',
  ]);
  // A failed init keeps the previous configuration working.
  assert.ok(fresh.sdk.creativeClick({ adId: 'a', creativeId: 'c' }));
});

test('cart sends absolute units; cartChanged skips a repeat of the same count', () => {
  const { sdk, events } = load();
  const line = { adId: 'a', productCode: 'p', catalogId: 'c' };
  for (const u of [1, 2, 3, 0]) { tick(5); sdk.cart({ ...line, units: u }); }
  sdk.cart({ ...line, units: '4', conversionValue: 1e21 });
  assert.deepEqual(events().map((e) => e.units), ['1', '2', '3', '0', '4']);
  assert.equal(events()[4].conversionValue, '1e21'); // no raw '+' exponent
  assert.equal(sdk.cartChanged({ ...line, units: 4 }), false);
  assert.ok(sdk.cartChanged({ ...line, units: 5 }));
  assert.equal(events().length, 6);
});

test('viewability: continuous dwell, jitter inside the grace period, a real leave, re-render, threshold', () => {
  const { sdk, types, events } = load({ init: { viewability: { threshold: 0.5, durationMs: 1000, graceMs: 800 } } });
  const a = el();
  const key = { adId: 'ad', productCode: 'P-A', catalogId: 'cat' };
  assert.equal(sdk.observeProduct(a, key), true);
  const io = FakeIO.last;
  assert.deepEqual(io.opts.threshold, [0, 0.5, 1]);
  io.show(a, 0.49); tick(2000);
  assert.deepEqual(types(), [], 'under the threshold is not in view');
  io.show(a, 0.5); tick(999);
  io.show(a, 0.2); io.show(a, 0.6); tick(999);
  assert.deepEqual(types(), [], 'a dip before the dwell restarts it');
  tick(1);
  assert.deepEqual(types(), ['productImpression']);
  assert.equal(events()[0].productCode, 'P-A');
  // Jitter: out for 700 ms (< grace 800) several times: same occurrence.
  for (let i = 0; i < 5; i++) { io.show(a, 0); tick(700); io.show(a, 1); tick(1500); }
  assert.equal(types().length, 1);
  // Re-render: the element is replaced by another showing the same key.
  a.isConnected = false; io.show(a, 0);
  assert.equal(io.targets.has(a), false, 'a removed element is unobserved');
  const b = el();
  sdk.observeProduct(b, { ...key });
  io.show(b, 1); tick(3000);
  assert.equal(types().length, 1);
  // Observing the same key again is harmless.
  sdk.observeProduct(b, { ...key }); io.show(b, 1); tick(3000);
  assert.equal(types().length, 1);
  // A real leave (longer than the grace) and a return: a new occurrence.
  io.show(b, 0); tick(801); io.show(b, 0.7); tick(1000);
  assert.equal(types().length, 2);
  // Two elements of one key: the key stays in view while either is.
  const c = el();
  sdk.observeProduct(c, { ...key }); io.show(c, 1); io.show(b, 0); tick(5000);
  assert.equal(types().length, 2);
});

class FakeVideo extends EventTarget {
  constructor() {
    super();
    Object.assign(this, { currentTime: 0, duration: 4, muted: false, volume: 1, paused: true, ended: false, loop: false, readyState: 0 });
  }
  fire(name) { this.dispatchEvent(new Event(name)); }
  start() { this.readyState = 4; this.fire('loadeddata'); this.paused = false; this.fire('play'); this.fire('playing'); }
  playTo(t, step = 0.25) { while (this.currentTime < t - 1e-9) { this.currentTime = Math.min(t, this.currentTime + step); tick(Math.round(step * 1000)); this.fire('timeupdate'); } }
  seek(t) { this.currentTime = t; this.fire('seeking'); this.fire('seeked'); this.fire('timeupdate'); }
  end() { this.playTo(this.duration); this.ended = true; this.paused = true; this.fire('pause'); this.fire('ended'); }
}
const FUNNEL = ['videoCreativeView', 'videoPlay', 'videoFirstQuartile', 'videoMidpoint', 'videoThirdQuartile', 'videoComplete'];

test('video: the funnel in order by real progress, once per view (no repeat on replay)', () => {
  const { sdk, types, events } = load();
  const v = new FakeVideo();
  sdk.trackVideo(v, { adId: 'ad', videoId: 'v-1' });
  v.start();
  v.playTo(0.9);
  assert.deepEqual(types(), ['videoCreativeView', 'videoPlay']);
  v.playTo(1.0);
  assert.deepEqual(types().at(-1), 'videoFirstQuartile');
  v.end();
  assert.deepEqual(types(), FUNNEL, 'the pause at the end is not a pause');
  assert.ok(events().every((e) => e.videoId === 'v-1' && e.adId === 'ad'));
  // Replay: seek to 0, play to the end again.
  v.ended = false; v.seek(0); v.paused = false; v.fire('play'); v.fire('playing'); v.end();
  tick(1000);
  assert.deepEqual(types(), FUNNEL);
});

test('video: a seek past a quartile synthesises nothing; playing through it later does', () => {
  const { sdk, types } = load();
  const v = new FakeVideo();
  sdk.trackVideo(v, { adId: 'ad', videoId: 'v-2' });
  v.start(); v.playTo(0.5);
  v.seek(2.4); v.playTo(3.6);
  assert.deepEqual(types(), ['videoCreativeView', 'videoPlay'], 'no quartile after jumping from 12% to 60%');
  v.seek(0.8); v.playTo(2.2);
  assert.deepEqual(types(), FUNNEL.slice(0, 4), 'first quartile and midpoint played through');
  v.seek(3.9); v.end();
  assert.deepEqual(types(), FUNNEL.slice(0, 4), 'a seek to the end is not a complete');
});

test('video: a loop wrap completes once', () => {
  const { sdk, types } = load();
  const v = new FakeVideo();
  v.loop = true;
  sdk.trackVideo(v, { adId: 'ad', videoId: 'v-3' });
  v.start(); v.playTo(3.8);
  v.seek(0); v.playTo(3.8); v.seek(0); v.playTo(1);
  assert.deepEqual(types(), FUNNEL);
});

test('video: controls report the settled state after the debounce; skip ends the view', () => {
  const { sdk, types } = load({ init: { controlDebounceMs: 300 } });
  const v = new FakeVideo();
  const ctl = sdk.trackVideo(v, { adId: 'ad', videoId: 'v-4' });
  v.fire('pause'); tick(1000);
  assert.deepEqual(types(), [], 'a pause before playback starts is not reported');
  v.start(); v.playTo(0.5);
  const controls = () => types().filter((t) => !FUNNEL.includes(t));
  // Rapid pause/resume toggles that end playing: nothing.
  v.fire('pause'); tick(100); v.fire('play'); tick(100); v.fire('pause'); tick(100); v.fire('play'); tick(400);
  assert.deepEqual(controls(), []);
  v.fire('pause'); tick(299);
  assert.deepEqual(controls(), []);
  tick(1);
  assert.deepEqual(controls(), ['videoPause']);
  v.fire('play'); tick(300);
  assert.deepEqual(controls(), ['videoPause', 'videoResume']);
  // Mute toggles: muted, unmuted, muted quickly -> one mute; volume 0 counts as muted.
  v.muted = true; v.fire('volumechange'); tick(50); v.muted = false; v.fire('volumechange'); tick(50);
  v.muted = true; v.fire('volumechange'); tick(300);
  v.muted = false; v.volume = 0; v.fire('volumechange'); tick(300);
  assert.deepEqual(controls(), ['videoPause', 'videoResume', 'videoMute']);
  v.volume = 1; v.fire('volumechange'); tick(300);
  assert.deepEqual(controls(), ['videoPause', 'videoResume', 'videoMute', 'videoUnmute']);
  // Skip: once, then nothing more from this view.
  assert.equal(ctl.skip(), true);
  assert.equal(ctl.skip(), false);
  v.playTo(4); v.fire('pause'); tick(1000);
  assert.deepEqual(types().filter((t) => t === 'videoSkip').length, 1);
  assert.ok(!types().includes('videoFirstQuartile'));
});

test('video: no skip after complete; a reload with the same ad id repeats no milestone', () => {
  const storage = new Storage();
  const first = load({ storage });
  const v = new FakeVideo();
  const ctl = first.sdk.trackVideo(v, { adId: 'ad', videoId: 'v-5' });
  v.start(); v.end();
  assert.equal(ctl.skip(), false);
  assert.deepEqual(first.types(), FUNNEL);
  const second = load({ storage });
  const w = new FakeVideo();
  second.sdk.trackVideo(w, { adId: 'ad', videoId: 'v-5' });
  w.start(); w.end();
  assert.deepEqual(second.types(), []);
  // Another realised ad id is another view.
  second.sdk.trackVideo(new FakeVideo(), { adId: 'ad-2', videoId: 'v-5' }).detach();
  const x = new FakeVideo();
  second.sdk.trackVideo(x, { adId: 'ad-2', videoId: 'v-5' });
  x.start(); x.end();
  assert.deepEqual(second.types(), FUNNEL);
});

test('viewability: an element removed without a notification does not hold its key in view', () => {
  const { sdk, types } = load({ init: { viewability: { durationMs: 1000, graceMs: 500 } } });
  const key = { adId: 'ad', productCode: 'P-Z', catalogId: 'cat' };
  const a = el();
  sdk.observeProduct(a, key);
  const io = FakeIO.last;
  io.show(a, 1); tick(1000);
  assert.deepEqual(types(), ['productImpression']);
  a.isConnected = false; // detached; the browser sent nothing
  const b = el();
  sdk.observeProduct(b, { ...key });
  io.show(b, 0); tick(600); // b is below the fold: the key has left view for longer than the grace
  io.show(b, 1); tick(1000);
  assert.deepEqual(types(), ['productImpression', 'productImpression']);
});

test('viewability: time on a hidden tab does not count', () => {
  const doc = Object.assign(new EventTarget(), { visibilityState: 'visible' });
  const { sdk, types } = load({ document: doc });
  const a = el();
  sdk.observeProduct(a, { adId: 'ad', productCode: 'P-H', catalogId: 'cat' });
  FakeIO.last.show(a, 1); tick(600);
  doc.visibilityState = 'hidden'; doc.dispatchEvent(new Event('visibilitychange')); tick(5000);
  assert.deepEqual(types(), []);
  doc.visibilityState = 'visible'; doc.dispatchEvent(new Event('visibilitychange')); tick(999);
  assert.deepEqual(types(), [], 'the dwell restarts when the tab shows again');
  tick(1);
  assert.deepEqual(types(), ['productImpression']);
});
