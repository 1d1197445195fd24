// The server's JSON routes (glassformer/workshop/server.py). A 4xx answer carries
// {"error": message}: it becomes an ApiError whose message the page shows as it is.

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.name = "ApiError";
    this.status = status;
  }
}

// Relative paths: the page works wherever the app is mounted.
const MODELS_URL = "api/models";
const WALK_URL = "api/walk";
const STAGE_URL = "api/stage";
const LENS_URL = "api/lens";
const TOKENS_URL = "api/tokens";
const SIMILARITY_URL = "api/similarity";
const SAMPLES_URL = "api/samples";

async function call(url, body) {
  const init = body === undefined
    ? {}
    : { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
  let response;
  try {
    response = await fetch(url, init);
  } catch (error) {
    throw new ApiError(`the workshop server did not answer (${error.message}); is it still running?`, 0);
  }
  let answer;
  try {
    answer = await response.json();
  } catch {
    throw new ApiError(`the server answered ${response.status} ${response.statusText} without JSON`, response.status);
  }
  if (!response.ok) {
    throw new ApiError(answer?.error ?? `the server answered ${response.status} ${response.statusText}`, response.status);
  }
  return answer;
}

/** {models: [{name, parameters, max_seq_len, reads_text, architecture, stages}], sampling:
 * {temperature, top_p}} (the library's sampling defaults; never the token: the teaching link
 * is shown by the server's /teach page, to a person). */
export function fetchModels() {
  return call(MODELS_URL);
}

/** The walk payload (payload.py, version 1) for {model, text, temperature, top_k, ...}. */
export function fetchWalk(request) {
  return call(WALK_URL, request);
}

/** One stage's whole tensor: {name, value: packed array}. `input`: the walk's pass input
 * ({model, text, decoder_text?, generated?, interventions?, patch_text?}); `exact`: attention
 * weights as float32 (a table's numbers), not bytes (a map's). */
export function fetchStage(input, name, exact = false) {
  return call(STAGE_URL, exact ? { ...input, name, exact } : { ...input, name });
}

/** The logit lens of a pass input: {layers, token, rows: [{layer, top, rank, p, entropy}]}. */
export function fetchLens(input) {
  return call(LENS_URL, input);
}

/** How the tokenizer cut `text`: {kind, pieces: [{text, ids, tokens, steps, ...}], ids}. */
export function fetchTokenization(model, text) {
  return call(TOKENS_URL, { model, text });
}

/** A sentence encoder's {cosine, vectors: [packed u, packed w], pooling} for two texts. */
export function fetchSimilarity(model, text, other) {
  return call(SIMILARITY_URL, { model, text, other });
}

/** The held-out images a vision model can read, for the picker: {count, images: packed n C H W
 * (null when none), labels, source} (glassformer/workshop/walk/images.py). */
export function fetchSamples(model) {
  return call(`${SAMPLES_URL}?${new URLSearchParams({ model })}`);
}
