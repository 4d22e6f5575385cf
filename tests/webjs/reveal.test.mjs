// @ts-check
// The reveal scheduler (js/reveal.js) on cases/reveal.json — the cases of tests/app/test_reveal.py,
// which test_twins.py runs on the Python twin — and test_reveal.py's properties, seeded.
import assert from "node:assert/strict";
import { test } from "node:test";
import { Reveal, charsPerSecond } from "../../src/iris/web/js/reveal.js";
import { boundaryAtOrBefore } from "../../src/iris/web/js/graphemes.js";
import { cases, forAll, text } from "./cases.js";

const FRAME = 1 / 30;
const CASES = cases("reveal");

/** Tick at 30 Hz from `start` for `seconds`; returns the characters revealed per tick.
 * @param {Reveal} reveal @param {number} start @param {number} seconds */
function play(reveal, start, seconds) {
  const steps = [];
  const until = start + seconds;
  let now = start;
  while (now < until - 1e-9) {
    now += FRAME;
    const before = reveal.shown;
    reveal.tick(now);
    steps.push(reveal.shown - before);
  }
  return { now, steps };
}

/** @param {number} actual @param {number | [number, number]} want @param {string} what */
function near(actual, want, what) {
  const [value, tolerance] = Array.isArray(want) ? want : [want, 0];
  assert.ok(Math.abs(actual - value) <= tolerance, `${what} ${actual}, wanted ${value} ± ${tolerance}`);
}

/** @param {string} full @param {number} index */
const isBoundary = (full, index) => boundaryAtOrBefore(full, index) === index;

test("smoothness maps to 60 / seconds, clamped to [0.2, 0.8]", () => {
  for (const [smoothness, rate] of CASES.rates) assert.equal(charsPerSecond(smoothness), rate);
});

for (const spec of CASES.cases) {
  test(spec.name, () => {
    const reveal = new Reveal(spec.smoothness, 0);
    let now = 0;
    let mark = 0;
    for (const step of spec.steps) {
      if (step.push !== undefined) reveal.push(text(step.push), now);
      else if (step.play !== undefined) ({ now } = play(reveal, now, step.play));
      else if (step.set_smoothness !== undefined) reveal.setSmoothness(step.set_smoothness);
      else if (step.mark) mark = reveal.shown;
      else if (step.expect) {
        const want = step.expect;
        if ("shown" in want) near(reveal.shown, want.shown, "shown");
        if ("advanced" in want) near(reveal.shown - mark, want.advanced, "advanced");
        if ("text" in want) assert.equal(reveal.text, want.text);
        if ("jumps" in want) assert.equal(reveal.jumps, want.jumps);
        if ("caught_up" in want) assert.equal(reveal.caughtUp, want.caught_up);
      } else assert.fail(`unknown step ${JSON.stringify(step)}`);
    }
  });
}

// 48: the iris socket's default cadence; 24: the old one (same steps).
for (const update of [24, 48]) {
  test(`an outpacing model is followed without jumps (${update} per snapshot)`, () => {
    const reveal = new Reveal(0.8, 0); // 75 chars/s
    const arrival = 300;
    const full = "word ".repeat(4000);
    let sent = 0;
    let now = 0;
    let nextPush = 0;
    const steps = [0];
    while (reveal.shown < full.length) {
      if (sent < full.length && nextPush <= now) {
        sent += update;
        reveal.push(full.slice(0, sent), now);
        nextPush += update / arrival;
        continue;
      }
      now += FRAME;
      const before = reveal.shown;
      reveal.tick(now);
      steps.push(reveal.shown - before);
    }
    assert.equal(reveal.jumps, 0);
    assert.ok(Math.max(...steps) <= 2 * arrival * FRAME, "small steps, never hundreds");
    assert.ok(now <= full.length / arrival + 2, "done within two seconds of the last snapshot");
  });
}

test("bursts at a steady pace are not dumps", () => {
  const reveal = new Reveal(0.8, 0);
  const full = "b".repeat(8000);
  let now = 0;
  let sent = 0;
  while (sent < full.length) {
    sent += 400; // the gateway's 0.8 s cadence with a fast model
    reveal.push(full.slice(0, sent), now);
    play(reveal, now, 0.8);
    now += 0.8;
  }
  assert.ok(reveal.jumps <= 1, "only the very first burst, before any pace is known");
});

test("the reveal never cuts inside a grapheme", () => {
  const full = "👨‍👩‍👧‍👦 é 🇫🇷🇩🇪 👍🏽 1️⃣ ".repeat(20);
  const reveal = new Reveal(0.8, 0);
  reveal.push(full, 0);
  let now = 0;
  while (!reveal.caughtUp) {
    now += FRAME / 3;
    reveal.tick(now);
    assert.ok(isBoundary(full, reveal.shown), JSON.stringify(reveal.text.slice(-6)));
  }
});

const PIECES = ["a", "b", " ", "\n", "é", "👍🏽", "🇫🇷", "👨‍👩‍👧"];

test("the shown text is always a whole-grapheme prefix of the latest snapshot", () => {
  forAll(100, (random) => {
    const smoothness = random.pick([0.2, 0.5, 0.8]);
    const reveal = new Reveal(smoothness, 0);
    let now = 0;
    let snapshot = "";
    const pushes = random.int(0, 30);
    for (let push = 0; push < pushes; push++) {
      const piece = random.list(() => random.pick(PIECES), 20).join("");
      snapshot = random.next() < 0.5 ? snapshot + piece : piece; // extend, or rewrite
      reveal.push(snapshot, now);
      for (let i = 0; i < Math.floor(random.next() * 0.5 * 30); i++) {
        now += FRAME;
        reveal.tick(now);
        assert.ok(snapshot.startsWith(reveal.text));
        assert.ok(isBoundary(snapshot, reveal.shown));
      }
    }
    for (let i = 0; i < 400; i++) { // given time, it always catches up
      now += FRAME;
      reveal.tick(now);
    }
    assert.equal(reveal.text, snapshot);
  });
});
