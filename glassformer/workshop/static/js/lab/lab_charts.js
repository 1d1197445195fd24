// The lab's live charts: plain SVG line charts drawn anew as the run's events arrive
// (a few hundred points each; no library needed). A vertical marker shows the film's step.

import { svg, el } from "../core/dom.js";
import { number } from "../core/format.js";

const WIDTH = 360;
const HEIGHT = 150;
const PAD = { left: 46, right: 10, top: 10, bottom: 24 };

/**
 * A chart of `series` ([{name, colour, points: [[step, value]]}]) against the step, up to
 * `steps`; `log` for a log-scale y axis; `marker`: a step to mark.
 */
export function lineChart(title, series, { steps, log = false, marker = null } = {}) {
  const values = series.flatMap((s) => s.points.map(([, v]) => v)).filter((v) => Number.isFinite(v) && (!log || v > 0));
  const figure = el("figure", { class: "lab-chart", dataset: { chart: title } }, el("figcaption", {}, title));
  if (!values.length) return figure;
  const f = log ? Math.log10 : (v) => v;
  let low = f(Math.min(...values));
  let high = f(Math.max(...values));
  if (high - low < 1e-9) { low -= 0.5; high += 0.5; }
  const last = Math.max(steps ?? 1, ...series.flatMap((s) => s.points.map(([x]) => x)));
  const x = (step) => PAD.left + (step / last) * (WIDTH - PAD.left - PAD.right);
  const y = (v) => HEIGHT - PAD.bottom - ((f(v) - low) / (high - low)) * (HEIGHT - PAD.top - PAD.bottom);
  const shown = (v) => number(log ? 10 ** v : v, 3);
  const parts = [
    svg("line", { class: "axis", x1: PAD.left, y1: HEIGHT - PAD.bottom, x2: WIDTH - PAD.right, y2: HEIGHT - PAD.bottom }),
    svg("text", { class: "tick", x: PAD.left - 4, y: PAD.top + 8, "text-anchor": "end" }, shown(high)),
    svg("text", { class: "tick", x: PAD.left - 4, y: HEIGHT - PAD.bottom, "text-anchor": "end" }, shown(low)),
    svg("text", { class: "tick", x: PAD.left, y: HEIGHT - 6 }, "step 0"),
    svg("text", { class: "tick", x: WIDTH - PAD.right, y: HEIGHT - 6, "text-anchor": "end" }, `step ${last}`),
  ];
  if (marker !== null) {
    parts.push(svg("line", { class: "marker", x1: x(marker), y1: PAD.top, x2: x(marker), y2: HEIGHT - PAD.bottom }));
  }
  for (const s of series) {
    const points = s.points.filter(([, v]) => Number.isFinite(v) && (!log || v > 0));
    if (!points.length) continue;
    const line = points.map(([step, v]) => `${x(step).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    parts.push(svg("polyline", { points: line, fill: "none", stroke: s.colour, "stroke-width": s.dots ? 1 : 1.5 }));
    if (s.dots) for (const [step, v] of points) parts.push(svg("circle", { cx: x(step), cy: y(v), r: 3, fill: s.colour }, svg("title", {}, `${s.name} at step ${step}: ${number(v, 4)}`)));
  }
  const legend = el("div", { class: "lab-legend" }, series.map((s) => el("span", { style: { color: s.colour } }, `● ${s.name}`)));
  figure.append(svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, width: WIDTH, height: HEIGHT, role: "img", "aria-label": title }, ...parts), legend);
  return figure;
}

const COLOURS = { train: "var(--attn)", val: "var(--ffn)", other: "var(--resid)" };

function series(name, key, rows, colour, dots = false) {
  return { name, colour, dots, points: rows.filter((r) => r[key] !== undefined).map((r) => [r.step, r[key]]) };
}

/** A run's charts from its progress (each step) and metrics (each evaluation): the loss, the
 * learning rate, the gradient norm, tokens/s, and a classifier's accuracy and macro-F1.
 * ``options``: {steps, marker} (the film's frame shown, as a step). */
export function runCharts(progress, metrics, { steps, marker }) {
  const charts = [
    lineChart("loss", [series("train (each step)", "loss", progress, COLOURS.train), series("validation", "val_loss", metrics, COLOURS.val, true)], { steps, log: true, marker }),
    lineChart("learning rate", [series("lr", "lr", progress, COLOURS.other)], { steps, marker }),
    lineChart("gradient norm", [series("‖g‖ before clipping", "grad_norm", progress, COLOURS.train)], { steps, log: true, marker }),
    lineChart("tokens / s", [series("tokens/s", "tokens_per_s", progress, COLOURS.other)], { steps, marker }),
  ];
  if (metrics.some((m) => m.macro_f1 !== undefined)) { // a classifier's figures at each evaluation
    const f1 = [series("accuracy", "val_accuracy", metrics, COLOURS.val, true), series("macro-F1", "macro_f1", metrics, COLOURS.train, true)];
    charts.push(lineChart("validation accuracy and macro-F1", f1, { steps, marker }));
  }
  return charts;
}
