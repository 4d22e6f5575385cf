// @ts-check
// The case files in cases/, read by these tests and by test_twins.py (the Python twins on the
// same cases), and a seeded random source for the properties.
import { readFileSync } from "node:fs";

/** @param {string} name a file in cases/, without `.json` @returns {any} */
export function cases(name) {
  return JSON.parse(readFileSync(new URL(`cases/${name}.json`, import.meta.url), "utf8"));
}

/**
 * A text written as a string, `{ repeat, times }`, or a list of those, joined.
 * @param {any} spec @returns {string}
 */
export function text(spec) {
  if (typeof spec === "string") return spec;
  if (Array.isArray(spec)) return spec.map(text).join("");
  return String(spec.repeat).repeat(spec.times);
}

/** A seeded PRNG (mulberry32): the same runs every time, and a failure names its seed. */
export class Random {
  /** @param {number} seed */
  constructor(seed) { this.state = seed >>> 0; }

  /** A float in [0, 1). */
  next() {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** An integer in [low, high]. @param {number} low @param {number} high */
  int(low, high) { return low + Math.floor(this.next() * (high - low + 1)); }

  /** @template T @param {T[]} items @returns {T} */
  pick(items) { return items[Math.floor(this.next() * items.length)]; }

  /** @template T @param {() => T} make @param {number} max @param {number} [min] @returns {T[]} */
  list(make, max, min = 0) {
    return Array.from({ length: this.int(min, max) }, make);
  }
}

/** Property runs: `check(random)` for each seed; a failure says which. @param {number} runs
 * @param {(random: Random) => void} check */
export function forAll(runs, check) {
  for (let seed = 1; seed <= runs; seed++) {
    try {
      check(new Random(seed));
    } catch (error) {
      if (error instanceof Error) error.message = `seed ${seed}: ${error.message}`;
      throw error;
    }
  }
}
