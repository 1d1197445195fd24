// A heatmap of a rows x cols array on a canvas, one canvas pixel per cell scaled up by CSS
// (so a 512 x 512 pattern costs one ImageData, not 262,144 rectangles), with labels on
// both axes and a hover tip that names the cell and its value. Its parts (axisLabels,
// legend) also draw the long inputs' attention (attention_canvas.js); cells are painted by
// the painter the notebook views share (viz/paint.js).

import { el } from "../core/dom.js";
import { poolLargest, range } from "../core/arrays.js";
import { colourScale, css, unitColour } from "../../viz/colours.js";
import { paint } from "../../viz/paint.js";
import { number } from "../core/format.js";

const MAX_WIDTH = 560; // px of cells
const MAX_HEIGHT = 520;
const MAX_CELL = 28;
const MIN_CELL = 2;
const LABEL_MIN_CELL = 11; // below this a label per cell would overlap: label every k-th
const LABEL_BOX = 14; // px across a label's line of text
const CHAR_WIDTH = 7; // px per character of an 11 px monospace label
const ROW_LABELS_MAX = 90; // px; longer token labels end in an ellipsis
const LEGEND_STEPS = 64;
const TIP_ROOM = 360; // px a tip may need to the right of the pointer

function clamp(value, low, high) {
  return Math.max(low, Math.min(high, value));
}

/** Labels every k-th index when cells are too small for one label each. */
function labelStride(cell) {
  return cell >= LABEL_MIN_CELL ? 1 : Math.ceil(LABEL_MIN_CELL / cell);
}

/** Labels along one axis, each centred on its cell; every k-th when cells are small. Only
 * the indices ``first`` to ``end`` (exclusive) are drawn: a window of a long axis.
 * Returns the box and a lookup index -> label (for highlighting the hovered cell's). */
export function axisLabels(labels, cell, vertical, first = 0, end = labels.length) {
  const stride = labelStride(cell);
  const length = (end - first) * cell;
  // Absolutely placed labels give the row box no width: size it to the longest label of
  // the whole axis, so a window moving along it keeps its place.
  const longest = labels.reduce((most, label) => Math.max(most, label.length), 1);
  const box = el("div", {
    class: vertical ? "hm-cols" : "hm-rows",
    style: vertical
      ? { width: `${length}px` }
      : { height: `${length}px`, width: `${Math.min(ROW_LABELS_MAX, CHAR_WIDTH * longest + 4)}px` },
  });
  const byIndex = new Map();
  for (let i = first; i < end; i += 1) {
    if (i % stride !== 0) continue;
    const centre = (i - first + 0.5) * cell;
    const style = vertical ? { left: `${centre - LABEL_BOX / 2}px` } : { top: `${centre - LABEL_BOX / 2}px` };
    const node = el("div", { class: "hm-label", style, title: labels[i], dataset: { index: i } }, labels[i]);
    byIndex.set(i, node);
    box.append(node);
  }
  return { box, byIndex };
}

/** The colour bar of a map: its scale from end to end, and the range of the values shown. A
 * "magnitude" map (values >= 0, as sizes of errors) has the diverging colours' positive half. */
export function legend(scale, extent, low, high) {
  const canvas = el("canvas", { class: "hm-legend-bar", width: LEGEND_STEPS, height: 1 });
  const context = canvas.getContext("2d");
  const colour = colourScale(scale, extent);
  const [from, to] = { unit: [0, 1], magnitude: [0, extent] }[scale] ?? [-extent, extent];
  for (let i = 0; i < LEGEND_STEPS; i += 1) {
    context.fillStyle = css(colour(from + (to - from) * (i / (LEGEND_STEPS - 1))));
    context.fillRect(i, 0, 1, 1);
  }
  const [left, right] = scale === "unit" ? ["0", "1"] : [number(from, 3), number(to, 3)];
  return el(
    "div",
    { class: "hm-legend" },
    el("span", {}, left),
    canvas,
    el("span", {}, right),
    el("span", { class: "hm-legend-range" }, `shown: ${number(low, 4)} … ${number(high, 4)}`),
  );
}

/**
 * options: {values (rows*cols), rows, cols, rowLabels, colLabels, scale: "unit" | "diverging" | "magnitude",
 *           square, rowTitle, colTitle, describe(row, col, value) -> text,
 *           maxWidth, maxHeight: px of cells at most (a teaching slide's room; default 560 x 520),
 *           colGroup: a line between every colGroup columns (a quantized matrix's blocks of 32)}
 */
export function heatmap(options) {
  const { values, rows, cols, rowLabels, colLabels, scale = "diverging", square = false, describe } = options;
  const { maxWidth = MAX_WIDTH, maxHeight = MAX_HEIGHT } = options;
  let cellW = clamp(Math.floor(maxWidth / cols), MIN_CELL, MAX_CELL);
  let cellH = clamp(Math.floor(maxHeight / rows), MIN_CELL, MAX_CELL);
  if (square) cellW = cellH = Math.min(cellW, cellH);
  else cellH = Math.min(cellH, Math.max(cellW, 16));

  const { min, max } = range(values);
  const extent = Math.max(Math.abs(min), Math.abs(max)) || 1;
  const canvas = el("canvas", {
    class: "hm-canvas",
    width: cols,
    height: rows,
    style: { width: `${cols * cellW}px`, height: `${rows * cellH}px` },
    dataset: { rows, cols },
  });
  paint(canvas, values, colourScale(scale, extent));

  const rowAxis = axisLabels(rowLabels, cellH, false);
  const colAxis = axisLabels(colLabels, cellW, true);
  const tip = el("div", { class: "hm-tip", hidden: true });
  const grid = el(
    "div",
    { class: "hm-grid" },
    el("div", { class: "hm-corner" }, options.colTitle ? el("span", {}, `${options.colTitle} →`) : null,
      options.rowTitle ? el("span", {}, `${options.rowTitle} ↓`) : null),
    colAxis.box,
    rowAxis.box,
    el("div", { class: "hm-cells" }, canvas, groupLines(options.colGroup, cols, cellW, rows * cellH)),
  );
  const root = el("div", { class: `heatmap heatmap-${scale}` }, grid, tip, legend(scale, extent, min, max));

  let hot = [];
  const cool = () => {
    hot.forEach((label) => label.classList.remove("hot"));
    hot = [];
  };
  canvas.addEventListener("mousemove", (event) => {
    const col = clamp(Math.floor(event.offsetX / cellW), 0, cols - 1);
    const row = clamp(Math.floor(event.offsetY / cellH), 0, rows - 1);
    const value = values[row * cols + col];
    tip.textContent = describe(row, col, value);
    Object.assign(tip.dataset, { row, col, value });
    tip.hidden = false;
    // Fixed to the viewport: a scrolled or clipped heatmap cannot cut the tip off.
    const flip = event.clientX + TIP_ROOM > window.innerWidth;
    tip.style.left = `${event.clientX + (flip ? -TIP_ROOM : 14)}px`;
    tip.style.top = `${event.clientY + 16}px`;
    cool();
    hot = [rowAxis.byIndex.get(row), colAxis.byIndex.get(col)].filter(Boolean);
    hot.forEach((label) => label.classList.add("hot"));
  });
  canvas.addEventListener("mouseleave", () => {
    tip.hidden = true;
    cool();
  });
  return root;
}

/** Lines over the cells between every ``group`` columns (none without a group), drawn on top of
 * the canvas and blind to the pointer, so the cells' hover still answers. */
function groupLines(group, cols, cellW, height) {
  if (!group || group >= cols) return null;
  const lines = [];
  for (let col = group; col < cols; col += group) {
    lines.push(el("div", { class: "hm-group-line", dataset: { col }, style: { left: `${col * cellW - 1}px`, height: `${height}px` } }));
  }
  return lines;
}

/** A small heatmap with no labels and no hover: one head among many (a thumbnail). A map
 * larger than ``size`` px is pooled down to about it first (a long input's 1,000 x 1,000). */
export function thumbnail(values, rows, cols, size) {
  const factor = Math.max(1, Math.floor(Math.max(rows, cols) / size));
  const shown = poolLargest({ shape: [rows, cols], values }, factor);
  const [shownRows, shownCols] = shown.shape;
  const canvas = el("canvas", {
    class: "hm-thumb",
    width: shownCols,
    height: shownRows,
    style: { width: `${size}px`, height: `${Math.max(1, Math.round((size * rows) / cols))}px` },
  });
  paint(canvas, shown.values, unitColour);
  return canvas;
}
