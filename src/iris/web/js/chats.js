// @ts-check
// The chat list: the server's (GET /iris/chats) when it has one, else a list kept locally.

const LOCAL = "iris.chats";

/** @typedef {{ chat_id: string, title?: string, updated?: number }} Chat */

/** @returns {Chat[]} */
export function localChats() {
  try { return JSON.parse(localStorage.getItem(LOCAL) || "[]") || []; } catch { return []; }
}

/** @param {string} chatId @param {string} [title] */
export function rememberChat(chatId, title) {
  const chats = localChats().filter((c) => c.chat_id !== chatId);
  const old = localChats().find((c) => c.chat_id === chatId);
  chats.unshift({ chat_id: chatId, title: title || old?.title || chatId, updated: Date.now() / 1000 });
  localStorage.setItem(LOCAL, JSON.stringify(chats.slice(0, 50)));
}

/** @param {string} token @returns {Promise<{ chats: Chat[], source: "server" | "local" }>} */
export async function listChats(token) {
  try {
    const answer = await fetch("iris/chats", { headers: { Authorization: `Bearer ${token}` } });
    if (answer.ok) {
      const body = await answer.json();
      if (Array.isArray(body.chats)) return { chats: body.chats, source: "server" };
    }
  } catch { /* offline: the local list */ }
  return { chats: localChats(), source: "local" };
}

export function newChatId() {
  const bytes = crypto.getRandomValues(new Uint8Array(6));
  return `web-${[...bytes].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
}
