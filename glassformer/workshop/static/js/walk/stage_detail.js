// One step opened: its whole tensor from POST /api/stage, drawn as a heatmap.
//   attention weights  h t s  one head at a time (head buttons), rows = queries, cols = keys;
//                             past 128 tokens an overview and a detail window (attention_canvas.js)
//   scores             h t s  the same, in a signed scale
//   q, k, v, z         h t e  one head: tokens x features
//   everything else    t d    tokens x the first 64 features
//   a classifier's     d, c   one vector: the pooled features, or each label's logit
//                             (stage_vector_detail.js)
// Which of these a step is comes from its kind (stage_map_words.js, with the words around it).
// plus the per-token norms the walk payload already holds. Under the heatmap, a view of one
// token (a row; click one): for q, scores and pattern the query · key sums of one query
// (query_key.js), for the FFN's activation its most active neurons (ffn_neurons.js), for a
// mixture of experts' router scores (t n: tokens x experts) the token's routing (moe_routing.js).
// A vision model's attention weights are also laid on its image: one query's weights over the
// patches (patch_attention.js), [CLS]'s first.

import { leadingColumns, slice, unpack } from "../core/arrays.js";
import { attentionCanvas, isLargeMap } from "../views/attention_canvas.js";
import { el } from "../core/dom.js";
import { ffnNeuronsView } from "../views/ffn_neurons.js";
import { number, percent, quoted } from "../core/format.js";
import { heatmap, thumbnail } from "../views/heatmap.js";
import { moeRoutingView, routingTraces } from "../views/moe_routing.js";
import { normBars } from "./norms.js";
import { patchAttentionView, queryRow } from "../views/patch_attention.js";
import { queryKeyTraces, queryKeyView } from "../views/query_key.js";
import { bars } from "../panels/prediction.js";
import { caption, describeCell, mapKind, tokenLabels } from "./stage_map_words.js";
import { vectorDetail } from "./stage_vector_detail.js";
import { axisTokens } from "../core/stages.js";
import { mapRoom } from "./slide.js";

const FIRST_FEATURES = 64;
const THUMB_SIZE = 44; // px

/** What each axis of a 2-D slice holds: tokens (t, s) or feature indices. */
function axes(stage, payload, letters) {
  return letters.map((letter) => ({ letter, tokens: axisTokens(stage, letter, payload) }));
}

/** The per-token norms of the walk payload (t, or one head's t of h t). */
function normsView(stage, payload, head, level) {
  const packed = stage.value?.norms;
  if (!packed) return null;
  const norms = unpack(packed);
  const letters = stage.shape.split(" ");
  const rowLetter = letters.length === 3 ? letters[1] : letters[0];
  const tokens = axisTokens(stage, rowLetter, payload) ?? [];
  const values = norms.shape.length === 2 ? slice(norms, head ?? 0).values : norms.values;
  const words = level === "beginner" ? "How big each token's vector is" : "‖x‖ per token";
  const which = norms.shape.length === 2 ? ` (head ${head ?? 0})` : "";
  return normBars(values, tokens, `${words}${which}`);
}

/** The view of one row (token) under the heatmap, {element, show(head, row)}; null for
 * steps that have none. ``onRow(row)`` is called when the view picks a row itself. */
function rowView({ stage, payload, level, loadStage }, array, onRow) {
  const traces = queryKeyTraces(stage, payload.stages);
  if (traces) {
    const view = queryKeyView({ traces, stage, payload, level, loadStage, onQuery: onRow });
    return { element: view.element, show: (head, row) => view.show(head, row) };
  }
  if (stage.kind === "ffn.router_probs") {
    const tokens = axisTokens(stage, "t", payload) ?? [];
    const view = moeRoutingView({ array, tokens, level, loadStage, traces: routingTraces(stage, payload.stages), onToken: onRow });
    return { element: view.element, show: (head, row) => view.show(row) };
  }
  if (stage.kind === "ffn.act") {
    const tokens = axisTokens(stage, "t", payload) ?? [];
    const view = ffnNeuronsView({ array, tokens, level, onToken: onRow });
    return { element: view.element, show: (head, row) => view.show(row) };
  }
  return null;
}

/** The map of one plane: a heatmap, or a long input's attention as an overview and a
 * detail window. Returns {element, place(row)}: place outlines the row ``onPick`` was
 * given (null when no row is picked here). */
function planeMap(kind, options, onPick) {
  if (kind !== "features" && kind !== "routing" && isLargeMap(options.rows, options.cols)) return attentionCanvas({ ...options, onPick });
  const element = heatmap(options);
  return { element, place: onPick ? rowPicker(element, options.rows, onPick) : null };
}

/** Rows of a heatmap made clickable, the picked one outlined: returns place(row). */
function rowPicker(map, rows, onPick) {
  const canvas = map.querySelector(".hm-canvas");
  const cellHeight = parseFloat(canvas.style.height) / rows; // px
  const mark = el("div", { class: "row-mark", style: { height: `${cellHeight}px` } });
  canvas.parentElement.append(mark);
  canvas.addEventListener("click", (event) => onPick(Math.min(rows - 1, Math.floor(event.offsetY / cellHeight))));
  return (row) => {
    mark.style.top = `${row * cellHeight}px`;
  };
}

/**
 * The opened step. options: {stage, payload, level, head, onHead(head), loadStage(name) -> Promise}
 * The element is returned at once; the tensor is drawn when it arrives (data-ready set).
 */
export function stageDetail({ stage, payload, level, head = 0, onHead, loadStage, lens = null }) {
  const root = el("div", { class: "detail", dataset: { stage: stage.id } });
  if (!stage.trace) {
    root.append(el("p", { class: "detail-caption" }, "This step has no tensor of its own."));
    root.dataset.ready = "1";
    return root;
  }
  const letters = stage.shape.split(" ");
  if (letters.length === 1) return vectorDetail(root, stage, payload, loadStage, FIRST_FEATURES);
  if (level === "beginner" && stage.trace === "logits" && payload.prediction) return likeliestTokens(root, payload);
  const kind = mapKind(stage);
  const perHead = letters.length === 3;
  const body = el("div", { class: "detail-body" }, el("p", { class: "loading" }, "loading the whole tensor…"));
  const norms = el("div", { class: "detail-norms" });
  const below = el("div", { class: "detail-view" });
  root.append(el("p", { class: "detail-caption" }, caption(kind, level)), body, below, norms);
  const lensRow = lens?.rows.find((r) => r.layer === stage.trace);
  if (lensRow && level !== "beginner") root.append(lensHere(lensRow, lens.token));

  let current = perHead ? Math.min(head, (stage.value?.shape?.[0] ?? 1) - 1) : null;
  const drawNorms = () => norms.replaceChildren(normsView(stage, payload, current, level) ?? "");
  drawNorms();

  loadStage(stage.trace).then(
    (answer) => {
      const array = unpack(answer.value);
      const heads = perHead ? array.shape[0] : 0;
      const [rowAxis, colAxis] = axes(stage, payload, perHead ? letters.slice(1) : letters);
      let row = null; // the token the view below reads (default: the last; an image's [CLS])
      let place = null;
      const pickRow = (r) => {
        row = r;
        place(row);
        view.show(current, row);
        overlay?.show(queryRow(slice(array, current), row), row, `head ${current}`);
      };
      const view = rowView({ stage, payload, level, loadStage }, array, pickRow);
      const overlay = view && payload.image && kind === "pattern" ? patchAttentionView({ payload, onQuery: pickRow }) : null;
      if (view) below.replaceChildren(overlay?.element ?? "", view.element);
      const room = mapRoom(root); // teaching mode's current step: the map fits the slide beside its words
      const draw = () => {
        const plane = perHead ? slice(array, current) : array; // rows cols
        const shown = colAxis.tokens ? plane : leadingColumns(plane, FIRST_FEATURES);
        const [rows, cols] = shown.shape;
        const map = planeMap(kind, {
          values: shown.values,
          rows,
          cols,
          rowLabels: tokenLabels(rowAxis.tokens, rows),
          colLabels: tokenLabels(colAxis.tokens, cols),
          scale: kind === "pattern" || kind === "routing" ? "unit" : "diverging",
          square: kind === "pattern" || kind === "scores",
          rowTitle: kind === "pattern" || kind === "scores" ? "queries" : "tokens",
          colTitle: { pattern: "keys", scores: "keys", routing: "experts" }[kind] ??
            (colAxis.letter === "v" ? "vocabulary ids" : "features"),
          describe: describeCell(kind, rowAxis, colAxis, current, letters[0]),
          ...room,
        }, view ? pickRow : null);
        const clipped = plane.shape[1] > cols
          ? el("p", { class: "hint" }, `the first ${cols} of ${plane.shape[1]} ${colAxis.letter === "v" ? "vocabulary entries" : "features"}`)
          : null;
        body.replaceChildren(
          heads ? headButtons(array, kind, heads, current, letters[0], pick) : "",
          map.element,
          clipped ?? "",
        );
        if (view) {
          row ??= payload.image ? 0 : rows - 1;
          place = map.place;
          pickRow(row);
        }
        if (!root.dataset.ready && room.maxHeight) root.closest(".step")?.scrollIntoView({ block: "center" }); // the slide, in full
        root.dataset.head = current ?? "";
        root.dataset.ready = "1";
      };
      const pick = (h) => {
        current = h;
        onHead?.(h);
        draw();
        drawNorms();
      };
      draw();
    },
    (error) => {
      body.replaceChildren(el("p", { class: "error-inline" }, error.message));
      root.dataset.ready = "error";
    },
  );
  return root;
}

/** A beginner's logits: not the scores of ids 0 to 63, but the tokens that score highest. */
function likeliestTokens(root, payload) {
  const first = payload.prediction.steps[0];
  const vocab = payload.architecture.vocab_size.toLocaleString("en");
  root.append(
    el("p", { class: "detail-caption" }, `Each of the ${vocab} tokens gets a score for what comes next; these score highest ` +
      "(as probabilities: the softmax of the scores). The intermediate level shows the raw scores."),
    bars(first, payload.prediction.token.id, "beginner"),
  );
  root.dataset.ready = "1";
  return root;
}

function headButtons(array, kind, heads, current, letter, pick) {
  const word = { g: "kv head", k: "choice" }[letter] ?? "head"; // k: a token's j-th chosen expert
  const buttons = Array.from({ length: heads }, (_, h) => {
    const plane = slice(array, h);
    const [rows, cols] = plane.shape;
    return el(
      "button",
      {
        type: "button",
        class: "head-button",
        "aria-pressed": String(h === current),
        dataset: { head: h },
        title: `${word} ${h}`,
        onclick: () => pick(h),
      },
      kind === "pattern" ? thumbnail(plane.values, rows, cols, THUMB_SIZE) : null,
      el("span", {}, `${word} ${h}`),
    );
  });
  return el("div", { class: "heads", role: "group", "aria-label": "heads" }, buttons);
}

/** The logit lens at this step's stream: what it would predict after the last token. */
function lensHere(row, final) {
  const top = row.top.map((t) => `${quoted(t.text)} ${percent(t.p, 0)}`).join(", ");
  return el("p", { class: "detail-lens", dataset: { rank: row.rank } },
    el("strong", {}, "Logit lens here: "),
    `read through the model's final norm and head, this stream would predict ${top} after the last token; `,
    `the final choice ${quoted(final.text)} ranks #${row.rank} (entropy ${number(row.entropy, 3)} nats).`);
}
