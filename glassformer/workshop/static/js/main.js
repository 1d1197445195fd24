// The page: read the setup from the URL, ask the server for the walk, draw it, and redraw
// what a change touches. Everything the page knows lives in one store (state.js: the settings
// and the walk); each panel below names the store's keys it is drawn from, and is drawn again
// when one of them changes. A vision model reads an image instead of text
// (body[data-input="image"]): a held-out one or a drawing (image_source.js).

import { classSettings, joinClass, startClass } from "./class/class.js";
import { fetchModels, fetchWalk } from "./core/api.js";
import { bindControls } from "./panels/controls.js";
import { bindImageSource, chooseImage, imageShape } from "./image/image_source.js";
import { drawCompare, drawLens, loadLens } from "./panels/lens_compare.js";
import { messageShown, setStatus, showMessage } from "./core/page_status.js";
import * as panels from "./panels/page_panels.js";
import { drawQuantization } from "./panels/quantization.js";
import { namedTokens } from "./image/patch_tokens.js";
import { blankImage } from "./image/pixels.js";
import { inputKey, queryString, readSettings, state, walkRequest, writeSettings } from "./core/state.js";
import { firstBlock } from "./walk/walk.js";
import { drawLines, drawOverview, drawWalk, reveal, revealedBlock, walkSteps } from "./walk/walk_panels.js";

const $ = (id) => document.getElementById(id);

/** Token by token: the drawn token joins the generated ids, and the next step is walked. */
function takeToken(id) {
  state.update({ generated: [...state.get().generated, id] });
  run({ keepGenerated: true });
}

/** A timeline step's walk: the ids a generation appended, walked after the text. */
function walkGenerated(ids) {
  state.update({ generated: ids });
  run({ keepGenerated: true });
}

// The panels, in the order they are drawn, and the store's keys each is drawn from: `pass`
// changes with a new forward pass, `walk` with every answer (a sampling change too). A panel
// without `always` waits for the first walk.
const PANELS = [
  { keys: ["level"], draw: () => { document.body.dataset.level = state.get().level; }, always: true },
  { keys: ["pass", "level"], draw: () => panels.drawTokens(imageInput) },
  { keys: ["pass", "level"], draw: panels.drawArchitecture },
  { keys: ["pass"], draw: panels.drawCosts },
  { keys: ["pass", "level"], draw: drawLines },
  { keys: ["pass", "level", "stage", "openBlock", "revealed", "lessonsByKind", "lensInWalk"], draw: drawWalk },
  { keys: ["walk", "level", "zoom"], draw: drawOverview },
  { keys: ["walk", "level"], draw: () => panels.drawPrediction(takeToken) },
  { keys: ["pass", "level"], draw: panels.drawViews },
  { keys: ["lens", "level"], draw: drawLens },
  { keys: ["lens", "level", "compare", "compared"], draw: drawCompare },
  { keys: ["pass", "level"], draw: () => panels.drawInterventions(() => run({ keepGenerated: true })) },
  { keys: ["pass", "level"], draw: () => panels.drawGenerate(walkGenerated) },
  { keys: ["pass", "level"], draw: panels.drawExplain },
  { keys: ["pass", "level"], draw: panels.drawChange },
  { keys: ["pass", "stage"], draw: drawQuantization },
];
for (const panel of PANELS) {
  state.subscribe(panel.keys, () => {
    if (panel.always || state.get().walk) panel.draw();
  });
}

const imageInput = bindImageSource($("image-input"), () => run());

/** The settings' image: a vision model's (the store's `image`, `sample`, `samples`), or none. */
async function readImage(shape) {
  if (!shape) return { sample: null, pixels: "", image: null }; // back on a vision model, the first held-out image again
  try {
    return { text: "", ...(await chooseImage(shape)) }; // a vision model reads its image only
  } catch (error) {
    showMessage(error.message);
    const { image } = state.get();
    return { text: "", image: image?.shape.join() === shape.join() ? image : blankImage(shape) };
  }
}

/** Ask for the walk of the form's settings (and of the timeline step chosen, if
 * `keepGenerated`). A new input redraws everything; a sampling change only the prediction
 * and the overview (the forward pass is the same). */
async function run({ keepGenerated = false, push = true } = {}) {
  state.update({ ...controls.read(), ...(keepGenerated ? {} : { generated: [] }) });
  const { models, model } = state.get();
  if (!models.find((m) => m.name === model)?.architecture.capabilities.seq2seq) state.update({ decoder_text: "" }); // only an encoder-decoder's decoder reads one
  const shape = imageShape(models, model);
  document.body.dataset.input = shape ? "image" : "text";
  state.update(await readImage(shape));
  writeSettings(state.get(), { push }); // each run its own history entry: Back is the run before
  const request = walkRequest(state.get(), state.get().generated, shape ? state.get().image : null);
  const asked = state.get().asked + 1;
  state.update({ asked });
  setStatus("loading", "running…");
  let payload;
  try {
    payload = await fetchWalk(request);
  } catch (error) {
    if (asked !== state.get().asked) return;
    showMessage(error.message);
    setStatus("error", "");
    return;
  }
  if (asked !== state.get().asked) return;
  showMessage("");
  if (payload.image) payload.tokens = namedTokens(payload.tokens); // "[CLS]", "patch 0,1": names, not text
  const pass = inputKey(request);
  const walk = { payload, model: request.model, text: request.text, decoderText: request.decoder_text ?? "", input: JSON.parse(pass), inputKey: pass };
  if (pass === state.get().pass) {
    state.update({ walk }); // the same forward pass: the sampling box and the drawn token
  } else {
    const chosen = payload.stages.find((s) => s.id === state.get().stage);
    if (reveal) {
      reveal.setStages(walkSteps(payload, state.get().level));
      if (chosen) reveal.goTo(chosen.id); // a shared link's step: the reveal starts there
    }
    const openBlock = chosen && chosen.layer !== null ? chosen.group : firstBlock(payload.stages);
    const fresh = { lens: null, lensInWalk: null, compared: null }; // this pass's lens is asked for below
    state.update({ walk, pass, stage: chosen ? chosen.id : "", openBlock, ...revealedBlock(payload.stages), ...fresh });
    writeSettings(state.get());
    loadLens();
  }
  controls.setGenerates(Boolean(payload.prediction));
  controls.setSeq2seq(payload.decoder_tokens !== null);
  document.body.dataset.walks = String(Number(document.body.dataset.walks ?? 0) + 1);
  const n = payload.tokens.length;
  setStatus("ready", `${n} token${n === 1 ? "" : "s"} · ${payload.seconds.toFixed(2)} s`);
}

/** Another level: the reveal's steps are the tour's stops or every step. */
function setLevel(level) {
  const { walk } = state.get();
  if (walk) reveal?.setStages(walkSteps(walk.payload, level)); // the tour's stops, or every step
  state.update({ level });
  writeSettings(state.get());
}

const controls = bindControls($("controls"), {
  onRun: () => run(),
  onSampling: () => run({ keepGenerated: true }), // the same pass: a timeline step stays
  onLevel: setLevel,
});

// A class (class/class.js): what this page shows as the class's keys, and a student's page
// drawing the teacher's state, or handed back to the student to explore
const CLASS_KEYS = ["model", "text", "level", "revealed", "stage", "zoom", "walk"];
const classHooks = {
  current: () => {
    const { model, text, level, stage, zoom } = state.get();
    return { model, text, level, step: reveal ? reveal.count() : 1, stage: stage || null, zoom: zoom ?? "" };
  },
  onChange: (fn) => state.subscribe(CLASS_KEYS, () => state.get().walk && fn()),
  async show(teacher) {
    const now = state.get();
    const settings = { ...now, model: teacher.model, text: teacher.text, ...(teacher.sampling ?? {}) };
    controls.show({ ...settings, level: teacher.level });
    if (teacher.level !== now.level) setLevel(teacher.level);
    if (!now.walk || teacher.model !== now.model || teacher.text !== now.text) await run({ push: false });
    reveal?.show(teacher.step ?? 1);
    const chosen = state.get().walk?.payload.stages.find((s) => s.id === teacher.stage);
    state.update({ stage: chosen ? chosen.id : "", zoom: teacher.zoom ?? "", ...(chosen?.layer != null ? { openBlock: chosen.group } : {}) });
    writeSettings(state.get());
  },
  explore(on) {
    controls.setLocked(!on);
    reveal?.setDriven(on);
    if (on) reveal?.show(Infinity); // the whole walk, the student's own
  },
};

/** The lessons' catalog, as a map from a step's kind to the lessons that explain it. A lesson
 * names a step by its id: its kind is what any model's step of that id says. */
async function loadLessons() {
  try {
    const response = await fetch("api/lessons");
    if (!response.ok) return;
    const known = new Map(state.get().models.flatMap((m) => m.stages).map((s) => [s.id, s]));
    const byKind = new Map();
    for (const lesson of await response.json()) {
      for (const kind of lesson.stages.map((id) => known.get(id)?.kind).filter(Boolean)) {
        if (!byKind.has(kind)) byKind.set(kind, []);
        if (!byKind.get(kind).includes(lesson)) byKind.get(kind).push(lesson);
      }
    }
    state.update({ lessonsByKind: byKind });
  } catch {
    // no lessons: the walk simply has no links to them
  }
}

async function start() {
  document.body.dataset.level = readSettings(window.location.search).level;
  let answer;
  try {
    answer = await fetchModels();
  } catch (error) {
    showMessage(error.message);
    setStatus("error", "");
    return;
  }
  const { models, sampling: samplingDefaults, class: classRuns } = answer;
  const joined = classRuns ? await joinClass() : null; // a student's page opens where the class is
  const settings = classSettings(readSettings(window.location.search, samplingDefaults), joined);
  if (settings.lock && !readSettings(window.location.search).lock) {
    window.location.replace(queryString(settings)); // a student follows in teaching mode: its reveal
    return;
  }
  let notice = "";
  if (!models.some((m) => m.name === settings.model)) {
    if (settings.model) notice = `This workshop does not hold the model '${settings.model}' named in the link; showing '${models[0].name}'.`;
    settings.model = models[0].name;
  }
  state.update({ models, samplingDefaults, ...settings });
  loadLessons(); // not waited for: the walk links to them once they are known
  controls.setModels(models, settings.model);
  controls.setLocked(settings.lock);
  controls.show(settings);
  await run({ push: false }); // the link opened is the entry already
  if (notice && !messageShown()) showMessage(notice);
  if (joined) startClass(joined, classHooks); // a class's panel, or a student's page following
}

// "Teach this": the page with this walk's teaching link (its token included: it opens in the
// class's fresh browsers), for the teacher to copy and share; this page never holds the token
$("teach").addEventListener("click", () => {
  window.location.href = new URL(`./teach${queryString({ ...state.get(), lock: true })}`, window.location.href).href;
});

// Back and Forward: the entry's settings, run again (not pushed: the entry is there)
window.addEventListener("popstate", () => {
  const entry = readSettings(window.location.search, state.get().samplingDefaults);
  if (!state.get().models.some((m) => m.name === entry.model)) entry.model = state.get().model;
  state.update(entry);
  controls.setLocked(entry.lock);
  controls.show(entry);
  run({ push: false });
});

start();
