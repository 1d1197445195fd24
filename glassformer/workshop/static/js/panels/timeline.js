// The timeline of a generation: one column per generated token, from the token events of
// POST api/generate (glassformer/workshop/reading/streaming.py). Each column shows the step's time
// and the KV cache rows its forward pass read: reused (kept by the cache) and new (computed
// now: the whole prompt at the prefill, one token after). Scrubbing to step k asks for the
// walk of that step's forward pass: the prompt and the first k generated tokens, the pass
// that chose token k.

import { el } from "../core/dom.js";
import { count, number, quoted } from "../core/format.js";

const SCRUB_DELAY = 120; // ms a scrub waits for the slider to settle before asking for a walk

function bytes(n) {
  if (n >= 1e6) return `${number(n / 1e6, 3)} MB`;
  if (n >= 1e3) return `${number(n / 1e3, 3)} kB`;
  return `${n} B`;
}

function milliseconds(seconds) {
  return `${number(1000 * seconds, 3)} ms`;
}

/** A column of bars per step: its time, and its cache rows (reused below, new on top). */
function chart(steps, onPick) {
  const slowest = Math.max(...steps.map((s) => s.step_seconds));
  const widest = Math.max(...steps.map((s) => s.kv.reused + s.kv.new));
  const columns = steps.map((s) => {
    const rows = s.kv.reused + s.kv.new;
    return el("button", {
      type: "button",
      class: "tl-step",
      dataset: { step: s.step },
      title: `step ${s.step}: ${quoted(s.text)} in ${milliseconds(s.step_seconds)}; read ${rows} rows: ${s.kv.reused} from the cache, ${s.kv.new} new`,
      onclick: () => onPick(s.step),
    },
    el("span", { class: "tl-times" }, el("span", { class: "tl-time", style: { height: `${(100 * s.step_seconds) / slowest}%` } })),
    el("span", { class: "tl-rows" },
      el("span", { class: "tl-new", style: { height: `${(100 * s.kv.new) / widest}%` } }),
      el("span", { class: "tl-reused", style: { height: `${(100 * s.kv.reused) / widest}%` } })));
  });
  return el("div", { class: "tl-chart", role: "group", "aria-label": "generation steps" }, columns);
}

function summary(steps, done) {
  const prefill = steps[0];
  const last = steps[steps.length - 1];
  const parts = [
    `prefill: ${prefill.kv.new} tokens in ${milliseconds(done.prefill_seconds)}`,
    done.decode_tokens_per_s ? `decode: ${number(done.decode_tokens_per_s, 3)} tokens/s` : null,
    `cache: ${bytes(done.kv_bytes_per_token)} per token, ${bytes(last.kv.bytes)} at the last step`,
  ];
  return el("p", { class: "tl-summary" }, parts.filter(Boolean).join(" · "));
}

function stepText(s) {
  const rows = s.kv.reused + s.kv.new;
  const what = s.kv.reused === 0 ? `the prefill: all ${rows} rows computed` : `${s.kv.reused} rows reused from the cache, ${s.kv.new} new`;
  return `step ${s.step} read ${rows} tokens (${what}); the cache held ${bytes(s.kv.bytes)}; ${milliseconds(s.step_seconds)}; drew ${quoted(s.text)} (id ${s.id})`;
}

/**
 * The timeline in `node` for `steps` (token events) and `done`. `onStep(k, ids)` asks for the
 * walk of step k with the generated ids before it; `selected` is the step shown now.
 */
export function renderTimeline(node, steps, done, selected, onStep) {
  if (!steps.length) {
    node.replaceChildren();
    return;
  }
  let timer = null;
  const slider = el("input", { type: "range", min: "0", max: String(steps.length - 1), value: String(selected), "aria-label": "step", class: "tl-slider" });
  const detail = el("p", { class: "tl-detail" });
  const show = (k) => {
    slider.value = String(k);
    detail.textContent = stepText(steps[k]);
    node.querySelectorAll(".tl-step").forEach((b) => b.setAttribute("aria-pressed", String(Number(b.dataset.step) === k)));
    node.dataset.step = String(k);
  };
  const ask = (k) => onStep(k, steps.slice(0, k).map((s) => s.id));
  const pick = (k) => {
    clearTimeout(timer);
    show(k);
    ask(k);
  };
  slider.addEventListener("input", () => {
    const k = Number(slider.value);
    show(k);
    clearTimeout(timer);
    timer = setTimeout(() => ask(k), SCRUB_DELAY);
  });
  node.replaceChildren(
    el("p", { class: "hint" },
      `Scrub to a step to walk through its forward pass: the prompt and the ${count(steps.length)} tokens generated, up to ` +
      "that step. Bars: time per step (top), the cache rows it read (bottom: grey reused, orange new)."),
    summary(steps, done),
    chart(steps, pick),
    el("label", { class: "tl-scrub" }, "step ", slider),
    detail,
  );
  show(selected);
}
