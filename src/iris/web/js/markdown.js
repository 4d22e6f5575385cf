// @ts-check
// Markdown → sanitized DOM. markdown-it parses with raw HTML off (it shows as text), links are
// limited to http(s), mailto and relative ones (no javascript:, no data:), and DOMPurify
// sanitizes every fragment before it reaches the page. Code is highlighted (highlight.js) only
// once its fence has closed; an open fence is shown as plain escaped text.

import markdownit from "../vendor/markdown-it/markdown-it.mjs";
import DOMPurify from "../vendor/dompurify/purify.mjs";
import hljs from "../vendor/highlight/core.mjs";
import bash from "../vendor/highlight/languages/bash.mjs";
import css from "../vendor/highlight/languages/css.mjs";
import diff from "../vendor/highlight/languages/diff.mjs";
import go from "../vendor/highlight/languages/go.mjs";
import javascript from "../vendor/highlight/languages/javascript.mjs";
import json from "../vendor/highlight/languages/json.mjs";
import python from "../vendor/highlight/languages/python.mjs";
import rust from "../vendor/highlight/languages/rust.mjs";
import shell from "../vendor/highlight/languages/shell.mjs";
import sql from "../vendor/highlight/languages/sql.mjs";
import typescript from "../vendor/highlight/languages/typescript.mjs";
import xml from "../vendor/highlight/languages/xml.mjs";
import yaml from "../vendor/highlight/languages/yaml.mjs";

const LANGUAGES = { bash, css, diff, go, javascript, json, python, rust, shell, sql, typescript, xml, yaml };
for (const [name, grammar] of Object.entries(LANGUAGES)) hljs.registerLanguage(name, grammar);
hljs.registerAliases(["html", "svg"], { languageName: "xml" });
hljs.registerAliases(["sh", "zsh", "console"], { languageName: "bash" });
hljs.registerAliases(["js", "mjs"], { languageName: "javascript" });
hljs.registerAliases(["ts"], { languageName: "typescript" });
hljs.registerAliases(["py"], { languageName: "python" });
hljs.registerAliases(["yml"], { languageName: "yaml" });

/**
 * The parts of a markdown-it token this module reads.
 * @typedef {{ type: string, level: number, info: string, content: string, markup: string,
 *   map: [number, number] | null, meta: any }} Token
 */

export const CURSOR = "\u2589"; // ▉

// Chat text: a single newline is a line break (the terminal app's hard-break transform).
export const md = markdownit({ html: false, linkify: true, breaks: true, typographer: false });

const SAFE_LINK = /^(?:https?:|mailto:|#|\/(?!\/)|\.{0,2}\/|[^:]*$)/i;
md.validateLink = (/** @type {string} */ url) => SAFE_LINK.test(url.trim());

const escapeHtml = md.utils.escapeHtml;
const FENCE_CLOSE = /^ {0,3}(`{3,}|~{3,})[ \t]*$/;

md.renderer.rules.fence = (/** @type {Token[]} */ tokens, /** @type {number} */ idx) => {
  const token = tokens[idx];
  const lang = token.info.trim().split(/\s+/)[0].toLowerCase();
  const cls = lang ? ` class="hljs language-${escapeHtml(lang)}"` : ' class="hljs"';
  let body;
  if (!token.meta?.open && lang && hljs.getLanguage(lang)) {
    body = hljs.highlight(token.content, { language: lang, ignoreIllegals: true }).value;
  } else {
    body = escapeHtml(token.content);
  }
  return `<pre><code${cls}>${body}</code></pre>\n`;
};

DOMPurify.addHook("afterSanitizeAttributes", (/** @type {Element} */ node) => {
  if (node.tagName === "A") {
    node.setAttribute("target", "_blank");
    node.setAttribute("rel", "noopener noreferrer nofollow");
  }
});

const PURIFY = {
  RETURN_DOM_FRAGMENT: true,
  FORBID_ATTR: ["style"],
  FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select", "iframe"],
  ALLOWED_URI_REGEXP: /^(?:(?:https?|mailto):|[^a-z]|[a-z+.-]+(?:[^a-z+.\-:]|$))/i,
};

/** Sanitized DOM for HTML from our renderer (or anything else).
 * @param {string} html @returns {DocumentFragment} */
export function sanitize(html) {
  return /** @type {DocumentFragment} */ (/** @type {any} */ (DOMPurify).sanitize(html, PURIFY));
}

/** A settled block: rendered once, never again. @param {object[]} tokens */
export function renderBlock(tokens) {
  return sanitize(md.renderer.render(tokens, md.options, {}));
}

/** Marks fences of `tokens` (parsed from `source`) that have not closed yet.
 * @param {Token[]} tokens @param {string} source */
function markOpenFences(tokens, source) {
  const lines = source.split("\n");
  for (const token of tokens) {
    if (token.type !== "fence" || !token.map) continue;
    const last = lines[token.map[1] - 1] ?? "";
    const close = FENCE_CLOSE.exec(last);
    const closed = token.map[1] - 1 > token.map[0] && close
      && close[1][0] === token.markup[0] && close[1].length >= token.markup.length;
    token.meta = { ...(token.meta || {}), open: !closed };
  }
}

/** The tail block: healed and with the cursor while streaming, re-rendered on every reveal step.
 * @param {string} source @param {boolean} streaming @param {(text: string) => string} heal */
export function renderTail(source, streaming, heal) {
  const shown = streaming ? heal(source) : source;
  const tokens = md.parse(shown, {});
  markOpenFences(tokens, shown);
  const fragment = sanitize(md.renderer.render(tokens, md.options, {}));
  if (streaming) addCursor(fragment, tokens);
  return fragment;
}

// The cursor goes after the last text of the tail, at render time only — never into the text
// or the parse input. Inside code and tables it is left out: there it would read as content.
/** @param {DocumentFragment} fragment @param {Token[]} tokens */
function addCursor(fragment, tokens) {
  const last = [...tokens].reverse().find((t) => t.level === 0);
  const cursor = document.createElement("span");
  cursor.className = "cursor";
  cursor.setAttribute("aria-hidden", "true");
  cursor.textContent = CURSOR;
  if (!last) { fragment.append(cursor); return; }
  if (["fence", "code_block", "table_close", "html_block", "hr"].includes(last.type)) return;
  const walker = document.createTreeWalker(fragment, NodeFilter.SHOW_TEXT);
  /** @type {Text | null} */
  let text = null;
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const found = /** @type {Text} */ (node); // SHOW_TEXT: text nodes only
    if (found.data.trim()) text = found;
  }
  if (text) text.after(cursor);
  else (fragment.lastElementChild || fragment).append(cursor);
}
