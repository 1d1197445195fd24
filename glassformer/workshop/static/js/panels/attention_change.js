// What fine-tuning changed (POST api/attention_change, glassformer/workshop/reading/attention_change.py):
// the passage through the pretrained model and its fine-tuned copy; a grid of every head's
// shift (Jensen-Shannon distance of its attention rows: 0 = the same, 1 = disjoint), the
// most moved heads listed, and one head's two patterns side by side. Click a cell or a
// listed head to draw that head.

import { unpack } from "../core/arrays.js";
import { css, unitColour } from "../../viz/colours.js";
import { el } from "../core/dom.js";
import { number, tokenText } from "../core/format.js";
import { heatmap } from "../views/heatmap.js";

const CHANGE_URL = "api/attention_change";

async function fetchChange(body) {
  const response = await fetch(CHANGE_URL, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error);
  return answer;
}

function shiftGrid(answer, pick) {
  const largest = Math.max(1e-9, ...answer.shift.flat());
  const heads = answer.shift[0].length;
  return el("table", { class: "shift-grid" },
    el("thead", {}, el("tr", {}, el("th", {}, ""), Array.from({ length: heads }, (_, h) => el("th", {}, `h${h}`)))),
    el("tbody", {}, answer.shift.map((row, layer) => el("tr", {}, el("th", {}, `layer ${layer}`), row.map((value, head) => {
      const chosen = layer === answer.layer && head === answer.head;
      return el("td", {}, el("button", {
        type: "button",
        class: `shift-cell${chosen ? " chosen" : ""}`,
        dataset: { layer, head, shift: value },
        title: `layer ${layer} head ${head}: moved ${number(value, 3)}`,
        style: { background: css(unitColour(value / largest)), color: value / largest > 0.6 ? "white" : "black" },
        onclick: () => pick(layer, head),
      }, number(value, 2)));
    })))));
}

function pattern(packed, tokens, title) {
  const { shape, values } = unpack(packed);
  const labels = tokens.map(tokenText);
  return el("figure", { class: "change-pattern" },
    el("figcaption", {}, title),
    heatmap({ values, rows: shape[0], cols: shape[1], rowLabels: labels, colLabels: labels, scale: "unit", square: true,
      rowTitle: "queries", colTitle: "keys",
      describe: (r, c, v) => `${tokenText(tokens[r])} → ${tokenText(tokens[c])}: ${number(v, 3)}` }));
}

/** The panel in `node` for the walk's {model, text} against the model it was fine-tuned from. */
export function renderAttentionChange(node, { model, base, text }) {
  const out = el("div", { class: "change-out" });
  const load = async (layer = null, head = null) => {
    node.dataset.state = "loading";
    out.replaceChildren(el("p", { class: "loading" }, "running both models…"));
    try {
      const body = { model, base, text };
      if (layer !== null) Object.assign(body, { layer, head });
      const answer = await fetchChange(body);
      out.replaceChildren(
        el("p", { class: "hint" },
          "How far each head's attention moved (Jensen-Shannon distance of each query's row, averaged; 0 = the same, " +
          `1 = disjoint). Most moved: ${answer.ranked.slice(0, 3).map((r) => `layer ${r.layer} head ${r.head} (${number(r.shift, 3)})`).join(", ")}.`),
        shiftGrid(answer, load),
        el("div", { class: "change-pair", dataset: { layer: answer.layer, head: answer.head } },
          pattern(answer.before, answer.tokens, `${base} (pretrained): layer ${answer.layer} head ${answer.head}`),
          pattern(answer.after, answer.tokens, `${model} (fine-tuned): layer ${answer.layer} head ${answer.head}`)),
      );
      node.dataset.state = "ready";
    } catch (error) {
      out.replaceChildren(el("p", { class: "error-inline" }, error.message));
      node.dataset.state = "error";
    }
  };
  node.replaceChildren(
    el("p", { class: "hint" }, `The same passage through ${base} and through ${model}, fine-tuned from it: which heads changed what they attend to?`),
    el("button", { type: "button", class: "change-go", onclick: () => load() }, "Compare their attention"),
    out);
  node.dataset.state = "none";
}
