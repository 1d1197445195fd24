// The overview's boxes and what is drawn in them from this pass: a step's last-token vector
// (stage.value.preview) as a strip, an attention's head-averaged weights
// (stage.value.mean_pattern) as a small map, a step's sizes in words (stage.shape and
// stage.value.shape) and the stream's mean norm (stage.value.norms).

import { unpack } from "../core/arrays.js";
import { el } from "../core/dom.js";
import { thumbnail } from "../views/heatmap.js";
import { vectorStrip } from "../views/strip.js";

const STRIP = { width: 150, height: 12 };
const MINI_MAP = 56; // px: a head-averaged pattern in a box
export const NORM_NAMES = { rmsnorm: "RMSNorm", layernorm: "LayerNorm" };

/** One box of the diagram: a button when it zooms or opens something. A pending box (a step
 * the teaching reveal has not reached) is drawn without its summary. */
export function box({ title, detail = "", summary = null, onClick = null, kind = "", pending = false, label = "" }) {
  return el(
    onClick ? "button" : "div",
    {
      type: onClick ? "button" : null,
      class: `ov-box ov-${kind}${pending ? " pending" : ""}`,
      onclick: onClick,
      "aria-label": label || null,
      dataset: { kind },
    },
    el("span", { class: "ov-title" }, title),
    detail ? el("span", { class: "ov-detail" }, detail) : null,
    pending ? null : summary,
  );
}

export const arrow = () => el("span", { class: "ov-arrow", "aria-hidden": "true" }, "↓");

/** The last token's leading features of a t d stage (its preview), as a strip. */
export function lastTokenStrip(stage, d) {
  const preview = stage?.value?.preview;
  if (!preview) return null;
  const array = unpack(preview);
  const [t, shown] = array.shape;
  const row = Array.from(array.values.subarray((t - 1) * shown, t * shown));
  const label = `the last token's vector: its first ${shown} of ${d} features (blue negative, orange positive)`;
  return vectorStrip(row, { ...STRIP, label });
}

/** An attention step's weights averaged over its heads, as a small map. */
export function miniMap(stage, size = MINI_MAP) {
  const packed = stage?.value?.mean_pattern;
  if (!packed) return null;
  const array = unpack(packed);
  const [rows, cols] = array.shape;
  const map = thumbnail(array.values, rows, cols, size);
  map.setAttribute("role", "img");
  map.setAttribute("aria-label", "attention weights, averaged over the heads: a row per token, a column per token it reads");
  return map;
}

const LETTER_WORDS = {
  h: "heads", g: "key/value heads", t: "tokens", s: "tokens", e: "numbers", d: "numbers", f: "numbers",
  v: "vocabulary scores", c: "classes",
};

/** A step's shape with its sizes: "9 heads × 7 tokens × 64 numbers" (beginner) or "h t e = [9, 7, 64]". */
export function sizeText(stage, level) {
  const sizes = stage.value?.shape;
  if (!sizes) return level === "beginner" ? "" : stage.shape;
  const letters = stage.shape.split(" ");
  if (level !== "beginner") return `${stage.shape} = [${sizes.join(", ")}]`;
  return letters.map((letter, i) => `${sizes[i]?.toLocaleString("en")} ${LETTER_WORDS[letter] ?? letter}`).join(" × ");
}

/** The mean of a step's per-token norms ‖x‖; null where the payload has none. */
export function meanNorm(stage) {
  const packed = stage?.value?.norms;
  if (!packed) return null;
  const values = unpack(packed).values;
  return values.reduce((a, b) => a + b, 0) / values.length;
}
