// @ts-check
// The chat's DOM: one <article> per bubble, updated when the bubble's version changes.
// A reply's Markdown is drawn incrementally (MarkdownView): settled blocks are appended once
// and never touched again; only the tail element is re-rendered as the reveal moves.

import { MarkdownSplitter } from "./mdstream.js";
import { heal } from "./heal.js";
import { md, renderBlock, renderTail } from "./markdown.js";
import { approvalCard } from "./approval.js";
import { elicitationCard } from "./elicitation.js";

/** @typedef {import("./view.js").Bubble} Bubble */
/** @typedef {import("./view.js").ChatView} ChatView */
/** @typedef {import("./view.js").ToolCall} ToolCall */
/** @typedef {import("./mdstream.js").Block} Block */
/** @typedef {import("./mdstream.js").Parser} Parser */
/**
 * @typedef {object} Options
 * @property {import("./settings.js").Settings} settings
 * @property {(html: string, card: HTMLElement) => void} openArtifact
 * @property {(approvalId: string, decision: string) => void} respond send an approval answer
 * @property {(id: string, action: string, content: Record<string, any> | null) => void} elicit
 *   send an answer to an MCP server's request for input
 * @property {() => number} wallClock Unix seconds (approval countdowns)
 * @property {boolean} force redraw a bubble even when its version did not change
 */

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag @param {string} [className] @param {string} [text]
 * @returns {HTMLElementTagNameMap[K]}
 */
function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

const URL_IN_TEXT = /https?:\/\/[^\s<>"]+/g;

/**
 * A command's answer as plain text with its http(s) addresses as links (the sign-in link of
 * `/signin NAME` opens in a new tab).
 * @param {HTMLElement} node @param {string} text
 */
function linkedText(node, text) {
  node.replaceChildren();
  let at = 0;
  for (const match of text.matchAll(URL_IN_TEXT)) {
    const start = match.index ?? 0;
    const link = el("a", "command-link", match[0]);
    link.href = match[0];
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    node.append(text.slice(at, start), link);
    at = start + match[0].length;
  }
  node.append(text.slice(at));
}

/** @param {string} label @param {() => string} text */
function copyButton(label, text) {
  const button = el("button", "copy", "Copy");
  button.type = "button";
  button.setAttribute("aria-label", label);
  button.addEventListener("click", (event) => {
    event.preventDefault();
    navigator.clipboard?.writeText(text()).then(() => { button.textContent = "Copied"; }, () => {});
  });
  return button;
}

/** Code blocks get a copy button — before they reach the page, so settled stays settled.
 * @param {DocumentFragment} fragment */
function withCopyButtons(fragment) {
  for (const pre of fragment.querySelectorAll("pre")) {
    const box = el("div", "code");
    pre.replaceWith(box);
    box.append(copyButton("Copy code", () => pre.textContent || ""), pre);
  }
  return fragment;
}

/** One bubble's Markdown: settled blocks drawn once, the tail redrawn. */
export class MarkdownView {
  /** @param {HTMLElement} root */
  constructor(root) {
    this.root = root;
    this.text = "";
    this.splitter = new MarkdownSplitter(/** @type {Parser} */ (md));
    this.tail = el("div", "tail");
    this.root.append(this.tail);
    /** @type {boolean | null} */
    this.drawnStreaming = null;
  }

  /** @param {string} text @param {boolean} streaming */
  show(text, streaming) {
    /** @type {Block[]} */
    let fresh;
    if (text.startsWith(this.text)) {
      const delta = text.slice(this.text.length);
      if (!delta && streaming === this.drawnStreaming && this.splitter.tailTokens.length) return;
      // No new line, no new settled block worth a parse now: the tail render parses anyway,
      // and the next line break settles whatever is due (same blocks, a moment later).
      if (!delta.includes("\n") && this.splitter.tailTokens.length) {
        this.splitter.tail += delta;
        fresh = [];
      } else {
        fresh = this.splitter.append(delta);
      }
    } else {
      // A rewrite (retry, fallback): the drawn blocks are stale.
      this.root.replaceChildren(this.tail);
      fresh = this.splitter.reset(text);
    }
    this.text = text;
    for (const block of fresh) {
      const node = el("div", "block");
      node.append(withCopyButtons(renderBlock(block.tokens)));
      this.root.insertBefore(node, this.tail);
    }
    const tail = renderTail(this.splitter.tail, streaming, heal);
    this.tail.replaceChildren(streaming ? tail : withCopyButtons(tail));
    this.drawnStreaming = streaming;
  }
}

/** @type {Record<string, string>} */
const TOOL_ICONS = { terminal: "💻", read_file: "📄", write_file: "✏️", web_search: "🔎" };

/** @param {ToolCall} call @param {string} mode */
function toolCard(call, mode) {
  const card = el("details", `tool ${call.ok === null ? "running" : call.ok ? "ok" : "failed"}`);
  if (mode === "everything") card.open = true;
  const summary = el("summary");
  summary.append(el("span", "tool-icon", TOOL_ICONS[call.name] || "🔧"));
  summary.append(el("span", "tool-name", call.name));
  if (call.preview) summary.append(el("span", "tool-preview", `"${call.preview}"`));
  const status = el("span", "tool-status");
  if (call.ok === null) {
    status.append(el("span", "spinner"));
    status.setAttribute("aria-label", "running");
  } else {
    status.textContent = `${call.ok ? "✓" : "✗"}${call.duration !== null ? ` ${call.duration.toFixed(1)} s` : ""}`;
  }
  summary.append(status);
  card.append(summary);
  const args = JSON.stringify(call.args, null, 2);
  card.append(el("pre", "tool-args", mode === "everything" ? args : args.slice(0, 400)));
  for (const note of call.notes) card.append(el("div", "tool-note", note));
  if (call.outputPreview) card.append(el("pre", "tool-output", call.outputPreview));
  return card;
}

export class BubbleView {
  /** @param {Bubble} bubble @param {Options} options */
  constructor(bubble, options) {
    this.options = options;
    this.version = -1;
    this.node = el("article", "bubble");
    this.node.dataset.id = bubble.messageId;
    /** @type {HTMLDetailsElement | null} */
    this.reasoning = null;
    this.body = el("div", "md");
    this.tools = el("div", "tools");
    this.footer = el("footer", "meta");
    /** @type {HTMLElement | null} */
    this.artifact = null;
    this.node.append(this.body, this.tools, this.footer);
    /** @type {MarkdownView | null} */
    this.markdown = null;
    this.toolsKey = "";
  }

  /** @param {Bubble} bubble @returns {boolean} whether anything was drawn */
  update(bubble) {
    if (bubble.version === this.version && !this.options.force) return false;
    this.version = bubble.version;
    const node = this.node;
    node.className = `bubble ${bubble.role} ${bubble.kind}${bubble.streaming ? " streaming" : ""}`;
    node.dataset.id = bubble.messageId;
    if (bubble.approval) {
      const before = /** @type {HTMLElement | null} */ (this.body.firstElementChild);
      this.body.replaceChildren(approvalCard(bubble.approval, this.options, before));
      return true;
    }
    if (bubble.elicitation) {
      this.body.replaceChildren(elicitationCard(bubble.elicitation, this.options));
      return true;
    }
    if (bubble.kind === "command") {
      linkedText(this.body, bubble.shown);
    } else if (bubble.role === "user" || bubble.kind === "error") {
      this.body.textContent = bubble.shown;
    } else {
      this.markdown ||= new MarkdownView(this.body);
      this.markdown.show(bubble.shown, bubble.streaming);
    }
    if (bubble.reasoning && !this.reasoning) this.addReasoning(bubble);
    this.drawTools(bubble);
    const done = !bubble.streaming;
    const meta = [bubble.model, bubble.tokens !== null ? `${bubble.tokens} tokens` : null]
      .filter(Boolean).join(" · ");
    this.footer.textContent = done && bubble.kind === "message" ? meta : "";
    if (done && !this.artifact && bubble.kind !== "command") {
      const html = bubble.html;
      if (html) this.addArtifact(html);
    }
    return true;
  }

  /** @param {Bubble} bubble */
  addReasoning(bubble) {
    const reasoning = bubble.reasoning || "";
    const block = el("details", "reasoning");
    block.open = reasoning.length < 280; // collapsed by default when long
    const summary = el("summary");
    summary.append(el("span", "", "💭 Reasoning"));
    summary.append(copyButton("Copy reasoning", () => bubble.reasoning || ""));
    block.append(summary, el("pre", "reasoning-body", reasoning));
    this.reasoning = block;
    this.node.insertBefore(block, this.body);
  }

  /** @param {Bubble} bubble */
  drawTools(bubble) {
    const mode = this.options.settings.toolDetail;
    const key = `${mode}|${JSON.stringify(bubble.tools)}`;
    if (key === this.toolsKey) return;
    this.toolsKey = key;
    this.tools.hidden = mode === "nothing" || !bubble.tools.length;
    this.tools.replaceChildren(...(mode === "nothing" ? [] : bubble.tools.map((c) => toolCard(c, mode))));
  }

  /** @param {string} html */
  addArtifact(html) {
    const card = el("div", "artifact");
    card.append(el("span", "artifact-title", "📄 HTML page"));
    const open = el("button", "artifact-open", "Open");
    open.type = "button";
    const save = el("button", "artifact-save", "Download");
    save.type = "button";
    open.addEventListener("click", () => this.options.openArtifact(html, card));
    save.addEventListener("click", () => {
      const url = URL.createObjectURL(new Blob([html], { type: "text/html" }));
      const link = el("a");
      link.href = url;
      link.download = "iris-page.html";
      link.click();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    });
    card.append(open, save);
    this.artifact = card;
    this.node.append(card);
  }
}

/** The list of bubbles in the log element: draws a ChatView (view.js). */
export class ChatLog {
  /** @param {HTMLElement} log @param {Options} options */
  constructor(log, options) {
    this.log = log;
    this.options = options;
    /** @type {Map<Bubble, BubbleView>} */
    this.views = new Map();
    this.epoch = -1;
  }

  /** Draws what changed; returns true if anything did. @param {ChatView} view */
  render(view) {
    if (view.epoch !== this.epoch) {
      this.epoch = view.epoch;
      this.views.clear();
      this.log.replaceChildren();
    }
    let changed = false;
    let previous = null;
    for (const bubble of view.bubbles) {
      let drawn = this.views.get(bubble);
      if (!drawn) {
        drawn = new BubbleView(bubble, this.options);
        this.views.set(bubble, drawn);
        if (previous) previous.node.after(drawn.node);
        else this.log.prepend(drawn.node);
      }
      changed = drawn.update(bubble) || changed;
      previous = drawn;
    }
    return changed;
  }

  /** Settings changed (tool detail): redraw every bubble's cards. @param {ChatView} view */
  refresh(view) {
    for (const [bubble, drawn] of this.views) drawn.drawTools(bubble);
    this.render(view);
  }
}
