// @ts-check
// For test_twins.py: reads turns (lists of frames) as JSON on stdin, plays each through a
// ChatView as test_twins.py plays it through the Python twin (a tick 0.05 s after every frame),
// and prints what the view holds after each frame, as JSON.
import { readFileSync } from "node:fs";
import { ChatView } from "../../src/iris/web/js/view.js";

/** @param {ChatView} view */
function state(view) {
  return {
    resync: view.takeResync(),
    typing: view.typing,
    last_seq: view.lastSeq,
    bubbles: view.bubbles.map((b) => [b.messageId, b.role, b.kind, b.text, b.shown, b.streaming,
      b.stopped, b.reasoning, b.model, b.tokens,
      b.tools.map((t) => [t.index, t.name, t.ok, [...t.notes], t.outputPreview])]),
  };
}

const { smoothness, turns } = JSON.parse(readFileSync(0, "utf8"));
const played = turns.map((/** @type {Record<string, any>[]} */ frames) => {
  let now = 100;
  const view = new ChatView(() => now, { smoothness });
  return frames.map((frame) => {
    view.apply(frame);
    now += 0.05;
    view.tick();
    return state(view);
  });
});
process.stdout.write(JSON.stringify(played));
