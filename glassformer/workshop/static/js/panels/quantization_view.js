// One quantized matrix (GET api/quantization?model=&matrix=, glassformer/workshop/model_quantization.py):
// what a block of 32 weights is, its worst blocks in words, every block's error as a map (click a
// cell to look inside), and a window of the weights the model now multiplies by, each a whole
// number of its block's steps (plus Q4_1's minimum).

import { el } from "../core/dom.js";
import { count } from "../core/format.js";
import { unpack } from "../core/arrays.js";
import { heatmap } from "../views/heatmap.js";

const MAP_HEIGHT = 260; // px of the error map's cells
const WINDOW_HEIGHT = 300; // px of the weights' window

/** A small number as a person reads it: 0.0032, never 3.2e-3; "−" for a minus. */
export function small(value, digits = 2) {
  if (value === 0) return "0";
  const magnitude = Math.abs(value);
  const text = magnitude >= 1e-6 && magnitude < 1e5 ? String(Number(value.toPrecision(digits))) : value.toExponential(digits - 1);
  return text.replace(/-/g, "\u2212");
}

/** Bytes as a person reads them: 336000 -> "336 kB". */
export function bytes(n) {
  for (const [size, unit] of [[1e9, "GB"], [1e6, "MB"], [1e3, "kB"]]) if (n >= size) return `${Number((n / size).toPrecision(3))} ${unit}`;
  return `${n} bytes`;
}

/** How ``kind``'s blocks are made, in a sentence (block_quant.py's equations). */
export function kindWords(kind, block) {
  const start = `Each block of ${block} weights in a row shares one scale (its step d, stored in 16 bits).`;
  if (kind === "q8_0") return `${start} Q8_0: the block's largest weight, by size, sets d = largest / 127; each weight is stored as a whole number of steps from −127 to 127 (8 bits).`;
  if (kind === "q4_0") return `${start} Q4_0: the block's largest weight, by size, sets d = largest / 8; each weight is stored as a whole number of steps from −8 to 7 (4 bits).`;
  return `${start} Q4_1: a minimum m too; the 16 levels span the block's own range, d = (highest − lowest) / 15, and each weight is stored as m plus 0 to 15 steps (4 bits).`;
}

/** One block's story: what set its step, how far its weights moved, and the stated bound. */
export function blockWords(kind, b) {
  const where = `Row ${b.row}, weights ${b.columns[0]}–${b.columns[1]} (block ${b.block}):`;
  const moved = b.max_error === 0
    ? "its weights did not move at all: they were already whole numbers of that step (a model read from such a file)."
    : `its weights moved by at most ${small(b.max_error, 3)} (RMS ${small(b.rms_error)}); the stated bound is ${small(b.bound, 3)}.`;
  if (kind === "q4_1") {
    return `${where} its weights run from ${small(b.low)} to ${small(b.high)}, so its step is ${small(b.step)} above m = ${small(b.minimum)}; ${moved}`;
  }
  const top = kind === "q8_0" ? 127 : 8;
  return `${where} its largest weight ${small(b.largest)} sets its step ${small(Math.abs(b.step))} (${small(b.largest)} / ${top}); ${moved}`;
}

/** A cell range of a pooled map: "rows 8–15" or "row 8". */
function span(what, index, size, total) {
  const first = index * size;
  const last = Math.min(total, first + size) - 1;
  return first === last ? `${what} ${first}` : `${what}s ${first}–${last}`;
}

function errorMap(view, onPick) {
  const { values, shape } = unpack(view.errors);
  const [rows, cols] = shape;
  const [rowSize, blockSize] = view.errors.pool;
  const [out, inner] = view.matrix.shape;
  const blocks = inner / view.block;
  const map = heatmap({
    values, rows, cols,
    rowLabels: Array.from({ length: rows }, (_, r) => String(r * rowSize)),
    colLabels: Array.from({ length: cols }, (_, c) => String(c * blockSize)),
    rowTitle: "row", colTitle: "block", scale: "magnitude",
    maxHeight: MAP_HEIGHT,
    describe: (r, c, v) => `${span("row", r, rowSize, out)}, ${span("block", c, blockSize, blocks)}: largest error ${small(v)}`,
  });
  map.classList.add("quant-errors");
  const canvas = map.querySelector(".hm-canvas");
  canvas.style.cursor = "pointer";
  canvas.addEventListener("click", (event) => {
    const cellW = canvas.clientWidth / cols;
    const cellH = canvas.clientHeight / rows;
    const c = Math.min(cols - 1, Math.floor(event.offsetX / cellW));
    const r = Math.min(rows - 1, Math.floor(event.offsetY / cellH));
    onPick(r * rowSize, c * blockSize);
  });
  return map;
}

/** The window's weights: each the block's step times a whole number (plus Q4_1's minimum). */
function weightWindow(view) {
  const { window: win, block, kind } = view;
  const weights = unpack(win.weights);
  const steps = unpack(win.steps).values;
  const errors = unpack(win.max_error).values;
  const bounds = unpack(win.bound).values;
  const minimums = unpack(win.minimums).values;
  const [rows, cols] = weights.shape;
  const perRow = cols / block;
  const describe = (r, c, w) => {
    const at = r * perRow + Math.floor(c / block);
    const d = steps[at];
    const level = d === 0 ? 0 : Math.round((w - minimums[at]) / d);
    const lead = `row ${win.row + r}, weight ${win.block * block + c} (block ${win.block + Math.floor(c / block)}): ${small(w, 3)}`;
    const grid = kind === "q4_1" ? `m ${small(minimums[at], 3)} + ${level} steps of ${small(d)}` : `${level} × ${small(d)}`;
    return `${lead} = ${grid}; this block's weights moved by at most ${small(errors[at])} (bound ${small(bounds[at])})`;
  };
  const map = heatmap({
    values: weights.values, rows, cols,
    rowLabels: Array.from({ length: rows }, (_, r) => String(win.row + r)),
    colLabels: Array.from({ length: cols }, (_, c) => String(win.block * block + c)),
    rowTitle: "row", colTitle: "weight",
    maxHeight: WINDOW_HEIGHT,
    colGroup: block,
    describe,
  });
  map.classList.add("quant-weights");
  return map;
}

/** The view of one matrix into ``container``; ``onPick(row, block)`` asks for another window. */
export function renderMatrixView(container, view, onPick) {
  const m = view.matrix;
  const blocks = m.weights / view.block;
  const tied = m.tied_to ? ` It is also the token table (${m.tied_to}): the lookup reads these rows too, as llama.cpp's token_embd.` : "";
  const total = m.max_error === 0
    ? `Not one weight moved: every block was already on this ${view.label} grid.`
    : `Its weights moved by at most ${small(m.max_error, 3)} (RMS ${small(m.rms_error)}); every block's bound holds (largest bound ${small(m.bound, 3)}).`;
  const facts = el("p", { class: "quant-facts" },
    `${m.name}: ${m.shape[0]} × ${m.shape[1]} = ${count(m.weights)} weights in ${count(blocks)} blocks, `,
    `${bytes(view.bytes_before)} as float32, ${bytes(view.bytes_after)} as ${view.label}. ${total}${tied}`);
  const exact = m.max_error === 0; // every block already on the grid: one example says it all, no map of zeros
  const listed = exact ? view.worst.slice(0, 1) : view.worst;
  const worst = el("ol", { class: "quant-worst" }, listed.map((b) => el("li", {},
    el("button", { type: "button", class: "quant-look", onclick: () => onPick(b.row, b.block) }, "look"), " ", blockWords(view.kind, b))));
  const [wr, wb] = view.window.chosen;
  const map = exact
    ? [el("p", { class: "hint" }, "Every block's largest error is 0: there is no error to map.")]
    : [el("h3", {}, "Every block's largest error"),
      el("p", { class: "hint" }, `Each cell is a block of 32 weights of a row (or the largest of the blocks it stands for); the darkest, ${small(m.max_error, 3)}. Click one to see its weights.`),
      errorMap(view, onPick)];
  container.replaceChildren(
    facts,
    el("h3", {}, exact ? "A block, for example" : "The largest errors, block by block"),
    worst,
    ...map,
    el("h3", {}, `The weights the model now multiplies by, around row ${wr}, block ${wb}`),
    el("p", { class: "hint" }, `Point at a weight: it is a whole number of its block's steps. A line marks where a block of ${view.block} ends and the next, with its own step, begins.`),
    weightWindow(view),
  );
}
