// @ts-check
// The elicitation form read from a request's schema (src/iris/web/js/elicitation.js): which
// inputs a person sees, and what content their answer sends.
import { test } from "node:test";
import assert from "node:assert/strict";
import { ElicitationCard, formContent, formFields } from "../../src/iris/web/js/elicitation.js";

const SCHEMA = {
  type: "object",
  properties: {
    sure: { type: "boolean", title: "Sure?" },
    color: { type: "string", enum: ["red", "green"] },
    size: { type: "string", oneOf: [{ const: "s", title: "Small" }, { const: "m", title: "Medium" }] },
    coats: { type: "integer", minimum: 1 },
    note: { type: "string", description: "Anything else" },
  },
  required: ["sure", "color"],
};

test("primitive fields, enums as choices, required marked", () => {
  const fields = formFields(SCHEMA);
  assert.deepEqual(fields.map((f) => [f.name, f.kind, f.required]), [
    ["sure", "boolean", true], ["color", "choice", true], ["size", "choice", false],
    ["coats", "integer", false], ["note", "text", false],
  ]);
  assert.equal(fields[0].label, "Sure?");
  assert.deepEqual(fields[2].choices, [{ value: "s", label: "Small" }, { value: "m", label: "Medium" }]);
  assert.equal(fields[4].description, "Anything else");
});

test("an answer sends typed values and leaves empty optional fields out", () => {
  const fields = formFields(SCHEMA);
  const raw = { sure: true, color: "green", size: "", coats: "3", note: "" };
  assert.deepEqual(formContent(fields, raw), { sure: true, color: "green", coats: 3 });
  assert.deepEqual(formContent(fields, { sure: false, color: "red" }), { sure: false, color: "red" });
});

test("a link to open, and how a card ends", () => {
  const card = new ElicitationCard({
    type: "elicitation.request", elicitation_id: "elic_1", server: "printer",
    message: "Sign in", schema: {}, url: "https://printer.test/in", expires_at: 5,
  });
  assert.equal(card.url, "https://printer.test/in");
  assert.deepEqual(card.fields, []);
  card.resolve({ action: "timeout", by: "timeout" });
  assert.equal(card.pending, false);
  assert.equal(card.outcome, "Declined: nobody answered in time");
  const other = new ElicitationCard({ elicitation_id: "elic_2", schema: SCHEMA });
  other.resolve({ action: "accept", by: "phone" });
  assert.equal(other.outcome, "Answered by phone");
});

test("the chat's view keeps a card per request; a refused answer shows why", async () => {
  const { ChatView } = await import("../../src/iris/web/js/view.js");
  const view = new ChatView(() => 0);
  view.apply({ type: "elicitation.request", elicitation_id: "elic_7", server: "paint",
    message: "Which colour?", schema: SCHEMA, expires_at: 9, seq: 1, chat_id: "main" });
  const bubble = view.bubbles.find((b) => b.kind === "elicitation");
  assert.ok(bubble?.elicitation?.pending);
  view.apply({ type: "error", code: "elicitation_invalid", message: "'color' must be one of: red, green" });
  assert.equal(bubble.elicitation.note, "'color' must be one of: red, green");
  assert.equal(view.bubbles.filter((b) => b.kind === "error").length, 0);
  view.apply({ type: "elicitation.resolved", elicitation_id: "elic_7", action: "decline",
    by: "phone", seq: 2, chat_id: "main" });
  assert.equal(bubble.elicitation.pending, false);
  assert.equal(bubble.elicitation.outcome, "Declined by phone");
});
