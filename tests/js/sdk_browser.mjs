// Drives api/sdk/beacon.js in headless Debian Chromium (playwright-core) against a
// running edge: serves tests/js/fixtures/shop.html and the snippet from a local node
// server, scrolls product tiles in and out of view (jitter, a re-render, a real leave
// and return), clicks, changes a cart 1, 2, 3, 0, plays two HTML5 videos (pauses,
// rapid toggles, mutes, a replay, a seek past the quartiles and a skip), and checks
// every beacon the page fired against the expectation. Prints `SUMMARY {json}` as its
// last line; exits 1 with the reasons when a check fails.
//
// Usage: node sdk_browser.mjs --edge http://127.0.0.1:PORT [--api http://127.0.0.1:PORT]
//        [--chromium /usr/bin/chromium]

import { createServer } from 'node:http';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const SDK_FILE = path.join(here, '..', '..', 'api', 'sdk', 'beacon.js');
const BEACON_PATH = '/v1/events/ad/interaction';

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
}
const edge = arg('edge');
const api = arg('api');
const chromiumPath = arg('chromium', '/usr/bin/chromium');
if (!edge) {
  console.error('usage: node sdk_browser.mjs --edge http://127.0.0.1:PORT [--api URL]');
  process.exit(2);
}
const log = (...a) => console.error('[sdk_browser]', ...a);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the fixture server ----
// The shop's ad ids stand for ads the api served: RM_TEST_AD_IDS maps each placeholder
// of the fixture to a genuine realised ad id (minted by the test with the service's
// key), so the reports count the shopper's events as billable.
const adIds = JSON.parse(process.env.RM_TEST_AD_IDS || '{}');
const servedAds = (html) => Object.entries(adIds).reduce((h, [from, to]) => h.replaceAll(from, to), html);
const sdkBytes = await readFile(SDK_FILE);
const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.webm': 'video/webm' };
const server = createServer(async (req, res) => {
  const name = new URL(req.url, 'http://x').pathname.replace(/^\/+/, '') || 'shop.html';
  try {
    let body = name === 'beacon.js' ? sdkBytes : await readFile(path.join(here, 'fixtures', path.basename(name)));
    if (name.endsWith('.html')) body = Buffer.from(servedAds(body.toString('utf8')));
    const type = types[path.extname(name)] || 'application/octet-stream';
    // Range support so Chromium's media stack can read the clip as it likes.
    const m = /bytes=(\d+)-(\d*)/.exec(req.headers.range || '');
    if (m) {
      const start = Number(m[1]);
      const end = m[2] ? Math.min(Number(m[2]), body.length - 1) : body.length - 1;
      res.writeHead(206, { 'Content-Type': type, 'Content-Range': `bytes ${start}-${end}/${body.length}`, 'Accept-Ranges': 'bytes', 'Content-Length': end - start + 1 });
      res.end(body.subarray(start, end + 1));
    } else {
      res.writeHead(200, { 'Content-Type': type, 'Accept-Ranges': 'bytes', 'Content-Length': body.length });
      res.end(body);
    }
  } catch {
    res.writeHead(404).end();
  }
});
await new Promise((r) => server.listen(0, '127.0.0.1', r));
const site = `http://127.0.0.1:${server.address().port}`;

// ---- the api serves the same bytes ----
let apiSdk = null;
if (api) {
  const r = await fetch(`${api}/sdk/beacon.js`);
  const b = Buffer.from(await r.arrayBuffer());
  apiSdk = { status: r.status, sameBytes: r.status === 200 && b.equals(sdkBytes), contentType: r.headers.get('content-type'), etag: r.headers.get('etag') };
  if (r.status === 200 && apiSdk.etag) {
    const again = await fetch(`${api}/sdk/beacon.js`, { headers: { 'If-None-Match': apiSdk.etag } });
    apiSdk.revalidatedStatus = again.status;
  }
  log('api /sdk/beacon.js', JSON.stringify(apiSdk));
}

// ---- the browser ----
const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--autoplay-policy=no-user-gesture-required'],
});
const failures = [];
const beacons = []; // {params, raw, status, req, beforeReload}
let reloaded = false;
let page;
try {
  // Headless Chromium names itself HeadlessChrome, which the edge flags as a known bot:
  // present as the desktop Chrome a shopper runs, so the page's beacons are valid.
  const context = await browser.newContext({
    viewport: { width: 800, height: 600 },
    userAgent: 'Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) '
      + 'Chrome/131.0.0.0 Safari/537.36',
  });
  page = await context.newPage();
  page.on('console', (m) => log('page console:', m.text()));
  page.on('pageerror', (e) => failures.push(`page error: ${e.message}`));
  page.on('request', (r) => {
    if (!r.url().startsWith(edge + BEACON_PATH)) return;
    const raw = r.url().split('?')[1] || '';
    const params = Object.fromEntries(new URLSearchParams(raw));
    beacons.push({ params, raw, status: null, req: r, beforeReload: !reloaded });
  });
  page.on('response', (r) => {
    const b = beacons.find((x) => x.req === r.request());
    if (b) b.status = r.status();
  });
  page.on('requestfailed', (r) => {
    const b = beacons.find((x) => x.req === r);
    if (b) b.status = `failed: ${r.failure()?.errorText}`;
  });

  const url = `${site}/shop.html?endpoint=${encodeURIComponent(edge)}`;
  await page.goto(url);
  const firstId = await page.evaluate(() => RetailMediaBeacon.trackingId());
  await sleep(500);
  reloaded = true;
  await page.reload(); // the session keeps its tracking id, and the videos' creativeView is not repeated
  const trackingId = await page.evaluate(() => RetailMediaBeacon.trackingId());
  if (firstId !== trackingId) failures.push(`tracking id changed on reload: ${firstId} -> ${trackingId}`);
  await sleep(300);

  const count = (type, product) => beacons.filter((b) => b.params.interactionType === type
    && (product === undefined || b.params.productCode === product || b.params.videoId === product)).length;
  const expect = (what, type, product, n) => {
    const got = count(type, product);
    if (got !== n) failures.push(`${what}: ${type} ${product ?? ''} expected ${n}, got ${got}`);
    log(`${what}: ${type} ${product ?? ''} = ${got}`);
  };
  const show = (id) => page.evaluate((i) => document.getElementById(i).scrollIntoView({ block: 'center', behavior: 'instant' }), id);
  const top = () => page.evaluate(() => window.scrollTo({ top: 0, behavior: 'instant' }));

  // Tile A: in view 1.5 s -> one impression.
  expect('nothing in view at load', 'productImpression', undefined, 0);
  await show('tile-a'); await sleep(1500);
  expect('tile A seen 1.5 s', 'productImpression', 'P-A', 1);
  // Scroll jitter: six dips out of view of 150 ms each count once.
  for (let i = 0; i < 6; i++) { await top(); await sleep(150); await show('tile-a'); await sleep(150); }
  await sleep(1200);
  expect('after jitter', 'productImpression', 'P-A', 1);
  // A re-render while in view is the same occurrence.
  await page.evaluate(() => rerenderTileA()); await sleep(1500);
  expect('after re-render', 'productImpression', 'P-A', 1);
  await page.click('#tile-a'); // the re-rendered element is auto-wired
  await sleep(200);
  expect('click on tile A', 'productClick', 'P-A', 1);
  // A real leave (2.5 s > grace 1 s) and return counts again.
  await top(); await sleep(2500); await show('tile-a'); await sleep(1500);
  expect('tile A after a real leave and return', 'productImpression', 'P-A', 2);
  // Tile B: a glance shorter than 1 s counts nothing; then 1.5 s counts one. No click.
  await show('tile-b'); await sleep(250); await top(); await sleep(1200);
  expect('tile B glanced 0.25 s', 'productImpression', 'P-B', 0);
  await show('tile-b'); await sleep(1500);
  expect('tile B seen 1.5 s', 'productImpression', 'P-B', 1);
  expect('tile C never shown', 'productImpression', 'P-C', 0);

  // Cart 1, 2, 3, 0 through the widget; a bad call sends nothing.
  await show('cart');
  for (const id of ['#cart-add', '#cart-add', '#cart-add', '#cart-remove']) { await page.click(id); await sleep(60); }
  const bad = await page.evaluate(() => [
    RetailMediaBeacon.cart({ adId: 'rm1.camp-sdk.ad-tiles', productCode: 'P-A', catalogId: 'cat-sdk', units: -1 }),
    RetailMediaBeacon.cart({ adId: 'rm1.camp-sdk.ad-tiles', productCode: 'P-A', catalogId: 'cat-sdk', units: 1.5 }),
    errors.length,
  ]);
  if (bad[0] !== false || bad[1] !== false || bad[2] !== 2) failures.push(`bad cart calls: ${JSON.stringify(bad)}`);
  await sleep(200);
  const cartUnits = beacons.filter((b) => b.params.interactionType === 'cart').map((b) => Number(b.params.units));
  if (JSON.stringify(cartUnits) !== '[1,2,3,0]') failures.push(`cart units ${JSON.stringify(cartUnits)}, expected [1,2,3,0]`);

  // A creative click.
  await show('banner'); await page.click('#banner'); await sleep(200);
  expect('banner click', 'creativeClick', undefined, 1);

  // Main video: play, pause 0.6 s, resume, rapid toggles, mute toggles, play to the end, replay.
  await show('video-main');
  const vm = (fn, arg) => page.evaluate(fn, arg);
  const waitFor = async (what, fn, ms) => {
    try { await page.waitForFunction(fn, null, { timeout: ms, polling: 50 }); } catch { failures.push(`timed out waiting for ${what}`); }
  };
  await vm(() => document.getElementById('video-main').play());
  await waitFor('main video at 0.6 s', () => document.getElementById('video-main').currentTime >= 0.6, 5000);
  await vm(() => document.getElementById('video-main').pause()); await sleep(600);
  await vm(() => document.getElementById('video-main').play()); await sleep(600);
  await vm(() => { const v = document.getElementById('video-main'); v.pause(); v.play(); v.pause(); v.play(); });
  await sleep(600);
  await vm(() => { const v = document.getElementById('video-main'); v.muted = true; v.muted = false; v.muted = true; });
  await sleep(600);
  await vm(() => { document.getElementById('video-main').muted = false; });
  await sleep(600);
  await waitFor('main video ended', () => document.getElementById('video-main').ended, 10000);
  await sleep(200);
  await vm(() => { const v = document.getElementById('video-main'); v.currentTime = 0; return v.play(); });
  await sleep(300);
  await waitFor('main video ended again', () => document.getElementById('video-main').ended, 10000);
  const skipAfterComplete = await vm(() => mainVideo.skip());
  if (skipAfterComplete !== false) failures.push('skip() after complete should send nothing');
  await sleep(500);
  for (const t of ['videoCreativeView', 'videoPlay', 'videoFirstQuartile', 'videoMidpoint', 'videoThirdQuartile',
    'videoComplete', 'videoPause', 'videoResume', 'videoMute', 'videoUnmute']) {
    expect('main video', t, 'v-main', 1);
  }
  expect('main video', 'videoSkip', 'v-main', 0);

  // Seek video: play, seek to 60 %, play past 75 %, skip: no quartile is synthesised.
  await show('video-seek');
  await vm(() => document.getElementById('video-seek').play());
  await waitFor('seek video playing', () => document.getElementById('video-seek').currentTime >= 0.3, 5000);
  await vm(() => { const v = document.getElementById('video-seek'); v.currentTime = v.duration * 0.6; });
  await waitFor('seek video past 80 %', () => { const v = document.getElementById('video-seek'); return v.currentTime >= v.duration * 0.8; }, 5000);
  const skipped = await vm(() => { const r = seekVideo.skip(); document.getElementById('video-seek').pause(); return r; });
  if (skipped !== true) failures.push('skip() before complete should send videoSkip');
  await sleep(600);
  for (const [t, n] of [['videoCreativeView', 1], ['videoPlay', 1], ['videoFirstQuartile', 0], ['videoMidpoint', 0],
    ['videoThirdQuartile', 0], ['videoComplete', 0], ['videoSkip', 1], ['videoPause', 0]]) {
    expect('seek video', t, 'v-seek', n);
  }

  // Every beacon: answered 200 by the edge, one tracking id, a fresh ISO 8601 timestamp.
  await sleep(500);
  for (const b of beacons) {
    // DevTools reports keepalive fetches still open at a navigation as aborted, though
    // the browser completes them (keepalive's purpose): tests/it/sdk_browser.rs finds
    // them in the edge's log.
    const kept = b.beforeReload && b.status === 'failed: net::ERR_ABORTED';
    if (b.status !== 200 && !kept) failures.push(`beacon ${b.raw} answered ${b.status}`);
    if (b.params.sessionId !== trackingId) failures.push(`beacon ${b.raw} has another tracking id`);
    if (!/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(b.params.timestamp || '')) failures.push(`beacon ${b.raw}: timestamp`);
    if (/[^A-Za-z0-9\-._~!*'()%&=]/.test(b.raw)) failures.push(`beacon ${b.raw}: not URL-encoded`);
  }
  const stamps = new Set(beacons.map((b) => b.params.timestamp));
  const byType = {};
  for (const b of beacons) {
    const k = `${b.params.interactionType}${b.params.productCode ? ':' + b.params.productCode : ''}${b.params.videoId ? ':' + b.params.videoId : ''}`;
    byType[k] = (byType[k] || 0) + 1;
  }
  const summary = {
    ok: failures.length === 0, failures, trackingId, beacons: beacons.length,
    answered200: beacons.filter((b) => b.status === 200).length,
    keptAcrossReload: beacons.filter((b) => b.beforeReload && b.status !== 200).length,
    distinctTimestamps: stamps.size, byType, cartUnits, apiSdk, sdkBytes: sdkBytes.length,
  };
  console.log('SUMMARY ' + JSON.stringify(summary));
} catch (e) {
  failures.push(`exception: ${e.stack || e}`);
  console.log('SUMMARY ' + JSON.stringify({ ok: false, failures, beacons: beacons.length }));
} finally {
  await browser.close();
  server.close();
}
process.exit(failures.length === 0 ? 0 : 1);
