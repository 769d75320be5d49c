// The analyst page's script (api/web/reports.js, served at /reports/reports.js; no
// build step, no dependencies). It talks to the api that served it, only:
//
// - POST /v1/oauth2/token (OAuth 2.0 client credentials, HTTP Basic with the
//   form-urlencoded client id and secret); the token is kept in sessionStorage until
//   it expires or a report answers 401. The answer's namespace_id is shown beside the
//   client: every report, and so the campaign picker, holds only that namespace's
//   campaigns.
// - GET /v1/reports/campaigns for the campaign picker when the api has it; otherwise
//   the campaign ids found in the video-funnel, products, carts/campaigns and sales
//   rows.
// - GET /v1/reports/{video-funnel,products,carts/campaigns,sales}?campaignId&from&to
//   for the four sections, and the same with format=csv for "Download CSV".
//
// Every numeric cell carries its raw value in data-value (the text is formatted), so
// tests and scrapers read exact numbers.
'use strict';

(() => {
  const TOKEN_KEY = 'rm-reports-token';
  const CAMPAIGN_KEY = 'rm-reports-campaign';
  const CLIENT_KEY = 'rm-reports-client';
  const NAMESPACE_KEY = 'rm-reports-namespace';
  const MILESTONES = [
    ['creativeViews', 'Creative views'],
    ['plays', 'Plays'],
    ['firstQuartiles', 'First quartile'],
    ['midpoints', 'Midpoint'],
    ['thirdQuartiles', 'Third quartile'],
    ['completes', 'Completes'],
  ];
  const SVG_NS = 'http://www.w3.org/2000/svg';
  const nf = new Intl.NumberFormat('en-US');
  const money = new Intl.NumberFormat('en-US', { minimumFractionDigits: 2, maximumFractionDigits: 2 });
  const pct = new Intl.NumberFormat('en-US', { style: 'percent', minimumFractionDigits: 1, maximumFractionDigits: 1 });

  const $ = (id) => document.getElementById(id);
  let productRows = [];
  let productSort = { key: 'impressions', dir: 'descending' };

  /** An error to show as it is (already phrased for the analyst). */
  class Shown extends Error {}

  // ---- status line ----
  function status(text, isError = false) {
    const s = $('status');
    s.textContent = text;
    s.classList.toggle('error', isError);
  }

  // ---- token ----
  function savedToken() {
    try {
      const t = JSON.parse(sessionStorage.getItem(TOKEN_KEY) || 'null');
      return t && typeof t.value === 'string' && t.expiresAt > Date.now() + 5000 ? t.value : null;
    } catch {
      return null;
    }
  }
  function forgetToken() {
    sessionStorage.removeItem(TOKEN_KEY);
  }
  // RFC 6749 2.3.1: each part form-urlencoded, then base64.
  const formEncode = (s) => encodeURIComponent(s).replace(/%20/g, '+');

  // credentials 'omit': the page sends its own Authorization header and needs no
  // cookie, and without it a 401 carrying `WWW-Authenticate: Basic` (the token
  // endpoint's wrong secret) makes the browser open its own login dialog instead of
  // handing the answer to the page (Fetch standard, HTTP-network-or-cache fetch).
  async function send(url, init) {
    try {
      return await fetch(url, { cache: 'no-store', credentials: 'omit', ...init });
    } catch {
      throw new Shown('network down: the api did not answer; check the connection and retry');
    }
  }

  async function errorText(r) {
    try {
      const b = await r.json();
      return b.message || b.error_description || b.error || `HTTP ${r.status}`;
    } catch {
      return `HTTP ${r.status}`;
    }
  }

  async function login(clientId, secret) {
    const basic = btoa(`${formEncode(clientId)}:${formEncode(secret)}`);
    const r = await send('/v1/oauth2/token', {
      method: 'POST',
      headers: { Authorization: `Basic ${basic}`, 'Content-Type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials',
    });
    if (r.status === 401) throw new Shown('login failed: wrong client id or secret');
    if (r.status === 429) {
      throw new Shown(`login failed: too many attempts; retry in ${r.headers.get('Retry-After') || 60} s`);
    }
    if (!r.ok) throw new Shown(`login failed: ${await errorText(r)}`);
    const b = await r.json();
    const token = { value: b.access_token, expiresAt: Date.now() + 1000 * (b.expires_in || 300) };
    sessionStorage.setItem(TOKEN_KEY, JSON.stringify(token));
    sessionStorage.setItem(CLIENT_KEY, clientId);
    // The token's namespace: every report and the campaign picker show only its data.
    sessionStorage.setItem(NAMESPACE_KEY, b.namespace_id || '');
    return token.value;
  }

  function token() {
    const t = savedToken();
    if (!t) {
      loggedIn(false);
      throw new Shown('log in first (the session has ended)');
    }
    return t;
  }

  /** GET a report route; `raw` answers the Response (the caller reads it). */
  async function report(path, params, raw = false) {
    const q = new URLSearchParams(params).toString();
    const r = await send(`/v1/reports/${path}${q ? `?${q}` : ''}`, {
      headers: { Authorization: `Bearer ${token()}` },
    });
    if (r.status === 401) {
      forgetToken();
      loggedIn(false);
      throw new Shown('login failed: the token was refused; log in again');
    }
    if (r.status === 403) throw new Shown('this client may not read reports (it lacks the reports scope)');
    if (raw) return r;
    if (!r.ok) throw new Shown(`${path}: ${await errorText(r)}`);
    const b = await r.json();
    return Array.isArray(b.rows) ? b.rows : [];
  }

  // ---- filters ----
  const isoDay = (d) => d.toISOString().slice(0, 10);
  function defaultDates() {
    const today = new Date();
    if (!$('to').value) $('to').value = isoDay(today);
    if (!$('from').value) $('from').value = isoDay(new Date(today.getTime() - 29 * 86400000));
  }
  function filterParams() {
    const p = { campaignId: $('campaign').value };
    const from = $('from').value;
    const to = $('to').value;
    if (from && to && from > to) throw new Shown('the From day is after the To day');
    if (from) p.from = from;
    if (to) p.to = to;
    return p;
  }

  async function loadCampaigns() {
    let ids = null;
    const r = await report('campaigns', {}, true);
    if (r.ok) {
      const b = await r.json().catch(() => ({}));
      if (Array.isArray(b.rows)) ids = b.rows.map((x) => x.campaignId ?? x.id);
    }
    if (!ids) {
      const all = await Promise.all(['video-funnel', 'products', 'carts/campaigns', 'sales'].map((p) => report(p, {})));
      ids = all.flat().map((x) => x.campaignId);
    }
    ids = [...new Set(ids.filter((x) => typeof x === 'string' && x !== ''))].sort();
    const sel = $('campaign');
    const keep = sel.value || sessionStorage.getItem(CAMPAIGN_KEY);
    sel.replaceChildren(...ids.map((id) => new Option(id, id)));
    if (ids.includes(keep)) sel.value = keep;
    return ids;
  }

  // ---- rendering helpers ----
  function cell(text, opts = {}) {
    const td = document.createElement('td');
    td.textContent = text;
    if (opts.value !== undefined) {
      td.dataset.value = opts.value === null ? '' : String(opts.value);
      td.className = 'num';
    }
    if (opts.key) td.dataset.key = opts.key;
    return td;
  }
  function emptyRow(tbody, cols) {
    const tr = document.createElement('tr');
    const td = cell('No rows for this campaign and dates.');
    td.colSpan = cols;
    td.className = 'empty';
    tr.append(td);
    tbody.replaceChildren(tr);
  }
  const sum = (rows, k) => rows.reduce((a, r) => a + (Number(r[k]) || 0), 0);
  const ratio = (a, b) => (b > 0 ? a / b : 0);

  // ---- video funnel ----
  function renderFunnel(rows) {
    const plays = sum(rows, 'plays');
    const steps = MILESTONES.map(([key, label]) => {
      const count = sum(rows, key);
      return { key, label, count, rate: key === 'creativeViews' ? null : ratio(count, plays) };
    });
    const tbody = $('funnel-table').tBodies[0];
    tbody.replaceChildren(...steps.map((s) => {
      const tr = document.createElement('tr');
      tr.dataset.milestone = s.key;
      const th = document.createElement('th');
      th.scope = 'row';
      th.textContent = s.label;
      tr.append(th, cell(nf.format(s.count), { value: s.count, key: 'count' }),
        cell(s.rate === null ? '—' : pct.format(s.rate), { value: s.rate, key: 'rate' }));
      return tr;
    }));
    drawFunnel(steps, rows.length);
  }

  function svg(name, attrs, text) {
    const e = document.createElementNS(SVG_NS, name);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function drawFunnel(steps, rowCount) {
    const W = 640;
    const rowH = 34;
    const labelW = 120;
    const barMax = W - labelW - 170;
    const H = steps.length * rowH + 10;
    const max = Math.max(1, ...steps.map((s) => s.count));
    const chart = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-labelledby': 'funnel-chart-title' });
    const summary = steps.map((s) => `${s.label} ${s.count}`).join(', ');
    chart.append(svg('title', { id: 'funnel-chart-title' }, `Video funnel: ${summary}`));
    steps.forEach((s, i) => {
      const y = 5 + i * rowH;
      const w = s.count > 0 ? Math.max(2, (s.count / max) * barMax) : 0;
      chart.append(
        svg('text', { x: labelW - 8, y: y + 20, 'text-anchor': 'end', class: 'label' }, s.label),
        svg('rect', { x: labelW, y: y + 4, width: w.toFixed(1), height: rowH - 10, rx: 3, class: 'bar' }),
        svg('text', { x: labelW + w + 6, y: y + 20, class: 'value' }, nf.format(s.count)),
      );
      if (s.rate !== null) {
        chart.append(svg('text', { x: W - 6, y: y + 20, 'text-anchor': 'end', class: 'rate' },
          `${pct.format(s.rate)} of plays`));
      }
    });
    $('funnel-chart').replaceChildren(chart);
    $('funnel-caption').textContent = rowCount
      ? `Milestone counts over ${rowCount} creative-day row${rowCount === 1 ? '' : 's'}`
      : 'No video events for this campaign and dates';
  }

  // ---- products ----
  function renderProducts(rows) {
    const by = new Map();
    for (const r of rows) {
      const k = `${r.catalogId}\u0000${r.productCode}`;
      const p = by.get(k) || { catalogId: r.catalogId, productCode: r.productCode, impressions: 0, clicks: 0 };
      p.impressions += Number(r.impressions) || 0;
      p.clicks += Number(r.clicks) || 0;
      by.set(k, p);
    }
    productRows = [...by.values()].map((p) => ({ ...p, ctr: ratio(p.clicks, p.impressions) }));
    drawProducts();
  }

  function drawProducts() {
    const { key, dir } = productSort;
    const sign = dir === 'ascending' ? 1 : -1;
    const sorted = [...productRows].sort((a, b) => {
      const x = a[key];
      const y = b[key];
      const c = typeof x === 'number' ? x - y : String(x).localeCompare(String(y));
      return sign * c || a.productCode.localeCompare(b.productCode);
    });
    for (const th of $('products-table').tHead.rows[0].cells) {
      th.setAttribute('aria-sort', th.dataset.key === key ? dir : 'none');
    }
    const tbody = $('products-table').tBodies[0];
    if (!sorted.length) return emptyRow(tbody, 5);
    tbody.replaceChildren(...sorted.map((p) => {
      const tr = document.createElement('tr');
      if (p.clicks === 0) tr.className = 'zero';
      tr.append(cell(p.catalogId, { key: 'catalogId' }), cell(p.productCode, { key: 'productCode' }),
        cell(nf.format(p.impressions), { value: p.impressions, key: 'impressions' }),
        cell(nf.format(p.clicks), { value: p.clicks, key: 'clicks' }),
        cell(pct.format(p.ctr), { value: p.ctr, key: 'ctr' }));
      return tr;
    }));
    return undefined;
  }

  function sortProducts(key) {
    const numeric = key !== 'catalogId' && key !== 'productCode';
    if (productSort.key === key) {
      productSort.dir = productSort.dir === 'ascending' ? 'descending' : 'ascending';
    } else {
      productSort = { key, dir: numeric ? 'descending' : 'ascending' };
    }
    drawProducts();
  }

  // ---- carts and sales ----
  function renderCarts(rows) {
    const tbody = $('carts-table').tBodies[0];
    if (!rows.length) return emptyRow(tbody, 5);
    tbody.replaceChildren(...rows.map((r) => {
      const tr = document.createElement('tr');
      tr.append(cell(r.catalogId, { key: 'catalogId' }), cell(r.productCode, { key: 'productCode' }),
        cell(nf.format(r.cartsAdded), { value: r.cartsAdded, key: 'cartsAdded' }),
        cell(nf.format(r.unitsAdded), { value: r.unitsAdded, key: 'unitsAdded' }),
        cell(money.format(r.value), { value: r.value, key: 'value' }));
      return tr;
    }));
    return undefined;
  }

  function renderSales(rows) {
    const table = $('sales-table');
    const tbody = table.tBodies[0];
    table.tFoot.replaceChildren();
    if (!rows.length) return emptyRow(tbody, 8);
    tbody.replaceChildren(...rows.map((r) => {
      const tr = document.createElement('tr');
      tr.append(cell(r.day, { key: 'day' }), cell(r.catalogId, { key: 'catalogId' }), cell(r.productCode, { key: 'productCode' }),
        cell(nf.format(r.orders), { value: r.orders, key: 'orders' }),
        cell(nf.format(r.units), { value: r.units, key: 'units' }),
        cell(money.format(r.revenue), { value: r.revenue, key: 'revenue' }),
        Object.assign(cell(`${r.clickAttributions} / ${r.viewAttributions}`, { key: 'credits' }), { className: 'num' }),
        cell(r.roas === null || r.roas === undefined ? '—' : money.format(r.roas), { value: r.roas ?? null, key: 'roas' }));
      return tr;
    }));
    // The cost is the campaign's whole cost, so the rows' ROAS add up to the campaign's.
    const withRoas = rows.filter((r) => typeof r.roas === 'number');
    const roas = withRoas.length ? sum(withRoas, 'roas') : null;
    // Revenue never adds across currencies: one total per currency.
    const currencies = [...new Set(rows.map((r) => r.currency || 'USD'))];
    const byCurrency = currencies.map((c) => [c, sum(rows.filter((r) => (r.currency || 'USD') === c), 'revenue')]);
    const revenue = byCurrency.length === 1 ? byCurrency[0][1] : null;
    const revenueText = byCurrency.length === 1
      ? money.format(revenue)
      : byCurrency.map(([c, v]) => `${money.format(v)} ${c}`).join(' · ');
    const tr = document.createElement('tr');
    const label = cell('Total');
    label.colSpan = 3;
    tr.append(label, cell(nf.format(sum(rows, 'orders')), { value: sum(rows, 'orders') }),
      cell(nf.format(sum(rows, 'units')), { value: sum(rows, 'units') }),
      cell(revenueText, { value: revenue, key: 'revenue' }), cell(''),
      cell(roas === null ? '—' : money.format(roas), { value: roas, key: 'roas' }));
    tr.id = 'sales-total';
    table.tFoot.replaceChildren(tr);
    return undefined;
  }

  // ---- actions ----
  async function showReports() {
    const params = filterParams();
    if (!params.campaignId) throw new Shown('no campaign has report rows yet');
    sessionStorage.setItem(CAMPAIGN_KEY, params.campaignId);
    status(`Loading reports for ${params.campaignId}…`);
    const [funnel, products, carts, sales] = await Promise.all(
      ['video-funnel', 'products', 'carts/campaigns', 'sales'].map((p) => report(p, params)),
    );
    renderFunnel(funnel);
    renderProducts(products);
    renderCarts(carts);
    renderSales(sales);
    $('reports').hidden = false;
    const range = `${params.from || 'the start'} to ${params.to || 'today'}`;
    status(`Showing campaign ${params.campaignId}, ${range} (UTC days).`);
    document.body.dataset.loaded = params.campaignId;
  }

  async function downloadCsv(path) {
    const params = { ...filterParams(), format: 'csv' };
    const r = await report(path, params, true);
    if (!r.ok) throw new Shown(`${path} CSV: ${await errorText(r)}`);
    const blob = new Blob([await r.arrayBuffer()], { type: 'text/csv' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = `${path.replace('/', '-')}-${params.campaignId}-${params.from || 'start'}-${params.to || 'today'}.csv`;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 60000);
    status(`Downloaded ${a.download}.`);
  }

  function loggedIn(yes) {
    $('filters').hidden = !yes;
    $('logout-button').hidden = !yes;
    for (const e of document.querySelectorAll('.login-field')) e.hidden = yes;
    const who = $('logged-in-as');
    who.hidden = !yes;
    const ns = sessionStorage.getItem(NAMESPACE_KEY);
    who.textContent = yes
      ? `Logged in as ${sessionStorage.getItem(CLIENT_KEY) || 'a client'}${ns ? ` (namespace ${ns})` : ''}.`
      : '';
    document.body.dataset.namespace = yes ? ns || '' : '';
    if (!yes) $('reports').hidden = true;
  }

  /** Runs an action, showing its failure in the status line. */
  function guarded(action) {
    return async (ev) => {
      if (ev) ev.preventDefault();
      try {
        await action(ev);
      } catch (e) {
        status(e instanceof Shown ? e.message : `something went wrong: ${e.message}`, true);
        if (!(e instanceof Shown)) console.error(e);
      }
    };
  }

  async function afterLogin() {
    loggedIn(true);
    defaultDates();
    status('Loading campaigns…');
    const ids = await loadCampaigns();
    if (!ids.length) {
      status('Logged in. No campaign has report rows yet.');
      return;
    }
    await showReports();
  }

  function start() {
    $('login-form').addEventListener('submit', guarded(async () => {
      status('Logging in…');
      await login($('client-id').value.trim(), $('client-secret').value);
      $('client-secret').value = '';
      await afterLogin();
    }));
    $('logout-button').addEventListener('click', () => {
      forgetToken();
      loggedIn(false);
      status('Logged out.');
    });
    $('filter-form').addEventListener('submit', guarded(showReports));
    $('refresh-campaigns').addEventListener('click', guarded(async () => {
      const ids = await loadCampaigns();
      status(`${ids.length} campaign${ids.length === 1 ? '' : 's'} with report rows.`);
    }));
    for (const b of document.querySelectorAll('button.csv')) {
      b.addEventListener('click', guarded(() => downloadCsv(b.dataset.report)));
    }
    for (const th of $('products-table').tHead.rows[0].cells) {
      th.querySelector('button').addEventListener('click', () => sortProducts(th.dataset.key));
    }
    if (savedToken()) guarded(afterLogin)();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
