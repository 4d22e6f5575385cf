// @ts-check
// The incremental splitter (js/mdstream.js) on cases/mdstream.json — the cases of
// tests/app/test_mdstream.py, which test_twins.py runs on the Python twin — with the vendored
// markdown-it configured as js/markdown.js configures it; the property seeded.
import assert from "node:assert/strict";
import { test } from "node:test";
import markdownit from "../../src/iris/web/vendor/markdown-it/markdown-it.mjs";
import { MarkdownSplitter } from "../../src/iris/web/js/mdstream.js";
import { cases, forAll } from "./cases.js";

/** @typedef {import("../../src/iris/web/js/mdstream.js").Parser} Parser */
/** @typedef {import("../../src/iris/web/js/mdstream.js").Token} Token */

const CASES = cases("mdstream");
// js/markdown.js's options (that module also needs a DOM, for DOMPurify).
const md = markdownit({ html: false, linkify: true, breaks: true, typographer: false });
const parser = /** @type {Parser} */ (/** @type {unknown} */ (md));

/** @param {Token[]} tokens */
const render = (tokens) => md.renderer.render(/** @type {any} */ (tokens), md.options, {});

/** @param {MarkdownSplitter} splitter */
const incrementalHtml = (splitter) =>
  splitter.settled.map((block) => render(block.tokens)).join("") + render(splitter.tailTokens);

/** What the splitter holds: the settled sources and the tail. @param {MarkdownSplitter} splitter */
const source = (splitter) => splitter.settled.map((block) => block.source).join("") + splitter.tail;

test("the incremental parse equals the full parse at every step", () => {
  forAll(100, (random) => {
    const doc = random.list(() => random.pick(CASES.blocks) + random.pick(CASES.gaps), 8, 1).join("");
    const sizes = random.list(() => random.int(1, 30), 80);
    const splitter = new MarkdownSplitter(parser);
    let at = 0;
    for (const size of [...sizes, doc.length]) {
      splitter.append(doc.slice(at, at + size));
      at += size;
      assert.equal(source(splitter), doc.slice(0, at));
      assert.equal(incrementalHtml(splitter), md.render(doc.slice(0, at)), JSON.stringify(doc.slice(0, at)));
      if (at >= doc.length) break;
    }
  });
});

test("an ordered list streamed by character stays one list", () => {
  const splitter = new MarkdownSplitter(parser);
  for (const char of CASES.one_list) splitter.append(char);
  const html = incrementalHtml(splitter);
  assert.equal(html.split("<ol>").length - 1, 1);
  assert.equal(html, md.render(CASES.one_list));
});

test("settled blocks keep their identity and are not parsed again", () => {
  const { appends, sources, then } = CASES.settled;
  const splitter = new MarkdownSplitter(parser);
  for (const chunk of appends) splitter.append(chunk);
  const first = [...splitter.settled];
  assert.deepEqual(first.map((block) => block.source), sources);
  const before = splitter.parsedChars;
  splitter.append(then);
  first.forEach((block, i) => assert.equal(splitter.settled[i], block));
  assert.equal(splitter.parsedChars - before, splitter.tail.length, "only the tail was parsed again");
});

test("a reset starts over from the new text", () => {
  const splitter = new MarkdownSplitter(parser);
  splitter.append("# A\n\nalpha\n\nbeta");
  splitter.reset("# B\n\ngamma");
  assert.equal(source(splitter), "# B\n\ngamma");
  assert.equal(incrementalHtml(splitter), md.render("# B\n\ngamma"));
});
