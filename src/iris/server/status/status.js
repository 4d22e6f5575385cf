// @ts-check
/**
 * The /status page: scrapes /metrics every two seconds (with the operator's token) and draws
 * the dashboard's series live with uPlot. Everything comes from this server; nothing is kept.
 */
import uPlot from './vendor/uplot/uPlot.esm.mjs';
import { meanBetween, parse, ratePerSecond, sumBy } from './prom.js';

/** @typedef {import('./prom.js').Sample} Sample */
/** @typedef {(before: Sample[], now: Sample[], seconds: number) => Map<string, number | null>} Series */

const EVERY = 2000; // ms between scrapes
const KEEP = 150; // points per chart: five minutes
const KEY = 'iris.metrics.token';
const COLORS = ['#5b5bd6', '#1f8a4c', '#c62f3b', '#d08a00', '#0a84a8', '#8a4fc6', '#6b6e76'];

/** @param {Map<string, number>} rates */
const perMinute = (rates) => new Map([...rates].map(([k, v]) => [k, v * 60]));

/** @type {Record<string, Series>} */
const CHARTS = {
  ttft: (before, now) => meanBetween(before, now, 'iris_time_to_first_token_seconds', 'model'),
  tps: (before, now, seconds) => ratePerSecond(
    sumBy(before, 'iris_tokens_total', '', { type: 'output' }),
    sumBy(now, 'iris_tokens_total', '', { type: 'output' }), seconds),
  running: (_, now) => {
    const running = sumBy(now, 'iris_turns_running', 'surface');
    for (const key of sumBy(now, 'iris_turns_started_total', 'surface').keys()) {
      if (!running.has(key)) running.set(key, 0);
    }
    return running;
  },
  limited: (before, now, seconds) => perMinute(ratePerSecond(
    sumBy(before, 'iris_chat_rate_limited_total', 'platform'),
    sumBy(now, 'iris_chat_rate_limited_total', 'platform'), seconds)),
  bound: (before, now, seconds) => perMinute(ratePerSecond(
    sumBy(before, 'iris_socket_devices_over_bound_total', 'action'),
    sumBy(now, 'iris_socket_devices_over_bound_total', 'action'), seconds)),
};

/** @typedef {{times: number[], values: Map<string, (number | null)[]>, plot: uPlot | null,
 *   shape: string}} Chart */
/** @type {Record<string, Chart>} */
const charts = {};
for (const id of Object.keys(CHARTS)) charts[id] = { times: [], values: new Map(), plot: null, shape: '' };

const state = /** @type {HTMLElement} */ (document.getElementById('state'));
const login = /** @type {HTMLFormElement} */ (document.getElementById('login'));
const tokenInput = /** @type {HTMLInputElement} */ (document.getElementById('token'));
const totals = /** @type {HTMLElement} */ (document.querySelector('#now tbody'));

/** What the tests read: scrapes done and each chart's series. */
const exposed = { scrapes: 0, charts: /** @type {Record<string, Record<string, (number | null)[]>>} */ ({}) };
Object.assign(window, { __status: exposed });

function takeToken() {
  const match = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (match) {
    sessionStorage.setItem(KEY, decodeURIComponent(match[1]));
    history.replaceState(null, '', location.pathname); // the token leaves the address bar
  }
  return sessionStorage.getItem(KEY) || '';
}

/** @type {Sample[] | null} */
let previous = null;
let previousAt = 0;

async function tick() {
  const token = takeToken();
  let answer;
  try {
    answer = await fetch('/metrics', {
      headers: token ? { authorization: `Bearer ${token}` } : {},
      cache: 'no-store',
      credentials: 'omit',
    });
  } catch (error) {
    say(`cannot reach the server (${error})`, true);
    return;
  }
  if (answer.status === 401) {
    login.hidden = false;
    say('this server needs its metrics token', true);
    return;
  }
  if (!answer.ok) {
    say(`/metrics answered ${answer.status}`, true);
    return;
  }
  login.hidden = true;
  const now = parse(await answer.text());
  const at = Date.now() / 1000;
  if (previous !== null) {
    for (const [id, series] of Object.entries(CHARTS)) {
      push(id, at, series(previous, now, at - previousAt));
    }
  }
  previous = now;
  previousAt = at;
  showTotals(now);
  exposed.scrapes += 1;
  say(`updated ${new Date().toLocaleTimeString()}`, false);
}

/**
 * @param {string} id
 * @param {number} at
 * @param {Map<string, number | null>} point
 */
function push(id, at, point) {
  const chart = charts[id];
  chart.times.push(at);
  for (const key of point.keys()) {
    if (!chart.values.has(key)) chart.values.set(key, chart.times.slice(1).map(() => null));
  }
  for (const [key, values] of chart.values) values.push(point.has(key) ? point.get(key) ?? null : null);
  if (chart.times.length > KEEP) {
    chart.times.shift();
    for (const values of chart.values.values()) values.shift();
  }
  exposed.charts[id] = Object.fromEntries(chart.values);
  draw(id, chart);
}

/**
 * @param {string} id
 * @param {Chart} chart
 */
function draw(id, chart) {
  const keys = [...chart.values.keys()].sort();
  const data = /** @type {uPlot.AlignedData} */ ([chart.times, ...keys.map((k) => chart.values.get(k) || [])]);
  const shape = keys.join('\n');
  if (chart.plot !== null && chart.shape === shape) {
    chart.plot.setData(data);
    return;
  }
  chart.plot?.destroy();
  chart.shape = shape;
  const box = /** @type {HTMLElement} */ (document.getElementById(id));
  chart.plot = new uPlot({
    width: Math.max(300, box.clientWidth - 16),
    height: 180,
    series: [{}, ...keys.map((label, i) => ({
      label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: false,
    }))],
    axes: [{ stroke: '#6b6e76' }, { stroke: '#6b6e76' }],
    scales: { y: { range: (_, min, max) => [Math.min(0, min), Math.max(max, 1)] } },
  }, data, box);
}

/** @param {Sample[]} now */
function showTotals(now) {
  const rows = [
    ['turns started', sumBy(now, 'iris_turns_started_total', '').get('all') || 0],
    ...[...sumBy(now, 'iris_turns_ended_total', 'outcome')].map(([k, v]) => [`turns ${k}`, v]),
    ['iris devices connected', sumBy(now, 'iris_socket_connections', '').get('all') || 0],
    ['API streams open', sumBy(now, 'iris_api_streams_open', '').get('all') || 0],
  ];
  totals.replaceChildren(...rows.map(([name, value]) => {
    const row = document.createElement('tr');
    for (const text of [String(name), String(value)]) {
      const cell = document.createElement('td');
      cell.textContent = text;
      row.append(cell);
    }
    return row;
  }));
}

/**
 * @param {string} text
 * @param {boolean} failed
 */
function say(text, failed) {
  state.textContent = text;
  state.classList.toggle('failed', failed);
}

login.addEventListener('submit', (event) => {
  event.preventDefault();
  sessionStorage.setItem(KEY, tokenInput.value.trim());
  tokenInput.value = '';
  void tick();
});

void tick();
setInterval(() => void tick(), EVERY);
