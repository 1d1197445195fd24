// The page's smaller panels, each drawn from the store: the tokens (a vision model's image and
// patches), the architecture, the costs, the answer, the notebook views' links, the heads to
// change, generation, the explanations and what fine-tuning changed. main.js says when.

import { fetchTokenization } from "../core/api.js";
import { renderArchitecture } from "./architecture.js";
import { renderAttentionChange } from "./attention_change.js";
import { renderCosts } from "./costs.js";
import { renderExplain } from "./explain_panel.js";
import { renderGenerate } from "./generate.js";
import { renderInterventions } from "./interventions.js";
import { showMessage } from "../core/page_status.js";
import { renderPatchTokens } from "../image/patch_tokens.js";
import { renderPrediction } from "./prediction.js";
import { renderSentenceVector } from "./sentence_vector.js";
import { state, walkRequest } from "../core/state.js";
import { renderTokens } from "./tokens.js";
import { renderViewLinks } from "./views.js";

const $ = (id) => document.getElementById(id);

/** What /api/models says of the model walked now ({name, architecture, stages, ...}), or null. */
export function modelInfo() {
  const { models, walk } = state.get();
  return models.find((m) => m.name === walk?.model) ?? null;
}

/** The tokens; a vision model's patches, and its image beside what the model says of it. */
export function drawTokens(imageInput) {
  const { walk, level, image, sample, samples } = state.get();
  const { payload, model, text } = walk;
  $("tokens-title").textContent = payload.image ? "Tokens: [CLS] and the patches" : "Tokens";
  if (!payload.image) {
    renderTokens($("tokens"), payload, level, () => fetchTokenization(model, text));
    return;
  }
  renderPatchTokens($("tokens"), payload, level);
  const { classes, label } = payload.classification ?? { classes: [] };
  const answer = classes[label] ?? null; // what the model says, beside the image
  imageInput.show({ image, patchSize: payload.image.patch_size, sample, samples, answer });
}

export function drawArchitecture() {
  const { walk, level } = state.get();
  renderArchitecture($("architecture"), walk.payload, modelInfo(), level);
}

/** The costs, drawn anew for a new model only. */
export function drawCosts() {
  const { model } = state.get().walk;
  if ($("costs").dataset.for === model) return;
  $("costs").dataset.for = model;
  renderCosts($("costs"), model, modelInfo()?.max_seq_len ?? 1);
}

/** The answer panel: the next token (or a label), or a sentence encoder's sentence vector.
 * ``takeToken(id)``: the token clicked joins the generated ids. */
export function drawPrediction(takeToken) {
  const { walk, level } = state.get();
  if (walk.payload.architecture.sentence) {
    renderSentenceVector($("prediction"), { payload: walk.payload, model: walk.model, text: walk.text, level, showMessage });
  } else {
    renderPrediction($("prediction"), walk.payload, level, takeToken);
  }
}

export function drawViews() {
  const { walk, layer } = state.get();
  renderViewLinks($("views"), walk.model, walk.text, layer);
}

/** The heads to change; ``run()`` walks the changed model. */
export function drawInterventions(run) {
  const values = state.get();
  renderInterventions($("interventions"), values.walk.payload, values, ({ interventions, patch_text }) => {
    state.update({ interventions, patch_text: interventions.some((a) => a.mode === "patch") ? patch_text : "" });
    run();
  });
}

/** Whether ``panel`` already shows the walk's model and text; marks it as showing them. */
function showsText(panel) {
  const { model, text } = state.get().walk;
  const key = `${model}\n${text}`;
  if (panel.dataset.for === key) return true;
  panel.dataset.for = key;
  return false;
}

/** The generate panel, made anew only for a new model or text (a reply survives a level
 * switch); ``onStep(ids)``: a timeline step's generated ids, to walk. */
export function drawGenerate(onStep) {
  const panel = $("generate");
  if (showsText(panel)) return;
  const { payload } = state.get().walk;
  if (payload.prediction === null) {
    const why = payload.classification ? "A classifier answers with a label; it does not generate text." : "An encoder reads text but does not generate it.";
    panel.replaceChildren(document.createTextNode(why));
    return;
  }
  renderGenerate(panel, () => walkRequest(state.get()), showMessage, (step, ids) => onStep(ids));
}

/** The explanations panel, made anew only for a new model or text. */
export function drawExplain() {
  if (showsText($("explain"))) return;
  const { walk } = state.get();
  const classes = walk.payload.architecture.classifier?.classes ?? null;
  const encoder = Boolean(modelInfo()?.architecture.capabilities.sentence_encoder);
  renderExplain($("explain"), { model: walk.model, text: walk.text, encoder, classes });
}

/** What fine-tuning changed: shown for a model the server knows the origin of. */
export function drawChange() {
  const base = modelInfo()?.fine_tuned_from;
  $("change-panel").hidden = !base;
  if (!base || showsText($("change"))) return;
  const { walk } = state.get();
  renderAttentionChange($("change"), { model: walk.model, base, text: walk.text });
}
