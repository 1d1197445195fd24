// The whole model on one screen: a diagram of this model's own architecture, drawn from the
// payload's stages and architecture summary (architecture.py), with this pass's numbers in
// its boxes. Four zoom levels, each a click deeper, each in the URL (settings.zoom; its text
// read and written by overview_zoom.js):
//   the model   tokens → embedding → the block × N → the head → the token (overview_model.js)
//   one block   its steps, with each attention head as a tile (overview_block.js)
//   one head    its attention map, and query · key for one query, chosen or not (overview_head.js)
// A box whose step the teaching reveal has not reached yet is drawn without its numbers.
// A vision model's tokens are its image cut into patches; a head's weights are laid on it too.

import { el } from "../core/dom.js";
import { blockView } from "./overview_block.js";
import { headView } from "./overview_head.js";
import { modelView } from "./overview_model.js";
import { readZoom, zoomText } from "./overview_zoom.js";

/** The way back out: Model › Block 3 › head 2 › query · key, each a button but the last. */
function crumbs(view, zoom) {
  const parts = [["Model", ""]];
  const block = zoom.block ? view.payload.stages.find((s) => s.group === zoom.block) : null; // its first step says its layer and stack
  if (zoom.block) parts.push([`Block ${block?.layer ?? null}${block?.stack ? ` (${block.stack})` : ""}`, zoom.block]);
  if (zoom.pattern) {
    parts.push([`${zoom.pattern.cross ? "cross-attention " : ""}head ${zoom.head}`, zoomText({ ...zoom, query: null })]);
    if (zoom.query !== null) parts.push(["query · key", zoomText(zoom)]);
  }
  return el("nav", { class: "ov-crumbs", "aria-label": "zoom" }, parts.map(([label, target], i) => [
    i ? el("span", { "aria-hidden": "true" }, " › ") : null,
    i === parts.length - 1
      ? el("span", { class: "ov-crumb current", "aria-current": "location" }, label)
      : el("button", { type: "button", class: "ov-crumb", onclick: () => view.onZoom(target) }, label),
  ]));
}

/**
 * view: {payload, level, zoom (its text), onZoom(zoom text), onOpenStage(id), loadStage(name) -> Promise,
 *        revealed(id) -> bool (teaching mode: whether the reveal has reached a step)}
 */
export function renderOverview(container, view) {
  const zoom = readZoom(view.zoom, view.payload.stages);
  let body;
  if (zoom.pattern) body = headView(view, zoom);
  else if (zoom.block) body = blockView(view, zoom.block);
  else body = modelView(view);
  container.replaceChildren(crumbs(view, zoom), body);
  container.dataset.zoom = view.zoom || "model";
}
