// The service worker: caches the app's shell only (never the socket, the API or chat data),
// network first, so an upgraded Iris reaches the browser and the shell still opens offline.

const CACHE = "iris-shell-v1";
const SHELL = [
  "./", "index.html", "app.css", "manifest.webmanifest", "icons/icon-192.png", "icons/icon-512.png",
  "js/main.js", "js/store.js", "js/reveal.js", "js/graphemes.js", "js/mdstream.js", "js/heal.js",
  "js/markdown.js", "js/view.js", "js/connection.js", "js/settings.js", "js/chats.js",
  "js/artifact.js", "vendor/markdown-it/markdown-it.mjs", "vendor/dompurify/purify.mjs",
  "vendor/highlight/core.mjs", "vendor/highlight/github.css", "vendor/highlight/github-dark.css",
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
  const shell = url.origin === location.origin && event.request.method === "GET"
    && !url.pathname.startsWith("/iris/") && !url.pathname.startsWith("/v1/")
    && url.pathname !== "/health";
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
