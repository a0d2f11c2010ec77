// The dashboard: polls GET /metrics and GET /v1/top, one poll a second after the last one ended,
// and shows what model.js makes of them. Every text that comes from the service, the keys above
// all (they are the clients' bytes), is set as text (textContent, attribute values), never
// parsed as HTML.
//
// For tests and scripts, the numbers shown are also in data attributes: #dashboard has
// data-polls, data-poll-start and data-poll-end (ms since the epoch: when the last poll asked
// for /metrics and had its answer), data-prev-poll-start/-end and data-interval-ms (between
// the two polls' midpoints); each rate cell has data-value (per second) and data-delta (the
// counter's increase between the polls), each total data-value.
import { snapshot, summarize, visibleKey } from './model.js';

const POLL_MS = 1000;
const HISTORY = 120;  // polls drawn in a rule's chart
const TOP_N = 10;

const integer = new Intl.NumberFormat('en-US', { maximumFractionDigits: 0 });
const decimal = new Intl.NumberFormat('en-US', {
  minimumFractionDigits: 1,
  maximumFractionDigits: 1,
});
const percent = new Intl.NumberFormat('en-US', { style: 'percent', maximumFractionDigits: 1 });

const dashboard = document.getElementById('dashboard');
const rows = new Map();     // rule → its row's cells
const history = new Map();  // rule → [{allowed, denied}] per second, oldest first
let previous = null;

function element(tag, { text, className, data } = {}, children = []) {
  const node = document.createElement(tag);
  if (text !== undefined) node.textContent = text;
  if (className) node.className = className;
  for (const [name, value] of Object.entries(data ?? {})) node.dataset[name] = value;
  node.append(...children);
  return node;
}

function duration(seconds) {
  const minutes = Math.floor(seconds / 60);
  const rest = seconds % 60;
  if (minutes === 0) return `${rest} s`;
  return rest === 0 ? `${minutes} min` : `${minutes} min ${rest} s`;
}

// "1 denial", "2 denials".
function count(n, noun) {
  return `${integer.format(n)} ${noun}${n === 1 ? '' : 's'}`;
}

function setCount(cell, value) {
  cell.dataset.value = String(value);
  cell.textContent = integer.format(value);
}

function setRate(cell, counter) {
  if (counter.rate === null) {
    cell.dataset.value = '';
    cell.dataset.delta = '';
    cell.textContent = '–';
    return;
  }
  cell.dataset.value = String(counter.rate);
  cell.dataset.delta = String(counter.delta);
  cell.textContent = decimal.format(counter.rate);
}

function setStatus(state, text) {
  const status = document.getElementById('status');
  status.dataset.state = state;
  status.textContent = text;
  document.body.dataset.state = state;
}

function ruleRow(rule) {
  let row = rows.get(rule);
  if (row) return row;
  const cell = (field, className = 'num') => element('td', { className, data: { field } });
  row = {
    chart: element('canvas', { className: 'chart' }),
    rate: cell('rate'),
    allowedRate: cell('allowed-rate'),
    deniedRate: cell('denied-rate'),
    shadowRate: cell('shadow-rate', 'num shadow'),
    deniedShare: cell('denied-share'),
    allowedTotal: cell('allowed-total'),
    deniedTotal: cell('denied-total'),
    degradedTotal: cell('degraded-total'),
    waiters: cell('waiters'),
  };
  row.chart.width = 240;
  row.chart.height = 48;
  const tr = element('tr', { data: { rule } }, [
    element('th', { text: rule, data: { field: 'rule' } }),
    element('td', { className: 'chart-col' }, [row.chart]),
    row.rate,
    row.allowedRate,
    row.deniedRate,
    row.shadowRate,
    row.deniedShare,
    row.allowedTotal,
    row.deniedTotal,
    row.degradedTotal,
    row.waiters,
  ]);
  const body = document.querySelector('#rules tbody');
  const after = [...body.children].find((r) => r.dataset.rule > rule);
  body.insertBefore(tr, after ?? null);
  rows.set(rule, row);
  return row;
}

// Allowed (below) and denied (stacked above) decisions per second over the last polls.
function drawChart(canvas, points) {
  const context = canvas.getContext('2d');
  const { width, height } = canvas;
  context.clearRect(0, 0, width, height);
  const top = Math.max(1, ...points.map((p) => p.allowed + p.denied));
  const step = width / (HISTORY - 1);
  const x = (i) => width - (points.length - 1 - i) * step;
  const y = (v) => height - 1 - (v / top) * (height - 4);
  const area = (low, high, color) => {
    context.beginPath();
    points.forEach((p, i) => context.lineTo(x(i), y(high(p))));
    for (let i = points.length - 1; i >= 0; i--) context.lineTo(x(i), y(low(points[i])));
    context.closePath();
    context.fillStyle = color;
    context.fill();
  };
  const style = getComputedStyle(canvas);
  area(() => 0, (p) => p.allowed, style.getPropertyValue('--allowed').trim());
  area((p) => p.allowed, (p) => p.allowed + p.denied, style.getPropertyValue('--denied').trim());
}

function renderRules(summary) {
  for (const header of document.querySelectorAll('#rules .shadow')) {
    header.hidden = !summary.hasShadow;
  }
  for (const rule of summary.rules) {
    const row = ruleRow(rule.rule);
    setRate(row.rate, rule.decisions);
    setRate(row.allowedRate, rule.allowed);
    setRate(row.deniedRate, rule.denied);
    row.shadowRate.hidden = !summary.hasShadow;
    if (rule.shadowDenied) setRate(row.shadowRate, rule.shadowDenied);
    const decided = rule.decisions.delta;
    row.deniedShare.textContent = decided ? percent.format(rule.denied.delta / decided) : '–';
    setCount(row.allowedTotal, rule.allowed.total);
    setCount(row.deniedTotal, rule.denied.total);
    setCount(row.degradedTotal, rule.degraded);
    setCount(row.waiters, rule.waiters);
    row.waiters.classList.toggle('busy', rule.waiters > 0);
    if (rule.decisions.rate !== null) {
      const points = history.get(rule.rule) ?? [];
      points.push({ allowed: rule.allowed.rate, denied: rule.denied.rate });
      if (points.length > HISTORY) points.shift();
      history.set(rule.rule, points);
      drawChart(row.chart, points);
    }
  }
}

function badge(state) {
  return element('span', { text: (state ?? 'unknown').replace('_', '-'), className: 'badge', data: { state: state ?? 'unknown' } });
}

function renderStore(summary) {
  const breaker = document.getElementById('breaker');
  if (summary.breaker === null) {
    breaker.dataset.state = 'none';
    breaker.replaceChildren('No circuit breaker: the store is in this process (memory://).');
  } else {
    breaker.dataset.state = summary.breaker.state ?? 'unknown';
    breaker.replaceChildren(
      'Circuit breaker ',
      badge(summary.breaker.state),
      ` — opened ${count(summary.breaker.opens, 'time')}`,
    );
    if (summary.breaker.state !== 'closed') {
      breaker.append(
        element('span', {
          text: 'The store is out: each rule\'s on_error policy decides (see the degraded sources).',
          className: 'problem block',
        }),
      );
    }
  }
  const nodes = document.getElementById('nodes');
  nodes.hidden = summary.nodes.length === 0;
  nodes.tBodies[0].replaceChildren(
    ...summary.nodes.map((n) => {
      const opens = element('td', { className: 'num', data: { field: 'opens' } });
      setCount(opens, n.opens);
      return element('tr', { data: { node: n.node } }, [
        element('td', { text: n.node, className: 'node' }),
        element('td', { data: { field: 'state', state: n.state ?? 'unknown' } }, [badge(n.state)]),
        opens,
      ]);
    }),
  );
  document.querySelector('#sources tbody').replaceChildren(
    ...summary.sources.map((s) => {
      const rate = element('td', { className: 'num', data: { field: 'rate' } });
      const total = element('td', { className: 'num', data: { field: 'total' } });
      setRate(rate, s);
      setCount(total, s.total);
      const name = element('td', { text: s.source.replaceAll('_', ' ') });
      if (s.degraded) name.append(' ', element('span', { text: 'degraded', className: 'tag' }));
      return element('tr', { data: { source: s.source, degraded: String(s.degraded) } }, [
        name,
        rate,
        total,
      ]);
    }),
  );
  setCount(document.getElementById('store-errors'), summary.storeErrors.total);
}

function keyRow(entry, rank, denials) {
  const key = element('span', { text: visibleKey(entry.key), className: 'key-text' });
  if (entry.key_hex !== undefined) key.title = `not UTF-8; bytes: ${entry.key_hex}`;
  const bar = element('span', { className: 'bar' });
  bar.style.width = `${denials ? Math.min(100, (100 * entry.denied) / denials) : 0}%`;
  const denied = element('td', { className: 'num', data: { field: 'denied' } });
  setCount(denied, entry.denied);
  const error = element('td', { className: 'num', data: { field: 'error' } });
  setCount(error, entry.error);
  if (entry.error === 0) error.textContent = 'exact';
  return element('tr', { data: { rank: String(rank) } }, [
    element('td', { text: String(rank), className: 'num rank' }),
    element('td', { className: 'key', data: { field: 'key', key: entry.key } }, [bar, key]),
    denied,
    error,
  ]);
}

function renderTop(top) {
  const container = document.getElementById('top');
  const note = document.getElementById('top-note');
  if (top.hidden) {
    container.dataset.hidden = 'true';
    container.replaceChildren();
    note.textContent = `Keys are hidden: ${top.message}. Keys identify clients, so the service ` +
      'shows them only when its config says server.expose_keys: true.';
    return;
  }
  container.dataset.hidden = 'false';
  const quiet = top.rules.filter((r) => r.tracked && r.denied === 0).map((r) => r.rule);
  const untracked = top.rules.filter((r) => !r.tracked).map((r) => r.rule);
  const window = top.rules.length ? duration(top.rules[0].window_s) : '';
  note.textContent = `Denials in the last ${window}, counted per key in a bounded sketch: a ` +
    'count may be over by at most its error, never under.';
  const blocks = top.rules.filter((r) => r.tracked && r.denied > 0).map((r) => {
    const heading = element('h3', { text: r.rule }, [
      element('span', {
        text: ` ${count(r.denied, 'denial')}; counts over by at most ${integer.format(r.max_error)}`,
        className: 'note',
      }),
    ]);
    const table = element('table', { className: 'keys' }, [
      element('thead', {}, [
        element('tr', {}, [
          element('th', { text: '#', className: 'num' }),
          element('th', { text: 'Key' }),
          element('th', { text: 'Denied', className: 'num' }),
          element('th', { text: 'Error', className: 'num' }),
        ]),
      ]),
      element('tbody', {}, r.keys.map((k, i) => keyRow(k, i + 1, r.denied))),
    ]);
    return element('section', { className: 'top-rule', data: { rule: r.rule, denied: String(r.denied) } }, [heading, table]);
  });
  if (quiet.length) blocks.push(element('p', { text: `No denials: ${quiet.join(', ')}.`, className: 'note' }));
  if (untracked.length) {
    blocks.push(element('p', { text: `Not counted (the sketches' memory cap): ${untracked.join(', ')}.`, className: 'note' }));
  }
  container.replaceChildren(...blocks);
}

async function readTop(response) {
  if (response.status === 403) {
    const body = await response.json().catch(() => ({}));
    return { hidden: true, message: body.error ?? 'forbidden' };
  }
  if (!response.ok) throw new Error(`/v1/top answered ${response.status}`);
  return response.json();
}

function recordPoll(current) {
  const data = dashboard.dataset;
  data.polls = String(Number(data.polls) + 1);
  if (previous) {
    data.prevPollStart = String(previous.pollStart);
    data.prevPollEnd = String(previous.pollEnd);
    data.intervalMs = String(current.at - previous.at);
  }
  data.pollStart = String(current.pollStart);
  data.pollEnd = String(current.pollEnd);
}

// With server.auth, /metrics and /v1/top need a caller's token (scopes metrics and admin): the
// page asks for it once, keeps it in this tab's sessionStorage (gone when the tab closes) and
// sends it as a Bearer header. The page itself holds no data and is served to anyone.
const TOKEN_KEY = 'sluice.token';
let tokenAsked = false;

function requestOptions() {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  return { cache: 'no-store', headers };
}

// Asks again only when the token entered was refused, not when the user declined to give one.
function askForToken() {
  const refused = sessionStorage.getItem(TOKEN_KEY) !== null;
  sessionStorage.removeItem(TOKEN_KEY);
  if (tokenAsked && !refused) throw new Error('the service needs a token: reload the page to enter one');
  tokenAsked = true;
  const token = window.prompt('This service needs a token whose caller has the admin and ' +
                              'metrics scopes (kept in this tab only):');
  if (token && token.trim()) sessionStorage.setItem(TOKEN_KEY, token.trim());
  throw new Error('the service asked for a token');
}

async function poll() {
  const pollStart = Date.now();
  try {
    const options = requestOptions();
    const [metrics, top] = await Promise.all([
      fetch('/metrics', options),
      fetch(`/v1/top?n=${TOP_N}`, options),
    ]);
    if (metrics.status === 401 || top.status === 401) askForToken();
    if (!metrics.ok) throw new Error(`/metrics answered ${metrics.status}`);
    const current = snapshot(await metrics.text(), pollStart, Date.now());
    const topKeys = await readTop(top);
    const summary = summarize(current, previous);
    renderRules(summary);
    renderStore(summary);
    renderTop(topKeys);
    recordPoll(current);
    previous = current;
    setStatus('live', `Live · updated ${new Date(current.pollEnd).toLocaleTimeString()}`);
  } catch (error) {
    setStatus('error', `Cannot read the service: ${error.message} · retrying every second`);
  } finally {
    setTimeout(poll, POLL_MS);
  }
}

poll();
