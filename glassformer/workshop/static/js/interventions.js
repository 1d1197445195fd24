// Switch attention heads off and watch the prediction move: each ablated head's output z
// is replaced by zeros or by its mean over the positions (glassformer.inspect.interventions,
// head_ablation_hook), and the whole walk is run again with it.

import { el } from "./dom.js";

const MODES = [
  ["zero", "zero: the head writes nothing"],
  ["mean", "mean: the head writes its average output at every position"],
];

/** The panel in `node` for `payload`'s model; `onChange(list)` runs the walk with a new list. */
export function renderInterventions(node, payload, ablate, onChange) {
  const { heads } = payload.architecture.attention;
  const layers = payload.architecture.stacks[0].layers;
  const layer = el("input", { type: "number", min: "0", max: String(layers - 1), value: "0", "aria-label": "layer", class: "abl-layer" });
  const head = el("input", { type: "number", min: "0", max: String(heads - 1), value: "0", "aria-label": "head", class: "abl-head" });
  const mode = el("select", { "aria-label": "mode", class: "abl-mode" }, MODES.map(([value, title]) => el("option", { value, title }, value)));
  const add = el("button", {
    type: "button",
    class: "abl-add",
    onclick: () => {
      const item = { layer: Number(layer.value), head: Number(head.value), mode: mode.value };
      const others = ablate.filter((a) => a.layer !== item.layer || a.head !== item.head);
      onChange([...others, item]);
    },
  }, "ablate");
  const list = ablate.map((a, i) => el("li", { class: "abl-item", dataset: { layer: a.layer, head: a.head } },
    `layer ${a.layer}, head ${a.head} (${a.mode}) `,
    el("button", { type: "button", class: "abl-remove", onclick: () => onChange(ablate.filter((_, j) => j !== i)) }, "restore")));
  const stack = payload.architecture.stacks[0].name;
  node.replaceChildren(
    el("p", { class: "hint" }, `Switch off an attention head${stack ? ` of the ${stack}` : ""} and run the walk again: every step after it, the logits and the drawn token change.`),
    el("div", { class: "abl-controls" }, el("label", {}, "layer ", layer), el("label", {}, "head ", head), mode, add),
    list.length ? el("ul", { class: "abl-list" }, list) : el("p", { class: "hint" }, "No head is switched off."),
  );
}
