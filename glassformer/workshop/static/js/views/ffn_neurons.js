// The FFN's most active neurons, from what enters W_down (<block>.ffn.act, t f: after the
// activation, and the gate for SwiGLU / GeGLU):
//   at one token     the TOP neurons with the largest values a[i, n]
//   over all tokens  the TOP neurons with the largest mean_i |a[i, n]|
// Picking a neuron shows a[:, n], its value at every token.

import { el } from "../core/dom.js";
import { number, quoted, tokenText } from "../core/format.js";

const TOP = 10;
const BAR_WIDTH = 120; // px for the largest value of a list
const PROFILE_HEIGHT = 72; // px for the largest positive plus the largest negative value
const PROFILE_WIDTH = 640; // px the columns share before they shrink to MIN_COLUMN
const MAX_COLUMN = 18; // px per token
const MIN_COLUMN = 3;
const LABEL_MIN_COLUMN = 10; // narrower columns go without a token under them

/** The ``count`` indices of the largest values, largest first. */
function top(values, count) {
  const order = Array.from(values, (_, n) => n);
  return order.sort((a, b) => values[b] - values[a] || a - b).slice(0, count);
}

/** mean_i |a[i, n]| for a t f array: f. */
function meanMagnitude(array) {
  const [t, f] = array.shape;
  const mean = new Float32Array(f);
  for (let i = 0; i < t; i += 1) for (let n = 0; n < f; n += 1) mean[n] += Math.abs(array.values[i * f + n]) / t;
  return mean;
}

function neuronList({ kind, title, neurons, values, selected, onPick }) {
  const largest = Math.max(...neurons.map((n) => Math.abs(values[n]))) || 1;
  const rows = neurons.map((n) =>
    el(
      "button",
      {
        type: "button",
        class: "ffn-neuron",
        "aria-pressed": String(n === selected),
        dataset: { neuron: n, value: values[n] },
        title: `neuron ${n}: show it at every token`,
        onclick: () => onPick(n),
      },
      el("span", { class: "ffn-index" }, `#${n}`),
      el("span", { class: "ffn-track" },
        el("span", { class: values[n] < 0 ? "ffn-bar negative" : "ffn-bar", style: { width: `${Math.max(1, (BAR_WIDTH * Math.abs(values[n])) / largest)}px` } })),
      el("span", { class: "ffn-value" }, number(values[n])),
    ));
  return el("div", { class: "ffn-top", dataset: { kind } }, el("div", { class: "ffn-list-title" }, title), rows);
}

/** a[:, n]: one bar per token from a zero line, the picked token marked. */
function profile(array, neuron, tokens, token, onToken) {
  const [t, f] = array.shape;
  const values = Array.from({ length: t }, (_, i) => array.values[i * f + neuron]); // t
  const high = Math.max(0, ...values);
  const low = Math.max(0, ...values.map((v) => -v));
  const unit = PROFILE_HEIGHT / (high + low || 1); // px per unit of activation
  const column = Math.max(MIN_COLUMN, Math.min(MAX_COLUMN, Math.floor(PROFILE_WIDTH / t)));
  const columns = values.map((value, i) => {
    const label = tokenText(tokens[i]?.text ?? String(i));
    return el(
      "button",
      {
        type: "button",
        class: i === token ? "ffn-col on" : "ffn-col",
        style: { width: `${column}px` },
        dataset: { position: i, value },
        title: `${quoted(tokens[i]?.text ?? "?")} (${i}): ${number(value)}`,
        onclick: () => onToken(i),
      },
      el("span", { class: "ffn-col-area", style: { height: `${PROFILE_HEIGHT}px` } },
        el("span", {
          class: value < 0 ? "ffn-col-bar negative" : "ffn-col-bar",
          style: {
            height: `${Math.max(1, Math.abs(value) * unit)}px`,
            top: `${(high - Math.max(0, value)) * unit}px`,
          },
        })),
      column >= LABEL_MIN_COLUMN ? el("span", { class: "ffn-col-label" }, label) : null,
    );
  });
  return el(
    "div",
    { class: "ffn-profile", dataset: { neuron } },
    el("div", { class: "ffn-list-title" }, `neuron #${neuron} at every token (from ${number(-low)} to ${number(high)}); click a token to pick it`),
    el("div", { class: "ffn-cols" }, el("span", { class: "ffn-zero", style: { top: `${high * unit}px` } }), columns),
  );
}

/**
 * options: {array: the unpacked t f activation, tokens, level, onToken(i)}
 * Returns {element, show(token)}; data-ready is set each time it is drawn.
 */
export function ffnNeuronsView({ array, tokens, level, onToken }) {
  const [t, f] = array.shape;
  const mean = meanMagnitude(array); // f
  const element = el("section", { class: "ffn-view", "aria-label": "most active neurons" });
  const select = el(
    "select",
    { class: "ffn-token", "aria-label": "token", onchange: () => onToken?.(Number(select.value)) },
    Array.from({ length: t }, (_, i) => el("option", { value: i }, `${i}: ${tokenText(tokens[i]?.text ?? "?")}`)),
  );
  let token = t - 1;
  let pinned = null; // the neuron a reader picked; until then the top one at the token

  const draw = () => {
    const values = array.values.subarray(token * f, (token + 1) * f); // f
    const atToken = top(values, TOP);
    const neuron = pinned ?? atToken[0];
    const pick = (n) => {
      pinned = n;
      draw();
    };
    select.value = String(token);
    const words = level === "beginner"
      ? "Each of the feed-forward layer's neurons gives one number per token. These fire the most."
      : `a = ${f} neuron activations per token (what enters W_down). Click a neuron to see it at every token.`;
    element.replaceChildren(
      el("h4", { class: "ffn-title" }, "The most active neurons"),
      el("p", { class: "detail-caption" }, words),
      el("label", { class: "ffn-pick" }, "token ", select, el("span", { class: "hint" }, " or click a row of the map")),
      el(
        "div",
        { class: "ffn-lists" },
        neuronList({ kind: "token", title: `largest at ${quoted(tokens[token]?.text ?? "?")} (${token})`, neurons: atToken, values, selected: neuron, onPick: pick }),
        neuronList({ kind: "mean", title: "largest mean |activation| over all tokens", neurons: top(mean, TOP), values: mean, selected: neuron, onPick: pick }),
      ),
      profile(array, neuron, tokens, token, (i) => onToken?.(i)),
    );
    Object.assign(element.dataset, { token, neuron, ready: "1" });
  };
  return {
    element,
    show(picked) {
      token = picked;
      draw();
    },
  };
}
