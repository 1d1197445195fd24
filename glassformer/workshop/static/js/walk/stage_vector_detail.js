// An opened step with no token axis: a classifier's one vector (stage.shape "d" or "c"), from
// its whole tensor (POST /api/stage): the pooled features as one row, or each label's logit
// with its softmax probability (the labels from architecture.classifier.classes).

import { unpack } from "../core/arrays.js";
import { el } from "../core/dom.js";
import { number, percent } from "../core/format.js";
import { heatmap } from "../views/heatmap.js";
import { tokenLabels } from "./stage_map_words.js";

/** Each label's logit z and softmax(z), as a table. */
function classLogits(values, classes) {
  const top = Math.max(...values);
  const exp = Array.from(values, (z) => Math.exp(z - top));
  const total = exp.reduce((a, b) => a + b, 0);
  const row = (label, k) =>
    el("tr", { dataset: { label } }, el("th", {}, label), el("td", {}, `z = ${number(values[k])}`), el("td", {}, percent(exp[k] / total, 2)));
  return [
    el("p", { class: "detail-caption" }, "One logit z per label; softmax(z) is the probability the prediction panel shows."),
    el("table", { class: "class-logits" }, classes.map(row)),
  ];
}

/** The pooled vector's first ``shown`` features, as one row. */
function pooledFeatures(values, shown) {
  const cols = Math.min(values.length, shown);
  return [
    el("p", { class: "detail-caption" }, `One vector for the whole text: its first ${cols} of ${values.length} features.`),
    heatmap({
      values: values.slice(0, cols), rows: 1, cols, rowLabels: ["pooled"], colLabels: tokenLabels(null, cols),
      rowTitle: "", colTitle: "features", describe: (r, c, v) => `feature ${c}: ${number(v)}`,
    }),
  ];
}

/** Draw the vector into ``root`` when it arrives (data-ready set); returns root. */
export function vectorDetail(root, stage, payload, loadStage, shown) {
  const body = el("div", { class: "detail-body" }, el("p", { class: "loading" }, "loading the whole tensor…"));
  root.append(body);
  loadStage(stage.trace).then((answer) => {
    const { values } = unpack(answer.value);
    const classes = payload.architecture.classifier?.classes;
    body.replaceChildren(...(stage.shape === "c" ? classLogits(values, classes) : pooledFeatures(values, shown)));
    root.dataset.ready = "1";
  }, (error) => {
    body.replaceChildren(el("p", { class: "error-inline" }, error.message));
    root.dataset.ready = "error";
  });
  return root;
}
