// What the overview's model ends with, after its last stack: an LM head's likeliest next
// tokens and the sampling that picked one (payload.prediction), a classifier's label
// (payload.classification), a sentence vector (architecture.sentence, the "sentence.vector"
// step) or a masked-LM head's guesses (payload.masked); the output group's steps open in the walk.

import { el } from "../core/dom.js";
import { percent, quoted } from "../core/format.js";
import { plainTitle } from "../walk/levels.js";
import { box, arrow, lastTokenStrip } from "./overview_box.js";

const TOP_TOKENS = 3;

function samplingWords(settings) {
  if (settings.greedy) return "greedy: the likeliest";
  const topK = settings.top_k ? ` · top-k ${settings.top_k}` : "";
  const topP = settings.top_p < 1 ? ` · top-p ${settings.top_p}` : "";
  return `temperature ${settings.temperature}${topK}${topP}`;
}

function lmHead(view, last, pending) {
  const { payload } = view;
  const { head, vocab_size: vocab } = payload.architecture;
  const top = payload.prediction.steps[0].top.slice(0, TOP_TOKENS);
  const { settings, token } = payload.prediction;
  const capped = head.softcap ? `, soft-capped: ${head.softcap} · tanh(z / ${head.softcap})` : "";
  return [
    box({
      kind: "head", title: "LM head", detail: `scores for all ${vocab.toLocaleString("en")} tokens${capped}`,
      summary: el("ol", { class: "ov-top" }, top.map((e) => el("li", {}, `${quoted(e.token)} ${percent(e.p, 1)}`))),
      pending, onClick: () => view.onOpenStage(last.id),
    }),
    arrow(),
    box({ kind: "sample", title: "Sampling", detail: samplingWords(settings), summary: el("span", { class: "ov-token" }, quoted(token.text)), pending }),
  ];
}

/** The boxes of the model's output, in order. */
export function outputBoxes(view) {
  const { payload, revealed } = view;
  const arch = payload.architecture;
  const stages = payload.stages.filter((s) => s.group === "output");
  const last = stages[stages.length - 1];
  const pending = last ? !revealed(last.id) : false;
  const open = (stage) => () => view.onOpenStage(stage.id);
  if (payload.prediction) return lmHead(view, last, pending);
  if (payload.classification) {
    const { classes, label } = payload.classification;
    const chosen = el("span", { class: "ov-token" }, `${classes[label].label} ${percent(classes[label].p, 1)}`);
    return stages.flatMap((stage, i) => [
      ...(i ? [arrow()] : []),
      box({
        kind: "head", title: plainTitle(stage), pending: !revealed(stage.id), onClick: open(stage),
        summary: stage.kind === "classifier.logits" ? chosen : lastTokenStrip(stage, arch.d_model),
      }),
    ]);
  }
  if (arch.sentence) {
    const vector = stages.find((s) => s.kind === "sentence.vector");
    return [box({ kind: "head", title: "The sentence vector", detail: `${arch.sentence.pooling} pooling, then length 1`,
      summary: lastTokenStrip(vector, arch.d_model), pending, onClick: open(vector) })];
  }
  const guesses = (payload.masked?.positions ?? []).slice(0, TOP_TOKENS);
  const guessed = (g) => el("li", {}, `${g.position}: ${quoted(g.top[0].token)} ${percent(g.top[0].p, 1)}`);
  return stages.map((stage) => box({
    kind: "head", title: "Masked-LM head", detail: `a score for each of ${arch.vocab_size.toLocaleString("en")} words at each position`,
    pending: !revealed(stage.id), onClick: open(stage), summary: el("ol", { class: "ov-top" }, guesses.map(guessed)),
  }));
}
