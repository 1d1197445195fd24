// Per-token norms ‖x_i‖ (the walk payload's `norms`: t, or h t for per-head vectors) as
// small bars: how large each token's vector is at this step.

import { el, svg } from "../core/dom.js";
import { number, tokenText } from "../core/format.js";
import { tokenColour } from "../panels/tokens.js";

const BAR_WIDTH = 140; // px for the largest norm
const SPARK_BAR = 5; // px per token in a one-line sparkline
const SPARK_HEIGHT = 16;
const SPARK_MAX_TOKENS = 48;

/** One bar per token: label, bar, value. ``norms`` is a Float32Array of t. */
export function normBars(norms, tokens, caption) {
  const largest = Math.max(...norms) || 1;
  const rows = Array.from(norms, (value, i) =>
    el(
      "div",
      { class: "norm-row", dataset: { position: i } },
      el("span", { class: "norm-token", style: { background: tokenColour(i) } }, tokenText(tokens[i]?.text ?? String(i))),
      el("span", { class: "norm-bar", style: { width: `${Math.max(1, (BAR_WIDTH * value) / largest)}px` } }),
      el("span", { class: "norm-value" }, number(value, 4)),
    ));
  return el("div", { class: "norms" }, caption ? el("div", { class: "norms-caption" }, caption) : null, rows);
}

/** A one-line sparkline of per-token norms, for a collapsed block (SVG, no labels). */
export function sparkline(norms, title) {
  const shown = norms.length > SPARK_MAX_TOKENS ? norms.subarray(norms.length - SPARK_MAX_TOKENS) : norms;
  const largest = Math.max(...shown) || 1;
  const width = shown.length * SPARK_BAR;
  const bars = Array.from(shown, (value, i) => {
    const height = Math.max(1, (SPARK_HEIGHT * value) / largest);
    return svg("rect", { x: i * SPARK_BAR, y: SPARK_HEIGHT - height, width: SPARK_BAR - 1, height });
  });
  const chart = svg("svg", { class: "spark", width, height: SPARK_HEIGHT, viewBox: `0 0 ${width} ${SPARK_HEIGHT}` }, ...bars);
  chart.append(svg("title", {}, document.createTextNode(title)));
  return chart;
}

/** The mean of each token's norm over heads: h t -> t. */
export function meanOverHeads(norms, heads) {
  const t = norms.length / heads;
  const mean = new Float32Array(t);
  for (let h = 0; h < heads; h += 1) for (let i = 0; i < t; i += 1) mean[i] += norms[h * t + i] / heads;
  return mean;
}
