// A vector as a strip: one thin coloured column per feature (blue negative, orange
// positive, against the largest magnitude in the strip), drawn on a canvas so a 2,048-feature
// vector is one element. The overview's boxes and the sentence vector show vectors this way.

import { el } from "../core/dom.js";
import { css, divergingColour } from "../../viz/colours.js";

/** A canvas strip of `values` (an array of numbers), `width` × `height` CSS pixels;
 * `label` is what a screen reader hears and the hover text. */
export function vectorStrip(values, { width = 160, height = 14, label = "a vector" } = {}) {
  const canvas = el("canvas", { class: "strip", role: "img", "aria-label": label, title: label });
  const scale = window.devicePixelRatio || 1;
  canvas.width = Math.max(1, Math.round(width * scale));
  canvas.height = Math.max(1, Math.round(height * scale));
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  const context = canvas.getContext("2d");
  const extent = values.reduce((m, v) => (Number.isFinite(v) ? Math.max(m, Math.abs(v)) : m), 0) || 1;
  const column = canvas.width / Math.max(1, values.length);
  values.forEach((value, i) => {
    context.fillStyle = css(divergingColour(value, extent));
    context.fillRect(Math.floor(i * column), 0, Math.ceil(column), canvas.height);
  });
  return canvas;
}
