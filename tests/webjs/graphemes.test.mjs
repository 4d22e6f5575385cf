// @ts-check
// Grapheme boundaries (js/graphemes.js) on cases/graphemes.json — the cases of
// tests/app/test_graphemes.py, which test_twins.py runs on the Python twin — and its property:
// the windowed search finds the boundaries of the whole text, seeded.
import assert from "node:assert/strict";
import { test } from "node:test";
import { boundaryAtOrAfter, boundaryAtOrBefore } from "../../src/iris/web/js/graphemes.js";
import { cases, forAll } from "./cases.js";

const CASES = cases("graphemes");

/** Every boundary of `text` per boundaryAtOrBefore. @param {string} text */
function boundaries(text) {
  const found = [];
  for (let i = 0; i <= text.length; i++) if (boundaryAtOrBefore(text, i) === i) found.push(i);
  return found;
}

for (const [cluster, what] of CASES.clusters) {
  test(`no cut inside a cluster: ${what}`, () => {
    const text = `a${cluster}${cluster}b`;
    assert.deepEqual(boundaries(text), [0, 1, 1 + cluster.length, 1 + 2 * cluster.length, text.length]);
    assert.equal(boundaryAtOrBefore(text, 2), 1);
    assert.equal(boundaryAtOrAfter(text, 2), 1 + cluster.length);
  });
}

for (const [parts, what] of CASES.runs) {
  test(`boundaries of a run: ${what}`, () => {
    const ends = [0];
    for (const part of parts) ends.push(ends[ends.length - 1] + part.length);
    assert.deepEqual(boundaries(parts.join("")), ends);
  });
}

const PIECES = ["a", " ", "\n", "\r", "\u1100", "\u1161", "\u11a8", "\u0915", "\u094d", "\u0937", "\u0e01",
  "\u0e33", "👨", "\u200d", "🏽", "🇯", "🇵", "\u0301", "\ufe0f", "\u20e3", "\u0600", "字"];
const WHOLE = new Intl.Segmenter(undefined, { granularity: "grapheme" });

test("the boundaries are those of the whole text", () => {
  forAll(200, (random) => {
    // Long enough, at times, that the search window (64 units each side) does not see it all.
    const text = random.list(() => random.pick(PIECES), random.next() < 0.2 ? 200 : 40).join("");
    const whole = [...WHOLE.segment(text)].map((s) => s.index).concat(text.length);
    let next = 0; // whole[next] is the first boundary at or after i
    for (let i = 0; i <= text.length; i++) {
      if (whole[next] < i) next++;
      const before = whole[next] === i ? i : whole[next - 1];
      assert.equal(boundaryAtOrBefore(text, i), before, `before ${i}`);
      assert.equal(boundaryAtOrAfter(text, i), whole[next], `after ${i}`);
    }
  });
});
