// @ts-check
// The app: token from the pairing link, the chat list, the socket, the reveal loop, settings.
// Its state is one object, `app`, exported for the browser tests and bench/web_render.py
// (they reach it with `import("/js/main.js")`); nothing is put on `window`.

import { ChatView } from "./view.js";
import { ChatLog } from "./widgets.js";
import { Connection } from "./connection.js";
import { loadSettings, saveSettings } from "./settings.js";
import { listChats, newChatId, rememberChat } from "./chats.js";
import { tickCountdowns } from "./approval.js";
import { Attachments } from "./attach.js";
import { offerPush, takeOpened } from "./push.js";

/** @typedef {import("./view.js").Frame} Frame */

/** The element `selector` names (the page has each one). @param {string} selector */
const $ = (selector) => /** @type {HTMLElement} */ (document.querySelector(selector));
const TOKEN = "iris.token";
const CHAT = "iris.chat";

// The pairing link opens /#token=…: keep the token in this browser, take it out of the URL.
function takeToken() {
  const params = new URLSearchParams(location.hash.slice(1));
  const fromLink = params.get("token");
  if (fromLink) {
    localStorage.setItem(TOKEN, fromLink);
    history.replaceState(null, "", location.pathname + location.search);
  }
  return localStorage.getItem(TOKEN);
}

const settings = loadSettings();
const log = $("#log");
const announcer = $("#announce");
const statusLine = $("#status");
const composer = /** @type {HTMLFormElement} */ ($("#composer"));
const input = /** @type {HTMLTextAreaElement} */ ($("#input"));
const sendButton = /** @type {HTMLButtonElement} */ ($("#send"));
const stopButton = $("#stop");
const typingLine = $("#typing");

/** The open chat: its view model, its DOM, its socket (set by openChat), and the loop's state. */
export const app = {
  /** @type {ChatView} */
  view: new ChatView(clock, settings),
  /** @type {ChatLog | null} */
  log: null,
  /** @type {Connection | null} */
  connection: null,
  settings,
  turnActive: false,
  atBottom: true,
  frameRequested: false,
  /** Apply a frame as the socket would (one that is not the protocol's changes nothing).
   * @param {Frame} frame */
  feed(frame) {
    if (app.view.apply(frame)) onFrame(frame);
  },
};

function clock() { return performance.now() / 1000; }

/** @param {string} text */
function announce(text) {
  // One polite announcement at a reply's start and end, never per token.
  announcer.textContent = "";
  requestAnimationFrame(() => { announcer.textContent = text; });
}

function scrollToEnd() {
  if (app.atBottom) log.scrollTop = log.scrollHeight;
}

log.addEventListener("scroll", () => {
  app.atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 40;
}, { passive: true });

function draw() {
  app.frameRequested = false;
  const view = app.view;
  view.tick();
  app.log?.render(view);
  typingLine.hidden = !view.typing;
  stopButton.hidden = !app.turnActive;
  sendButton.hidden = app.turnActive;
  scrollToEnd();
  if (view.revealing) schedule();
}

function schedule() {
  if (!app.frameRequested) {
    app.frameRequested = true;
    requestAnimationFrame(draw);
  }
}

/** @param {Frame} frame */
function onFrame(frame) {
  if (frame.type === "typing") {
    if (frame.on && !app.turnActive) announce("Iris is replying");
    if (!frame.on && app.turnActive) {
      announce("Iris finished replying");
      offerNotifications(); // after the first reply, never on load
    }
    app.turnActive = Boolean(frame.on);
  } else if (frame.type === "approval.request") {
    announce(`Iris asks to run ${frame.name}: allow or deny`);
  } else if (frame.type === "elicitation.request") {
    announce(`${frame.server} asks: ${frame.message}`);
  } else if (frame.type === "ready" && frame.chat_id) {
    const first = app.view.bubbles.find((b) => b.role === "user");
    rememberChat(frame.chat_id, first?.text.slice(0, 60));
  }
  schedule();
}

/** Ask whether this browser may be notified of the open chat (once it answered a message). */
function offerNotifications() {
  const chatId = localStorage.getItem(CHAT) || "main";
  const send = (/** @type {object} */ frame) => Boolean(app.connection?.send(frame));
  offerPush(chatId, send).catch(() => {}); // a browser without push, or one that said no
}

/** Show the message a notification named, once its chat has drawn it. @param {string} id */
function showMessage(id) {
  if (!id) return;
  const found = () => log.querySelector(`[data-id="${CSS.escape(id)}"]`);
  const tries = { left: 50 };
  const look = () => {
    const node = found();
    if (node) { node.scrollIntoView({ block: "center" }); app.atBottom = false; return; }
    if (--tries.left > 0) setTimeout(look, 100);
  };
  look();
}

/** @type {Record<string, string>} */
const STATUS_TEXT = {
  connecting: "Connecting…",
  online: "",
  reconnecting: "Offline — reconnecting",
  unauthorized: "This device is not paired (or its token was revoked).",
  refused: "The server refused this chat.",
};

/** @param {string} state @param {string | number} [detail] */
function onStatus(state, detail) {
  document.body.dataset.connection = state;
  statusLine.textContent = STATUS_TEXT[state] ?? state;
  if (state === "reconnecting" && detail) statusLine.textContent += ` in ${detail} s`;
  if (state === "unauthorized") {
    // The close reason says which (docs/iris-protocol.md): `revoked`, else `unauthorized`.
    showPairing(detail === "revoked"
      ? "This device was revoked. Pair it again with `iris devices add`."
      : "That token was refused. Pair this device again, or paste a valid token.");
  }
  sendButton.disabled = state !== "online";
}

/** @param {string} chatId */
function openChat(chatId) {
  app.connection?.close();
  localStorage.setItem(CHAT, chatId);
  const view = new ChatView(clock, settings);
  app.view = view;
  app.log = new ChatLog(log, { settings, openArtifact, respond, elicit, wallClock, force: false });
  app.turnActive = false;
  app.atBottom = true;
  $("#chat-title").textContent = chatId === "main" ? "Iris" : chatId;
  const token = localStorage.getItem(TOKEN);
  app.connection = new Connection({ token, chatId, view, onFrame, onStatus });
  app.connection.open();
  schedule();
}

// -- composer ----------------------------------------------------------------------------------

const attachments = new Attachments($("#attachments"));
const picker = /** @type {HTMLInputElement} */ ($("#attach-input"));
$("#attach").addEventListener("click", () => picker.click());
picker.addEventListener("change", () => {
  attachments.add(picker.files || []);
  picker.value = "";
});
input.addEventListener("paste", (event) => {
  const files = [...(event.clipboardData?.files || [])];
  if (!files.length) return;
  event.preventDefault(); // a pasted image is a file, not its name as text
  attachments.add(files);
});

let submitting = false; // while a file is still being read: one message, not one per Enter
composer.addEventListener("submit", async (event) => {
  event.preventDefault();
  if (submitting) return;
  submitting = true;
  try {
    await attachments.reading; // a file picked or pasted a moment ago goes with this message
  } finally {
    submitting = false;
  }
  const text = input.value.trim();
  const connection = app.connection;
  if ((!text && !attachments.count) || !connection?.connected) return;
  const files = await attachments.take();
  const frame = files.length ? { type: "message.send", text, attachments: files } : { type: "message.send", text };
  if (!connection.send(frame)) { attachments.restore(files); return; }
  const names = files.map((f) => f.name).join(", ");
  app.view.addLocalUser(names ? (text ? `${text}\n[attached: ${names}]` : `[attached: ${names}]`) : text);
  rememberChat(app.view.chatId || localStorage.getItem(CHAT) || "main", (text || names).slice(0, 60));
  input.value = "";
  app.atBottom = true;
  resizeInput();
  schedule();
});

input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
    event.preventDefault();
    composer.requestSubmit();
  }
});

function resizeInput() {
  input.style.height = "auto";
  input.style.height = `${Math.min(input.scrollHeight, 160)}px`;
}
input.addEventListener("input", resizeInput);

stopButton.addEventListener("click", () => app.connection?.send({ type: "turn.cancel" }));

// -- approvals: a person's answer to a tool call, and the countdowns ---------------------------

function wallClock() { return Date.now() / 1000; }

/** @param {string} approvalId @param {string} decision */
function respond(approvalId, decision) {
  if (app.connection?.send({ type: "approval.respond", approval_id: approvalId, decision })) {
    app.view.answered(approvalId, decision);
    schedule();
  }
}

setInterval(() => tickCountdowns(log, wallClock()), 1000);

/** An answer to an MCP server's request for input (the card stays until it is resolved).
 * @param {string} id @param {string} action @param {Record<string, any> | null} content */
function elicit(id, action, content) {
  /** @type {Record<string, any>} */
  const frame = { type: "elicitation.respond", elicitation_id: id, action };
  if (content) frame.content = content;
  app.connection?.send(frame);
}

// -- the artifact sandbox ----------------------------------------------------------------------

/** @param {string} html @param {HTMLElement} card */
function openArtifact(html, card) {
  const open = card.querySelector("iframe");
  if (open) { open.remove(); return; }
  const frame = document.createElement("iframe");
  // Scripts run, but in an opaque origin: no cookies, storage or access to this page, and no
  // navigating the app away (no allow-top-navigation, no allow-same-origin).
  frame.setAttribute("sandbox", "allow-scripts");
  frame.setAttribute("title", "HTML page from the reply");
  frame.src = "sandbox.html";
  frame.addEventListener("load", () => frame.contentWindow?.postMessage({ html }, "*"), { once: true });
  card.append(frame);
}

// -- settings ----------------------------------------------------------------------------------

const dialog = /** @type {HTMLDialogElement} */ ($("#settings"));
const streamingBox = /** @type {HTMLInputElement} */ ($("#set-streaming"));
const speed = /** @type {HTMLInputElement} */ ($("#set-speed"));
const speedValue = $("#set-speed-value");

function showSettings() {
  streamingBox.checked = settings.streaming;
  speed.value = String(settings.smoothness);
  speedValue.textContent = `${settings.smoothness.toFixed(2)} s`;
  for (const radio of document.querySelectorAll("input[name=tool-detail]")) {
    if (!(radio instanceof HTMLInputElement)) continue;
    radio.checked = radio.value === settings.toolDetail;
  }
  dialog.showModal();
}

function applySettings() {
  settings.streaming = streamingBox.checked;
  settings.smoothness = Number(speed.value);
  const mode = document.querySelector("input[name=tool-detail]:checked");
  if (mode instanceof HTMLInputElement) settings.toolDetail = mode.value;
  speedValue.textContent = `${settings.smoothness.toFixed(2)} s`;
  saveSettings(settings);
  app.view.setStreaming(settings.streaming);
  app.view.setSmoothness(settings.smoothness); // applies to a reveal in progress too
  app.log?.refresh(app.view);
}

$("#open-settings").addEventListener("click", showSettings);
dialog.addEventListener("input", applySettings);
dialog.addEventListener("change", applySettings);
$("#close-settings").addEventListener("click", () => dialog.close());

// -- chats -------------------------------------------------------------------------------------

const drawer = /** @type {HTMLDialogElement} */ ($("#chats"));

async function showChats() {
  const { chats } = await listChats(localStorage.getItem(TOKEN) || "");
  const list = $("#chat-list");
  list.replaceChildren();
  const current = localStorage.getItem(CHAT) || "main";
  const known = chats.some((c) => c.chat_id === "main") ? chats : [{ chat_id: "main", title: "main" }, ...chats];
  for (const chat of known) {
    const item = document.createElement("li");
    const button = document.createElement("button");
    button.type = "button";
    button.textContent = chat.title || chat.chat_id;
    if (chat.chat_id === current) button.setAttribute("aria-current", "true");
    button.addEventListener("click", () => { drawer.close(); openChat(chat.chat_id); });
    item.append(button);
    list.append(item);
  }
  drawer.showModal();
}

$("#open-chats").addEventListener("click", showChats);
$("#new-chat").addEventListener("click", () => { drawer.close(); openChat(newChatId()); });
$("#close-chats").addEventListener("click", () => drawer.close());

// -- pairing -----------------------------------------------------------------------------------

/** @param {string} message */
function showPairing(message) {
  $("#pair-message").textContent = message;
  document.body.dataset.screen = "pair";
}

$("#pair-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const token = /** @type {HTMLInputElement} */ ($("#pair-token")).value.trim();
  if (!token) return;
  localStorage.setItem(TOKEN, token);
  document.body.dataset.screen = "chat";
  openChat(localStorage.getItem(CHAT) || "main");
});

// -- phone: keep the composer above the on-screen keyboard -------------------------------------

function fitViewport() {
  const height = window.visualViewport?.height;
  if (height) document.documentElement.style.setProperty("--app-height", `${height}px`);
  // iOS scrolls the page up to reveal a focused input; the layout already fits the keyboard.
  if (window.scrollY) window.scrollTo(0, 0);
  scrollToEnd();
}
window.visualViewport?.addEventListener("resize", fitViewport);
fitViewport();

window.addEventListener("online", () => app.connection?.nudge());
document.addEventListener("visibilitychange", () => {
  if (document.visibilityState === "visible") app.connection?.nudge();
});

if ("serviceWorker" in navigator && window.isSecureContext) {
  navigator.serviceWorker.register("sw.js").catch(() => {});
  // A tap on a notification while the app is open: that chat, at that message.
  navigator.serviceWorker.addEventListener("message", (event) => {
    const data = event.data || {};
    if (data.type !== "open" || !data.chat_id) return;
    if (data.chat_id !== localStorage.getItem(CHAT)) openChat(data.chat_id);
    showMessage(data.message_id || "");
  });
}

// -- start -------------------------------------------------------------------------------------

const opened = takeOpened(); // a notification's tap opened this page: its chat and message
if (takeToken()) {
  document.body.dataset.screen = "chat";
  openChat(opened?.chat || localStorage.getItem(CHAT) || "main");
  if (opened) showMessage(opened.message);
} else {
  showPairing("Open the pairing link from `iris devices add`, or paste a device token.");
}
