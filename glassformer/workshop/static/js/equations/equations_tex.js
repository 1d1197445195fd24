// How the equations (equations.js and its parts) typeset a model's numbers: constants of the
// architecture summary (architecture.summary(config)) and this input's values, as KaTeX
// (tex.js). A number read from this input or this model is wrapped in \htmlClass{num}{...};
// a name read from the model enters the LaTeX only through tex.js `texText`.
// An equation is DOM nodes, never an HTML string: its prose is text, with <sub>, <sup> and
// numbers made as elements.

import { el } from "../core/dom.js";
import { number } from "../core/format.js";
import { tex } from "../core/tex.js";

/** A number as TeX, with the digits `number` prints: −1.2e−5 -> -1.2 \times 10^{-5}. */
export function texNumber(value, digits = 4) {
  const shown = number(value, digits).replace(/\u2212/g, "-");
  if (shown === "\u221e" || shown === "-\u221e") return shown.replace("\u221e", "\\infty");
  const [mantissa, exponent] = shown.split("e");
  return exponent === undefined ? mantissa : `${mantissa} \\times 10^{${Number(exponent)}}`;
}

/** A constant of the config as TeX to float32's 7 significant digits, the precision the
 * model computes with (a GGUF file stores 1e-5 as 9.99999974e-6): 1e-12 -> 10^{-12}. */
export function texConstant(raw) {
  const value = Number(raw.toPrecision(7));
  if (value === 0 || (Math.abs(value) >= 1e-3 && Math.abs(value) < 1e7)) return String(value);
  const [mantissa, exponent] = value.toExponential().split("e");
  const power = `10^{${Number(exponent)}}`;
  return mantissa === "1" ? power : `${mantissa} \\times ${power}`;
}

/** An integer exactly, its thousands grouped: 49151 -> 49{,}151 (TeX's comma, no space). */
export function texInteger(value) {
  return value.toLocaleString("en-US").replace(/,/g, "{,}");
}

/** A number of the model and its config: integers exact (a vocabulary of 49,152 tokens ends
 * at id 49,151, not "49,150" rounded), other constants at float32 precision. */
export const num = (value) => `\\htmlClass{num}{${Number.isInteger(value) ? texInteger(value) : texConstant(value)}}`;
export const exact = num;
/** A number of this input in the prose: a <span class="num">. */
export const shownNum = (value) => el("span", { class: "num" }, number(value));
export const sub = (text) => el("sub", {}, text);
export const sup = (text) => el("sup", {}, text);
export const real = (rows, cols) => `\\mathbb{R}^{${rows} \\times ${cols}}`;
export const W = (name) => `W_{\\mathrm{${name}}}`;
/** "+ b_name" where the layer has a bias (config qkv_bias, out_bias, ffn_bias, lm_head_bias). */
export const plusBias = (present, name) => (present ? ` + b_{${name}}` : "");
/** Whether value is √d (an embedding scale, or the inverse of T5's head input scale). */
export const isRootOf = (value, d) => Math.abs(value * value - d) < 1e-6 * d;

// A note is a string or a list of strings and nodes (el appends each as text or as itself).
const prose = (note) => (note?.length ? [" ", el("span", { class: "eq-note" }, note)] : []);
const range = (value, what) =>
  value?.min !== undefined
    ? [" ", el("span", { class: "range" }, `${what} from `, shownNum(value.min), " to ", shownNum(value.max))]
    : [];

/** An equation as a DocumentFragment: the typeset LaTeX, its prose, the range of this step's values. */
export function eq(latex, note = "", value = null, what = "values") {
  const out = document.createDocumentFragment();
  out.append(tex(latex), ...prose(note), ...range(value, what));
  return out;
}
