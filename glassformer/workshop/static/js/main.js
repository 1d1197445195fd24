// The page: read the setup from the URL, ask the server for the walk, draw it, and redraw
// what a change touches. The current settings, walk and view choices live here, in this
// module's few variables; every other module draws from what it is handed. A vision model
// reads an image instead of text (body[data-input="image"]): a held-out one or a drawing.

import { fetchLens, fetchModels, fetchSamples, fetchStage, fetchTokenization, fetchWalk } from "./api.js";
import { unpack } from "./arrays.js";
import { bindImageInput } from "./image_input.js";
import { renderImageAttention } from "./patch_attention.js";
import { namedTokens, renderPatchTokens } from "./patch_tokens.js";
import { blankImage, imageAt, imageCode, imageFromCode } from "./pixels.js";
import { renderArchitecture } from "./architecture.js";
import { renderOverview } from "./overview.js";
import { renderLines } from "./attention_lines.js";
import { bindControls } from "./controls.js";
import { stageDetail } from "./stage_detail.js";
import { inputKey, queryString, readSettings, walkRequest, writeSettings } from "./state.js";
import { renderInterventions } from "./interventions.js";
import { renderPrediction } from "./prediction.js";
import { renderSentenceVector } from "./sentence_vector.js";
import { createReveal } from "./reveal.js";
import { renderTokens } from "./tokens.js";
import { renderGenerate } from "./generate.js";
import { renderLens } from "./lens.js";
import { renderCompare } from "./compare.js";
import { renderExplain } from "./explain_panel.js";
import { renderAttentionChange } from "./attention_change.js";
import { renderCosts } from "./costs.js";
import { renderViewLinks } from "./views.js";
import { renderTour, tourStops } from "./tour.js";
import { firstBlock, renderWalk } from "./walk.js";

const $ = (id) => document.getElementById(id);
const panels = {
  tokens: $("tokens"),
  architecture: $("architecture"),
  overview: $("overview"),
  lines: $("lines"),
  walk: $("walk"),
  prediction: $("prediction"),
  views: $("views"),
  generate: $("generate"),
  interventions: $("interventions"),
  lens: $("lens"),
  compare: $("compare"),
  explain: $("explain"),
  change: $("change"),
};
const message = $("message");
const status = $("status");

let settings = readSettings(window.location.search); // read again with the sampling defaults
let models = [];
let samplingDefaults = {}; // the library's (glassformer.sampling.SAMPLING_DEFAULTS), from /api/models
let walk = null; // {payload, model, text, decoderText, input}: the walk drawn now, and what it was asked for
let generated = []; // a timeline step's walk: the generated ids its pass reads after the text
let openBlock = "";
let head = 0; // the head shown when a per-head step is opened
let walksDone = 0;
let lessonsByKind = new Map(); // a step's kind ("attn.pattern") -> the lessons that link to it
let latestRequest = 0; // a walk that answers after a newer one was asked is dropped
let image = null; // a vision model's image, the input of its pass ({shape, values}, pixels.js)
let samples = null; // its held-out images ({count, stack, labels, source}), or null
const samplesByModel = new Map(); // model -> Promise of its held-out images, fetched once
let painting = null; // the timer of a walk asked for a drawing (it waits for the painting to rest)
const PAINT_MS = 250;
const stageTensors = new Map(); // pass input + "\n" + name -> Promise of /api/stage's answer
// teaching mode: the walk revealed step by step, the block being revealed open
const reveal = settings.lock ? createReveal($("reveal"), () => {
  openRevealedBlock();
  drawWalk();
}) : null;

/** Open the block of the last step revealed, if it is in one. */
function openRevealedBlock() {
  const last = stageById(reveal.lastShown());
  if (last && last.layer !== null) openBlock = last.group;
}

function showMessage(text) {
  message.textContent = text;
  message.hidden = !text;
}

const SLOW_WALK_MS = 1000; // past this, the status counts the seconds a walk has taken
let ticking = null; // the timer that counts them

function setState(state, text) {
  document.body.dataset.state = state;
  status.textContent = text;
  clearInterval(ticking);
  ticking = null;
  if (state !== "loading") return;
  const started = performance.now(); // a long input's pass takes seconds: say it is under way
  ticking = setInterval(() => {
    const ms = performance.now() - started;
    if (ms >= SLOW_WALK_MS) status.textContent = `${text} ${Math.floor(ms / 1000)} s`;
  }, 250);
}

function loadStage(name) {
  const key = `${walk.inputKey}\n${name}`;
  if (!stageTensors.has(key)) {
    const request = fetchStage(walk.input, name);
    request.catch((error) => {
      stageTensors.delete(key);
      showMessage(error.message);
    });
    stageTensors.set(key, request);
  }
  return stageTensors.get(key);
}

/** The walk's stage ``id`` (its group, layer, kind...), or undefined (a tour's own stop). */
function stageById(id) {
  return walk.payload.stages.find((s) => s.id === id);
}

function modelInfo() {
  return models.find((m) => m.name === walk?.model) ?? null;
}

// drawing ------------------------------------------------------------------------------
/** Open step ``id`` (or close the open one: ""), and keep the keyboard's focus on its head:
 * the walk is drawn again, and focus would fall to the page's body. */
function selectStage(id) {
  const toggled = id || settings.stage;
  settings.stage = id;
  const stage = stageById(id);
  if (stage && stage.layer !== null) openBlock = stage.group;
  writeSettings(settings);
  drawWalk();
  panels.walk.querySelector(`.step[data-stage="${CSS.escape(toggled)}"] .step-head`)?.focus({ preventScroll: true });
}

// Escape closes what is open: an open <details> around the focus, else the step opened
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || event.target.closest?.("input, textarea, select")) return;
  const details = event.target.closest?.("details[open]");
  if (details) {
    details.open = false;
    details.querySelector("summary")?.focus();
  } else if (settings.stage && walk) {
    selectStage("");
  } else {
    return;
  }
  event.preventDefault();
});

function drawFullWalk() {
  renderWalk(panels.walk, {
    payload: walk.payload,
    level: settings.level,
    lessonsFor: (kind) => lessonsByKind.get(kind) ?? [],
    openBlock,
    selected: settings.stage,
    onOpenBlock: (group) => {
      openBlock = group;
      const openedStep = stageById(settings.stage);
      if (openedStep && openedStep.group !== group && openedStep.layer !== null) {
        settings.stage = "";
      }
      writeSettings(settings);
      drawWalk();
      const opened = panels.walk.querySelector(`.group[data-group="${CSS.escape(group)}"]`);
      opened?.scrollIntoView({ block: "nearest" });
      opened?.querySelector(".step-head")?.focus({ preventScroll: true }); // focus stays with the reader
    },
    onSelect: (id) => selectStage(id),
    detailFor,
  });
}

/** The steps the walk shows at this level: the tour's stops for a beginner, else every step. */
function walkSteps() {
  return settings.level === "beginner" ? tourStops(walk.payload) : walk.payload.stages;
}

function detailFor(stage) {
  return stageDetail({ stage, payload: walk.payload, level: settings.level, head, onHead: (h) => { head = h; }, loadStage, lens: walk.lens });
}

function drawWalk() {
  if (settings.level === "beginner") {
    const lessonsFor = (kind) => lessonsByKind.get(kind) ?? [];
    renderTour(panels.walk, { payload: walk.payload, selected: settings.stage, onSelect: selectStage, detailFor, lessonsFor });
  } else {
    drawFullWalk();
  }
  if (reveal) {
    reveal.apply(panels.walk);
    drawOverview(); // its boxes show their numbers once the reveal reaches them
    // the answer (and generating one) waits for the last step
    for (const id of ["prediction-panel", "generate-panel", "lens-panel", "compare-panel", "explain-panel"]) $(id).hidden = !reveal.done();
    // which words look at which: once the first attention weights are out
    $("lines-panel").hidden = !reveal.reached((id) => id.endsWith("attn.pattern"));
  }
}

/** Whether the teaching reveal has reached a step, by the steps' order in the pass: the tour
 * stops at a few of them, and its "other blocks" stop stands for every block of its stack. */
function revealedSteps() {
  if (!reveal || reveal.done()) return () => true;
  const order = walk.payload.stages.map((s) => s.id);
  const last = reveal.lastShown();
  let upto = order.indexOf(last);
  if (upto < 0 && last.endsWith("tour.others")) {
    const blocks = `${last.slice(0, -"tour.others".length)}blocks.`;
    upto = order.findLastIndex((id) => id.startsWith(blocks));
  }
  return (id) => order.indexOf(id) <= upto;
}

/** The whole model on one screen, zoomed as settings.zoom says (overview.js). */
function drawOverview() {
  renderOverview(panels.overview, {
    payload: walk.payload,
    level: settings.level,
    zoom: settings.zoom,
    loadStage,
    revealed: revealedSteps(),
    onZoom: (zoom) => {
      settings.zoom = zoom;
      writeSettings(settings);
      drawOverview();
      panels.overview.querySelector(".ov-back, .ov-box")?.focus({ preventScroll: true }); // focus stays in the picture
    },
    onOpenStage: (id) => {
      selectStage(id);
      panels.walk.querySelector(`.step[data-stage="${CSS.escape(id)}"]`)?.scrollIntoView({ block: "start" });
    },
  });
}

function drawLines() {
  if (settings.level !== "beginner") {
    panels.lines.replaceChildren();
    return;
  }
  const vision = Boolean(walk.payload.image);
  $("lines-title").textContent = vision ? "Where each token looks in the image" : "Which words look at which";
  if (vision) {
    const onChange = ({ layer }) => {
      settings.layer = layer;
      writeSettings(settings);
    };
    renderImageAttention(panels.lines, { payload: walk.payload, layer: settings.layer, loadStage, onChange });
    return;
  }
  renderLines(panels.lines, {
    payload: walk.payload,
    part: settings.linesPart,
    layer: settings.layer,
    loadStage,
    onChange: ({ part, layer }) => {
      settings.linesPart = part;
      settings.layer = layer;
      writeSettings(settings);
    },
  });
}

function drawAll() {
  document.body.dataset.level = settings.level;
  if (!walk) return;
  const { model, text } = walk;
  const vision = Boolean(walk.payload.image);
  $("tokens-title").textContent = vision ? "Tokens: [CLS] and the patches" : "Tokens";
  if (vision) {
    renderPatchTokens(panels.tokens, walk.payload, settings.level);
    const { classes, label } = walk.payload.classification ?? { classes: [] };
    const answer = classes[label] ?? null; // what the model says, beside the image
    imageInput.show({ image, patchSize: walk.payload.image.patch_size, sample: settings.sample, samples, answer });
  } else {
    renderTokens(panels.tokens, walk.payload, settings.level, () => fetchTokenization(model, text));
  }
  renderArchitecture(panels.architecture, walk.payload, modelInfo(), settings.level);
  if ($("costs").dataset.for !== walk.model) { // drawn anew for a new model only
    $("costs").dataset.for = walk.model;
    renderCosts($("costs"), walk.model, modelInfo()?.max_seq_len ?? 1);
  }
  drawLines();
  drawWalk();
  drawOverview();
  drawPrediction();
  renderViewLinks(panels.views, walk.model, walk.text, settings.layer);
  if (walk.lens) {
    renderLens(panels.lens, walk.lens, settings.level);
    drawCompare(latestRequest);
  }
  renderInterventions(panels.interventions, walk.payload, settings, ({ interventions, patch_text }) => {
    settings.interventions = interventions;
    settings.patch_text = interventions.some((a) => a.mode === "patch") ? patch_text : "";
    run({ keepGenerated: true });
  });
  drawGenerate();
  drawExplain();
  drawChange();
}

/** The answer panel: the next token (or a label), or a sentence encoder's sentence vector. */
function drawPrediction() {
  if (walk.payload.architecture.sentence) {
    renderSentenceVector(panels.prediction, { payload: walk.payload, model: walk.model, text: walk.text, level: settings.level, showMessage });
  } else {
    renderPrediction(panels.prediction, walk.payload, settings.level, takeToken);
  }
}

/** What fine-tuning changed: shown for a model the server knows the origin of. */
function drawChange() {
  const base = modelInfo()?.fine_tuned_from;
  $("change-panel").hidden = !base;
  const key = `${walk.model}\n${walk.text}`;
  if (!base || panels.change.dataset.for === key) return;
  panels.change.dataset.for = key;
  renderAttentionChange(panels.change, { model: walk.model, base, text: walk.text });
}

/** The explanations panel, made anew only for a new model or text. */
function drawExplain() {
  const key = `${walk.model}\n${walk.text}`;
  if (panels.explain.dataset.for === key) return;
  panels.explain.dataset.for = key;
  const info = modelInfo();
  const classes = walk.payload.architecture.classifier?.classes ?? null;
  const encoder = Boolean(info?.architecture.capabilities.sentence_encoder);
  renderExplain(panels.explain, { model: walk.model, text: walk.text, encoder, classes });
}

/** The logit lens of the walk just drawn (its own request: it does not depend on sampling). */
async function drawLens(ticket) {
  const hasHead = walk.payload.stages.some((s) => s.id === "logits");
  panels.lens.dataset.state = "loading";
  if (!hasHead) {
    panels.lens.replaceChildren(document.createTextNode("This model has no head to read its layers with."));
    panels.lens.dataset.state = "none";
    panels.compare.replaceChildren(document.createTextNode("The compare view reads both models with the logit lens: this one has no head."));
    return;
  }
  try {
    const lens = await fetchLens(walk.input);
    if (ticket !== latestRequest) return;
    walk.lens = lens;
    renderLens(panels.lens, lens, settings.level);
    panels.lens.dataset.state = "ready";
    // an opened stream step shows the lens at its layer; any other opened step keeps its place
    const opened = walk.payload.stages.find((s) => s.id === settings.stage);
    if (opened && settings.level !== "beginner" && lens.rows.some((r) => r.layer === opened.trace)) drawWalk();
  } catch (error) {
    if (ticket === latestRequest) showMessage(error.message);
    return;
  }
  drawCompare(ticket);
}

/** The models the lens can read (those with a head over the vocabulary). */
function lensModels() {
  return models.filter((m) => m.stages.some((s) => s.id === "logits")).map((m) => m.name);
}

/** The compare view: this walk's lens beside the lens of `settings.compare` on the same text. */
async function drawCompare(ticket) {
  const other = settings.compare;
  const options = {
    models: lensModels(),
    other,
    level: settings.level,
    onPick: (name) => {
      settings.compare = name;
      writeSettings(settings);
      drawCompare(latestRequest);
    },
  };
  renderCompare(panels.compare, { ...options, sides: walk.compared?.other === other ? walk.compared.sides : null });
  if (!other || !walk.lens || walk.compared?.other === other) return;
  const seq2seq = models.find((m) => m.name === other)?.architecture.capabilities.seq2seq;
  const input = { model: other, text: walk.text };
  if (seq2seq && walk.decoderText) input.decoder_text = walk.decoderText;
  if (other === walk.model && walk.input.generated) input.generated = walk.input.generated;
  try {
    const lens = await fetchLens(input);
    if (ticket !== latestRequest || settings.compare !== other) return;
    const changed = Boolean(walk.input.interventions);
    const sides = [
      { name: walk.model, label: changed ? `${walk.model} (with the interventions)` : walk.model, lens: walk.lens },
      { name: other, label: other === walk.model ? `${other} (as trained)` : other, lens },
    ];
    walk.compared = { other, sides };
    renderCompare(panels.compare, { ...options, sides });
  } catch (error) {
    if (ticket === latestRequest) showMessage(error.message);
  }
}

/** The generate panel, made anew only for a new model or text (a reply survives a level switch). */
function drawGenerate() {
  const key = `${walk.model}\n${walk.text}`;
  if (panels.generate.dataset.for === key) return;
  panels.generate.dataset.for = key;
  if (walk.payload.prediction === null) {
    const why = walk.payload.classification ? "A classifier answers with a label; it does not generate text." : "An encoder reads text but does not generate it.";
    panels.generate.replaceChildren(document.createTextNode(why));
    return;
  }
  renderGenerate(panels.generate, () => walkRequest(settings), showMessage, (step, ids) => {
    generated = ids;
    run({ keepGenerated: true });
  });
}

/** Token by token: the drawn token joins the generated ids, and the next step is walked. */
function takeToken(id) {
  generated = [...generated, id];
  run({ keepGenerated: true });
}

// a vision model's image -----------------------------------------------------------------
/** The image shape [C, H, W] of a model that reads images; null for one that reads text. */
function imageShape(name) {
  const v = models.find((m) => m.name === name)?.architecture.vision;
  return v ? [v.channels, v.image_size, v.image_size] : null;
}

/** A vision model's held-out images ({count, stack: n C H W, labels, source}), asked once. */
function loadSamples(name) {
  if (!samplesByModel.has(name)) {
    const request = fetchSamples(name).then((answer) => ({ ...answer, stack: answer.images ? unpack(answer.images) : null }));
    request.catch(() => samplesByModel.delete(name));
    samplesByModel.set(name, request);
  }
  return samplesByModel.get(name);
}

/** The image the settings name: a held-out one, a drawing from the link, the drawing on the
 * page (too large for a link), or, when none is named, the first held-out image. */
async function chooseImage(shape) {
  samples = await loadSamples(settings.model);
  const fits = (candidate) => candidate && candidate.shape.join() === shape.join();
  if (settings.sample !== null) {
    const known = samples.count && settings.sample < samples.count;
    image = known ? imageAt(samples.stack, settings.sample) : blankImage(shape); // the server names a bad one
  } else if (settings.pixels) {
    image = imageFromCode(settings.pixels, shape) ?? blankImage(shape);
  } else if (!fits(image)) {
    settings.sample = samples.count ? 0 : null;
    image = samples.count ? imageAt(samples.stack, 0) : blankImage(shape);
  }
}

const imageInput = bindImageInput($("image-input"), {
  // a drawing: walked once the painting rests, its code in the link (when it fits there)
  onImage: (drawn) => {
    image = drawn;
    settings.sample = null;
    settings.pixels = imageCode(drawn);
    clearTimeout(painting);
    painting = setTimeout(() => run(), PAINT_MS);
  },
  onSample: (index) => {
    settings.sample = index;
    settings.pixels = "";
    run();
  },
});

// running ------------------------------------------------------------------------------
/** Ask for the walk of the form's settings (and of the timeline step chosen, if
 * `keepGenerated`). A new input redraws everything; a sampling change only the prediction
 * (the forward pass is the same). */
async function run({ keepGenerated = false, push = true } = {}) {
  settings = { ...settings, ...controls.read() };
  if (!keepGenerated) generated = [];
  const seq2seq = models.find((m) => m.name === settings.model)?.architecture.capabilities.seq2seq;
  if (!seq2seq) settings.decoder_text = ""; // only an encoder-decoder's decoder reads one
  const shape = imageShape(settings.model);
  document.body.dataset.input = shape ? "image" : "text";
  if (shape) {
    settings.text = ""; // a vision model reads its image only
    try {
      await chooseImage(shape);
    } catch (error) {
      showMessage(error.message);
      image = image?.shape.join() === shape.join() ? image : blankImage(shape);
    }
  } else {
    settings.sample = null;
    settings.pixels = "";
    image = null; // back on a vision model, the first held-out image again
  }
  writeSettings(settings, { push }); // each run its own history entry: Back is the run before
  const request = walkRequest(settings, generated, shape ? image : null);
  const ticket = ++latestRequest;
  setState("loading", "running…");
  let payload;
  try {
    payload = await fetchWalk(request);
  } catch (error) {
    if (ticket !== latestRequest) return;
    showMessage(error.message);
    setState("error", "");
    return;
  }
  if (ticket !== latestRequest) return;
  showMessage("");
  if (payload.image) payload.tokens = namedTokens(payload.tokens); // "[CLS]", "patch 0,1": names, not text
  const key = inputKey(request);
  const sameInput = walk?.inputKey === key;
  const input = JSON.parse(key);
  walk = { payload, model: request.model, text: request.text, decoderText: request.decoder_text ?? "", input, inputKey: key };
  if (sameInput) {
    drawPrediction();
    drawOverview(); // the sampling box and the drawn token
  } else {
    const stages = payload.stages;
    const chosen = stages.find((s) => s.id === settings.stage);
    if (!chosen) settings.stage = "";
    if (reveal) {
      reveal.setStages(walkSteps());
      if (chosen) reveal.goTo(chosen.id); // a shared link's step: the reveal starts there
    }
    openBlock = chosen && chosen.layer !== null ? chosen.group : firstBlock(stages);
    if (reveal) openRevealedBlock();
    writeSettings(settings);
    drawAll();
    drawLens(ticket);
  }
  controls.setGenerates(Boolean(payload.prediction));
  controls.setSeq2seq(payload.decoder_tokens !== null);
  walksDone += 1;
  document.body.dataset.walks = String(walksDone);
  const n = payload.tokens.length;
  setState("ready", `${n} token${n === 1 ? "" : "s"} · ${payload.seconds.toFixed(2)} s`);
}

const controls = bindControls($("controls"), {
  onRun: () => run(),
  onSampling: () => run({ keepGenerated: true }), // the same pass: a timeline step stays
  onLevel: (level) => {
    settings.level = level;
    writeSettings(settings);
    if (walk) reveal?.setStages(walkSteps()); // the tour's stops, or every step
    drawAll();
  },
});

/** The lessons' catalog, as a map from a step's kind to the lessons that explain it. */
async function loadLessons() {
  try {
    const response = await fetch("api/lessons");
    if (!response.ok) return;
    const byKind = new Map();
    const known = new Map(models.flatMap((m) => m.stages).map((s) => [s.id, s])); // a lesson names a step by its id
    for (const lesson of await response.json()) {
      for (const id of lesson.stages) {
        const kind = known.get(id)?.kind;
        if (!kind) continue;
        if (!byKind.has(kind)) byKind.set(kind, []);
        if (!byKind.get(kind).includes(lesson)) byKind.get(kind).push(lesson);
      }
    }
    lessonsByKind = byKind;
    if (walk) drawWalk();
  } catch {
    // no lessons: the walk simply has no links to them
  }
}

async function start() {
  document.body.dataset.level = settings.level;
  try {
    ({ models, sampling: samplingDefaults } = await fetchModels());
  } catch (error) {
    showMessage(error.message);
    setState("error", "");
    return;
  }
  settings = readSettings(window.location.search, samplingDefaults);
  let notice = "";
  if (!models.some((m) => m.name === settings.model)) {
    if (settings.model) notice = `This workshop does not hold the model '${settings.model}' named in the link; showing '${models[0].name}'.`;
    settings.model = models[0].name;
  }
  loadLessons(); // not waited for: the walk links to them once they are known
  controls.setModels(models, settings.model);
  controls.setLocked(settings.lock);
  controls.show(settings);
  await run({ push: false }); // the link opened is the entry already
  if (notice && message.hidden) showMessage(notice);
}

// "Teach this": the page with this walk's teaching link (its token included: it opens in the
// class's fresh browsers), for the teacher to copy and share; this page never holds the token
$("teach").addEventListener("click", () => {
  window.location.href = new URL(`./teach${queryString({ ...settings, lock: true })}`, window.location.href).href;
});

// Back and Forward: the entry's settings, run again (not pushed: the entry is there)
window.addEventListener("popstate", () => {
  const entry = readSettings(window.location.search, samplingDefaults);
  if (!models.some((m) => m.name === entry.model)) entry.model = settings.model;
  settings = entry;
  document.body.dataset.level = settings.level;
  controls.setLocked(settings.lock);
  controls.show(settings);
  run({ push: false });
});

start();
