// @ts-check
// ChatView: iris frames in, the chat's view model out — the rules of
// src/iris/app/core/view.py. One bubble per message_id; a streamed bubble holds the latest
// full text and a Reveal, and stays `streaming` after message.stop until the reveal caught up.
// message.update snapshots and message.append frames (UTF-16 offsets: a JS string's length)
// go through one path; an append that does not fit is never applied — the view asks for a
// resume (takeResync) and waits for the snapshot. A frame that is not the protocol's (a newer
// server's type, or a malformed one) changes nothing: frames.js reads each whole, by the
// Python app's rule, never field by field. The clock is injected.

import { readFrame } from "./frames.js";
import { Reveal } from "./reveal.js";
import { findHtml } from "./artifact.js";
import { ApprovalCard, isApprovalError } from "./approval.js";
import { ElicitationCard } from "./elicitation.js";

/**
 * A server frame: parsed off the socket and accepted whole by frames.js's readFrame.
 * @typedef {Record<string, any>} Frame
 */
/** @typedef {"message" | "commentary" | "tools" | "error" | "command" | "approval" | "elicitation"} Kind */
/**
 * @typedef {object} ToolCall
 * @property {number} index
 * @property {string} name
 * @property {string} preview
 * @property {Record<string, unknown>} args
 * @property {string[]} notes
 * @property {boolean | null} ok
 * @property {number | null} duration
 * @property {string} outputPreview
 */
/** @typedef {() => number} Clock seconds, monotonic */

/** The frames that carry a chat-scoped seq (the resume point). */
export const CHAT_SCOPED = new Set([
  "typing", "message.start", "message.update", "message.append", "message.stop", "message",
  "tool.start", "tool.progress", "tool.end", "commentary", "approval.request", "approval.resolved",
  "elicitation.request", "elicitation.resolved",
]);
const WIRE_KINDS = new Set([
  "message.start", "message.update", "message.append", "message.stop", "message", "commentary",
]);

export class Bubble {
  /**
   * @param {string} messageId
   * @param {string} role
   * @param {Kind} kind
   * @param {string} text
   */
  constructor(messageId, role, kind = "message", text = "") {
    this.messageId = messageId;
    this.role = role;
    this.kind = kind;
    this.text = text;
    this.shown = text;
    this.streaming = false;
    this.stopped = false;
    /** @type {string | null} */
    this.reasoning = null;
    /** @type {string | null} */
    this.model = null;
    /** @type {number | null} */
    this.tokens = null;
    /** @type {ToolCall[]} */
    this.tools = [];
    /** @type {ApprovalCard | null} on a bubble of kind approval */
    this.approval = null;
    /** @type {ElicitationCard | null} on a bubble of kind elicitation */
    this.elicitation = null;
    this.version = 0;
  }

  /** The HTML artifact, offered only once the reveal has finished. */
  get html() { return this.streaming ? null : findHtml(this.text); }
}

export class ChatView {
  /**
   * @param {Clock} clock
   * @param {{ streaming?: boolean, smoothness?: number }} [options]
   */
  constructor(clock, { streaming = true, smoothness = 0.3 } = {}) {
    this.clock = clock;
    this.streaming = streaming;
    this.smoothness = smoothness;
    /** @type {Bubble[]} */
    this.bubbles = [];
    /** @type {Map<string, Bubble>} */
    this.byId = new Map();
    /** @type {Map<string, Reveal>} */
    this.reveals = new Map();
    this.typing = false;
    /** @type {string | null} */
    this.chatId = null;
    this.lastSeq = 0;
    /** @type {Set<number>} */
    this.seen = new Set();
    this.epoch = 0;
    /** @type {string | null} the server's chat log epoch (ready/sync): a change restarts seqs */
    this.logEpoch = null;
    this.local = 0;
    /** @type {Map<string, string>} message_id -> text this connection was sent */
    this.wire = new Map();
    /** @type {number | null} */
    this.resync = null;
    /** @type {Set<string>} */
    this.awaiting = new Set();
  }

  /** @param {number} smoothness */
  setSmoothness(smoothness) {
    this.smoothness = smoothness;
    for (const reveal of this.reveals.values()) reveal.setSmoothness(smoothness);
  }

  /** @param {boolean} on */
  setStreaming(on) { this.streaming = on; }

  get revealing() { return this.reveals.size > 0; }

  /** The user's own message, shown at once. @param {string} text */
  addLocalUser(text) {
    this.local += 1;
    return this.add(new Bubble(`local-${this.local}`, "user", "message", text));
  }

  /** The `after_seq` to send a `resume` with, once, when an append did not fit. */
  takeResync() {
    const point = this.resync;
    this.resync = null;
    return point;
  }

  /** A new connection: the server's per-connection append state starts over. */
  newConnection() {
    this.wire.clear();
    this.awaiting.clear();
    this.approvalsDo((card) => card.reconnected());
  }

  /** Apply one frame as received (parsed JSON); one that is not the protocol's changes nothing.
   * @param {unknown} data @returns {boolean} whether it was a frame of the protocol */
  apply(data) {
    const frame = readFrame(data);
    if (frame === null) return false;
    this.applyFrame(frame);
    return true;
  }

  /** @param {Frame} frame a frame readFrame accepted */
  applyFrame(frame) {
    const kind = String(frame.type);
    if ((kind === "ready" || kind === "sync") && typeof frame.epoch === "string") {
      // The server's log restarted (it lost its data): its seqs begin again, so the ones
      // seen before say nothing about the new frames.
      if (this.logEpoch !== null && frame.epoch !== this.logEpoch) {
        this.seen.clear();
        this.lastSeq = 0;
      }
      this.logEpoch = frame.epoch;
    }
    const seq = frame.seq;
    const messageId = frame.message_id;
    if (typeof messageId === "string" && WIRE_KINDS.has(kind)) {
      // Before the replay check: the server's side follows every frame it sends.
      if (kind === "message.start") {
        this.wire.set(messageId, "");
      } else if (kind === "message.update" || kind === "message.append") {
        this.streamed(messageId, frame);
        return;
      } else {
        if (kind === "message.stop" && !("final_text" in frame)) {
          const final = this.streamedText(messageId, frame);
          if (final === null) return; // the resume brings the stop again
          frame = { ...frame, final_text: final };
        }
        this.wire.delete(messageId);
        this.awaiting.delete(messageId);
      }
    }
    if (CHAT_SCOPED.has(kind) && Number.isInteger(seq)) {
      if (this.seen.has(seq)) return; // a replay we already have
      this.seen.add(seq);
      this.lastSeq = Math.max(this.lastSeq, seq);
    }
    switch (kind) {
      case "ready":
        this.chatId = frame.chat_id || this.chatId;
        break;
      case "typing":
        this.typing = Boolean(frame.on);
        break;
      case "message.start":
        this.typing = false;
        if (this.streaming) this.start(String(frame.message_id), String(frame.role || "assistant"));
        break;
      case "message.stop":
        this.stop(frame);
        break;
      case "message":
        this.message(frame);
        break;
      case "commentary":
        this.commentary(String(frame.message_id), String(frame.text || ""));
        break;
      case "tool.start": case "tool.progress": case "tool.end":
        this.tool(kind, frame);
        break;
      case "approval.request": case "approval.resolved":
        this.approval(frame);
        break;
      case "elicitation.request": case "elicitation.resolved":
        this.elicitation(frame);
        break;
      case "error": {
        if (String(frame.code).startsWith("elicitation_")) { this.elicitationRefused(frame); break; }
        if (isApprovalError(frame)) { this.approvalsDo((card) => card.refused(frame), true); break; }
        this.typing = false;
        const text = `${frame.code || "error"}: ${frame.message || ""}`;
        this.add(new Bubble(`error-${seq}-${this.bubbles.length}`, "system", "error", text));
        break;
      }
      case "sync":
        this.sync(frame);
        break;
      case "command":
        this.add(new Bubble(`command-${seq}-${this.bubbles.length}`, "system", "command",
          String(frame.text || "")));
        break;
      default:
        break;
    }
  }

  /** Advance every reveal to now; returns the bubbles whose shown text changed. */
  tick() {
    const now = this.clock();
    /** @type {Bubble[]} */
    const changed = [];
    for (const [messageId, reveal] of [...this.reveals]) {
      const bubble = /** @type {Bubble} */ (this.byId.get(messageId));
      let moved = reveal.tick(now);
      if (moved) bubble.shown = reveal.text;
      if (bubble.stopped && reveal.caughtUp) {
        bubble.streaming = false;
        this.reveals.delete(messageId);
        moved = true;
      }
      if (moved) {
        bubble.version += 1;
        changed.push(bubble);
      }
    }
    return changed;
  }

  /** @param {Bubble} bubble */
  add(bubble) {
    this.bubbles.push(bubble);
    this.byId.set(bubble.messageId, bubble);
    return bubble;
  }

  /** @param {string} messageId @param {string} role */
  start(messageId, role) {
    let bubble = this.byId.get(messageId);
    if (!bubble) bubble = this.add(new Bubble(messageId, role));
    bubble.streaming = true;
    bubble.stopped = false;
    if (!this.reveals.has(messageId)) {
      this.reveals.set(messageId, new Reveal(this.smoothness, this.clock()));
    }
    bubble.version += 1;
    return bubble;
  }

  /** `message.update` or `message.append`: one path to the message's full text.
   * @param {string} messageId @param {Frame} frame */
  streamed(messageId, frame) {
    const text = this.streamedText(messageId, frame);
    if (text === null) return;
    if (Number.isInteger(frame.seq)) {
      this.seen.add(frame.seq);
      this.lastSeq = Math.max(this.lastSeq, frame.seq);
    }
    if (this.streaming) this.update(messageId, text);
  }

  /** The message's text after a snapshot or an append; null if the append does not fit.
   * @param {string} messageId @param {Frame} frame
   * @returns {string | null} */
  streamedText(messageId, frame) {
    /** @type {string | null} */
    let now = null;
    if (frame.type === "message.update") {
      now = String(frame.text || "");
    } else {
      const have = this.wire.get(messageId);
      const { offset, text } = frame;
      if (typeof have === "string" && Number.isInteger(offset) && typeof text === "string"
          && have.length === offset) {
        now = have + text;
      }
    }
    if (now === null) {
      this.wire.delete(messageId);
      this.askAgain(messageId, frame.seq);
      return null;
    }
    this.wire.set(messageId, now);
    this.awaiting.delete(messageId);
    return now;
  }

  /** Resume from just before `seq`: the server resends the message whole (once).
   * @param {string} messageId @param {unknown} seq */
  askAgain(messageId, seq) {
    if (this.awaiting.has(messageId)) return;
    this.awaiting.add(messageId);
    const point = typeof seq === "number" && Number.isInteger(seq) && seq > 0 ? seq - 1 : this.lastSeq;
    this.resync = this.resync === null ? point : Math.min(this.resync, point);
  }

  /** @param {string} messageId @param {string} text */
  update(messageId, text) {
    const bubble = this.byId.get(messageId) || this.start(messageId, "assistant");
    bubble.text = text;
    this.reveal(bubble, text);
    bubble.version += 1;
  }

  /** Show `text`: through the bubble's reveal while one runs, else at once.
   * @param {Bubble} bubble @param {string} text */
  reveal(bubble, text) {
    const reveal = this.reveals.get(bubble.messageId);
    if (!reveal) {
      bubble.shown = text;
    } else {
      reveal.push(text, this.clock());
      bubble.shown = reveal.text;
    }
  }

  /** @param {Frame} frame */
  stop(frame) {
    const messageId = String(frame.message_id);
    let bubble = this.byId.get(messageId);
    const text = String(frame.final_text || (bubble ? bubble.text : ""));
    if (!bubble) bubble = this.add(new Bubble(messageId, String(frame.role || "assistant")));
    this.finalize(bubble, frame);
    const reveal = this.reveals.get(messageId);
    bubble.text = text;
    if (!reveal || !this.streaming) {
      bubble.shown = text;
      bubble.streaming = false;
      this.reveals.delete(messageId);
    } else {
      reveal.push(text, this.clock());
      bubble.shown = reveal.text;
      bubble.streaming = !reveal.caughtUp;
      if (!bubble.streaming) this.reveals.delete(messageId);
    }
    bubble.stopped = true;
    bubble.version += 1;
  }

  /** @param {Bubble} bubble @param {Frame} frame */
  finalize(bubble, frame) {
    if (frame.reasoning) bubble.reasoning = String(frame.reasoning);
    if (frame.model) bubble.model = String(frame.model);
    if (Number.isInteger(frame.tokens)) bubble.tokens = frame.tokens;
  }

  /** @param {Frame} frame */
  message(frame) {
    const messageId = String(frame.message_id);
    const role = String(frame.role || "assistant");
    const text = String(frame.text || "");
    if (role === "user" && this.adoptLocal(messageId, text)) return;
    const bubble = this.byId.get(messageId) || this.add(new Bubble(messageId, role));
    this.reveals.delete(messageId);
    bubble.text = bubble.shown = text;
    bubble.streaming = false;
    bubble.stopped = true;
    this.finalize(bubble, frame);
    bubble.version += 1;
  }

  /** A user message we already show locally (our own, echoed back on a replay).
   * @param {string} messageId @param {string} text */
  adoptLocal(messageId, text) {
    for (let i = this.bubbles.length - 1; i >= 0; i--) {
      const bubble = this.bubbles[i];
      if (bubble.role === "user" && bubble.messageId.startsWith("local-") && bubble.text === text) {
        this.byId.delete(bubble.messageId);
        bubble.messageId = messageId;
        this.byId.set(messageId, bubble);
        return true;
      }
    }
    return false;
  }

  /** @param {string} messageId @param {string} text */
  commentary(messageId, text) {
    const bubble = this.byId.get(messageId);
    if (!bubble) {
      const added = this.add(new Bubble(messageId, "assistant", "commentary", text));
      added.stopped = true;
      return;
    }
    // The segment streamed as this bubble turned out to be commentary: restyle and close.
    bubble.kind = "commentary";
    bubble.text = text;
    bubble.stopped = true;
    this.reveal(bubble, text);
    bubble.version += 1;
  }

  /** @param {string} kind @param {Frame} frame */
  tool(kind, frame) {
    const index = Number(frame.index || 0);
    const name = String(frame.name || "tool");
    if (kind === "tool.start") {
      /** @type {ToolCall} */
      const call = {
        index, name, preview: String(frame.preview || ""),
        args: frame.args && typeof frame.args === "object" ? frame.args : {},
        notes: [], ok: null, duration: null, outputPreview: "",
      };
      const anchor = this.turnAnchor();
      anchor.tools.push(call);
      anchor.version += 1;
      return;
    }
    const found = this.findTool(index, name);
    if (!found) return;
    const [bubble, call] = found;
    if (kind === "tool.progress") {
      call.notes.push(String(frame.note || ""));
    } else {
      call.ok = frame.ok === undefined ? true : Boolean(frame.ok);
      call.duration = typeof frame.duration === "number" ? frame.duration : null;
      call.outputPreview = String(frame.output_preview || "");
    }
    bubble.version += 1;
  }

  /** The latest assistant bubble of the current turn, or a holder for its tools. */
  turnAnchor() {
    for (let i = this.bubbles.length - 1; i >= 0; i--) {
      const bubble = this.bubbles[i];
      if (bubble.role === "user") break;
      if (!["error", "approval", "elicitation"].includes(bubble.kind)) return bubble;
    }
    return this.add(new Bubble(`tools-${this.bubbles.length}`, "assistant", "tools"));
  }

  /** @param {number} index @param {string} name
   * @returns {[Bubble, ToolCall] | null} */
  findTool(index, name) {
    for (let i = this.bubbles.length - 1; i >= 0; i--) {
      const bubble = this.bubbles[i];
      for (let j = bubble.tools.length - 1; j >= 0; j--) {
        const call = bubble.tools[j];
        if (call.index === index && call.name === name) return [bubble, call];
      }
    }
    return null;
  }

  // -- approvals (the card's rules are approval.js's) ----------------------------------------

  /** approval.request makes a card under the turn; approval.resolved ends it. @param {Frame} frame */
  approval(frame) {
    const id = `approval-${frame.approval_id}`;
    let bubble = this.byId.get(id);
    if (frame.type === "approval.request") {
      bubble ||= this.add(new Bubble(id, "system", "approval"));
      bubble.approval = new ApprovalCard(frame);
    } else if (bubble?.approval) {
      bubble.approval.resolve(frame);
    } else {
      return; // the request was before what this device holds
    }
    bubble.version += 1;
  }

  /** elicitation.request makes a form card under the turn; elicitation.resolved ends it.
   * @param {Frame} frame */
  elicitation(frame) {
    const id = `elicitation-${frame.elicitation_id}`;
    let bubble = this.byId.get(id);
    if (frame.type === "elicitation.request") {
      bubble ||= this.add(new Bubble(id, "system", "elicitation"));
      bubble.elicitation = new ElicitationCard(frame);
    } else if (bubble?.elicitation) {
      bubble.elicitation.resolve(frame);
    } else {
      return;
    }
    bubble.version += 1;
  }

  /** The server refused this device's answer: the latest open form says why (it stays open).
   * @param {Frame} frame */
  elicitationRefused(frame) {
    for (let i = this.bubbles.length - 1; i >= 0; i--) {
      const bubble = this.bubbles[i];
      if (!bubble.elicitation?.pending) continue;
      bubble.elicitation.note = String(frame.message || frame.code);
      bubble.version += 1;
      return;
    }
  }

  /** This device sent an answer (main.js, once it went out).
   * @param {string} approvalId @param {string} decision */
  answered(approvalId, decision) {
    const bubble = this.byId.get(`approval-${approvalId}`);
    if (!bubble?.approval) return;
    bubble.approval.answered(decision);
    bubble.version += 1;
  }

  /** Apply `change` to each card (`answering`: only the latest one this device answered).
   * @param {(card: ApprovalCard) => void} change @param {boolean} [answering] */
  approvalsDo(change, answering = false) {
    for (let i = this.bubbles.length - 1; i >= 0; i--) {
      const bubble = this.bubbles[i];
      if (!bubble.approval || (answering && bubble.approval.sent === null)) continue;
      change(bubble.approval);
      bubble.version += 1;
      if (answering) return;
    }
  }

  /** The log no longer reaches back: the server's conversation replaces the view.
   * @param {Frame} frame */
  sync(frame) {
    this.bubbles = [];
    this.byId = new Map();
    this.reveals = new Map();
    this.wire = new Map();
    this.awaiting = new Set();
    this.typing = false;
    for (const message of frame.messages || []) {
      if (!message || typeof message !== "object") continue;
      const role = String(message.role);
      const kind = role === "commentary" ? "commentary" : "message";
      const bubble = new Bubble(String(message.message_id), role === "commentary" ? "assistant" : role,
        kind, String(message.text || ""));
      bubble.stopped = true;
      this.finalize(bubble, message);
      this.add(bubble);
    }
    // Requests still waiting for a yes, whose frames the log no longer holds.
    for (const open of Array.isArray(frame.approvals) ? frame.approvals : []) {
      if (open && typeof open === "object") this.approval({ ...open, type: "approval.request" });
    }
    if (Number.isInteger(frame.seq)) this.lastSeq = Math.max(this.lastSeq, frame.seq);
    this.epoch += 1;
  }
}
