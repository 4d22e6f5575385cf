// @ts-check
// The iris socket: hello with the device token and the `append` feature, the resume point in
// the hello (so a replay comes before any live frame), and reconnects by itself with backoff.
// A 4401 (bad or revoked token) or 4400 is final: the app shows why instead of retrying.

import { readFrame } from "./frames.js";

const FINAL = new Set([4401, 4400]);
const PING_SECONDS = 25;

/** @typedef {import("./view.js").Frame} Frame */
/** @typedef {import("./view.js").ChatView} ChatView */

export class Connection {
  /**
   * @param {object} options
   * @param {string | null} options.token the device token
   * @param {string} options.chatId
   * @param {ChatView} options.view applies every frame received
   * @param {(frame: Frame) => void} options.onFrame
   * @param {(state: string, detail?: string | number) => void} options.onStatus
   */
  constructor({ token, chatId, view, onFrame, onStatus }) {
    this.token = token;
    this.chatId = chatId;
    this.view = view;
    this.onFrame = onFrame;
    this.onStatus = onStatus;
    /** @type {WebSocket | null} */
    this.ws = null;
    this.attempt = 0;
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    this.timer = undefined;
    /** @type {ReturnType<typeof setInterval> | undefined} */
    this.ping = undefined;
    this.closed = false;
    this.held = false; // tests: keep reconnecting off
    this.connected = false;
  }

  url() {
    // Relative to the page, so the app also works under a reverse proxy's sub-path.
    const url = new URL("iris/ws", location.href);
    url.protocol = location.protocol === "https:" ? "wss:" : "ws:";
    url.hash = "";
    return url.href;
  }

  open() {
    if (this.closed || this.held) return;
    clearTimeout(this.timer);
    this.status("connecting");
    const ws = new WebSocket(this.url());
    this.ws = ws;
    ws.addEventListener("open", () => {
      this.view.newConnection();
      ws.send(JSON.stringify({
        type: "hello", token: this.token, chat_id: this.chatId, features: ["append"],
        // 0 on the first connection: the chat so far; then the highest seq we applied.
        after_seq: this.view.lastSeq,
      }));
    });
    ws.addEventListener("message", (event) => {
      if (ws !== this.ws) return;
      let data;
      try { data = JSON.parse(event.data); } catch { return; }
      const frame = readFrame(data);
      if (frame === null) return; // not a frame of the protocol: nothing changes
      if (frame.type === "ready") {
        this.attempt = 0;
        this.connected = true;
        this.status("online");
        clearInterval(this.ping);
        this.ping = setInterval(() => this.send({ type: "ping" }), PING_SECONDS * 1000);
      }
      this.view.apply(frame);
      const resync = this.view.takeResync();
      if (resync !== null) this.send({ type: "resume", after_seq: resync });
      this.onFrame(frame);
    });
    ws.addEventListener("close", (event) => {
      if (ws !== this.ws) return;
      this.connected = false;
      clearInterval(this.ping);
      if (this.closed) return;
      if (FINAL.has(event.code)) {
        this.closed = true;
        this.status(event.code === 4401 ? "unauthorized" : "refused", event.reason);
        return;
      }
      this.retry();
    });
  }

  retry() {
    if (this.closed) return;
    const delay = Math.min(500 * 2 ** this.attempt, 8000) * (0.75 + Math.random() / 2);
    this.attempt += 1;
    this.status("reconnecting", Math.ceil(delay / 1000));
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.open(), delay);
  }

  /** The network came back or the page woke up: try now instead of waiting out the backoff. */
  nudge() {
    if (this.closed || this.connected || this.held) return;
    if (this.ws && this.ws.readyState === WebSocket.CONNECTING) return;
    this.attempt = 0;
    this.open();
  }

  /** @param {Frame} frame @returns {boolean} false when the socket is not open */
  send(frame) {
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  /** Drop the socket as a network change would (reconnects unless held). */
  drop() {
    this.ws?.close();
  }

  close() {
    this.closed = true;
    clearTimeout(this.timer);
    clearInterval(this.ping);
    this.ws?.close(1000);
  }

  /** @param {string} state @param {string | number} [detail] */
  status(state, detail) {
    this.onStatus(state, detail);
  }
}
