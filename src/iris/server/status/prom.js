// @ts-check
/** The Prometheus text format, read: samples, and the rates the status page draws. Pure. */

/** @typedef {{name: string, labels: Record<string, string>, value: number}} Sample */

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/**
 * Every sample of a scrape.
 * @param {string} text
 * @returns {Sample[]}
 */
export function parse(text) {
  /** @type {Sample[]} */
  const samples = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const match = LINE.exec(line);
    if (!match) continue;
    /** @type {Record<string, string>} */
    const labels = {};
    for (const [, key, raw] of (match[2] || '').matchAll(LABEL)) {
      labels[key] = raw.replace(/\\n/g, '\n').replace(/\\"/g, '"').replace(/\\\\/g, '\\');
    }
    samples.push({ name: match[1], labels, value: Number(match[3]) });
  }
  return samples;
}

/**
 * The sum of ``name``'s samples grouped by one label ('' groups them all).
 * @param {Sample[]} samples
 * @param {string} name
 * @param {string} by
 * @param {Record<string, string>} [where] labels a sample must have
 * @returns {Map<string, number>}
 */
export function sumBy(samples, name, by, where = {}) {
  /** @type {Map<string, number>} */
  const sums = new Map();
  for (const s of samples) {
    if (s.name !== name) continue;
    if (!Object.entries(where).every(([k, v]) => s.labels[k] === v)) continue;
    const key = by ? (s.labels[by] || '(none)') : 'all';
    sums.set(key, (sums.get(key) || 0) + s.value);
  }
  return sums;
}

/**
 * How much each group grew per second between two scrapes ``seconds`` apart; a counter that
 * went back (a restarted server) counts from zero.
 * @param {Map<string, number>} before
 * @param {Map<string, number>} now
 * @param {number} seconds
 * @returns {Map<string, number>}
 */
export function ratePerSecond(before, now, seconds) {
  /** @type {Map<string, number>} */
  const rates = new Map();
  for (const [key, value] of now) {
    const was = before.get(key) || 0;
    const grown = value >= was ? value - was : value;
    rates.set(key, seconds > 0 ? grown / seconds : 0);
  }
  return rates;
}

/**
 * The mean of a histogram's observations made between two scrapes, by one label: the growth
 * of its ``_sum`` over the growth of its ``_count`` (null where nothing was observed).
 * @param {Sample[]} before
 * @param {Sample[]} now
 * @param {string} name the histogram's name, without ``_sum`` / ``_count``
 * @param {string} by
 * @returns {Map<string, number | null>}
 */
export function meanBetween(before, now, name, by) {
  const sums = ratePerSecond(sumBy(before, `${name}_sum`, by), sumBy(now, `${name}_sum`, by), 1);
  const counts = ratePerSecond(
    sumBy(before, `${name}_count`, by), sumBy(now, `${name}_count`, by), 1);
  /** @type {Map<string, number | null>} */
  const means = new Map();
  for (const [key, count] of counts) {
    means.set(key, count > 0 ? (sums.get(key) || 0) / count : null);
  }
  return means;
}
