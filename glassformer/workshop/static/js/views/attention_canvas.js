// A long input's attention map (more than LARGE_MAP entries along an axis) as two canvases,
// never an element per entry:
//   overview  the whole t x s map, one pixel per k x k block of entries (the largest of
//             them: arrays.poolLargest), with the detail window outlined on it; a click, a
//             drag or the arrow keys move the window
//   detail    a WINDOW x WINDOW part of the map at a readable size, each row labelled with
//             its query's token and each column with its key's; hovering a cell, or moving
//             the cursor over it with the arrow keys, reads its value
// Both are coloured on one scale (colours.js), set by the whole map as a short input's
// heatmap is. The page holds about 2 x WINDOW labels, however long the input.

import { poolLargest, range } from "../core/arrays.js";
import { colourScale } from "../../viz/colours.js";
import { el } from "../core/dom.js";
import { paint } from "../../viz/paint.js";
import { axisLabels, legend } from "./heatmap.js";

export const LARGE_MAP = 128; // entries along an axis past which a map is drawn this way
const WINDOW = 40; // entries along each axis of the detail window
const CELL = 11; // px per entry of the detail window: room for one label each
const OVERVIEW_PX = 180; // the overview's longer side at most, in canvas pixels (the two side by side at 1280 px)
const OVERVIEW_MIN_PX = 16; // its shorter side at least, on screen (one query of a cross-attention)
const STEP = 8; // entries one arrow key moves the window
const TIP_ROOM = 360; // px a tip may need to the right of the pointer
const KEY_MOVES = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };

export function isLargeMap(rows, cols) {
  return rows > LARGE_MAP || cols > LARGE_MAP;
}

function clamp(value, low, high) {
  return Math.max(low, Math.min(high, value));
}

/** "980–1027": ``count`` indices from ``first``. */
function span(first, count) {
  return count === 1 ? `${first}` : `${first}–${first + count - 1}`;
}

/** The rows x cols part of a map's values from (row0, col0). */
function windowValues({ values, cols }, row0, col0, size) {
  const part = new Float32Array(size.rows * size.cols);
  for (let r = 0; r < size.rows; r += 1) {
    const start = (row0 + r) * cols + col0;
    part.set(values.subarray(start, start + size.cols), r * size.cols);
  }
  return part;
}

/** The whole map, pooled to at most OVERVIEW_PX pixels a side, with the window's frame.
 * ``onAim(row, col)``: a point of the map clicked or dragged over; ``onMove(rows, cols)``:
 * an arrow key (Shift: a whole window). */
function overviewOf(map, colour, { onAim, onMove }) {
  const factor = Math.ceil(Math.max(map.rows, map.cols) / OVERVIEW_PX);
  const pooled = poolLargest({ shape: [map.rows, map.cols], values: map.values }, factor);
  const [height, width] = pooled.shape;
  const canvas = el("canvas", {
    class: "ac-overview-canvas",
    width,
    height,
    tabindex: 0,
    role: "application", // a screen reader hands it the arrow keys
    style: { width: `${Math.max(OVERVIEW_MIN_PX, width)}px`, height: `${Math.max(OVERVIEW_MIN_PX, height)}px` },
  });
  paint(canvas, pooled.values, colour);
  const frame = el("div", { class: "ac-frame" });
  const note = factor > 1 ? `one pixel: ${factor} × ${factor} entries, the largest shown` : "one pixel per entry";
  const element = el(
    "figure",
    { class: "ac-overview" },
    el("div", { class: "ac-overview-cells" }, canvas, frame),
    el("figcaption", { class: "hint" }, `The whole map (${note}). Click, drag or use the arrow keys to move the window.`),
  );

  const aim = (event) => {
    const box = canvas.getBoundingClientRect();
    onAim(Math.floor(((event.clientY - box.top) / box.height) * map.rows), Math.floor(((event.clientX - box.left) / box.width) * map.cols));
  };
  canvas.addEventListener("pointerdown", (event) => {
    canvas.setPointerCapture(event.pointerId);
    aim(event);
  });
  canvas.addEventListener("pointermove", (event) => {
    if (canvas.hasPointerCapture(event.pointerId)) aim(event);
  });
  canvas.addEventListener("keydown", (event) => {
    const move = KEY_MOVES[event.key];
    if (!move) return;
    event.preventDefault(); // the page would scroll
    const stride = event.shiftKey ? WINDOW : STEP;
    onMove(move[0] * stride, move[1] * stride);
  });

  /** The frame on the window at (row0, col0), in percent of the map: no pixel arithmetic. */
  const show = (row0, col0, size, words) => {
    Object.assign(frame.style, {
      top: `${(100 * row0) / map.rows}%`,
      left: `${(100 * col0) / map.cols}%`,
      height: `${(100 * size.rows) / map.rows}%`,
      width: `${(100 * size.cols) / map.cols}%`,
    });
    canvas.setAttribute("aria-label", `Overview of the whole map, ${map.rows} ${map.rowTitle} × ${map.cols} ${map.colTitle}. ` +
      `${words}. The arrow keys move the window (Shift: a whole window).`);
  };
  return { element, factor, show };
}

/** The window's entries at CELL px each, with their tokens on both axes, a hover tip, a
 * keyboard cursor and the picked row's outline. */
function detailOf(map, size, colour) {
  const canvas = el("canvas", {
    class: "ac-detail-canvas",
    width: size.cols,
    height: size.rows,
    tabindex: 0,
    role: "application",
    style: { width: `${size.cols * CELL}px`, height: `${size.rows * CELL}px` },
  });
  const cursor = el("div", { class: "ac-cursor", hidden: true, style: { width: `${CELL}px`, height: `${CELL}px` } });
  const mark = el("div", { class: "row-mark", hidden: true, style: { height: `${CELL}px` } });
  const corner = el("div", { class: "hm-corner" }, el("span", {}, `${map.colTitle} →`), el("span", {}, `${map.rowTitle} ↓`));
  let rowAxis = axisLabels(map.rowLabels, CELL, false, 0, 0);
  let colAxis = axisLabels(map.colLabels, CELL, true, 0, 0);
  const grid = el("div", { class: "hm-grid" }, corner, colAxis.box, rowAxis.box, el("div", { class: "hm-cells" }, canvas, cursor, mark));
  const element = el("div", { class: "ac-detail" }, grid);

  const place = (node, row, col, at) => {
    const inside = row >= at.row0 && row < at.row0 + size.rows && (col === null || (col >= at.col0 && col < at.col0 + size.cols));
    node.hidden = !inside;
    node.style.top = `${(row - at.row0) * CELL}px`;
    if (col !== null) node.style.left = `${(col - at.col0) * CELL}px`;
  };
  return {
    element,
    canvas,
    /** Paint the window at ``at`` = {row0, col0} and label its rows and columns. */
    draw(at) {
      paint(canvas, windowValues(map, at.row0, at.col0, size), colour);
      const rows = axisLabels(map.rowLabels, CELL, false, at.row0, at.row0 + size.rows);
      const cols = axisLabels(map.colLabels, CELL, true, at.col0, at.col0 + size.cols);
      rowAxis.box.replaceWith(rows.box);
      colAxis.box.replaceWith(cols.box);
      [rowAxis, colAxis] = [rows, cols];
      canvas.setAttribute("aria-label", `Detail window: ${map.rowTitle} ${span(at.row0, size.rows)}, ${map.colTitle} ` +
        `${span(at.col0, size.cols)}. The arrow keys move a cursor over its entries and read each value` +
        `${map.onPick ? "; Enter picks the cursor's row" : ""}.`);
    },
    /** The entry under a pointer event, in the whole map's indices. */
    entryAt(event, at) {
      const col = clamp(Math.floor(event.offsetX / CELL), 0, size.cols - 1);
      const row = clamp(Math.floor(event.offsetY / CELL), 0, size.rows - 1);
      return { row: at.row0 + row, col: at.col0 + col };
    },
    /** Its labels for (row, col) made bold, the others plain. */
    highlight(entry) {
      for (const axis of [rowAxis, colAxis]) for (const label of axis.byIndex.values()) label.classList.remove("hot");
      if (!entry) return;
      rowAxis.byIndex.get(entry.row)?.classList.add("hot");
      colAxis.byIndex.get(entry.col)?.classList.add("hot");
    },
    showCursor: (entry, at) => place(cursor, entry.row, entry.col, at),
    showMark: (row, at) => place(mark, row, null, at),
  };
}

/** A tip that follows the pointer, fixed to the viewport (a scrolled view cannot cut it). */
function pointerTip(tip, event, text) {
  tip.textContent = text;
  tip.hidden = false;
  const flip = event.clientX + TIP_ROOM > window.innerWidth;
  tip.style.left = `${event.clientX + (flip ? -TIP_ROOM : 14)}px`;
  tip.style.top = `${event.clientY + 16}px`;
}

/**
 * options: {values (rows*cols), rows, cols, rowLabels, colLabels, scale: "unit" | "diverging",
 *           rowTitle, colTitle, describe(row, col, value) -> text, onPick(row)?}
 * Returns {element, place(row)}: place outlines row ``row`` (the picked query) in the
 * detail window, moving the window there when the row is outside it. The element's
 * data-row0 and data-col0 give the window's first query and key.
 */
export function attentionCanvas(options) {
  const { values, rows, cols, scale, describe, onPick } = options;
  const { min, max } = range(values);
  const extent = Math.max(Math.abs(min), Math.abs(max)) || 1;
  const colour = colourScale(scale, extent);
  const size = { rows: Math.min(WINDOW, rows), cols: Math.min(WINDOW, cols) };
  // The window starts at the last queries and keys: where the last token reads.
  const at = { row0: rows - size.rows, col0: cols - size.cols };
  let cursor = null; // the keyboard's entry in the detail window: {row, col}
  let picked = null; // the row place() outlines

  const readout = el("p", { class: "ac-readout hint", "aria-live": "polite" });
  const tip = el("div", { class: "hm-tip", hidden: true });
  const detail = detailOf(options, size, colour);
  const windowWords = () => `The detail window shows ${options.rowTitle} ${span(at.row0, size.rows)} and ${options.colTitle} ${span(at.col0, size.cols)}`;

  const moveTo = (row0, col0) => {
    at.row0 = clamp(row0, 0, rows - size.rows);
    at.col0 = clamp(col0, 0, cols - size.cols);
    detail.draw(at);
    overview.show(at.row0, at.col0, size, windowWords());
    if (cursor) detail.showCursor(cursor, at);
    if (picked !== null) detail.showMark(picked, at);
    Object.assign(element.dataset, { row0: at.row0, col0: at.col0 });
  };
  const moveAndSay = (row0, col0) => {
    moveTo(row0, col0);
    readout.textContent = `${windowWords()}.`;
  };
  const overview = overviewOf(options, colour, {
    onAim: (row, col) => moveAndSay(row - Math.floor(size.rows / 2), col - Math.floor(size.cols / 2)),
    onMove: (down, right) => moveAndSay(at.row0 + down, at.col0 + right),
  });
  const element = el(
    "div",
    { class: `attention-canvas heatmap-${scale}`, dataset: { rows, cols, factor: overview.factor } },
    el("div", { class: "ac-maps" }, overview.element, detail.element),
    readout,
    tip,
    legend(scale, extent, min, max),
  );

  const inWindow = (entry) =>
    entry.row >= at.row0 && entry.row < at.row0 + size.rows && entry.col >= at.col0 && entry.col < at.col0 + size.cols;
  /** The keyboard's cursor moved by (down, right), the window following it; its first
   * press (or one after the window moved away) puts it on the window's first entry. */
  const moveCursor = (down, right) => {
    if (cursor && inWindow(cursor)) {
      cursor = { row: clamp(cursor.row + down, 0, rows - 1), col: clamp(cursor.col + right, 0, cols - 1) };
    } else {
      cursor = { row: at.row0, col: at.col0 };
    }
    moveTo(clamp(at.row0, cursor.row - size.rows + 1, cursor.row), clamp(at.col0, cursor.col - size.cols + 1, cursor.col));
    detail.highlight(cursor);
    readout.textContent = describe(cursor.row, cursor.col, values[cursor.row * cols + cursor.col]);
  };
  listen(detail, { at, describe, values, cols, tip, onPick, moveCursor, pickCursor: () => cursor && onPick?.(cursor.row) });

  moveTo(at.row0, at.col0);
  return {
    element,
    place(row) {
      picked = row;
      if (row < at.row0 || row >= at.row0 + size.rows) moveTo(row - Math.floor(size.rows / 2), at.col0);
      detail.showMark(row, at);
    },
  };
}

/** The detail window's pointer and keys: hover reads an entry, a click picks its row, the
 * arrow keys move the cursor and Enter picks the cursor's row. */
function listen(detail, { at, describe, values, cols, tip, onPick, moveCursor, pickCursor }) {
  const { canvas } = detail;
  canvas.addEventListener("mousemove", (event) => {
    const entry = detail.entryAt(event, at);
    const value = values[entry.row * cols + entry.col];
    pointerTip(tip, event, describe(entry.row, entry.col, value));
    Object.assign(tip.dataset, { row: entry.row, col: entry.col, value });
    detail.highlight(entry);
  });
  canvas.addEventListener("mouseleave", () => {
    tip.hidden = true;
    detail.highlight(null);
  });
  if (onPick) canvas.addEventListener("click", (event) => onPick(detail.entryAt(event, at).row));
  canvas.addEventListener("keydown", (event) => {
    const move = KEY_MOVES[event.key];
    if (move) moveCursor(...move);
    else if (event.key === "Enter") pickCursor();
    else return;
    event.preventDefault();
  });
}
