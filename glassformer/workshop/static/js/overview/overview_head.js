// The overview's third and fourth zoom, one head of one attention: its weights as a map (the
// attention step's whole tensor, POST /api/stage, sliced to the head; rows the queries, columns
// the keys: stages.js axisTokens), the head picker, a vision model's weights laid on its image
// (patch_attention.js), and how one query's weights are made from q · k (query_key.js).

import { slice, unpack } from "../core/arrays.js";
import { el } from "../core/dom.js";
import { number, quoted, tokenText } from "../core/format.js";
import { heatmap } from "../views/heatmap.js";
import { zoomText } from "./overview_zoom.js";
import { patchAttentionView, queryRow } from "../views/patch_attention.js";
import { queryKeyTraces, queryKeyView } from "../views/query_key.js";
import { axisTokens } from "../core/stages.js";

const HINT = "Each row is one token (the query) and how it spreads its attention over the tokens it may read (the keys); " +
  "each row adds up to 1. Click a row to see how its weights are made from q · k.";

/** The head picker: one button per head, the current one marked. */
function headPicker(view, zoom, heads) {
  return el("nav", { class: "ov-head-picker", "aria-label": "heads" }, Array.from({ length: heads }, (_, h) =>
    el("button", {
      type: "button", class: `ov-head-pick${h === zoom.head ? " current" : ""}`, "aria-current": h === zoom.head ? "true" : null,
      onclick: () => view.onZoom(zoomText({ ...zoom, head: h })),
    }, String(h))));
}

/** zoom: {block, pattern (the attention weights' step), head, query} (overview_zoom.js). */
export function headView(view, zoom) {
  const { payload } = view;
  const stage = zoom.pattern;
  const queries = axisTokens(stage, "t", payload) ?? [];
  const keys = axisTokens(stage, "s", payload) ?? [];
  const head = zoom.head;
  const query = zoom.query ?? (payload.image ? 0 : queries.length - 1); // an image: [CLS], what the label reads
  const toQuery = (q) => view.onZoom(zoomText({ ...zoom, query: q }));
  const mapBox = el("div", { class: "ov-head-map" }, el("p", { class: "loading" }, "loading the attention weights…"));
  const traces = queryKeyTraces(stage, payload.stages);
  const pair = queryKeyView({ traces, stage, payload, level: view.level, loadStage: view.loadStage, onQuery: toQuery });
  pair.show(head, query);
  view.loadStage(stage.trace).then((answer) => {
    const all = unpack(answer.value);
    const [heads, rows, cols] = all.shape;
    if (head >= heads) {
      mapBox.replaceChildren(el("p", { class: "hint" }, `This attention has heads 0 to ${heads - 1}.`));
      return;
    }
    const map = heatmap({
      values: slice(all, head).values, rows, cols, scale: "unit", square: true,
      rowLabels: queries.map((t) => tokenText(t.text)), colLabels: keys.map((t) => tokenText(t.text)),
      rowTitle: "query", colTitle: "key",
      describe: (r, c, v) => `${quoted(queries[r]?.text ?? "?")} reads ${quoted(keys[c]?.text ?? "?")}: weight ${number(v, 3)} (click: this query)`,
    });
    const canvas = map.querySelector("canvas");
    canvas.addEventListener("click", (event) => {
      toQuery(Math.min(rows - 1, Math.max(0, Math.floor((event.offsetY / canvas.clientHeight) * rows))));
    });
    const overlay = payload.image ? patchAttentionView({ payload, onQuery: toQuery }) : null;
    overlay?.show(queryRow(slice(all, head), query), query, `head ${head}`);
    mapBox.replaceChildren(headPicker(view, zoom, heads), map, overlay?.element ?? "");
    mapBox.dataset.ready = "1";
  }, (error) => mapBox.replaceChildren(el("p", { class: "error-inline" }, error.message)));
  return el("div", { class: "ov-head-view" },
    el("button", { type: "button", class: "ov-back", onclick: () => view.onZoom(zoom.block) }, `← block ${stage.layer}`),
    el("p", { class: "hint" }, HINT),
    mapBox, pair.element);
}
