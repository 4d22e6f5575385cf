// @ts-check
// ChatView (js/view.js) on the cases of cases/view.json — the cases of tests/app/test_view_model.py
// and test_view_appends.py, which test_twins.py runs on the Python twin.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ChatView } from "../../src/iris/web/js/view.js";
import { cases } from "./cases.js";

/** @typedef {import("../../src/iris/web/js/view.js").Bubble} Bubble */

/** The JSON's names (the protocol's and the Python twin's) for the browser's fields.
 * @type {Record<string, string>} */
const FIELDS = { id: "messageId", output_preview: "outputPreview" };

/** @param {Record<string, any>} object @param {string} key */
const field = (object, key) => object[FIELDS[key] ?? key];

/** Only the keys the case lists, each in the twin's names.
 * @param {any} actual @param {any} expected @returns {any} */
function pick(actual, expected) {
  if (Array.isArray(expected)) {
    if (!Array.isArray(actual) || actual.length !== expected.length) return actual;
    return expected.map((/** @type {any} */ item, /** @type {number} */ i) => pick(actual[i], item));
  }
  if (expected && typeof expected === "object" && actual && typeof actual === "object") {
    return Object.fromEntries(Object.keys(expected).map((key) => [key, pick(field(actual, key), expected[key])]));
  }
  return actual;
}

/** @param {ChatView} view @param {Record<string, any>} expect */
function check(view, expect) {
  for (const [key, want] of Object.entries(expect)) {
    if (key === "bubbles") assert.deepEqual(pick(view.bubbles, want), want);
    else if (key === "shown_length") {
      const [index, low, high] = want;
      const length = view.bubbles[index].shown.length;
      assert.ok(low <= length && length <= high, `shown ${length} not in [${low}, ${high}]`);
    } else if (key === "typing") assert.equal(view.typing, want);
    else if (key === "last_seq") assert.equal(view.lastSeq, want);
    else if (key === "chat_id") assert.equal(view.chatId, want);
    else if (key === "epoch") assert.equal(view.epoch, want);
    else if (key === "resync") assert.equal(view.takeResync(), want);
    else if (key === "reveal_rate") assert.equal(view.reveals.get(want[0])?.base ?? null, want[1]);
    else assert.fail(`unknown expectation ${key}`);
  }
}

for (const spec of cases("view").cases) {
  test(spec.name, () => {
    const clock = { now: 100 };
    const view = new ChatView(() => clock.now, spec.options || {});
    for (const step of spec.steps) {
      if (step.apply) for (const frame of step.apply) view.apply(frame);
      else if (step.local !== undefined) view.addLocalUser(step.local);
      else if (step.run !== undefined) {
        for (let i = 0; i < Math.round(step.run * 30); i++) {
          clock.now += 1 / 30;
          view.tick();
        }
      } else if (step.set_smoothness !== undefined) view.setSmoothness(step.set_smoothness);
      else if (step.expect) check(view, { ...step.expect, ...step.js });
      else assert.fail(`unknown step ${JSON.stringify(step)}`);
    }
  });
}

test("a reveal push goes through one path for updates and commentary", () => {
  // The block the issue found twice (update, commentary): a live reveal is pushed, else shown.
  const clock = { now: 0 };
  const view = new ChatView(() => clock.now, { smoothness: 0.8 });
  view.apply({ type: "message.start", seq: 1, message_id: "m1", role: "assistant" });
  view.apply({ type: "message.update", seq: 2, message_id: "m1", text: "abc" });
  view.apply({ type: "commentary", seq: 3, message_id: "m1", text: "abcdef" });
  const [bubble] = view.bubbles;
  assert.equal(bubble.kind, "commentary");
  assert.equal(bubble.shown, "", "revealed from the start, not shown at once");
  clock.now = 1;
  view.tick();
  assert.equal(bubble.shown, "abcdef");
  view.tick();
  assert.equal(bubble.streaming, false);
  assert.equal(view.revealing, false);
});
