// Attention over an image's patches, drawn on the image: one query token's weights (a row s of
// a pattern h t s: [CLS] first, then the patches row by row) laid back onto the patch grid,
// each patch tinted by how much the query reads it, with [CLS]'s own weight beside. The
// t × s map says the same numbers; this says where in the image they fall. Shown when an
// attention step is opened (stage_detail.js), in the overview's head view (overview.js) and,
// for a beginner, averaged over the heads layer by layer (`renderImageAttention`).

import { meanFirst, unpack } from "../core/arrays.js";
import { el } from "../core/dom.js";
import { number, percent } from "../core/format.js";
import { walkImage } from "../image/patch_tokens.js";
import { imageCanvas } from "../image/image_canvas.js";
import { attentionParts } from "../core/stages.js";

const OVERLAY_PX = 240;
const NUMBER_MIN_CELL = 34; // px: a cell this wide prints its weight
const TINT = [47, 109, 181]; // --attn
const MAX_ALPHA = 0.85;

/** Who a query is, in words: "[CLS]" or "patch 1,2". */
function tokenName(payload, query) {
  return query === 0 ? "[CLS]" : payload.image.patches[query - 1] ?? `token ${query}`;
}

/**
 * The overlay of one query's weights. options: {payload, onQuery(index) | null: a click on a
 * patch (or on [CLS]) picks it as the query}. Returns {element, show(weights, query, where)}:
 * weights is the query's row (s = 1 + patches), where says whose weights they are ("head 2").
 */
export function patchAttentionView({ payload, onQuery = null }) {
  const image = walkImage(payload);
  const [rows, cols] = payload.image.grid;
  const caption = el("p", { class: "detail-caption" });
  const cls = el(onQuery ? "button" : "span", { type: onQuery ? "button" : null, class: "pa-cls", onclick: onQuery ? () => onQuery(0) : null });
  // three layers: each patch's tint, the image multiplied over it (ink stays ink, paper takes
  // the tint), and on top the patches themselves, with their weights and a click each
  const place = (i) => ({ left: `${(100 * (i % cols)) / cols}%`, top: `${(100 * Math.floor(i / cols)) / rows}%`, width: `${100 / cols}%`, height: `${100 / rows}%` });
  const tints = Array.from({ length: rows * cols }, (_, i) => el("span", { class: "pa-tint", style: place(i) }));
  const cells = Array.from({ length: rows * cols }, (_, i) => el(onQuery ? "button" : "span", {
    type: onQuery ? "button" : null,
    class: "pa-cell",
    dataset: { patch: i },
    style: place(i),
    onclick: onQuery ? () => onQuery(i + 1) : null,
  }));
  const grid = el("div", { class: "pa-grid", style: { width: `${OVERLAY_PX}px` } },
    tints, imageCanvas(image, OVERLAY_PX, { className: "img-canvas pa-image" }), cells);
  const scale = el("p", { class: "hint pa-scale" });
  const element = el("div", { class: "patch-attention", dataset: { ready: "" } },
    caption, el("div", { class: "pa-body" }, grid, cls), scale);

  function show(weights, query, where = "") {
    const largest = Math.max(...weights.slice(1), 1e-9);
    const printed = OVERLAY_PX / cols >= NUMBER_MIN_CELL;
    cells.forEach((cell, i) => {
      const weight = weights[i + 1];
      const alpha = (MAX_ALPHA * weight) / largest;
      tints[i].style.background = `rgb(${TINT.join(" ")} / ${alpha.toFixed(3)})`;
      cell.classList.toggle("pa-query", query === i + 1);
      cell.title = `${tokenName(payload, query)} reads ${payload.image.patches[i]}: weight ${number(weight, 3)}`;
      cell.dataset.weight = weight.toFixed(4);
      cell.textContent = printed ? weight.toFixed(2).replace(/^0/, "") : "";
    });
    cls.replaceChildren(el("span", { class: "patch-cls-box" }, "[CLS]"), el("span", { class: "pa-cls-weight" }, number(weights[0], 3)));
    cls.classList.toggle("pa-query", query === 0);
    cls.title = `${tokenName(payload, query)} reads [CLS]: weight ${number(weights[0], 3)}`;
    cls.dataset.weight = weights[0].toFixed(4);
    const who = query === 0 ? "[CLS], the token the classifier reads," : tokenName(payload, query);
    caption.replaceChildren(`Where ${who} looks in the image${where ? ` (${where})` : ""}: each patch tinted by its attention weight. `,
      onQuery ? "Click a patch to see where it looks, or [CLS]." : "");
    scale.textContent = `The darkest patch has ${percent(largest, 1)} of the attention; [CLS] itself has ${percent(weights[0], 1)}. All ${weights.length} weights add up to 1.`;
    Object.assign(element.dataset, { query, ready: "1" });
  }
  return { element, show };
}

/** The query's row of a t s plane ({shape, values}). */
export function queryRow(plane, query) {
  const s = plane.shape[plane.shape.length - 1];
  return Array.from(plane.values.subarray(query * s, (query + 1) * s));
}

// The latest drawing asked of each container: an older fetch that answers late is dropped.
const latest = new WeakMap();

/**
 * A beginner's "where each token looks" for an image: one layer's attention averaged over its
 * heads, on the image. view: {payload, layer, onChange({layer}), loadStage(name)}.
 */
export function renderImageAttention(container, view, query = 0) {
  const part = attentionParts(view.payload.stages)[0];
  const index = Math.max(0, part.layers.findIndex((l) => l.layer === view.layer));
  const last = part.layers.length - 1;
  const layerName = el("span", { class: "field-name" });
  const slider = el("input", {
    type: "range", class: "lines-layer", min: 0, max: last, step: 1, value: index, "aria-label": "layer",
    oninput: (e) => {
      const { layer } = part.layers[Number(e.target.value)];
      view.onChange({ layer });
      show(Number(e.target.value));
    },
  });
  const picture = el("div", { class: "lines-picture" });
  container.replaceChildren(
    el("div", { class: "lines-controls" }, el("label", { class: "field" }, layerName, slider)),
    el("p", { class: "hint" }, "The image as the model cut it into patches, and where one token looks in it, averaged over the heads of one block. Start with [CLS]: the label is read from it."),
    picture,
  );

  function show(i) {
    const { layer, stage } = part.layers[i];
    layerName.textContent = `block ${layer} (of 0–${part.layers[last].layer})`;
    const ticket = {};
    latest.set(container, ticket);
    container.dataset.ready = "";
    const averaged = stage.value?.mean_pattern
      ? Promise.resolve(unpack(stage.value.mean_pattern))
      : view.loadStage(stage.trace).then((answer) => meanFirst(unpack(answer.value)));
    averaged.then((pattern) => {
      if (latest.get(container) !== ticket) return;
      const overlay = patchAttentionView({ payload: view.payload, onQuery: (q) => renderImageAttention(container, { ...view, layer }, q) });
      overlay.show(queryRow(pattern, query), query, `block ${layer}, averaged over ${stage.value?.shape?.[0] ?? "its"} heads`);
      picture.replaceChildren(overlay.element);
      container.dataset.layer = layer;
      container.dataset.ready = "1";
    }, (error) => {
      if (latest.get(container) !== ticket) return;
      picture.replaceChildren(el("p", { class: "error-inline" }, error.message));
      container.dataset.ready = "error";
    });
  }
  show(index);
}
