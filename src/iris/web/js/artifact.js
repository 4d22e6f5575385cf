// @ts-check
// Finds the HTML artifact in a reply: a ```html fenced block, or a whole HTML document
// (the rule of src/iris/app/core/artifact.py).

const FENCE = /^ {0,3}(`{3,}|~{3,})[ \t]*html\b[^\n]*\n([\s\S]*?)^ {0,3}\1[ \t]*$/im;
const DOCUMENT = /(<!doctype html[\s\S]*?<\/html>|<html[\s>][\s\S]*?<\/html>)/i;

/** @param {string} text @returns {string | null} */
export function findHtml(text) {
  const fenced = FENCE.exec(text);
  if (fenced) return fenced[2];
  const document = DOCUMENT.exec(text);
  return document ? document[1] : null;
}
