// A mixture of experts' routing, under the map of the router's scores (<block>.ffn.router_probs,
// t n: the tokens × experts map) and read with the experts each token chose
// (<block>.ffn.experts, t k) and their weights (<block>.ffn.expert_weights, t k):
//   at one token   a bar per expert, its score; the chosen ones marked, with their weight w
//   over all       each expert's load: how many of the t tokens chose it, in red past a
//                  capacity of 1.25 t k / n (what a capacity would drop; this model drops none)
// A click on a row of the map, or on a token here, picks the token.

import { unpack } from "../core/arrays.js";
import { el } from "../core/dom.js";
import { number, quoted, tokenText } from "../core/format.js";

const BAR_WIDTH = 140; // px for a score of 1
const CAPACITY_FACTOR = 1.25; // glassformer/nn/moe.py CAPACITY_FACTOR: room for 1.25 even shares

/** The trace names of the router's sibling steps in the same block: {experts, weights}. */
export function routingTraces(router, stages) {
  const sibling = (kind) => stages.find((s) => s.group === router.group && s.kind === kind)?.trace;
  return { experts: sibling("ffn.experts"), weights: sibling("ffn.expert_weights") };
}

function scoreBars(scores, chosen, weights, level) {
  const rows = Array.from(scores, (score, expert) => {
    const slot = chosen.indexOf(expert);
    const picked = slot >= 0;
    const note = picked
      ? (level === "beginner" ? `chosen, counts ${number(weights[slot], 3)}` : `w = ${number(weights[slot], 3)}`)
      : "";
    return el(
      "div",
      { class: picked ? "moe-expert chosen" : "moe-expert", dataset: { expert: expert, chosen: String(picked) } },
      el("span", { class: "moe-name" }, `expert ${expert}`),
      el("span", { class: "moe-track" }, el("span", { class: "moe-bar", style: { width: `${Math.max(1, BAR_WIDTH * score)}px` } })),
      el("span", { class: "moe-score" }, number(score, 3)),
      el("span", { class: "moe-weight" }, note),
    );
  });
  return el("div", { class: "moe-scores", role: "list" }, rows);
}

function loadBars(chosen, experts, tokens) {
  const [t, k] = chosen.shape;
  const load = new Array(experts).fill(0);
  for (let i = 0; i < t * k; i += 1) load[chosen.values[i]] += 1;
  const even = (t * k) / experts;
  const capacity = CAPACITY_FACTOR * even;
  const largest = Math.max(...load, capacity) || 1;
  const rows = load.map((n, expert) =>
    el(
      "div",
      { class: "moe-load-row", dataset: { expert, load: n } },
      el("span", { class: "moe-name" }, `expert ${expert}`),
      el("span", { class: "moe-track" }, el("span", { class: n > capacity ? "moe-bar over" : "moe-bar", style: { width: `${Math.max(1, (BAR_WIDTH * n) / largest)}px` } })),
      el("span", { class: "moe-score" }, `${n} of ${t} tokens`),
    ));
  return el("div", { class: "moe-load" },
    el("div", { class: "moe-title" },
      `Load: tokens per expert (an even share is ${number(even, 3)}; red: past a capacity of ${number(capacity, 3)})`), rows);
}

/**
 * options: {array (t n router scores), tokens, level, loadStage(name) -> Promise, traces (routingTraces), onToken(row)}
 * Returns {element, show(row)}.
 */
export function moeRoutingView({ array, tokens, level, loadStage, traces, onToken }) {
  const [t, n] = array.shape;
  const element = el("div", { class: "moe-routing" }, el("p", { class: "loading" }, "loading the routing…"));
  let routing = null;
  let row = t - 1;
  const draw = () => {
    if (!routing) return;
    const { chosen, weights } = routing;
    const k = chosen.shape[1];
    const scores = array.values.subarray(row * n, row * n + n);
    const picked = Array.from(chosen.values.subarray(row * k, row * k + k));
    const who = quoted(tokenText(tokens[row]?.text ?? "?"));
    const words = level === "beginner"
      ? `Token ${who} (${row}) gives every expert a score and sends itself to the ${k} best.`
      : `Token ${who} (${row}): router scores over ${n} experts; the top ${k} are chosen, weights w.`;
    const picker = el("select", {
      class: "moe-token",
      "aria-label": "the token whose routing is shown",
      onchange: (event) => onToken(Number(event.target.value)),
    }, Array.from({ length: t }, (_, i) => el("option", { value: i, selected: i === row }, `${i}: ${tokenText(tokens[i]?.text ?? "?")}`)));
    element.replaceChildren(
      el("p", { class: "moe-caption" }, words, " ", picker),
      scoreBars(scores, picked, weights.values.subarray(row * k, row * k + k), level),
      loadBars(chosen, n, tokens),
    );
    element.dataset.token = row;
    element.dataset.ready = "1";
  };
  Promise.all([loadStage(traces.experts), loadStage(traces.weights)]).then(
    ([experts, weights]) => {
      routing = { chosen: unpack(experts.value), weights: unpack(weights.value) };
      draw();
    },
    (error) => element.replaceChildren(el("p", { class: "error" }, `the routing could not be loaded: ${error.message ?? error}`)),
  );
  return {
    element,
    show(picked) {
      row = picked;
      draw();
    },
  };
}
