// The setup lives in the URL, so a teacher can share a link that opens on the same walk:
//   ?model=smollm2-135m-instruct&text=The+capital+of+France+is&level=beginner&temperature=0.8
// Settings are a plain object passed around; only main.js keeps the current one.

export const LEVELS = ["beginner", "intermediate", "advanced"];

// The library's sampling defaults (glassformer.sampling.SAMPLING_DEFAULTS, seed 0).
export const DEFAULTS = Object.freeze({
  model: "",
  text: "The capital of France is",
  decoder_text: "", // an encoder-decoder's decoder text, after its start token
  level: "beginner",
  temperature: 0.8,
  top_k: null, // null = off
  top_p: 0.95, // 1 = off
  repetition_penalty: 1,
  seed: 0,
  stage: "", // the expanded step, by id
  layer: null, // the layer of "which words look at which"
  linesPart: "", // which attention those lines show (T5: encoder, decoder, cross); not in the URL
  lock: false, // teaching mode: the form locked, the walk revealed step by step; in the URL as lock=1
  ablate: [], // heads switched off: [{layer, head, mode: "zero" | "mean"}]; in the URL as 1.2.zero,...
});

const ABLATION_MODES = ["zero", "mean"];

/** "1.2.zero,0.3.mean" -> [{layer: 1, head: 2, mode: "zero"}, ...]; unreadable items are dropped. */
export function parseAblations(text) {
  if (!text) return [];
  return text.split(",").map((item) => {
    const [layer, head, mode = "zero"] = item.split(".");
    return { layer: parseNumber(layer, true), head: parseNumber(head, true), mode };
  }).filter((a) => Number.isInteger(a.layer) && Number.isInteger(a.head) && ABLATION_MODES.includes(a.mode));
}

export function ablationsText(ablate) {
  return ablate.map((a) => `${a.layer}.${a.head}.${a.mode}`).join(",");
}

export const SAMPLING_KEYS = ["temperature", "top_k", "top_p", "repetition_penalty", "seed"];
const NUMBER_KEYS = [...SAMPLING_KEYS, "layer"];
const INTEGER_KEYS = new Set(["top_k", "seed", "layer"]);

/** A number from a text field or URL value: null when empty, NaN when not a number. */
export function parseNumber(text, integer = false) {
  if (text === null || text === undefined || String(text).trim() === "") return null;
  const value = Number(text);
  if (!Number.isFinite(value)) return NaN;
  return integer && !Number.isInteger(value) ? NaN : value;
}

/** Settings from a query string; a missing or unreadable value keeps its default. */
export function readSettings(search) {
  const params = new URLSearchParams(search);
  const settings = { ...DEFAULTS };
  for (const key of ["model", "text", "decoder_text", "stage"]) {
    if (params.has(key)) settings[key] = params.get(key);
  }
  if (LEVELS.includes(params.get("level"))) settings.level = params.get("level");
  settings.ablate = parseAblations(params.get("ablate"));
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
  for (const key of ["model", "text", "decoder_text", "level", ...NUMBER_KEYS, "stage"]) {
    const value = settings[key];
    if (value === null || value === undefined || value === "") continue;
    params.set(key, String(value));
  }
  if (settings.ablate?.length) params.set("ablate", ablationsText(settings.ablate));
  if (settings.lock) params.set("lock", "1");
  return `?${params}`;
}

/** Put ``settings`` in the address bar without reloading or adding a history entry. */
export function writeSettings(settings) {
  const query = queryString(settings);
  if (query !== window.location.search) window.history.replaceState(null, "", query);
}

/** The body of POST /api/walk. */
export function walkRequest(settings) {
  const request = { model: settings.model, text: settings.text };
  for (const key of SAMPLING_KEYS) request[key] = settings[key];
  if (settings.ablate?.length) request.ablate = settings.ablate;
  if (settings.decoder_text) request.decoder_text = settings.decoder_text;
  return request;
}
