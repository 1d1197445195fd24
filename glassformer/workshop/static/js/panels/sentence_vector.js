// A sentence encoder's answer: the sentence vector (its walk's last step, the pooled token
// vectors scaled to length 1) and how alike it is to a second sentence's, as the cosine of
// the two vectors (POST api/similarity: glassformer/workshop/reading/similarity.py).

import { fetchSimilarity } from "../core/api.js";
import { unpack } from "../core/arrays.js";
import { el } from "../core/dom.js";
import { number } from "../core/format.js";
import { vectorStrip } from "../views/strip.js";

const POOLING_WORDS = {
  mean: "the average of its token vectors",
  cls: "the first token's vector ([CLS])",
  pooler: "BERT's pooler applied to the first token's vector",
};
const SECOND_SENTENCE = "Someone is sitting on a rug.";

/** How alike, in words, for a cosine in [-1, 1]. */
function alikeWords(cosine) {
  if (cosine > 0.8) return "very close in meaning";
  if (cosine > 0.5) return "related";
  if (cosine > 0.2) return "loosely related";
  return "unrelated";
}

function strip(packed, label) {
  return vectorStrip(Array.from(unpack(packed).values), { width: 260, height: 18, label });
}

/** view: {payload, model, text, level, showMessage}. */
export function renderSentenceVector(container, { payload, model, text, level, showMessage }) {
  const heading = container.parentElement?.querySelector("h2");
  if (heading) heading.textContent = "The sentence vector";
  const { pooling } = payload.architecture.sentence;
  const d = payload.architecture.d_model;
  const tokens = payload.tokens.length;
  const answer = el("div", { class: "similarity", "aria-live": "polite" });
  const other = el("input", { type: "text", class: "similarity-other", value: SECOND_SENTENCE, "aria-label": "a second sentence", spellcheck: "false" });
  const compare = async () => {
    if (!other.value.trim()) return;
    answer.dataset.state = "loading";
    try {
      const reply = await fetchSimilarity(model, text, other.value);
      answer.replaceChildren(
        el("p", { class: "similarity-cosine" }, "cosine similarity ", el("strong", {}, number(reply.cosine, 3)),
          ` — ${alikeWords(reply.cosine)}`),
        el("div", { class: "similarity-strips" },
          el("span", {}, "your text"), strip(reply.vectors[0], `the sentence vector of your text, ${d} features`),
          el("span", {}, "second"), strip(reply.vectors[1], `the sentence vector of the second sentence, ${d} features`)),
        level !== "beginner" ? el("p", { class: "pred-facts" }, "cos(u, w) = u · w, both of length 1") : "",
      );
      answer.dataset.state = "ready";
    } catch (error) {
      answer.dataset.state = "error";
      showMessage(error.message);
    }
  };
  container.replaceChildren(
    el("p", { class: "hint" },
      `The model turns the whole text into one vector of ${d} numbers: ${POOLING_WORDS[pooling]} over the ${tokens} tokens, ` +
      "then scaled to length 1. Texts with a similar meaning get vectors that point the same way; their cosine is near 1."),
    el("form", { class: "similarity-form", onsubmit: (event) => { event.preventDefault(); compare(); } },
      el("label", { class: "field field-text" }, el("span", { class: "field-name" }, "compare with"), other),
      el("button", { type: "submit" }, "Compare")),
    answer,
  );
  container.dataset.ready = "1";
  compare();
}
