// Change attention heads in place and watch the prediction move. Each changed head's output
// z (before W_O) is replaced (glassformer/workshop/walk/interventions.py, by the library's hooks
// in glassformer.inspect.interventions), and the whole walk is run again with it:
//   zero   the head writes nothing
//   mean   its average output over the positions, at every position
//   scale  its output times a factor (0 = zero, 2 = twice as loud)
//   patch  its output on a second prompt, position by position (activation patching)

import { el } from "../core/dom.js";

const MODES = [
  ["zero", "zero: the head writes nothing"],
  ["mean", "mean: the head writes its average output at every position"],
  ["scale", "scale: the head's output times a factor"],
  ["patch", "patch: the head's output on a second prompt (same number of tokens)"],
];

function describe(item) {
  if (item.mode === "scale") return `× ${item.factor}`;
  if (item.mode === "patch") return "patched from the second prompt";
  return item.mode === "zero" ? "zeroed" : "mean-ablated";
}

/**
 * The panel in `node` for `payload`'s model. `state`: {interventions, patch_text};
 * `onChange({interventions, patch_text})` runs the walk with the new ones.
 */
export function renderInterventions(node, payload, state, onChange) {
  const { heads } = payload.architecture.attention;
  const layers = payload.architecture.stacks[0].layers;
  const { interventions } = state;
  const number = (label, max) => el("input", { type: "number", min: "0", max: String(max), value: "0", "aria-label": label, class: `iv-${label}` });
  const layer = number("layer", layers - 1);
  const head = number("head", heads - 1);
  const mode = el("select", { "aria-label": "mode", class: "iv-mode" }, MODES.map(([value, title]) => el("option", { value, title }, value)));
  const factor = el("input", { type: "number", step: "0.1", value: "2", "aria-label": "factor", class: "iv-factor" });
  const factorField = el("label", { class: "iv-factor-field" }, "× ", factor);
  const patchText = el("input", {
    type: "text",
    value: state.patch_text || (payload.decoder_tokens ? payload.tokens.map((t) => t.text).join("") : payload.read),
    spellcheck: "false",
    "aria-label": "second prompt",
    class: "iv-patch-text",
    title: "the prompt whose head outputs are put in: it must have as many tokens as the text",
  });
  const patchField = el("label", { class: "iv-patch-field" }, "second prompt ", patchText);
  const showFields = () => {
    factorField.hidden = mode.value !== "scale";
    patchField.hidden = mode.value !== "patch" && !interventions.some((a) => a.mode === "patch");
  };
  mode.addEventListener("change", showFields);
  const apply = el("button", {
    type: "button",
    class: "iv-add",
    onclick: () => {
      const item = { layer: Number(layer.value), head: Number(head.value), mode: mode.value };
      if (item.mode === "scale") item.factor = Number(factor.value);
      const others = interventions.filter((a) => a.layer !== item.layer || a.head !== item.head);
      onChange({ interventions: [...others, item], patch_text: patchText.value });
    },
  }, "apply");
  const list = interventions.map((a, i) => el("li", { class: "iv-item", dataset: { layer: a.layer, head: a.head, mode: a.mode } },
    `layer ${a.layer}, head ${a.head}: ${describe(a)} `,
    el("button", {
      type: "button",
      class: "iv-remove",
      onclick: () => onChange({ interventions: interventions.filter((_, j) => j !== i), patch_text: patchText.value }),
    }, "restore")));
  const stack = payload.architecture.stacks[0].name;
  showFields();
  node.replaceChildren(
    el("p", { class: "hint" }, `Change an attention head${stack ? ` of the ${stack}` : ""} and run the walk again: every step after it, the logits and the drawn token change.`),
    el("div", { class: "iv-controls" }, el("label", {}, "layer ", layer), el("label", {}, "head ", head), mode, factorField, apply),
    patchField,
    list.length ? el("ul", { class: "iv-list" }, list) : el("p", { class: "hint" }, "Every head runs as trained."),
  );
}
