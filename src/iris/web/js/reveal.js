// @ts-check
// The reveal scheduler (typewriter), the same rule as src/iris/app/core/reveal.py:
// `60 / smoothness` characters per second, faster in proportion to the backlog
// (max(base, backlog / 0.75 s)); a snapshot that leaves more than 2 s of reveal time — measured
// at the faster of the rate in force and the rate text has been arriving at — is shown at once.
// Pure: the caller passes `now` (seconds). Lengths are UTF-16 code units (JS strings).

import { boundaryAtOrAfter, boundaryAtOrBefore } from "./graphemes.js";

export const SMOOTHNESS_MIN = 0.2;
export const SMOOTHNESS_MAX = 0.8;
export const CATCH_UP_SECONDS = 2.0;
export const BACKLOG_SECONDS = 0.75;
const MIN_INTERVAL = 1 / 30;

/** @param {number} smoothness seconds, clamped to [0.2, 0.8] @returns {number} */
export function charsPerSecond(smoothness) {
  const clamped = Math.min(Math.max(smoothness, SMOOTHNESS_MIN), SMOOTHNESS_MAX);
  return 60 / clamped;
}

/** @param {string} a @param {string} b */
function commonPrefix(a, b) {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a.charCodeAt(i) === b.charCodeAt(i)) i++;
  return i;
}

export class Reveal {
  /** @param {number} smoothness @param {number} now seconds */
  constructor(smoothness, now) {
    this.base = charsPerSecond(smoothness);
    this.rate = this.base;
    this.last = now;
    this.budget = 0;
    this.inflow = 0;
    this.lastPush = now;
    this.target = "";
    this.shown = 0;
    this.jumps = 0;
  }

  get text() { return this.target.slice(0, this.shown); }
  get caughtUp() { return this.shown >= this.target.length; }

  /** @param {number} smoothness */
  setSmoothness(smoothness) {
    const oldBase = this.base;
    this.base = charsPerSecond(smoothness);
    this.rate = Math.max(this.base, this.rate > oldBase ? this.rate : 0);
  }

  /** The latest full text. @param {string} snapshot @param {number} now */
  push(snapshot, now) {
    let added = snapshot.length - this.target.length;
    if (!snapshot.startsWith(this.target)) {
      const common = commonPrefix(this.target, snapshot);
      this.shown = boundaryAtOrBefore(snapshot, Math.min(this.shown, common));
      added = snapshot.length - common;
    }
    this.target = snapshot;
    const backlog = snapshot.length - this.shown;
    if (backlog > CATCH_UP_SECONDS * Math.max(this.rate, this.inflow)) {
      this.jumps += 1;
      this.finish();
    }
    // Measured after the decision: the burst being judged must not vouch for itself.
    const since = Math.max(now - this.lastPush, MIN_INTERVAL);
    this.lastPush = now;
    this.inflow = 0.5 * this.inflow + 0.5 * (Math.max(added, 0) / since);
  }

  finish() {
    this.shown = this.target.length;
    this.budget = 0;
  }

  /** Advance to `now`; true if more text is shown. @param {number} now */
  tick(now) {
    const elapsed = Math.max(0, now - this.last);
    this.last = now;
    const backlog = this.target.length - this.shown;
    if (backlog <= 0) {
      this.budget = 0;
      this.rate = this.base;
      return false;
    }
    this.budget += this.rate * elapsed;
    const step = Math.floor(this.budget);
    if (step === 0) return false;
    const before = this.shown;
    this.shown = boundaryAtOrAfter(this.target, Math.min(this.target.length, before + step));
    this.budget = Math.max(0, this.budget - (this.shown - before));
    this.rate = Math.max(this.base, (this.target.length - this.shown) / BACKLOG_SECONDS);
    return true;
  }
}
