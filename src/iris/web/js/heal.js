// @ts-check
// Heals the unfinished tail of a streaming reply for display (after vercel/streamdown's
// "remend"): an unclosed `**bold`, `*em*`, `~~strike`, `` `code `` gets its closer, a half-typed
// link shows as its text, a marker with nothing after it yet is held back, and a line of one or
// two `-` / `=` under text gets a zero-width space so it is not read as a setext underline
// before the next character says what it is (`- item`). Only the display copy is healed; the
// text and the parse input of settled blocks are never touched. Its Python twin is
// src/iris/app/core/heal.py (the terminal app's tail): both run cases/heal.json, and
// tests/webjs/heal.test.mjs runs every case through remend too: where the two agree and where
// this one deliberately differs.

const FENCE_LINE = /^ {0,3}(`{3,}|~{3,})/;

/** @param {string} text */
function insideOpenFence(text) {
  /** @type {string | null} */
  let open = null;
  for (const line of text.split("\n")) {
    const fence = FENCE_LINE.exec(line);
    if (!fence) continue;
    if (open === null) open = fence[1];
    else if (fence[1][0] === open[0] && fence[1].length >= open.length && !line.slice(line.indexOf(fence[1]) + fence[1].length).trim()) open = null;
  }
  return open !== null;
}

/** The character before index `i`, a whole code point (`𝐀` is a letter, as in Python).
 * @param {string} text @param {number} i */
function charBefore(text, i) {
  const unit = text.charCodeAt(i - 1);
  return unit >= 0xdc00 && unit <= 0xdfff && i >= 2 ? text.slice(i - 2, i) : text[i - 1] || "";
}

// `[text](partial-url` or `[text` at the very end: show the text until the link is whole.
const OPEN_LINK = /(!?)\[([^\]\n]*)(?:\](?:\([^)\n]*)?)?$/;

/** The display copy of a streaming tail. @param {string} text @returns {string} */
export function heal(text) {
  if (!text || insideOpenFence(text)) return text;
  const link = OPEN_LINK.exec(text);
  if (link) text = text.slice(0, link.index) + (link[1] ? "" : link[2]);
  /** @type {[string, number][]} [marker, position] */
  const stack = [];
  let i = 0;
  let lineStart = true;
  while (i < text.length) {
    const c = text[i];
    if (c === "\n") { lineStart = true; i++; continue; }
    if (lineStart && /[ \t]/.test(c)) { i++; continue; }
    if (lineStart && (c === "*" || c === "-" || c === "+") && /[ \t]/.test(text[i + 1] || "")) {
      lineStart = false; i += 2; continue; // a list bullet, not emphasis
    }
    lineStart = false;
    if (c === "\\") { i += 2; continue; }
    if (c === "`") {
      let run = 1;
      while (text[i + run] === "`") run++;
      const marker = "`".repeat(run);
      const close = text.indexOf(marker, i + run);
      if (close === -1) { stack.push([marker, i]); break; } // the rest is code
      i = close + run;
      continue;
    }
    let marker = null;
    if (text.startsWith("**", i)) marker = "**";
    else if (text.startsWith("__", i)) marker = "__";
    else if (text.startsWith("~~", i)) marker = "~~";
    else if (c === "*" || c === "_") marker = c;
    if (marker) {
      const top = stack[stack.length - 1];
      const after = text[i + marker.length] || "";
      // An opener starts a word (`2*3` and `snake_case` are not emphasis).
      const opens = !/[\p{L}\p{N}]/u.test(charBefore(text, i)) && !/\s/.test(after);
      if (top && top[0] === marker) stack.pop();
      else if (opens || (after === "" && marker.length === 2)) stack.push([marker, i]);
      i += marker.length;
      continue;
    }
    i++;
  }
  let closers = "";
  while (stack.length) {
    const [marker, at] = /** @type {[string, number]} */ (stack.pop());
    if (!text.slice(at + marker.length).trim()) {
      text = text.slice(0, at); // nothing after the marker yet: hold it back
    } else {
      closers += marker;
    }
  }
  text = text.replace(/[ \t]+$/, (spaces) => (closers ? "" : spaces)) + closers;
  return SETEXT_TAIL.test(text) ? `${text}\u200b` : text;
}

// A last line of one or two `-` or `=` right under a line of text (remend's rule): a list item,
// a rule or an underline — which, the next character tells.
const SETEXT_TAIL = /[^\s][^\n]*\n[ \t]*(?:-{1,2}|={1,2})[ \t]*$/;
