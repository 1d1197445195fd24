// The logit lens of the walk drawn now (its own request: it does not depend on sampling), and
// the compare view: this walk's lens beside another model's (`compare`) on the same text.

import { fetchLens } from "../core/api.js";
import { renderCompare } from "./compare.js";
import { renderLens } from "./lens.js";
import { showMessage } from "../core/page_status.js";
import { state, writeSettings } from "../core/state.js";

const lensPanel = document.getElementById("lens");
const comparePanel = document.getElementById("compare");

/** Ask for the lens of the walk just drawn; it is the store's `lens` once it comes, unless a
 * newer walk was asked for meanwhile. */
export async function loadLens() {
  const { walk, asked } = state.get();
  lensPanel.dataset.state = "loading";
  if (!walk.payload.stages.some((s) => s.id === "logits")) {
    lensPanel.replaceChildren(document.createTextNode("This model has no head to read its layers with."));
    lensPanel.dataset.state = "none";
    comparePanel.replaceChildren(document.createTextNode("The compare view reads both models with the logit lens: this one has no head."));
    return;
  }
  try {
    const lens = await fetchLens(walk.input);
    if (asked !== state.get().asked) return;
    // an opened stream step shows the lens at its layer (the walk is drawn again); any other opened step keeps its place
    const { stage, level } = state.get();
    const opened = walk.payload.stages.find((s) => s.id === stage);
    const shown = opened && level !== "beginner" && lens.rows.some((row) => row.layer === opened.trace);
    state.update({ lens, ...(shown ? { lensInWalk: lens } : {}) });
  } catch (error) {
    if (asked === state.get().asked) showMessage(error.message);
  }
}

/** The lens panel, once the lens has come. */
export function drawLens() {
  const { lens, level } = state.get();
  if (!lens) return;
  renderLens(lensPanel, lens, level);
  lensPanel.dataset.state = "ready";
}

/** The models the lens can read (those with a head over the vocabulary). */
function lensModels(models) {
  return models.filter((m) => m.stages.some((s) => s.id === "logits")).map((m) => m.name);
}

/** The compare view, once this walk's lens has come; the other model's lens is asked for
 * when it is not there yet. */
export function drawCompare() {
  const { lens, compare: other, compared, models, level } = state.get();
  if (!lens) return;
  const onPick = (name) => {
    state.update({ compare: name });
    writeSettings(state.get());
  };
  const sides = compared?.other === other ? compared.sides : null;
  renderCompare(comparePanel, { models: lensModels(models), other, level, onPick, sides });
  if (other && !sides) compareWith(other);
}

async function compareWith(other) {
  const { walk, lens, models, asked } = state.get();
  const seq2seq = models.find((m) => m.name === other)?.architecture.capabilities.seq2seq;
  const input = { model: other, text: walk.text };
  if (seq2seq && walk.decoderText) input.decoder_text = walk.decoderText;
  if (other === walk.model && walk.input.generated) input.generated = walk.input.generated;
  try {
    const otherLens = await fetchLens(input);
    if (asked !== state.get().asked || state.get().compare !== other) return;
    const changed = Boolean(walk.input.interventions);
    const sides = [
      { name: walk.model, label: changed ? `${walk.model} (with the interventions)` : walk.model, lens },
      { name: other, label: other === walk.model ? `${other} (as trained)` : other, lens: otherLens },
    ];
    state.update({ compared: { other, sides } });
  } catch (error) {
    if (asked === state.get().asked) showMessage(error.message);
  }
}
