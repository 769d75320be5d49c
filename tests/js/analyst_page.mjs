// Drives the analyst page (GET /reports, api/web/) in headless Debian Chromium
// (playwright-core) against a running api: a wrong secret first (the page must say
// "login failed"), then the demo client; picks a campaign, reads every number the
// page shows (funnel counts and rates, product rows, cart rows, sales rows and total),
// sorts the product table by clicking its headers, downloads each table's CSV through
// the page's button, saves a screenshot, then checks the failure paths (a refused
// token, the network down); then logs out and in as a second client of another
// namespace (--rival-client, --rival-secret) and reads its picker. Prints
// `RESULT {json}` as its last line for
// tests/it/analyst_page.rs, which compares the numbers with what it fired; exits 1 when
// the page itself misbehaved (a script error, a missing element).
//
// Usage: node analyst_page.mjs --api http://127.0.0.1:PORT --campaign ID
//        --screenshot FILE [--chromium /usr/bin/chromium] [--secret demo-secret]
//        [--rival-client ID --rival-secret SECRET]

import { readFile } from 'node:fs/promises';
import { chromium } from 'playwright-core';

function arg(name, fallback) {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 && process.argv[i + 1] ? process.argv[i + 1] : fallback;
}
const api = arg('api');
const campaign = arg('campaign');
const screenshot = arg('screenshot');
const chromiumPath = arg('chromium', '/usr/bin/chromium');
const secret = arg('secret', 'demo-secret');
const rivalClient = arg('rival-client');
const rivalSecret = arg('rival-secret');
if (!api || !campaign || !screenshot) {
  console.error('usage: node analyst_page.mjs --api URL --campaign ID --screenshot FILE [--chromium PATH]');
  process.exit(2);
}
const log = (...a) => console.error('[analyst_page]', ...a);

const browser = await chromium.launch({
  executablePath: chromiumPath,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
const failures = [];
const result = { failures };
try {
  const context = await browser.newContext({ viewport: { width: 1100, height: 900 }, acceptDownloads: true });
  const page = await context.newPage();
  page.on('console', (m) => {
    log('page console:', m.type(), m.text());
    // The page logs only unexpected failures; expected ones go to the status line.
    if (m.type() === 'error' && !/Failed to load resource/.test(m.text())) failures.push(`console error: ${m.text()}`);
  });
  page.on('pageerror', (e) => failures.push(`page error: ${e.message}`));
  page.setDefaultTimeout(15000);

  const statusText = () => page.locator('#status').textContent();
  const waitStatus = async (re) => {
    await page.waitForFunction((src) => new RegExp(src).test(document.getElementById('status').textContent),
      re.source);
    return statusText();
  };

  const resp = await page.goto(`${api}/reports`);
  result.page = { status: resp.status(), contentType: resp.headers()['content-type'], title: await page.title() };
  result.loginVisible = await page.locator('#login-form').isVisible();
  result.filtersHiddenBeforeLogin = await page.locator('#filters').isHidden();

  // A wrong secret: the page says so and shows no report.
  await page.fill('#client-secret', 'not-the-secret');
  await page.click('#login-button');
  result.wrongSecretStatus = await waitStatus(/login failed/);
  result.wrongSecretIsError = await page.locator('#status.error').count() === 1;

  // The demo client: the campaigns load and the first one is shown.
  await page.fill('#client-id', 'demo-client');
  await page.fill('#client-secret', secret);
  await page.click('#login-button');
  await page.waitForFunction(() => document.body.dataset.loaded);
  result.campaignOptions = await page.$$eval('#campaign option', (os) => os.map((o) => o.value));
  result.loggedInAs = await page.locator('#logged-in-as').textContent();

  // Pick the campaign the test fired (and make sure the page reloaded for it).
  await page.evaluate(() => { delete document.body.dataset.loaded; });
  await page.selectOption('#campaign', campaign);
  await page.click('#show-button');
  await page.waitForFunction((c) => document.body.dataset.loaded === c, campaign);
  result.status = await statusText();
  result.from = await page.inputValue('#from');
  result.to = await page.inputValue('#to');

  const num = (v) => (v === '' || v === undefined ? null : Number(v));
  result.funnel = await page.$$eval('#funnel-table tbody tr', (trs) => trs.map((tr) => ({
    milestone: tr.dataset.milestone,
    label: tr.querySelector('th').textContent,
    count: tr.querySelector('td[data-key=count]').dataset.value,
    countText: tr.querySelector('td[data-key=count]').textContent,
    rate: tr.querySelector('td[data-key=rate]').dataset.value,
    rateText: tr.querySelector('td[data-key=rate]').textContent,
  })));
  for (const r of result.funnel) { r.count = num(r.count); r.rate = num(r.rate); }
  result.funnelChart = await page.$$eval('#funnel-chart svg rect.bar', (rs) => rs.map((r) => Number(r.getAttribute('width'))));
  result.funnelChartTitle = await page.locator('#funnel-chart svg title').textContent();

  const readTable = (sel) => page.$$eval(`${sel} tbody tr`, (trs) => trs.filter((tr) => !tr.querySelector('td.empty')).map((tr) => {
    const o = {};
    for (const td of tr.querySelectorAll('td[data-key]')) {
      o[td.dataset.key] = td.dataset.value === undefined ? td.textContent : td.dataset.value;
      if (td.dataset.value !== undefined) o[`${td.dataset.key}Text`] = td.textContent;
    }
    return o;
  }));
  const numeric = (rows, keys) => rows.map((r) => {
    for (const k of keys) r[k] = num(r[k]);
    return r;
  });
  result.products = numeric(await readTable('#products-table'), ['impressions', 'clicks', 'ctr']);
  result.carts = numeric(await readTable('#carts-table'), ['cartsAdded', 'unitsAdded', 'value']);
  result.sales = numeric(await readTable('#sales-table'), ['orders', 'units', 'revenue', 'roas']);
  result.salesTotal = await page.$$eval('#sales-total td[data-key]', (tds) => Object.fromEntries(
    tds.map((td) => [td.dataset.key, td.dataset.value === '' ? null : Number(td.dataset.value)])));

  // Sorting: by clicks (descending first, then ascending), then by product.
  const order = () => page.$$eval('#products-table tbody td[data-key=productCode]', (tds) => tds.map((t) => t.textContent));
  const ariaSort = (key) => page.getAttribute(`#products-table th[data-key=${key}]`, 'aria-sort');
  result.sorting = { initial: await order(), initialSort: await ariaSort('impressions') };
  await page.click('#products-table th[data-key=clicks] button');
  result.sorting.clicksDesc = await order();
  result.sorting.clicksDescAria = await ariaSort('clicks');
  await page.click('#products-table th[data-key=clicks] button');
  result.sorting.clicksAsc = await order();
  result.sorting.clicksAscAria = await ariaSort('clicks');
  await page.click('#products-table th[data-key=productCode] button');
  result.sorting.productAsc = await order();
  result.sorting.impressionsAriaAfter = await ariaSort('impressions');

  // Every "Download CSV" button: the file the browser saves.
  result.csv = {};
  for (const report of await page.$$eval('button.csv', (bs) => bs.map((b) => b.dataset.report))) {
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.click(`button.csv[data-report="${report}"]`),
    ]);
    const file = await download.path();
    result.csv[report] = { filename: download.suggestedFilename(), text: await readFile(file, 'utf8') };
  }
  await waitStatus(/Downloaded/);

  await page.screenshot({ path: screenshot, fullPage: true });
  result.screenshot = screenshot;

  // A token the api refuses: the page says so and asks for a login again.
  await page.evaluate(() => sessionStorage.setItem('rm-reports-token',
    JSON.stringify({ value: 'not.a.token', expiresAt: Date.now() + 3600000 })));
  await page.click('#show-button');
  result.refusedTokenStatus = await waitStatus(/login failed/);
  result.filtersHiddenAfterRefusal = await page.locator('#filters').isHidden();

  // The network down: log in again, go offline, ask for the reports.
  await page.fill('#client-secret', secret);
  await page.click('#login-button');
  await page.waitForFunction(() => !document.getElementById('filters').hidden && document.body.dataset.loaded);
  await waitStatus(/Showing campaign/);
  await context.setOffline(true);
  await page.click('#show-button');
  result.offlineStatus = await waitStatus(/network down/);
  await context.setOffline(false);

  // Another namespace's client: its own campaigns only, and the page says which.
  if (rivalClient) {
    await page.click('#logout-button');
    await page.evaluate(() => { delete document.body.dataset.loaded; });
    await page.fill('#client-id', rivalClient);
    await page.fill('#client-secret', rivalSecret);
    await page.click('#login-button');
    await page.waitForFunction(() => document.body.dataset.loaded && document.body.dataset.namespace);
    result.rival = {
      campaignOptions: await page.$$eval('#campaign option', (os) => os.map((o) => o.value)),
      loggedInAs: await page.locator('#logged-in-as').textContent(),
      namespace: await page.evaluate(() => document.body.dataset.namespace),
      status: await statusText(),
      text: await page.locator('#reports').innerText(),
    };
  }
} catch (e) {
  failures.push(`driver: ${e.stack || e.message}`);
} finally {
  await browser.close();
}
console.log(`RESULT ${JSON.stringify(result)}`);
process.exit(failures.length ? 1 : 0);
