/* Glassformer HTML views: the views' library (tokens, numbers, DOM, tooltips, start-up), over
 * the shared modules (payload decoding, colours, painting).
 *
 * An ES module, as every view: the workshop imports these files from static/viz/, and a
 * notebook cell or a saved file inlines them as classic scripts (glassformer/viz/modules.py).
 * A view's HTML calls start(root, view): the payload is the JSON script tag with id
 * root.id + "-data" (format in glassformer/viz/html.py), read by payload.js.
 */

import { inflateBlock } from "./blocks.js";
import { MASKED, css, divergingColour, headColours, textOn, unitColour } from "./colours.js";
import { paint } from "./paint.js";
import { readPayload } from "./payload.js";

// The shared modules under the names the views use: one decoder, one colour scale per
// quantity and one heatmap painter for these views and the workshop.
export const array = inflateBlock; // a payload block's typed array (a Promise)
export const sequential = unitColour; // x in [0, 1]
export const diverging = (x) => divergingColour(x, 1); // x in [-1, 1]
export const rgb = css;
export { MASKED, headColours, paint, textOn };

/* ---- tokens and numbers ---- */
// Characters a reader could not see: newline as ↵, tab as ⇥, other control characters as
// their byte in hex (U+0000 as <0x00>, as Llama's byte tokens; every font has these
// glyphs), the empty token as ∅.
export function label(token) {
  const text = token
    .replace(/\n/g, "\u21b5")
    .replace(/\t/g, "\u21e5")
    .replace(/[\u0000-\u001f\u007f]/g, (c) => "<0x" + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0") + ">");
  return text === "" ? "\u2205" : text;
}

export const quoted = (token) => JSON.stringify(token);

// Fixed-point with `digits` decimals; exponent form where that would show only zeros.
export function number(x, digits) {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "n/a" : String(x);
  const d = digits === undefined ? 3 : digits;
  const tiny = x !== 0 && Math.abs(x) < 0.5 * 10 ** -d;
  return Math.abs(x) >= 1e5 || tiny ? x.toExponential(1) : x.toFixed(d);
}

/* ---- DOM ---- */
export function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// A canvas of cssWidth x cssHeight pixels, sharp on high-DPI screens but never past the
// browsers' 32,767-pixel side limit; its context is scaled to CSS pixels.
export function canvas(cssWidth, cssHeight, className) {
  const node = el("canvas", className);
  const side = Math.max(cssWidth, cssHeight, 1);
  const ratio = Math.min(window.devicePixelRatio || 1, 32000 / side);
  node.width = Math.max(1, Math.round(cssWidth * ratio));
  node.height = Math.max(1, Math.round(cssHeight * ratio));
  node.style.width = cssWidth + "px";
  node.style.height = cssHeight + "px";
  node.ratio = ratio;
  const context = node.getContext("2d");
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  return node;
}

// One tooltip per view, inside its root (so it scrolls with it and is scoped to it).
export function tooltip(root) {
  const tip = el("div", "gfv-tip");
  root.appendChild(tip);
  return {
    show(event, text) {
      tip.textContent = text;
      tip.style.display = "block";
      const box = root.getBoundingClientRect();
      let x = event.clientX - box.left + 14;
      const y = event.clientY - box.top + 14;
      if (x + tip.offsetWidth > root.clientWidth) x = Math.max(0, event.clientX - box.left - tip.offsetWidth - 10);
      tip.style.left = x + "px";
      tip.style.top = y + "px";
    },
    hide() {
      tip.style.display = "none";
    },
  };
}

export function header(root, title, hint) {
  if (title) root.appendChild(el("div", "gfv-title", title));
  if (hint) root.appendChild(el("div", "gfv-hint", hint));
}

/* ---- start-up ---- */
function fail(root, error) {
  root.dataset.error = String(error && error.message ? error.message : error);
  root.appendChild(el("div", "gfv-error", "This view could not be drawn: " + root.dataset.error));
  console.error("glassformer view", root.id, error);
}

/** Draws the view module ``view`` ({kind, render(root, reading)}) into ``root`` from its payload;
 * sets data-ready (ms since navigation started) when the first drawing is done, or data-error. */
export function start(root, view) {
  try {
    const source = document.getElementById(root.id + "-data");
    const reading = readPayload(JSON.parse(source.textContent), view.kind);
    Promise.resolve(view.render(root, reading)).then(
      () => (root.dataset.ready = performance.now().toFixed(1)),
      (error) => fail(root, error),
    );
  } catch (error) {
    fail(root, error);
  }
}
