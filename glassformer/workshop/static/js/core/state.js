// The setup lives in the URL, so a teacher can share a link that opens on the same walk:
//   ?model=smollm2-135m-instruct&text=The+capital+of+France+is&level=beginner&temperature=0.8
// The page keeps them, and what it has drawn from them, in one store (`state`, below): the
// settings' keys as they are and the page's own (PAGE_DEFAULTS). A vision model's image is a
// held-out one (sample=12) or a drawing (pixels=00g0..., pixels.js).

import { imageRows } from "../image/pixels.js";

export const LEVELS = ["beginner", "intermediate", "advanced"];

// What a link that does not say otherwise opens on. The sampling defaults (temperature, top_p)
// are the library's, glassformer.sampling.SAMPLING_DEFAULTS, sent with /api/models: null
// until readSettings is given them. seed 0 is the facade's default too; top_k and the
// repetition penalty default to off.
export const DEFAULTS = Object.freeze({
  model: "",
  text: "The capital of France is",
  decoder_text: "", // an encoder-decoder's decoder text, after its start token
  level: "beginner",
  temperature: null, // the server's default
  top_k: null, // null = off
  top_p: null, // the server's default; 1 = off
  repetition_penalty: 1,
  seed: 0,
  stage: "", // the expanded step, by id
  zoom: "", // the overview's zoom: "" (the model), "blocks.3", "blocks.3.attn:2" (a head), "blocks.3.attn:2:5"
  layer: null, // the layer of "which words look at which"
  linesPart: "", // which attention those lines show (T5: encoder, decoder, cross); not in the URL
  lock: false, // teaching mode: the form locked, the walk revealed step by step; in the URL as lock=1
  // heads changed: [{layer, head, mode: "zero" | "mean" | "scale" | "patch", factor?}];
  // in the URL as intervene=1.2.zero,0.3.scale*0.5,1.0.patch
  interventions: [],
  patch_text: "", // the second prompt a patched head's output comes from
  compare: "", // the model the compare view runs beside this one
  sample: null, // a vision model's image: a held-out digit, by index (glassformer/workshop/walk/images.py)
  pixels: "", // ... or one drawn on the page, as pixels.js's URL code
});

const INTERVENTION = /^(\d+)\.(\d+)\.(zero|mean|patch|scale)(?:\*(-?[0-9.]+(?:e[+-]?\d+)?))?$/;

/** "1.2.zero,0.3.scale*0.5" -> [{layer: 1, head: 2, mode: "zero"}, ...]; unreadable items are dropped. */
export function parseInterventions(text) {
  if (!text) return [];
  return text.split(",").map((item) => INTERVENTION.exec(item)).filter(Boolean).map(([, layer, head, mode, factor]) => {
    const item = { layer: Number(layer), head: Number(head), mode };
    if (mode === "scale") item.factor = parseNumber(factor);
    return item;
  }).filter((a) => a.mode !== "scale" || Number.isFinite(a.factor));
}

export function interventionsText(interventions) {
  return interventions.map((a) => `${a.layer}.${a.head}.${a.mode}${a.mode === "scale" ? `*${a.factor}` : ""}`).join(",");
}

export const SAMPLING_KEYS = ["temperature", "top_k", "top_p", "repetition_penalty", "seed"];
const NUMBER_KEYS = [...SAMPLING_KEYS, "layer", "sample"];
const INTEGER_KEYS = new Set(["top_k", "seed", "layer", "sample"]);

/** A number from a text field or URL value: null when empty, NaN when not a number. */
export function parseNumber(text, integer = false) {
  if (text === null || text === undefined || String(text).trim() === "") return null;
  const value = Number(text);
  if (!Number.isFinite(value)) return NaN;
  return integer && !Number.isInteger(value) ? NaN : value;
}

/** Settings from a query string; a missing or unreadable value keeps its default.
 * `sampling`: the library's sampling defaults, {temperature, top_p} (/api/models' "sampling"). */
export function readSettings(search, sampling = {}) {
  const params = new URLSearchParams(search);
  const settings = { ...DEFAULTS };
  for (const key of SAMPLING_KEYS) if (sampling[key] !== undefined) settings[key] = sampling[key];
  for (const key of ["model", "text", "decoder_text", "stage", "zoom", "patch_text", "compare", "pixels"]) {
    if (params.has(key)) settings[key] = params.get(key);
  }
  if (LEVELS.includes(params.get("level"))) settings.level = params.get("level");
  settings.interventions = parseInterventions(params.get("intervene"));
  settings.lock = params.get("lock") === "1";
  for (const key of NUMBER_KEYS) {
    if (!params.has(key)) continue;
    const value = parseNumber(params.get(key), INTEGER_KEYS.has(key));
    if (!Number.isNaN(value)) settings[key] = value;
  }
  return settings;
}

/** The query string of ``settings`` (empty values left out). */
export function queryString(settings) {
  const params = new URLSearchParams();
  for (const key of ["model", "text", "decoder_text", "level", ...NUMBER_KEYS, "pixels", "stage", "zoom", "patch_text", "compare"]) {
    const value = settings[key];
    if (value === null || value === undefined || value === "") continue;
    params.set(key, String(value));
  }
  if (settings.interventions?.length) params.set("intervene", interventionsText(settings.interventions));
  if (settings.lock) params.set("lock", "1");
  return `?${params}`;
}

/** Put ``settings`` in the address bar without reloading: as a new history entry when
 * `push` (a run: Back returns to the one before), else in place of the current one. */
export function writeSettings(settings, { push = false } = {}) {
  const query = queryString(settings);
  if (query === window.location.search) return;
  if (push) window.history.pushState(null, "", query);
  else window.history.replaceState(null, "", query);
}

/** What a forward pass reads: model, text, and what changes it (the fields /api/walk,
 * /api/stage and /api/lens share). `generated`: ids a generation appended (a timeline step).
 * `image`: a vision model's image (pixels.js), sent as its rows unless it is settings.sample. */
export function passInput(settings, generated = [], image = null) {
  const input = { model: settings.model };
  if (!image) input.text = settings.text;
  else if (settings.sample !== null) input.sample = settings.sample;
  else input.pixels = imageRows(image);
  if (settings.decoder_text) input.decoder_text = settings.decoder_text;
  if (generated.length) input.generated = generated;
  if (settings.interventions?.length) {
    input.interventions = settings.interventions;
    if (settings.interventions.some((a) => a.mode === "patch")) input.patch_text = settings.patch_text;
  }
  return input;
}

/** The body of POST /api/walk: the pass's input and the sampling settings. */
export function walkRequest(settings, generated = [], image = null) {
  const request = passInput(settings, generated, image);
  for (const key of SAMPLING_KEYS) request[key] = settings[key];
  return request;
}

/** The pass input part of a walk request (the sampling fields left out), as a stable key. */
export function inputKey(request) {
  const input = { ...request };
  for (const key of SAMPLING_KEYS) delete input[key];
  return JSON.stringify(input);
}

// The page's own keys, beside the settings. A walk is {payload, model, text, decoderText,
// input, inputKey}: the pass drawn now and what it was asked for.
export const PAGE_DEFAULTS = Object.freeze({
  models: [], // /api/models: each model's name, sizes, architecture and stages
  samplingDefaults: {}, // the library's (glassformer.sampling.SAMPLING_DEFAULTS), from /api/models
  walk: null, // the walk drawn now; a new one for every answer, sampling changes included
  pass: "", // its pass input, as a key (inputKey): changes only when the forward pass does
  asked: 0, // walks asked for: an answer to an older one is dropped
  generated: [], // a timeline step's walk: the generated ids its pass reads after the text
  openBlock: "", // the walk's open block, by group
  revealed: 0, // teaching mode: how many steps are out
  head: 0, // the head shown when a per-head step is opened
  lessonsByKind: new Map(), // a step's kind ("attn.pattern") -> the lessons that link to it
  lens: null, // the logit lens of this pass (/api/lens), once it has come
  lensInWalk: null, // the lens, when the walk's opened step shows it (the walk is drawn again)
  compared: null, // the compare view's two lenses: {other, sides}
  image: null, // a vision model's image, the input of its pass ({shape, values}, pixels.js)
  samples: null, // its held-out images ({count, stack, labels, source}), or null
});

/** A store: `get()` the current values (one object, never changed in place), `update(patch)`
 * merges ``patch`` and calls each subscriber of a key whose value changed, once, in the order
 * they subscribed; `subscribe(keys, fn)`: fn(values) after a change to any of ``keys``. */
export function createStore(initial) {
  let values = { ...initial };
  const subscribers = [];
  return {
    get: () => values,
    update(patch) {
      const changed = Object.keys(patch).filter((key) => patch[key] !== values[key]);
      values = { ...values, ...patch };
      if (!changed.length) return;
      for (const { keys, fn } of subscribers) if (keys.some((key) => changed.includes(key))) fn(values);
    },
    subscribe(keys, fn) {
      subscribers.push({ keys, fn });
    },
  };
}

/** The page's one store: the settings (read from the URL once the server's sampling defaults
 * are known) and the page's own keys. */
export const state = createStore({ ...DEFAULTS, ...PAGE_DEFAULTS });
