// The service worker: caches the app's shell only (never the socket, the API or chat data),
// network first, so an upgraded Iris reaches the browser and the shell still opens offline.

const CACHE = "iris-shell-v7"; // bump with the file list
const SHELL = [
  "./", "app.css", "icons/icon-192.png", "icons/icon-512.png", "index.html", "js/approval.js",
  "js/artifact.js", "js/attach.js",
  "js/chats.js", "js/connection.js", "js/elicitation.js", "js/frames.js", "js/graphemes.js", "js/heal.js", "js/main.js",
  "js/markdown.js", "js/mdstream.js", "js/push.js", "js/reading.js", "js/reveal.js", "js/settings.js", "js/view.js",
  "js/visible.js", "js/widgets.js", "manifest.webmanifest", "sandbox.html", "vendor/dompurify/purify.mjs",
  "vendor/highlight/core.mjs", "vendor/highlight/github-dark.css", "vendor/highlight/github.css",
  "vendor/highlight/languages/bash.mjs", "vendor/highlight/languages/css.mjs",
  "vendor/highlight/languages/diff.mjs", "vendor/highlight/languages/go.mjs",
  "vendor/highlight/languages/javascript.mjs", "vendor/highlight/languages/json.mjs",
  "vendor/highlight/languages/python.mjs", "vendor/highlight/languages/rust.mjs",
  "vendor/highlight/languages/shell.mjs", "vendor/highlight/languages/sql.mjs",
  "vendor/highlight/languages/typescript.mjs", "vendor/highlight/languages/xml.mjs",
  "vendor/highlight/languages/yaml.mjs", "vendor/markdown-it/markdown-it.mjs",
];

self.addEventListener("install", (event) => {
  event.waitUntil(caches.open(CACHE).then((cache) => cache.addAll(SHELL)).then(() => self.skipWaiting()));
});

self.addEventListener("activate", (event) => {
  event.waitUntil(caches.keys().then((keys) => Promise.all(
    keys.filter((key) => key !== CACHE).map((key) => caches.delete(key)),
  )).then(() => self.clients.claim()));
});

self.addEventListener("fetch", (event) => {
  const url = new URL(event.request.url);
  const scope = new URL(self.registration.scope);
  const path = url.pathname.slice(scope.pathname.length); // relative: works under a sub-path
  const shell = url.origin === scope.origin && url.pathname.startsWith(scope.pathname)
    && event.request.method === "GET" && SHELL.includes(path || "./");
  if (!shell) return;
  event.respondWith(
    fetch(event.request).then((answer) => {
      if (answer.ok) {
        const copy = answer.clone();
        caches.open(CACHE).then((cache) => cache.put(event.request, copy));
      }
      return answer;
    }).catch(() => caches.match(event.request).then((hit) => hit || caches.match("index.html"))),
  );
});

// Web Push (js/push.js): what the server sent — a title, the first line, the chat and message
// to open; nothing else — shown as a notification, one per chat (a newer one replaces it).
self.addEventListener("push", (event) => {
  const data = event.data ? event.data.json() : {};
  event.waitUntil(self.registration.showNotification(data.title || "Iris", {
    body: data.body || "",
    tag: data.chat_id || "iris",
    icon: "icons/icon-192.png",
    data: { chat_id: data.chat_id || "", message_id: data.message_id || "" },
  }));
});

// A tap opens the app at that chat and message: an open window is told (and focused), else
// a new one opens at #chat=…&message=….
self.addEventListener("notificationclick", (event) => {
  event.notification.close();
  const data = event.notification.data || {};
  const params = new URLSearchParams();
  if (data.chat_id) params.set("chat", data.chat_id);
  if (data.message_id) params.set("message", data.message_id);
  const url = `${self.registration.scope}#${params}`;
  event.waitUntil(self.clients.matchAll({ type: "window", includeUncontrolled: true }).then((open) => {
    const client = open.find((c) => c.url.startsWith(self.registration.scope));
    if (!client) return self.clients.openWindow(url);
    client.postMessage({ type: "open", chat_id: data.chat_id, message_id: data.message_id });
    return client.focus().catch(() => client);
  }));
});
