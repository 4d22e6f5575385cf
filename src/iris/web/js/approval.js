// @ts-check
// Approval cards: a tool call waiting for a person's yes or no — the rules of
// src/iris/app/core/approval.py. The chat's view model keeps one card per approval_id (a
// bubble of kind "approval" under the turn); this module owns what a card holds, how the
// frames change it, and how it is drawn. The model's text in a card (the tool's name, its
// command and arguments) is untrusted: it only ever reaches the page as textContent, and is
// drawn as the shell reads it (visible.js: an invisible or control character as ⟨U+XXXX⟩, with
// a warning line above).

import { shown, warning } from "./visible.js";

/** @typedef {import("./view.js").Frame} Frame */
/**
 * What the card's element needs from the page.
 * @typedef {object} CardOptions
 * @property {(approvalId: string, decision: string) => void} respond send an answer
 * @property {() => number} wallClock Unix seconds (expires_at is one)
 */

/** The decisions a person may send, in the order the buttons show them.
 * @type {ReadonlyArray<readonly [string, string]>} */
export const DECISIONS = [
  ["once", "Allow once"],
  ["chat", "Allow in this chat"],
  ["deny", "Deny"],
];

// Longer than this and the command goes in a collapsed, scrollable block (never cut).
export const LONG_LINES = 6;
export const LONG_CHARS = 400;

/** Error codes the server answers a late or unknown approval.respond with.
 * @type {Record<string, string>} */
const REFUSED = {
  approval_decided: "Already decided",
  approval_unknown: "This request is no longer open",
};

export class ApprovalCard {
  /** @param {Frame} frame an approval.request */
  constructor(frame) {
    this.approvalId = String(frame.approval_id || "");
    this.index = Number(frame.index || 0);
    this.name = String(frame.name || "tool");
    /** @type {Record<string, unknown>} the call's whole arguments, as tool.start's */
    this.args = frame.args && typeof frame.args === "object" ? frame.args : {};
    this.preview = String(frame.preview || "");
    this.expiresAt = typeof frame.expires_at === "number" ? frame.expires_at : 0;
    /** @type {string | null} how it ended: once | chat | deny | timeout | cancelled */
    this.decision = null;
    this.by = "";
    /** @type {string | null} what this device sent, until it is decided (or the link drops) */
    this.sent = null;
    this.note = "";
  }

  get pending() { return this.decision === null; }

  /** @param {Frame} frame an approval.resolved */
  resolve(frame) {
    this.decision = String(frame.decision || "cancelled");
    this.by = String(frame.by || "");
  }

  /** This device's answer went out (the buttons wait for the server's word).
   * @param {string} decision */
  answered(decision) { if (this.pending) this.sent = decision; }

  /** A new connection: an answer that was in flight may never have arrived. */
  reconnected() { if (this.pending) this.sent = null; }

  /** @param {Frame} frame an error frame with an approval_* code */
  refused(frame) {
    this.note = REFUSED[frame.code] || String(frame.message || frame.code);
    this.sent = null;
  }

  /** What the card says once it is over; "" while it waits. */
  get outcome() { return outcomeText(this.decision, this.by); }

  /** The arguments as a person reads them: indented JSON. */
  get argsText() { return JSON.stringify(this.args, null, 2); }

  /** What the card draws: the command, the arguments (invisible characters as ⟨U+XXXX⟩),
   * and the warning line ("" when nothing was hidden). @returns {[string, string, string]} */
  get shown() {
    const args = this.argsText;
    return [shown(this.preview), shown(args), warning(this.preview) || warning(args)];
  }
}

/** An error frame answering this device's approval.respond. @param {Frame} frame */
export function isApprovalError(frame) {
  return frame.type === "error" && Object.hasOwn(REFUSED, String(frame.code));
}

/** @param {string | null} decision @param {string} by */
export function outcomeText(decision, by) {
  const who = by ? ` by ${by}` : "";
  switch (decision) {
    case null: return "";
    case "once": return `Allowed once${who}`;
    case "chat": return `Allowed in this chat${who}`;
    case "deny": return `Denied${who}`;
    case "timeout": return "Timed out — not run";
    default: return `Cancelled${by ? ` (${by})` : ""} — not run`;
  }
}

/** Seconds left as m:ss, never below 0:00. @param {number} expiresAt @param {number} now */
export function countdownText(expiresAt, now) {
  const left = Math.max(0, Math.ceil(expiresAt - now));
  return `${Math.floor(left / 60)}:${String(left % 60).padStart(2, "0")}`;
}

/** Code points, as Python's len() counts them. @param {string} text */
function chars(text) { return [...text].length; }

/** @param {string} text */
export function isLong(text) {
  return chars(text) > LONG_CHARS || text.split("\n").length > LONG_LINES;
}

/** The line a collapsed block shows: what it holds, not a cut of it.
 * @param {string} label @param {string} text */
export function longSummary(label, text) {
  return `${label} — ${text.split("\n").length} lines, ${chars(text)} characters`;
}

/** The card's state as the Python twin's `ApprovalCard.state()` gives it (tests).
 * @param {ApprovalCard} card @param {number} now */
export function cardState(card, now) {
  return [card.approvalId, card.index, card.name, card.preview, card.argsText, card.expiresAt,
    card.decision, card.by, card.sent, card.note, card.outcome, countdownText(card.expiresAt, now),
    isLong(card.preview), isLong(card.argsText)];
}

// -- the DOM ---------------------------------------------------------------------------------

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

/** A block of untrusted text, whole: inline when short, else collapsed and scrollable.
 * @param {string} text @param {string} label @param {string} key */
function block(text, label, key) {
  const pre = el("pre", "approval-text", text);
  if (!isLong(text)) return pre;
  const details = el("details", "approval-long");
  details.dataset.block = key;
  details.append(el("summary", "", longSummary(label, text)), pre);
  return details;
}

/**
 * The card's element; `previous` (the card's last element) keeps the blocks the person opened.
 * @param {ApprovalCard} card @param {CardOptions} options @param {Element | null} [previous]
 */
export function approvalCard(card, options, previous = null) {
  const node = el("section", `approval ${card.pending ? "pending" : "resolved"}`);
  node.dataset.approvalId = card.approvalId;
  node.setAttribute("aria-label", `Approval for ${card.name}`);
  const head = el("header", "approval-head");
  head.append(el("span", "approval-icon", card.pending ? "✋" : "🔒"));
  const ask = el("span", "approval-ask", card.pending ? "Run " : "Asked to run ");
  ask.append(el("span", "approval-name", card.name), card.pending ? "?" : "");
  head.append(ask);
  if (card.pending) {
    const countdown = el("span", "approval-countdown",
      countdownText(card.expiresAt, options.wallClock()));
    countdown.dataset.expires = String(card.expiresAt);
    countdown.setAttribute("aria-label", "time left to answer");
    head.append(countdown);
  }
  node.append(head);
  const [command, argsText, alarm] = card.shown;
  if (alarm) node.append(el("p", "approval-warning", alarm));
  if (command) node.append(block(command, "Show the full command", "command"));
  const args = el("details", "approval-args");
  args.dataset.block = "args";
  args.open = !command; // without a preview the arguments are the command
  args.append(el("summary", "", "Arguments"), el("pre", "approval-text", argsText));
  node.append(args);
  for (const before of previous?.querySelectorAll("details[data-block]") || []) {
    if (!(before instanceof HTMLDetailsElement)) continue;
    const now = node.querySelector(`details[data-block="${before.dataset.block}"]`);
    if (now instanceof HTMLDetailsElement) now.open = before.open;
  }
  if (card.pending) {
    const actions = el("div", "approval-actions");
    for (const [decision, label] of DECISIONS) {
      const button = el("button", `approval-${decision}`, label);
      button.type = "button";
      button.dataset.decision = decision;
      // Past expires_at the server has timed it out (its approval.resolved is on the way).
      button.disabled = card.sent !== null || card.expiresAt <= options.wallClock();
      if (card.sent === decision) button.setAttribute("aria-pressed", "true");
      button.addEventListener("click", () => options.respond(card.approvalId, decision));
      actions.append(button);
    }
    node.append(actions);
  } else {
    node.append(el("p", `approval-outcome ${card.decision}`, card.outcome));
  }
  if (card.note) node.append(el("p", "approval-note", card.note));
  return node;
}

/** Redraw every live countdown under `root` (once a second, without a re-render); the
 * buttons of one that ran out go dead. @param {Element} root @param {number} now */
export function tickCountdowns(root, now) {
  for (const span of root.querySelectorAll(".approval.pending .approval-countdown")) {
    if (!(span instanceof HTMLElement)) continue;
    const expires = Number(span.dataset.expires);
    const text = countdownText(expires, now);
    if (span.textContent !== text) span.textContent = text;
    if (expires <= now) {
      for (const button of span.closest(".approval")?.querySelectorAll("button") || []) {
        button.disabled = true;
      }
    }
  }
}
