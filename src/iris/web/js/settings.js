// @ts-check
// Per-device settings (doc 05 §5.1, §5.3), kept in this browser's localStorage.

const KEY = "iris.settings";
/** @typedef {{ streaming: boolean, smoothness: number, toolDetail: string }} Settings */
/** @type {Settings} */
export const DEFAULTS = { streaming: true, smoothness: 0.3, toolDetail: "truncated" };
const MODES = ["everything", "truncated", "nothing"];

/** @returns {Settings} */
export function loadSettings() {
  /** @type {Record<string, any>} */
  let saved;
  try { saved = JSON.parse(localStorage.getItem(KEY) || "{}") || {}; } catch { saved = {}; }
  const settings = { ...DEFAULTS };
  if (typeof saved.streaming === "boolean") settings.streaming = saved.streaming;
  const smoothness = Number(saved.smoothness);
  if (Number.isFinite(smoothness)) settings.smoothness = Math.min(0.8, Math.max(0.2, smoothness));
  if (MODES.includes(saved.toolDetail)) settings.toolDetail = saved.toolDetail;
  return settings;
}

/** @param {Settings} settings */
export function saveSettings(settings) {
  localStorage.setItem(KEY, JSON.stringify(settings));
}
