// The service worker: caches the app's shell only (never the socket, the API or chat data),
// network first, so an upgraded Iris reaches the browser and the shell still opens offline.

const CACHE = "iris-shell-v6"; // bump with the file list
const SHELL = [
  "./", "app.css", "icons/icon-192.png", "icons/icon-512.png", "index.html", "js/approval.js",
  "js/artifact.js", "js/attach.js",
  "js/chats.js", "js/connection.js", "js/elicitation.js", "js/frames.js", "js/graphemes.js", "js/heal.js", "js/main.js",
  "js/markdown.js", "js/mdstream.js", "js/reading.js", "js/reveal.js", "js/settings.js", "js/view.js",
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
