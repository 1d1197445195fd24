// The overview's second zoom, one block: each of its steps as a box (its title, its sizes,
// its last-token strip from stage.value.preview), each attention's weights as a tile per head
// (its whole tensor loaded, POST /api/stage), a tile the way into that head's zoom.

import { slice, unpack } from "../core/arrays.js";
import { el } from "../core/dom.js";
import { thumbnail } from "../views/heatmap.js";
import { plainTitle } from "../walk/levels.js";
import { box, lastTokenStrip, sizeText } from "./overview_box.js";
import { zoomText } from "./overview_zoom.js";
import { sections } from "../core/stages.js";

const HEAD_TILE = 44; // px: one head's map in the block view

/** A step's box class: the sublayer its kind is a step of ("attn", "ffn", "resid-mid", ...). */
const boxKind = (kind) => kind.split(".")[0].replace("_", "-");

/** One tile per head of an attention step: its own map once the whole pattern has come. */
function headTiles(view, stage) {
  const heads = stage.value?.shape?.[0] ?? view.payload.architecture.attention.heads;
  const tiles = el("span", { class: "ov-heads", role: "group", "aria-label": "open one head" });
  const tile = (h, picture) => el("button", {
    type: "button", class: "ov-head", "aria-label": `open head ${h}`, title: `head ${h}`,
    onclick: (event) => { event.stopPropagation(); view.onZoom(zoomText({ pattern: stage, head: h })); },
  }, picture ?? el("span", { class: "ov-head-name" }, `h${h}`));
  tiles.append(...Array.from({ length: heads }, (_, h) => tile(h)));
  view.loadStage(stage.trace).then((answer) => {
    const all = unpack(answer.value);
    const [, rows, cols] = all.shape;
    tiles.replaceChildren(...Array.from({ length: heads }, (_, h) => tile(h, thumbnail(slice(all, h).values, rows, cols, HEAD_TILE))));
  }, () => {}); // the tiles stay named buttons: the map is an extra
  return tiles;
}

/** The block whose group is ``group``: its steps in order. */
export function blockView(view, group) {
  const { payload, revealed, onZoom } = view;
  const section = sections(payload.stages).find((s) => s.group === group);
  if (!section) return el("p", { class: "hint" }, `This model has no ${group}.`);
  const items = [];
  for (const stage of section.stages) {
    const { kind, cross } = stage;
    const title = view.level === "beginner" ? plainTitle(stage, cross) : stage.title;
    let summary = null;
    if (kind === "attn.pattern") summary = headTiles(view, stage);
    else if (stage.value?.preview) summary = lastTokenStrip(stage, stage.value.shape[stage.value.shape.length - 1]);
    items.push(box({
      kind: boxKind(kind), title, detail: sizeText(stage, view.level), summary, pending: !revealed(stage.id),
      onClick: stage.trace ? () => view.onOpenStage(stage.id) : null,
    }));
  }
  return el("div", { class: "ov-block-steps" },
    el("button", { type: "button", class: "ov-back", onclick: () => onZoom("") }, "← the whole model"), items);
}
