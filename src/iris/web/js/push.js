// @ts-check
// Web Push: after the first reply (never on load) the page asks whether this browser may be
// notified; if so it subscribes with the server's VAPID key (GET iris/push.json) and registers
// the subscription for the open chat over the socket (`push.subscribe`). The service worker
// shows what the server pushes (sw.js) and a tap opens the app at that chat and message.

const ASKED = "iris.push.asked"; // the person answered the browser's question once: never again
const SUBSCRIBED = "iris.push.chats"; // chats whose notifications this browser registered for

/** base64url (the server's key) to the bytes `pushManager.subscribe` takes.
 * @param {string} text */
export function keyBytes(text) {
  const padded = (text + "=".repeat((4 - (text.length % 4)) % 4)).replace(/-/g, "+").replace(/_/g, "/");
  return Uint8Array.from(atob(padded), (c) => c.charCodeAt(0));
}

/** Where a tap on a notification opens the app (the chat, and the message to show).
 * @param {string} scope @param {{chat_id?: string, message_id?: string}} data */
export function openUrl(scope, data) {
  const params = new URLSearchParams();
  if (data.chat_id) params.set("chat", data.chat_id);
  if (data.message_id) params.set("message", data.message_id);
  return `${scope}#${params}`;
}

/** The chat and message a page was opened at (`#chat=…&message=…`), taken out of the URL. */
export function takeOpened() {
  const params = new URLSearchParams(location.hash.slice(1));
  const chat = params.get("chat");
  if (!chat) return null;
  history.replaceState(null, "", location.pathname + location.search);
  return { chat, message: params.get("message") || "" };
}

function supported() {
  return "Notification" in window && "serviceWorker" in navigator && "PushManager" in window
    && window.isSecureContext;
}

/** Ask (once per browser) and register the open chat's notifications with the server.
 * @param {string} chatId @param {(frame: object) => boolean} send */
export async function offerPush(chatId, send) {
  if (!supported()) return false;
  const chats = JSON.parse(localStorage.getItem(SUBSCRIBED) || "[]");
  if (chats.includes(chatId)) return true;
  if (Notification.permission === "default") {
    if (localStorage.getItem(ASKED)) return false;
    localStorage.setItem(ASKED, "1");
    if ((await Notification.requestPermission()) !== "granted") return false;
  }
  if (Notification.permission !== "granted") return false;
  const answer = await fetch(new URL("iris/push.json", document.baseURI));
  const { enabled, public_key: key } = await answer.json();
  if (!enabled) return false;
  const registration = await navigator.serviceWorker.ready;
  const subscription = await registration.pushManager.getSubscription()
    || await registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(key) });
  if (!send({ type: "push.subscribe", subscription: subscription.toJSON() })) return false;
  localStorage.setItem(SUBSCRIBED, JSON.stringify([...chats, chatId]));
  return true;
}
