// Generate from the current text: POST api/generate answers with server-sent events, one
// per new token (glassformer/workshop/reading/streaming.py); the reply grows as they arrive. Stop
// (or a new generation) aborts the request, and the server then makes no more tokens. When
// it ends, the timeline (timeline.js) scrubs through the steps.

import { el } from "../core/dom.js";
import { number } from "../core/format.js";
import { renderTimeline } from "./timeline.js";

const GENERATE_URL = "api/generate";
const DEFAULT_NEW_TOKENS = 48;

/** Split an SSE text buffer into complete events [{event, data}] and the unfinished rest. */
export function parseEvents(buffer) {
  const blocks = buffer.split("\n\n");
  const rest = blocks.pop();
  const events = blocks.filter(Boolean).map((block) => {
    const fields = Object.fromEntries(block.split("\n").map((line) => [line.slice(0, line.indexOf(":")), line.slice(line.indexOf(":") + 2)]));
    return { event: fields.event, data: JSON.parse(fields.data) };
  });
  return { events, rest };
}

/**
 * The generate panel in `node`; `request()` gives the walk's {model, text, sampling...};
 * `onStep(k, ids)` walks step k of the generation (ids: the tokens generated before it).
 */
export function renderGenerate(node, request, onError, onStep) {
  let controller = null;
  let steps = [];
  const timeline = el("div", { class: "timeline" });
  const walkStep = (k, ids) => {
    output.querySelectorAll(".gen-token").forEach((t) => t.classList.toggle("gen-current", Number(t.dataset.step) === k));
    onStep(k, ids);
  };
  const count = el("input", { type: "number", min: "1", max: "512", value: String(DEFAULT_NEW_TOKENS), "aria-label": "new tokens", class: "gen-count" });
  const output = el("div", { class: "gen-output", "aria-live": "polite" });
  const info = el("p", { class: "hint gen-info" });
  const stop = el("button", { type: "button", class: "gen-stop", disabled: true, onclick: () => controller?.abort() }, "Stop");
  const start = el("button", { type: "button", class: "gen-start", onclick: () => run() }, "Generate");

  async function run() {
    controller?.abort();
    controller = new AbortController();
    // a generation reads the prompt and the sampling fields; the walk's pass fields stay with the walk
    const { decoder_text, generated, interventions, patch_text, ...prompt } = request();
    const body = { ...prompt, max_new_tokens: Number(count.value) || DEFAULT_NEW_TOKENS };
    output.replaceChildren(el("span", { class: "gen-prompt" }, body.text));
    steps = [];
    timeline.replaceChildren();
    info.textContent = "generating…";
    stop.disabled = false;
    node.dataset.state = "running";
    try {
      const response = await fetch(GENERATE_URL, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: controller.signal,
      });
      if (!response.ok) throw new Error((await response.json()).error);
      await readEvents(response.body, ({ event, data }) => {
        if (event === "token") {
          steps.push(data);
          output.append(el("span", { class: "gen-token", dataset: { step: data.step }, title: `id ${data.id}, step ${data.step}` }, data.text));
        } else if (event === "done") {
          info.textContent = `${data.tokens} tokens in ${number(data.seconds, 3)} s (${number(data.tokens_per_s, 3)} tokens/s)`;
          renderTimeline(timeline, steps, data, 0, walkStep);
        } else if (event === "stopped") {
          info.textContent = `stopped after ${steps.length} tokens: ${data.reason}`;
        }
      });
      node.dataset.state = "done";
    } catch (error) {
      node.dataset.state = error.name === "AbortError" ? "stopped" : "error";
      if (error.name === "AbortError") info.textContent = "stopped";
      else onError(error.message);
    } finally {
      stop.disabled = true;
    }
  }

  node.replaceChildren(
    el("p", { class: "hint" }, "Continue the text token by token with the settings above (the KV cache keeps earlier tokens' keys and values)."),
    el("div", { class: "gen-controls" }, el("label", {}, "new tokens ", count), start, stop),
    output,
    info,
    timeline,
  );
}

async function readEvents(stream, onEvent) {
  const reader = stream.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    const parsed = parseEvents(buffer + value);
    buffer = parsed.rest;
    parsed.events.forEach(onEvent);
  }
}
