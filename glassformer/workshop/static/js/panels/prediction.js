// The prediction panel: the next-token pipeline of payload.prediction, step by step
// (logits -> repetition penalty -> temperature -> top-k -> top-p), each as the likeliest
// tokens with their probabilities over the whole vocabulary and how many are still kept,
// then the token drawn. Encoders do not generate: the panel says so.

import { el } from "../core/dom.js";
import { percent, quoted, tokenText } from "../core/format.js";
import { codeLine } from "../walk/levels.js";

const SHOWN = { beginner: 5, intermediate: 10, advanced: 12 };
const DECIMALS = { beginner: 1, intermediate: 2, advanced: 2 };

const PLAIN_TITLES = {
  logits: () => "What the model thinks comes next",
  repetition: (s) => `Tokens already in the text made less likely (penalty ${s.repetition_penalty})`,
  temperature: (s) => `Temperature ${s.temperature}: ${s.temperature < 1 ? "sharper, safer" : s.temperature > 1 ? "flatter, more surprising" : "unchanged"}`,
  top_k: (s) => `Only the ${s.top_k} likeliest tokens kept`,
  top_p: (s) => `Only the likeliest tokens that add up to ${percent(s.top_p, 0)} kept`,
};

/** What the panel answers: a classifier's label, a generator's next token, or what an
 * encoder gives instead (a vector per token; words for its masked positions). */
function panelTitle(payload) {
  if (payload.classification) return "The label";
  if (payload.prediction) return "The next token";
  const hasHead = payload.stages.some((s) => s.id === "logits");
  return hasHead ? "What an encoder predicts" : "What a sentence encoder gives";
}

const MASKED_SHOWN = { beginner: 8, intermediate: 64, advanced: 64 }; // positions listed without a mask token

/** An MLM encoder's answer (payload.masked): the words its head puts at each mask token, or
 * at every position when the text has none. */
function maskedView(masked, level) {
  const rows = masked.positions.slice(0, masked.masked ? undefined : MASKED_SHOWN[level]);
  const how = masked.masked
    ? `At each ${masked.mask_token} the masked-LM head scores every word; the likeliest:`
    : masked.mask_token
      ? `Put ${masked.mask_token} in your text where a word should be guessed. Without one, here is the word the head reads at each position (it sees the word itself, so it mostly agrees):`
      : "This model's tokenizer has no mask token; here is the word its head reads at each position (it sees the word itself, so it mostly agrees):";
  return [
    el("p", { class: "hint" }, how),
    ...rows.map((row) => el("section", { class: "pred-step masked-position", dataset: { position: row.position } },
      el("h3", { class: "pred-title" }, `position ${row.position}: ${quoted(row.token)}`),
      bars({ top: row.top }, row.top[0]?.id, level))),
    masked.positions.length > rows.length ? el("p", { class: "hint" }, `… and ${masked.positions.length - rows.length} more positions at the intermediate level.`) : "",
  ];
}

function noPrediction(payload) {
  const can = payload.architecture.capabilities;
  const hasHead = can.has_lm_head;
  const text = !can.generates && !payload.classification
    ? "This model is an encoder: it reads the whole text at once, in both directions, and gives one vector per " +
      "token. Encoders do not generate text, so there is no next token to predict." +
      (hasHead ? " Its masked-LM head (the logits step) scores the words that could stand at each position." : "")
    : "This model does not predict a next token.";
  return el("p", { class: "no-prediction" }, text);
}

/** The likeliest tokens of one step of the pipeline as bars, the chosen one marked. */
export function bars(step, chosenId, level) {
  const decimals = DECIMALS[level];
  return el(
    "ol",
    { class: "bars" },
    step.top.slice(0, SHOWN[level]).map((entry) =>
      el(
        "li",
        { class: `bar-row${entry.id === chosenId ? " chosen" : ""}${entry.p === 0 ? " dropped" : ""}`, dataset: { id: entry.id } },
        el("span", { class: "bar-token", title: `id ${entry.id}` }, tokenText(entry.token)),
        el("span", { class: "bar-track" }, el("span", { class: "bar", style: { width: `${(100 * entry.p).toFixed(2)}%` } })),
        el("span", { class: "bar-p" }, percent(entry.p, decimals)),
        level === "advanced" ? el("span", { class: "bar-id" }, entry.id) : null,
      ),
    ),
  );
}

function stepView(step, prediction, level, vocab) {
  const settings = prediction.settings;
  const title = level === "beginner" ? (PLAIN_TITLES[step.name]?.(settings) ?? step.text) : step.text;
  const kept = step.kept === vocab
    ? `all ${vocab.toLocaleString("en")} tokens possible`
    : `${step.kept.toLocaleString("en")} of ${vocab.toLocaleString("en")} tokens kept`;
  const facts = [kept];
  if (level !== "beginner") facts.push(`entropy ${step.entropy.toFixed(3)} nats`);
  const code = level === "advanced" ? codeLine(step.code) : null;
  return el(
    "section",
    { class: "pred-step", dataset: { step: step.name, kept: step.kept } },
    el("h3", { class: "pred-title" }, title),
    el("p", { class: "pred-facts" }, facts.join(" · "),
      code ? [" · ", code] : null),
    bars(step, prediction.token.id, level),
  );
}

function chosenView(prediction, payload, level) {
  const { settings, token } = prediction;
  const how = settings.greedy
    ? "temperature 0 is greedy: the likeliest token is taken."
    : `drawn at random from the last distribution${settings.seed === null ? "" : ` (seed ${settings.seed}: the same seed draws the same token)`}.`;
  const tokens = payload.decoder_tokens ?? payload.tokens;
  const context = level === "beginner"
    ? el("p", { class: "continuation" },
      el("span", { class: "continuation-text" }, payload.read ?? tokens.map((t) => t.text).join("")),
      el("mark", { class: "continuation-next" }, token.text))
    : null;
  return el(
    "div",
    { class: "pred-token", dataset: { id: token.id } },
    el("div", { class: "pred-token-line" }, "Next token: ", el("strong", { class: "pred-token-text" }, quoted(token.text)),
      level === "advanced" ? el("span", { class: "bar-id" }, ` id ${token.id}`) : null),
    el("p", { class: "hint" }, how),
    context,
  );
}

/** A held-out image's true label beside the model's (a vision model's walk of a sample). */
function truth(image, predicted) {
  if (image?.label === null || image?.label === undefined) return null;
  const right = image.label === predicted;
  return el("p", { class: `pred-truth ${right ? "right" : "wrong"}`, dataset: { truth: image.label } },
    `Held-out image #${image.sample} is a handwritten ${image.label}: the model is ${right ? "right" : "wrong"}.`);
}

/** A classifier's answer (payload.classification): each label's probability, the argmax chosen;
 * for a held-out image, its true label too. */
function classificationView(classification, level, image = null) {
  const { classes, label } = classification;
  const entries = classes
    .map((c, id) => ({ id, token: c.label, p: c.p, logit: c.logit }))
    .sort((a, b) => b.p - a.p);
  const step = { top: entries };
  return [
    el("p", { class: "hint" }, level === "beginner"
      ? "A classifier does not predict a next token: it gives each label a probability."
      : "softmax of the class logits z = p W_c + b_c (the last step of the walk)"),
    bars(step, label, level),
    level !== "beginner"
      ? el("p", { class: "pred-facts" }, entries.map((e) => `${e.token}: logit ${e.logit.toFixed(3)}`).join(" · "))
      : null,
    el("div", { class: "pred-token pred-label", dataset: { label: classes[label].label } },
      el("div", { class: "pred-token-line" }, "Label: ", el("strong", { class: "pred-token-text" }, classes[label].label))),
    truth(image, classes[label].label),
  ];
}

/** Draw payload.prediction (or a classifier's label, or why there is none) into ``container``;
 * `onTake(id)`, when given, offers to feed the drawn token back in: the walk of the next step. */
export function renderPrediction(container, payload, level, onTake = null) {
  const prediction = payload.prediction;
  const heading = container.parentElement?.querySelector("h2");
  if (heading) heading.textContent = panelTitle(payload);
  if (payload.classification) {
    container.replaceChildren(...classificationView(payload.classification, level, payload.image).filter(Boolean));
    container.dataset.temperature = "";
    container.dataset.ready = "1";
    return;
  }
  if (!prediction) {
    container.replaceChildren(...(payload.masked ? maskedView(payload.masked, level) : [noPrediction(payload)]));
    container.dataset.temperature = "";
    container.dataset.ready = "1";
    return;
  }
  const vocab = payload.architecture.vocab_size;
  const intro = level === "beginner"
    ? el("p", { class: "hint" }, "The model gives every token in its vocabulary a probability; your settings then reshape that list before one token is picked.")
    : null;
  container.replaceChildren(
    intro ?? "",
    ...prediction.steps.map((step) => stepView(step, prediction, level, vocab)),
    chosenView(prediction, payload, level),
    onTake ? el("button", {
      type: "button",
      class: "pred-take",
      title: "append the drawn token to the input (its id, not its text) and walk the next step",
      onclick: () => onTake(prediction.token.id),
    }, `Next step: feed ${quoted(prediction.token.text)} back in`) : "",
  );
  const settings = prediction.settings;
  Object.assign(container.dataset, {
    temperature: settings.temperature,
    topK: settings.top_k ?? "",
    topP: settings.top_p ?? "",
    token: prediction.token.id,
    ready: "1",
  });
}
