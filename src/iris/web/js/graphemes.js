// @ts-check
// Grapheme boundaries (Intl.Segmenter): the reveal never cuts a user-perceived character.
// Only a window around the index is segmented, so a tick costs the same at 20 000 characters
// as at 20; a cluster longer than the window's lead-in (none in practice) may be cut once.

const segmenter = new Intl.Segmenter(undefined, { granularity: "grapheme" });
const LEAD = 64;

/** @param {string} text @param {number} index */
function boundariesAround(text, index) {
  const start = Math.max(0, index - LEAD);
  const end = Math.min(text.length, index + LEAD);
  const found = [];
  for (const part of segmenter.segment(text.slice(start, end))) found.push(start + part.index);
  found.push(end);
  return found;
}

/** The first grapheme boundary at or after `index` (in UTF-16 code units).
 * @param {string} text @param {number} index @returns {number} */
export function boundaryAtOrAfter(text, index) {
  if (index <= 0) return 0;
  if (index >= text.length) return text.length;
  for (const at of boundariesAround(text, index)) if (at >= index) return at;
  return text.length;
}

/** The last grapheme boundary at or before `index`.
 * @param {string} text @param {number} index @returns {number} */
export function boundaryAtOrBefore(text, index) {
  if (index <= 0) return 0;
  if (index >= text.length) return text.length;
  let best = 0;
  for (const at of boundariesAround(text, index)) if (at <= index) best = at;
  return best;
}
