// The quantized weights panel, shown only for a model the workshop quantized as it loaded it
// (`glassformer workshop --quantize q8_0`): what the blocks cost and lost, the model's matrices
// to choose from (the one of the step opened in the walk, by what the step says of itself:
// stack, layer, cross, kind), and that matrix's view (quantization_view.js). The walk itself
// is the forward pass over these weights: nothing else on the page changes.

import { ApiError } from "../core/api.js";
import { el } from "../core/dom.js";
import { state } from "../core/state.js";
import { modelInfo } from "./page_panels.js";
import { bytes, kindWords, renderMatrixView, small } from "./quantization_view.js";

const URL_PATH = "api/quantization";
const $ = (id) => document.getElementById(id);

const summaries = new Map(); // model -> its summary (asked once)
let shown = { model: null, matrix: null, window: null }; // what the panel shows now
let asked = 0; // the latest request: an older answer is dropped

async function get(params) {
  let response;
  try {
    response = await fetch(`${URL_PATH}?${new URLSearchParams(params)}`);
  } catch (error) {
    throw new ApiError(`the workshop server did not answer (${error.message}); is it still running?`, 0);
  }
  const answer = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(answer?.error ?? `the server answered ${response.status}`, response.status);
  return answer;
}

/** The matrices a step multiplies by: its block's sublayer, or the head for the logits (and
 * the token table, where the head is tied to it); none for the other steps. */
export function stepMatrices(stage, matrices) {
  if (!stage) return [];
  if (stage.layer === null) {
    if (stage.kind === "logits") return matrices.filter((m) => m.layer === null);
    if (stage.kind === "embed.tokens") return matrices.filter((m) => m.tied_to);
    return [];
  }
  return matrices.filter((m) => m.layer === stage.layer && m.stack === stage.stack && m.cross === stage.cross && stage.kind.startsWith(`${m.sublayer}.`));
}

function header(summary, model) {
  const exact = summary.matrices.filter((m) => m.max_error === 0);
  const all = exact.length === summary.matrices.length;
  const which = exact.length === 1 ? `${exact[0].name} did not move` : `${exact.length} of ${summary.matrices.length} matrices did not move`;
  const skipped = Object.entries(summary.skipped);
  const others = summary.matrices.filter((m) => m.kind !== summary.kind);  // the head beside a 4-bit kind (block_quant.HEAD_KIND)
  const head = others.length ? `; ${others.map((m) => m.name).join(", ")} at ${others[0].label}, as llama.cpp keeps the output matrix finer` : "";
  return el("div", { class: "quant-header" },
    el("p", {}, `${model} runs here as ${summary.label}: ${summary.matrices.length} matrices of its blocks and head, `,
      `${bytes(summary.bytes_before)} as float32, ${bytes(summary.bytes_after)} as ${summary.label} `,
      `(${summary.bits_per_weight.toFixed(2)} bits a weight${head}). Every number in the walk is this quantized model's.`),
    el("p", {}, kindWords(summary.kind, summary.block)),
    exact.length
      ? el("p", { class: "quant-exact" }, `${all ? "Not one weight moved" : which}: ${all || exact.length === 1 ? "its weights were" : "theirs were"} already on their blocks' grids, `,
        "each weight a whole number of its block's step (the model was read from a file of such blocks), so quantizing them again gives back the same blocks.")
      : null,
    skipped.length ? el("p", { class: "hint" }, `Kept in float32: ${skipped.map(([name, why]) => `${name} (${why})`).join("; ")}.`) : null);
}

function matrixPicker(summary, chosen, onChoose) {
  const select = el("select", { class: "quant-matrix", "aria-label": "matrix" }, summary.matrices.map((m) =>
    el("option", { value: m.name, selected: m.name === chosen }, `${m.name} — largest error ${small(m.max_error)}`)));
  select.addEventListener("change", () => onChoose(select.value));
  return el("label", { class: "quant-pick" }, "Matrix: ", select);
}

/** Ask for ``matrix``'s view (its window at ``at``, [row, block], or the worst block's) and draw it. */
async function showMatrix(model, summary, matrix, at = null) {
  shown = { model, matrix, window: at };
  const mine = ++asked;
  const body = $("quant");
  body.replaceChildren(header(summary, model), matrixPicker(summary, matrix, (name) => showMatrix(model, summary, name)),
    el("div", { id: "quant-matrix", class: "quant-matrix-view" }, "loading…"));
  let view;
  try {
    view = await get({ model, matrix, ...(at ? { row: at[0], block: at[1] } : {}) });
  } catch (error) {
    if (mine === asked) $("quant-matrix").textContent = error.message;
    return;
  }
  if (mine !== asked) return;
  renderMatrixView($("quant-matrix"), view, (row, block) => showMatrix(model, summary, matrix, [row, block]));
  body.dataset.matrix = matrix; // what is drawn, for a test or a reader of the page
}

/** The panel: hidden unless the model walked was quantized; the step opened picks the matrix. */
export async function drawQuantization() {
  const info = modelInfo();
  const panel = $("quant-panel");
  panel.hidden = !info?.quantization;
  if (!info?.quantization) return;
  const model = info.name;
  if (!summaries.has(model)) {
    try {
      summaries.set(model, await get({ model }));
    } catch (error) {
      $("quant").textContent = error.message;
      return;
    }
  }
  const summary = summaries.get(model);
  const { walk, stage } = state.get();
  const step = walk?.payload.stages.find((s) => s.id === stage);
  const forStep = stepMatrices(step, summary.matrices);
  const keep = shown.model === model && shown.matrix && (forStep.length === 0 || forStep.some((m) => m.name === shown.matrix));
  if (keep && $("quant").dataset.matrix) return; // the step opened uses the matrix shown: nothing to ask
  const matrix = keep ? shown.matrix : (forStep[0] ?? summary.matrices[0]).name;
  await showMatrix(model, summary, matrix);
}
