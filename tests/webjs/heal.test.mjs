// @ts-check
// Tail healing (js/heal.js) next to remend, Vercel Streamdown's healing, on cases/heal.json: where
// they agree, and where ours deliberately differs (or falls short), each with the reason. Also
// the cases the browser test checks (tests/web/test_render.py's HEALED).
import assert from "node:assert/strict";
import { test } from "node:test";
import remend from "remend";
import { heal } from "../../src/iris/web/js/heal.js";
import { cases } from "./cases.js";

const CASES = cases("heal");

for (const spec of CASES.cases) {
  const label = `${spec.kind}: ${JSON.stringify(spec.in)}`;
  test(label, () => {
    assert.equal(heal(spec.in), spec.ours);
    const theirs = remend(spec.in, CASES.options);
    if (spec.kind === "same") assert.equal(theirs, spec.ours, "remend agrees");
    else {
      assert.ok(spec.why, "a difference says why");
      assert.equal(theirs, spec.remend, "remend as recorded");
    }
  });
}

test("every difference is recorded as deliberate (ours); no gap is left", () => {
  const kinds = new Set(CASES.cases.map((/** @type {{ kind: string }} */ c) => c.kind));
  assert.deepEqual([...kinds].sort(), ["ours", "same"]);
});

test("only the display copy is healed: text without an open marker is unchanged", () => {
  for (const text of ["plain words", "**b** and `c` and ~~d~~", "[a](https://x.y) done", "```\nopen fence **"]) {
    assert.equal(heal(text), text);
  }
});
