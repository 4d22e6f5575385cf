// @ts-check
// The visible rule (js/visible.js) and the approval card's drawn texts on the cases of
// cases/visible.json, which test_visible_twin.py runs on the Python twin
// (iris.formats.visible, iris.app.core.approval).
import assert from "node:assert/strict";
import { test } from "node:test";
import { ApprovalCard } from "../../src/iris/web/js/approval.js";
import { CUT, readBack, shown, warning } from "../../src/iris/web/js/visible.js";
import { cases, forAll } from "./cases.js";

const VISIBLE = cases("visible");

test("a hidden character is drawn as its code point, and the warning says so", () => {
  for (const [text, want, alarm] of VISIBLE.texts) {
    assert.equal(shown(text), want, JSON.stringify(text));
    assert.equal(warning(text), alarm, JSON.stringify(text));
    assert.equal(readBack(shown(text)), text, JSON.stringify(text));
    assert.ok(!shown(text).includes(CUT));
  }
});

test("a card draws its command and arguments the same way", () => {
  for (const one of VISIBLE.cards) {
    assert.deepEqual(new ApprovalCard(one.frame).shown, one.shown);
  }
});

test("any text maps back to exactly itself", () => {
  const alphabet = ["a", " ", "#", ";", "\n", "\t", "\r", "\b", "\u200b", "\u202e", "\u00a0",
    "⟨", "⟩", "U", "+", "0", "\u{e0041}", "👍", "\ud800", "\x7f"];
  forAll(200, (random) => {
    const text = random.list(() => random.pick(alphabet), 30).join("");
    const drawn = shown(text);
    assert.equal(readBack(drawn), text);
    for (const char of drawn) assert.ok(!["\u200b", "\u202e", "\u00a0", "\r", "\b"].includes(char));
  });
});
