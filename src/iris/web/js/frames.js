// @ts-check
// Reads a server frame by the rule the Python app reads it (iris.protocol.types.SERVER, strict):
// a frame of a known type whose every field has its type and bounds is taken whole; anything
// else — a newer server's type, a missing or mistyped field — is refused whole and changes
// nothing. Never field by field. The rule is data (reading.js, generated from the Python
// types); this module only walks it. Unknown fields are ignored, as in Python.

import { READING } from "./reading.js";

/** @typedef {import("./view.js").Frame} Frame */
/** @typedef {Record<string, any>} Rule a JSON Schema node of READING */

/** @param {unknown} value @returns {value is Record<string, unknown>} */
function isObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Code points, as Python's len() and JSON Schema count a string's length. @param {string} text */
function length(text) { return [...text].length; }

/** The definitions by name. @type {Record<string, Rule>} */
const DEFS = READING.defs;
/** The definition's name by the discriminator's tag. @type {Record<string, string>} */
const TAGS = READING.tags;

/** @type {Map<string, RegExp>} */
const PATTERNS = new Map();

/** @param {string} pattern */
function regex(pattern) {
  let compiled = PATTERNS.get(pattern);
  if (!compiled) {
    compiled = new RegExp(pattern, "u");
    PATTERNS.set(pattern, compiled);
  }
  return compiled;
}

/** Does `value` satisfy `rule`? @param {unknown} value @param {Rule} rule @returns {boolean} */
function fits(value, rule) {
  if (rule.$ref) return fits(value, DEFS[rule.$ref.slice("#/$defs/".length)]);
  if (rule.anyOf) return rule.anyOf.some((/** @type {Rule} */ each) => fits(value, each));
  if ("const" in rule && value !== rule.const) return false;
  if (rule.enum && !rule.enum.includes(value)) return false;
  switch (rule.type) {
    case "string":
      if (typeof value !== "string") return false;
      if (rule.minLength !== undefined && length(value) < rule.minLength) return false;
      if (rule.maxLength !== undefined && length(value) > rule.maxLength) return false;
      return rule.pattern === undefined || regex(rule.pattern).test(value);
    case "integer":
    case "number":
      if (typeof value !== "number" || !Number.isFinite(value)) return false;
      if (rule.type === "integer" && !Number.isInteger(value)) return false;
      if (rule.minimum !== undefined && value < rule.minimum) return false;
      return rule.maximum === undefined || value <= rule.maximum;
    case "boolean":
      return typeof value === "boolean";
    case "null":
      return value === null;
    case "array":
      if (!Array.isArray(value)) return false;
      if (rule.maxItems !== undefined && value.length > rule.maxItems) return false;
      return !rule.items || value.every((item) => fits(item, rule.items));
    case "object": {
      if (!isObject(value)) return false;
      for (const key of rule.required || []) if (!Object.hasOwn(value, key)) return false;
      const properties = rule.properties || {};
      for (const [key, each] of Object.entries(properties)) {
        if (Object.hasOwn(value, key) && !fits(value[key], each)) return false;
      }
      return true;
    }
    default:
      return true; // no type: anything (a tool's argument values)
  }
}

/** The definition a frame is read by, as the Python adapter's discriminator picks it: a stop
 * without final_text is the one that ends with an append.
 * @param {Record<string, unknown>} data @returns {Rule | null} */
function ruleOf(data) {
  const kind = data.type;
  if (typeof kind !== "string") return null;
  const tag = kind === "message.stop" && !Object.hasOwn(data, "final_text") ? `${kind}+append` : kind;
  const name = TAGS[tag];
  return name ? DEFS[name] : null;
}

/** The frame, if it is one of the protocol's; null (change nothing) if not.
 * @param {unknown} data parsed JSON off the socket @returns {Frame | null} */
export function readFrame(data) {
  if (!isObject(data)) return null;
  const rule = ruleOf(data);
  return rule && fits(data, rule) ? data : null;
}
