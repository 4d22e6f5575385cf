// @ts-check
// Approval cards (js/approval.js, in js/view.js's ChatView) on the cases of cases/approval.json,
// which test_approval_twin.py runs on the Python twin (iris.app.core.approval).
import assert from "node:assert/strict";
import { test } from "node:test";
import { ChatView } from "../../src/iris/web/js/view.js";
import {
  cardState, countdownText, isLong, longSummary, outcomeText,
} from "../../src/iris/web/js/approval.js";
import { cases } from "./cases.js";

const APPROVAL = cases("approval");

for (const one of APPROVAL.cases) {
  test(one.name, () => {
    const view = new ChatView(() => 0);
    for (const step of one.steps) {
      if (step.apply) for (const frame of step.apply) view.apply(frame);
      if (step.answered) view.answered(step.answered[0], step.answered[1]);
      if (step.new_connection) view.newConnection();
      const expect = step.expect;
      if (!expect) continue;
      if (expect.kinds) {
        assert.deepEqual(view.bubbles.map((b) => [b.messageId, b.kind, b.tools.length]), expect.kinds);
      }
      if (expect.cards) {
        const cards = view.bubbles.flatMap((b) => (b.approval ? [cardState(b.approval, one.now)] : []));
        assert.deepEqual(cards, expect.cards);
      }
      if (expect.typing !== undefined) assert.equal(view.typing, expect.typing);
    }
  });
}

test("the texts a card shows", () => {
  const { outcome, countdown, long, summary } = APPROVAL.texts;
  for (const [decision, by, want] of outcome) assert.equal(outcomeText(decision, by), want);
  for (const [expires, now, want] of countdown) assert.equal(countdownText(expires, now), want);
  for (const [text, want] of long) assert.equal(isLong(text), want, JSON.stringify(text));
  for (const [label, text, want] of summary) assert.equal(longSummary(label, text), want);
});
