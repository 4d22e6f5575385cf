// @ts-check
// The incremental Markdown splitter, the rule of src/iris/app/core/mdstream.py: appended text,
// an append-only parse that re-parses only the unstable tail. Everything before the last
// top-level block is settled — its tokens never change, so the view renders it once — and a
// block settles only once the next block's first line is complete (until then the parser may
// still fold that line into it: "2. two" continuing the list "1. one").

/**
 * The parts of a markdown-it token the splitter reads (markdown-it's Token has more).
 * @typedef {{ level: number, nesting: number, map: [number, number] | null }} Token
 */
/** @typedef {{ parse(text: string, env: object): Token[] }} Parser a markdown-it instance */
/** @typedef {{ index: number, source: string, tokens: Token[] }} Block */

export class MarkdownSplitter {
  /** @param {Parser} md */
  constructor(md) {
    this.md = md;
    /** @type {Block[]} */
    this.settled = [];
    this.tail = "";
    /** @type {Token[]} */
    this.tailTokens = [];
    this.parsedChars = 0;
  }

  /** Start again from `text`; returns the blocks that became settled. @param {string} text */
  reset(text = "") {
    this.settled = [];
    this.tail = "";
    this.tailTokens = [];
    return this.append(text);
  }

  /** Append `chunk`; returns the blocks that became settled.
   * @param {string} chunk @returns {Block[]} */
  append(chunk) {
    if (!chunk && this.tailTokens.length) return [];
    this.tail += chunk;
    const tokens = this.parse(this.tail);
    /** @type {[number, number][]} [token index, first line] */
    const starts = [];
    tokens.forEach((token, i) => {
      if (token.level === 0 && token.nesting >= 0 && token.map) starts.push([i, token.map[0]]);
    });
    let complete = 0;
    for (let at = this.tail.indexOf("\n"); at !== -1; at = this.tail.indexOf("\n", at + 1)) complete++;
    // The last block whose first line is complete; every block before it is stable.
    let cut = null;
    for (let k = starts.length - 1; k > 0; k--) {
      if (starts[k][1] < complete) { cut = k; break; }
    }
    if (cut === null) {
      this.tailTokens = tokens;
      return [];
    }
    const offsets = lineOffsets(this.tail);
    /** @type {Block[]} */
    const fresh = [];
    for (let k = 0; k < cut; k++) {
      const [first, line] = starts[k];
      const [after, nextLine] = starts[k + 1];
      const source = this.tail.slice(k ? offsets[line] : 0, offsets[nextLine]);
      fresh.push({ index: this.settled.length + fresh.length, source, tokens: tokens.slice(first, after) });
    }
    this.settled.push(...fresh);
    const [cutToken, cutLine] = starts[cut];
    this.tail = this.tail.slice(offsets[cutLine]);
    this.tailTokens = tokens.slice(cutToken);
    return fresh;
  }

  /** @param {string} text */
  parse(text) {
    this.parsedChars += text.length;
    return this.md.parse(text, {});
  }
}

/** @param {string} text */
function lineOffsets(text) {
  const offsets = [0];
  for (let at = text.indexOf("\n"); at !== -1; at = text.indexOf("\n", at + 1)) offsets.push(at + 1);
  offsets.push(text.length);
  return offsets;
}
