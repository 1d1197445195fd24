// Checkpoints as a film: a scrubber over the frames a run recorded at each evaluation
// (glassformer/inspect/film.py). For the chosen frame: every head's attention on the probe,
// the head-role scores (previous token, induction), the logit lens's top guess per layer at
// the last position (a classifier: its label probabilities), the last stream's 2-D
// projection, one dot per probe token, and a mixture of experts' load per layer.

import { slice, unpack } from "../core/arrays.js";
import { el, svg } from "../core/dom.js";
import { number, quoted, tokenText } from "../core/format.js";
import { thumbnail } from "../views/heatmap.js";

const THUMB = 64;
const ROLE_COLOURS = { previous_token: "var(--attn)", induction: "var(--ffn)" };

/** Each head's role scores; with `other` (a second checkpoint), both and the change. */
function roleTable(frame, other = null) {
  const roles = ["previous_token", "induction"].filter((r) => frame[r]);
  const layers = frame.previous_token.length;
  const heads = frame.previous_token[0].length;
  const rows = [];
  for (let l = 0; l < layers; l += 1) {
    for (let h = 0; h < heads; h += 1) {
      rows.push(el("tr", { dataset: { layer: l, head: h } }, el("th", {}, `${l}.${h}`), roles.map((role) => {
        const value = frame[role][l][h];
        const before = other?.[role]?.[l]?.[h];
        return el("td", { class: "role-cell", dataset: { role, value } },
          el("span", { class: "role-bar", style: { width: `${Math.round(60 * value)}px`, background: ROLE_COLOURS[role] } }),
          ` ${number(value, 2)}`,
          before === undefined ? "" : el("span", { class: "role-change", dataset: { before } },
            ` (step ${other.step}: ${number(before, 2)}, ${value >= before ? "+" : "−"}${number(Math.abs(value - before), 2)})`));
      })));
    }
  }
  return el("table", { class: "film-roles" },
    el("thead", {}, el("tr", {}, el("th", {}, "head"), roles.map((r) => el("th", {}, r.replace("_", " "))))),
    el("tbody", {}, rows));
}

function patternGrid(frame) {
  const patterns = unpack(frame.patterns); // L H t t
  const [layers, heads, t] = patterns.shape;
  const rows = [];
  for (let l = 0; l < layers; l += 1) {
    const layer = slice(patterns, l);
    rows.push(el("div", { class: "film-row" }, el("span", { class: "film-label" }, `layer ${l}`),
      Array.from({ length: heads }, (_, h) => el("figure", { class: "film-head", title: `layer ${l}, head ${h}` },
        thumbnail(slice(layer, h).values, t, t, THUMB), el("figcaption", {}, `head ${h}`)))));
  }
  return el("div", { class: "film-grid" }, rows);
}

function lensLine(frame) {
  if (!frame.lens) return el("p", { class: "hint" }, "This model has no head to read its layers with.");
  const last = frame.tokens.length - 1;
  return el("ol", { class: "film-lens" }, frame.lens.layers.map((name, l) =>
    el("li", {}, `${name}: ${quoted(frame.lens.top[l][last])} ${number(frame.lens.p[l][last], 2)}`)));
}

/** A classifier's probabilities for the probe's label at this checkpoint. */
function classLine(frame) {
  const { names, p } = frame.classes;
  return el("ol", { class: "film-classes" }, names.map((name, k) =>
    el("li", { dataset: { label: name, p: p[k] } }, el("span", { class: "film-class-bar", style: { width: `${Math.round(100 * p[k])}px` } }), ` ${name} ${number(p[k], 2)}`)));
}

/** A mixture of experts' load on the probe: a row per layer, a bar per expert (its share of
 * the probe's routed slots; an even load is 1/n each), with the change since ``other``. */
function expertLoad(frame, other = null) {
  const { load } = frame.experts;
  const n = load[0].length;
  const rows = load.map((shares, l) => el("tr", { dataset: { layer: l } }, el("th", {}, `block ${l}`),
    shares.map((share, i) => {
      const before = other?.experts?.load?.[l]?.[i];
      const title = `expert ${i}: ${number(100 * share, 3)}% of the probe's slots` +
        (before === undefined ? "" : ` (step ${other.step}: ${number(100 * before, 3)}%)`);
      return el("td", { class: "expert-cell", dataset: { expert: i, share }, title },
        el("span", { class: "expert-bar", style: { height: `${Math.round(40 * Math.min(1, share * n / 2))}px` } }));
    })));
  return el("table", { class: "film-experts" },
    el("thead", {}, el("tr", {}, el("th", {}, ""), Array.from({ length: n }, (_, i) => el("th", {}, String(i))))),
    el("tbody", {}, rows));
}

function projection(frame) {
  const points = frame.projection;
  const xs = points.map((p) => p[0]);
  const ys = points.map((p) => p[1]);
  const span = (v) => Math.max(1e-9, Math.max(...v) - Math.min(...v));
  const size = 220;
  const px = (v) => 12 + ((v - Math.min(...xs)) / span(xs)) * (size - 24);
  const py = (v) => size - 12 - ((v - Math.min(...ys)) / span(ys)) * (size - 24);
  return svg("svg", { viewBox: `0 0 ${size} ${size}`, width: size, height: size, class: "film-projection", role: "img", "aria-label": "projection" },
    ...points.map(([a, b], i) => svg("text", { x: px(a), y: py(b), "text-anchor": "middle", class: "film-dot" }, tokenText(frame.tokens[i]))));
}

/**
 * The film in `node` for `frames`: the frame at index `chosen` (null: the latest), beside
 * the frame at index `compared` if set. `onStep(index, compared)` tells the page a change.
 */
export function renderFilm(node, frames, chosen, onStep, compared = null) {
  if (!frames.length) {
    node.replaceChildren(el("p", { class: "hint" }, "No frame yet: the first comes with the first evaluation."));
    return;
  }
  const index = Math.min(chosen ?? frames.length - 1, frames.length - 1);
  const frame = frames[index];
  const slider = el("input", { type: "range", min: "0", max: String(frames.length - 1), value: String(index), class: "film-slider", "aria-label": "checkpoint" });
  slider.addEventListener("input", () => onStep(Number(slider.value), compared));
  const other = compared === null ? null : frames[Math.min(compared, frames.length - 1)];
  const against = el("select", { class: "film-compare", "aria-label": "compare with checkpoint", onchange: () => onStep(index, against.value === "" ? null : Number(against.value)) },
    el("option", { value: "" }, "—"),
    frames.map((f, i) => el("option", { value: String(i), selected: i === compared }, `step ${f.step}`)));
  node.replaceChildren(
    el("label", { class: "film-scrub" }, `checkpoint ${index + 1} of ${frames.length}: step ${frame.step} `, slider),
    el("p", { class: "hint" }, `The probe: ${frame.tokens.map(tokenText).join(" ")}`),
    el("h3", {}, "Attention of every head on the probe"),
    patternGrid(frame),
    el("h3", {}, "Head roles"),
    el("label", { class: "hint" }, "compare with checkpoint ", against),
    roleTable(frame, other),
    el("div", { class: "film-pair" },
      frame.classes
        ? el("div", {}, el("h3", {}, "The probe's label"), classLine(frame))
        : el("div", {}, el("h3", {}, "Logit lens at the last position"), lensLine(frame)),
      el("div", {}, el("h3", {}, "The last stream, projected (PCA)"), projection(frame))),
    frame.experts
      ? el("div", {}, el("h3", {}, "Expert load on the probe (bar full: twice an even share)"), expertLoad(frame, other))
      : "",
  );
  node.dataset.step = String(frame.step);
  node.dataset.frames = String(frames.length);
}
