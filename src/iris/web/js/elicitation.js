// @ts-check
// An MCP server asking the person for input (elicitation.request, docs/iris-protocol.md
// "Elicitation"): the card the chat's view keeps per elicitation_id (a bubble of kind
// "elicitation"), the form read from the request's schema, and its DOM.

/** @typedef {Record<string, any>} Frame */
/**
 * @typedef {object} Field
 * @property {string} name
 * @property {"boolean" | "choice" | "integer" | "number" | "text"} kind
 * @property {boolean} required
 * @property {string} label the field's title, else its name
 * @property {string} description
 * @property {{value: any, label: string}[]} choices for a choice
 */
/**
 * @typedef {object} Options
 * @property {(id: string, action: string, content: Record<string, any> | null) => void} elicit
 */

/** The form's fields, in the schema's order: primitives, enums as choices.
 * @param {Frame} schema @returns {Field[]} */
export function formFields(schema) {
  const properties = schema && typeof schema.properties === "object" ? schema.properties : {};
  const required = new Set(Array.isArray(schema?.required) ? schema.required : []);
  return Object.entries(properties).map(([name, spec]) => {
    const options = Array.isArray(spec.enum)
      ? spec.enum.map((/** @type {any} */ value, /** @type {number} */ i) => ({
        value, label: String(spec.enumNames?.[i] ?? value) }))
      : (spec.oneOf || spec.anyOf || []).filter((/** @type {any} */ o) => o && "const" in o)
        .map((/** @type {any} */ o) => ({ value: o.const, label: String(o.title ?? o.const) }));
    /** @type {Field["kind"]} */
    let kind = "text";
    if (options.length) kind = "choice";
    else if (spec.type === "boolean") kind = "boolean";
    else if (spec.type === "integer" || spec.type === "number") kind = spec.type;
    return { name, kind, required: required.has(name), label: String(spec.title || name),
      description: String(spec.description || ""), choices: options };
  });
}

/** The content of an answer from the form's raw values (strings from inputs, booleans from
 * checkboxes); a field left empty and not required is left out.
 * @param {Field[]} fields @param {Record<string, string | boolean>} raw
 * @returns {Record<string, any>} */
export function formContent(fields, raw) {
  /** @type {Record<string, any>} */
  const content = {};
  for (const field of fields) {
    const value = raw[field.name];
    if (field.kind === "boolean") { content[field.name] = Boolean(value); continue; }
    if (value === undefined || value === "") continue;
    if (field.kind === "integer" || field.kind === "number") content[field.name] = Number(value);
    else if (field.kind === "choice") {
      const picked = field.choices.find((c) => String(c.value) === String(value));
      content[field.name] = picked ? picked.value : value;
    } else content[field.name] = value;
  }
  return content;
}

/** @type {Record<string, string>} */
const OUTCOMES = {
  accept: "Answered", decline: "Declined", cancel: "Cancelled",
  timeout: "Declined: nobody answered in time",
};

export class ElicitationCard {
  /** @param {Frame} frame an elicitation.request */
  constructor(frame) {
    this.id = String(frame.elicitation_id || "");
    this.server = String(frame.server || "");
    this.message = String(frame.message || "");
    this.url = String(frame.url || "");
    this.fields = formFields(frame.schema || {});
    this.expiresAt = Number(frame.expires_at || 0);
    this.pending = true;
    this.outcome = "";
    this.note = ""; // why the last answer was refused (elicitation_invalid)
    /** @type {Record<string, string | boolean>} what the person entered (kept across redraws) */
    this.values = {};
  }

  /** @param {Frame} frame an elicitation.resolved */
  resolve(frame) {
    this.pending = false;
    const by = frame.by && frame.action !== "timeout" ? ` by ${frame.by}` : "";
    this.outcome = `${OUTCOMES[frame.action] || String(frame.action)}${by}`;
    this.note = "";
  }
}

/**
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag @param {string} [className] @param {string} [text]
 * @returns {HTMLElementTagNameMap[K]}
 */
function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

/** One field's input, holding what the person entered before a redraw.
 * @param {Field} field @param {string | boolean | undefined} value @returns {HTMLElement} */
function fieldInput(field, value) {
  if (field.kind === "choice") {
    const select = el("select");
    if (!field.required) select.append(el("option", "", ""));
    for (const choice of field.choices) {
      const option = el("option", "", choice.label);
      option.value = String(choice.value);
      select.append(option);
    }
    select.name = field.name;
    if (typeof value === "string") select.value = value;
    return select;
  }
  const input = el("input");
  input.name = field.name;
  input.type = { boolean: "checkbox", integer: "number", number: "number", text: "text" }[field.kind];
  if (field.kind === "number") input.step = "any";
  if (typeof value === "boolean") input.checked = value;
  else if (value !== undefined) input.value = value;
  return input;
}

/** @param {ElicitationCard} card @param {HTMLFormElement} form */
function read(card, form) {
  /** @type {Record<string, string | boolean>} */
  const raw = {};
  for (const field of card.fields) {
    const input = /** @type {HTMLInputElement | null} */ (form.elements.namedItem(field.name));
    if (input) raw[field.name] = input.type === "checkbox" ? input.checked : input.value;
  }
  card.values = raw;
  return formContent(card.fields, raw);
}

/** The card's DOM. @param {ElicitationCard} card @param {Options} options */
export function elicitationCard(card, options) {
  const node = el("section", `elicitation ${card.pending ? "pending" : "resolved"}`);
  node.dataset.elicitationId = card.id;
  node.append(el("header", "elicitation-head", `${card.server} asks: ${card.message}`));
  if (card.url) {
    const link = el("a", "elicitation-link", card.url);
    link.href = card.url;
    link.target = "_blank";
    link.rel = "noopener noreferrer";
    node.append(link);
  }
  const form = el("form", "elicitation-form");
  for (const field of card.fields) {
    const label = el("label", "elicitation-field");
    label.append(el("span", "", field.label + (field.required ? " *" : "")));
    label.append(fieldInput(field, card.values[field.name]));
    if (field.description) label.title = field.description;
    form.append(label);
  }
  if (card.pending) {
    const actions = el("div", "elicitation-actions");
    for (const [action, text] of [["accept", card.url ? "Open and continue" : "Send"],
      ["decline", "Decline"], ["cancel", "Cancel"]]) {
      const button = el("button", `elicitation-${action}`, text);
      button.type = action === "accept" ? "submit" : "button";
      if (action !== "accept") {
        button.addEventListener("click", () => options.elicit(card.id, action, null));
      }
      actions.append(button);
    }
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      options.elicit(card.id, "accept", card.url ? null : read(card, form));
    });
    form.append(actions);
  }
  node.append(form);
  if (card.note) node.append(el("p", "elicitation-note", card.note));
  if (card.outcome) node.append(el("p", "elicitation-outcome", card.outcome));
  return node;
}
