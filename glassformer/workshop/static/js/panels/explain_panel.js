// Why this prediction? Two attribution methods side by side on the same prediction
// (POST api/explain, glassformer/workshop/reading/explanations.py): the probability of the next
// token (default: the model's top choice; a sentence encoder: the similarity to a second
// sentence; a classifier: the probability of a label, default the one it chose), each token coloured by its score, with what each method assumes and where
// methods part. Asked on demand: LIME and SHAP run the model hundreds of times.

import { el } from "../core/dom.js";
import { number, tokenText } from "../core/format.js";
import { divergingColour } from "../../viz/colours.js";

const EXPLAIN_URL = "api/explain";
const SINK_WORDS = "a decoder's first token soaks up attention (the sink): integrated gradients only adds up with it held fixed";
const METHODS = [["ig", "integrated gradients"], ["lime", "LIME"], ["shap", "SHAP"], ["occlusion", "occlusion"], ["gxi", "gradient × input"]];

async function fetchExplanation(body) {
  const response = await fetch(EXPLAIN_URL, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error);
  return answer;
}

function row(answer) {
  const finite = answer.scores.filter((v) => v !== null);
  const extent = Math.max(1e-12, ...finite.map(Math.abs));
  const chips = answer.tokens.map((token, i) => {
    const score = answer.scores[i];
    const [r, g, b] = score === null ? [235, 235, 235] : divergingColour(score, extent);
    const title = score === null ? "no score" : `${number(score, 4)}`;
    return el("span", { class: "xp-token", style: { background: `rgb(${r} ${g} ${b})` }, dataset: { score: score ?? "" }, title }, tokenText(token));
  });
  return el("div", { class: "xp-row", dataset: { method: answer.method } },
    el("h3", {}, answer.method),
    el("div", { class: "xp-tokens" }, chips),
    el("p", { class: "hint" }, answer.assumes),
    answer.notes.length ? el("p", { class: "hint" }, answer.notes.join(" ")) : "");
}

/** The panel in `node` for the walk's {model, text}: `encoder` (a sentence encoder: the target
 * is a second sentence) or `classes` (a classifier's labels: the target is one of them). */
export function renderExplain(node, { model, text, encoder, classes = null }) {
  const pick = (value) => el("select", { class: "xp-method", "aria-label": "method" }, METHODS.map(([v, name]) => el("option", { value: v, selected: v === value }, name)));
  const first = pick("ig");
  const second = pick("lime");
  const target = classes
    ? el("select", { class: "xp-target", "aria-label": "target" }, el("option", { value: "" }, "the label it chose"), classes.map((c) => el("option", { value: c }, c)))
    : el("input", { type: "text", class: "xp-target", "aria-label": "target", placeholder: encoder ? "a second sentence" : "the top prediction" });
  const keep = el("input", { type: "checkbox", class: "xp-keep", "aria-label": "hold the first token fixed" });
  const out = el("div", { class: "xp-out" });
  const go = el("button", { type: "button", class: "xp-go", onclick: async () => {
    node.dataset.state = "loading";
    out.replaceChildren(el("p", { class: "loading" }, "explaining… (LIME and SHAP run the model many times)"));
    try {
      const answers = [];
      for (const method of [first.value, second.value]) {
        const body = { model, text, method, keep_first: keep.checked };
        if (target.value) body.target = target.value;
        answers.push(await fetchExplanation(body));
      }
      out.replaceChildren(
        el("p", { class: "xp-what" }, `Explaining ${answers[0].what}${answers[0].score === null ? "" : ` = ${number(answers[0].score, 4)}`}. Orange: the token raises it; blue: lowers it.`),
        ...answers.map(row),
        el("p", { class: "hint" }, answers[0].disagreement));
      node.dataset.state = "ready";
    } catch (error) {
      out.replaceChildren(el("p", { class: "error-inline" }, error.message));
      node.dataset.state = "error";
    }
  } }, "Explain");
  node.replaceChildren(
    el("p", { class: "hint" }, "Which tokens made this prediction? Two methods side by side on the same score."),
    el("div", { class: "xp-controls" }, first, second, target,
      el("label", { title: SINK_WORDS }, keep, " hold the first token fixed"), go),
    out);
  node.dataset.state = "none";
}
