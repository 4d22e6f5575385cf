// @ts-check
// What a person approves is what the shell reads: a text with its invisible characters shown
// as ⟨U+XXXX⟩ — the rules of src/iris/formats/visible.py (tests/webjs/cases/visible.json holds
// both to the same cases). Control characters (but a line break and a tab), format characters
// (zero-width, bidi controls, tags), separators, every space but U+0020, lone surrogates and
// the characters fonts draw blank are drawn as markers; so is "⟨" itself, so that a marker is
// never ambiguous and readBack(shown(text)) === text.

export const OPEN = "⟨";
export const CLOSE = "⟩";
/** Where a text split over several messages was cut (never in a shown text). */
export const CUT = "⟨cut⟩";

const CATEGORIES = /^[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\p{Zs}]$/u;
const AS_IS = new Set(["\n", "\t", " "]);
// Default-ignorable or drawn blank, though not in those categories.
/** @type {ReadonlyArray<readonly [number, number]>} */
const BLANK = [
  [0x034f, 0x034f], // combining grapheme joiner
  [0x115f, 0x1160], // Hangul choseong / jungseong fillers
  [0x17b4, 0x17b5], // Khmer inherent vowels
  [0x180b, 0x180f], // Mongolian variation selectors
  [0x2800, 0x2800], // braille pattern blank
  [0x3164, 0x3164], // Hangul filler
  [0xfe00, 0xfe0f], // variation selectors
  [0xffa0, 0xffa0], // halfwidth Hangul filler
  [0xe0000, 0xe0fff], // tags and variation selectors supplement
];
const MARKER = /⟨U\+([0-9A-F]{4,6})⟩/g;

/** Is `char` (one code point) one a person could not see? @param {string} char */
export function hidden(char) {
  if (AS_IS.has(char)) return false;
  const point = /** @type {number} */ (char.codePointAt(0));
  if (BLANK.some(([low, high]) => low <= point && point <= high)) return true;
  return CATEGORIES.test(char);
}

/** @param {string} char */
function marker(char) {
  const hex = /** @type {number} */ (char.codePointAt(0)).toString(16).toUpperCase();
  return `${OPEN}U+${hex.padStart(4, "0")}${CLOSE}`;
}

/** `text` with every hidden character (and "⟨") drawn as ⟨U+XXXX⟩. @param {string} text */
export function shown(text) {
  let out = "";
  for (const char of text) out += char === OPEN || hidden(char) ? marker(char) : char;
  return out;
}

/** The text `shown` drew. @param {string} text */
export function readBack(text) {
  return text.replace(MARKER, (_, hex) => String.fromCodePoint(parseInt(hex, 16)));
}

/** How many of `text`'s characters are hidden ones. @param {string} text */
export function count(text) {
  let n = 0;
  for (const char of text) if (hidden(char)) n += 1;
  return n;
}

/** The line shown above `text` when it holds hidden characters; "" when not.
 * @param {string} text */
export function warning(text) {
  const n = count(text);
  if (!n) return "";
  const what = n === 1 ? "character" : "characters";
  return `⚠ Holds ${n} hidden or control ${what}, shown as ⟨U+…⟩.`;
}
