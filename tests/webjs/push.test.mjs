// @ts-check
// js/push.js, its pure parts: the server's key as the bytes a browser subscribes with, and
// where a tap on a notification opens the app.
import { test } from "node:test";
import assert from "node:assert/strict";
import { keyBytes, openUrl } from "../../src/iris/web/js/push.js";

test("a base64url VAPID key becomes its 65 bytes (an uncompressed P-256 point)", () => {
  const raw = Uint8Array.from({ length: 65 }, (_, i) => (i * 37 + 4) % 256);
  raw[0] = 4;
  const text = Buffer.from(raw).toString("base64url");
  assert.ok(!text.includes("=") && !text.includes("+"));
  assert.deepEqual(keyBytes(text), raw);
});

test("a notification opens the app at its chat and message", () => {
  const url = openUrl("https://iris.example/app/", { chat_id: "c 1", message_id: "m_9" });
  assert.equal(url, "https://iris.example/app/#chat=c+1&message=m_9");
  assert.equal(openUrl("https://iris.example/", {}), "https://iris.example/#");
});
