// The chat's DOM: one <article> per bubble, updated when the bubble's version changes.
// A reply's Markdown is drawn incrementally (MarkdownView): settled blocks are appended once
// and never touched again; only the tail element is re-rendered as the reveal moves.

import { MarkdownSplitter } from "./mdstream.js";
import { heal } from "./heal.js";
import { md, renderBlock, renderTail } from "./markdown.js";
import { approvalCard } from "./approval.js";

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

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

/** Code blocks get a copy button — before they reach the page, so settled stays settled. */
function withCopyButtons(fragment) {
  for (const pre of fragment.querySelectorAll("pre")) {
    const box = el("div", "code");
    pre.replaceWith(box);
    box.append(copyButton("Copy code", () => pre.textContent), pre);
  }
  return fragment;
}

/** One bubble's Markdown: settled blocks drawn once, the tail redrawn. */
export class MarkdownView {
  constructor(root) {
    this.root = root;
    this.text = "";
    this.splitter = new MarkdownSplitter(md);
    this.tail = el("div", "tail");
    this.root.append(this.tail);
    this.drawnStreaming = null;
  }

  show(text, streaming) {
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

const TOOL_ICONS = { terminal: "💻", read_file: "📄", write_file: "✏️", web_search: "🔎" };

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
  constructor(bubble, options) {
    this.options = options;
    this.version = -1;
    this.node = el("article", "bubble");
    this.node.dataset.id = bubble.messageId;
    this.reasoning = null;
    this.body = el("div", "md");
    this.tools = el("div", "tools");
    this.footer = el("footer", "meta");
    this.artifact = null;
    this.node.append(this.body, this.tools, this.footer);
    this.markdown = null;
    this.toolsKey = "";
  }

  update(bubble) {
    if (bubble.version === this.version && !this.options.force) return false;
    this.version = bubble.version;
    const node = this.node;
    node.className = `bubble ${bubble.role} ${bubble.kind}${bubble.streaming ? " streaming" : ""}`;
    node.dataset.id = bubble.messageId;
    if (bubble.approval) {
      this.body.replaceChildren(approvalCard(bubble.approval, this.options, this.body.firstChild));
      return true;
    }
    if (bubble.role === "user" || bubble.kind === "error" || bubble.kind === "command") {
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

  addReasoning(bubble) {
    const block = el("details", "reasoning");
    block.open = bubble.reasoning.length < 280; // collapsed by default when long
    const summary = el("summary");
    summary.append(el("span", "", "💭 Reasoning"));
    summary.append(copyButton("Copy reasoning", () => bubble.reasoning));
    block.append(summary, el("pre", "reasoning-body", bubble.reasoning));
    this.reasoning = block;
    this.node.insertBefore(block, this.body);
  }

  drawTools(bubble) {
    const mode = this.options.settings.toolDetail;
    const key = `${mode}|${JSON.stringify(bubble.tools)}`;
    if (key === this.toolsKey) return;
    this.toolsKey = key;
    this.tools.hidden = mode === "nothing" || !bubble.tools.length;
    this.tools.replaceChildren(...(mode === "nothing" ? [] : bubble.tools.map((c) => toolCard(c, mode))));
  }

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

/** The list of bubbles in the log element. */
export class ChatView {
  constructor(log, options) {
    this.log = log;
    this.options = options;
    this.views = new Map();
    this.epoch = -1;
  }

  /** Draws what changed; returns true if anything did. */
  render(store) {
    if (store.epoch !== this.epoch) {
      this.epoch = store.epoch;
      this.views.clear();
      this.log.replaceChildren();
    }
    let changed = false;
    let previous = null;
    for (const bubble of store.bubbles) {
      let view = this.views.get(bubble);
      if (!view) {
        view = new BubbleView(bubble, this.options);
        this.views.set(bubble, view);
        if (previous) previous.node.after(view.node);
        else this.log.prepend(view.node);
      }
      changed = view.update(bubble) || changed;
      previous = view;
    }
    return changed;
  }

  /** Settings changed (tool detail): redraw every bubble's cards. */
  refresh(store) {
    for (const [bubble, view] of this.views) view.drawTools(bubble);
    this.render(store);
  }
}
