// Compare two models on the same text, layer by layer: the logit lens of each
// (POST api/lens, glassformer/workshop/walk/lens.py), drawn against relative depth so models of
// different depths line up. Per layer: the entropy of what it would predict (nats), the rank
// of the model's final choice, and its likeliest tokens. The second model may be the first
// one itself: then it runs without the interventions, and the comparison shows what they
// changed.

import { el, svg } from "../core/dom.js";
import { number, percent, quoted } from "../core/format.js";

const WIDTH = 300;
const HEIGHT = 120;
const PAD = { left: 34, right: 8, top: 8, bottom: 22 };
const COLOURS = ["var(--accent)", "var(--ffn)"];

function depth(row, rows) {
  return rows.length > 1 ? row / (rows.length - 1) : 1;
}

/** A line per model of `value(row)` against relative depth; `log` for ranks. */
function chart(title, sides, value, { log = false, unit = "" } = {}) {
  const all = sides.flatMap((s) => s.lens.rows.map(value));
  const top = log ? Math.log2(Math.max(2, ...all)) : Math.max(1e-9, ...all);
  const x = (d) => PAD.left + d * (WIDTH - PAD.left - PAD.right);
  const y = (v) => {
    const share = log ? Math.log2(v) / top : v / top;
    return HEIGHT - PAD.bottom - share * (HEIGHT - PAD.top - PAD.bottom);
  };
  const lines = sides.map((side, i) => {
    const points = side.lens.rows.map((row, l) => [x(depth(l, side.lens.rows)), y(value(row))]);
    return svg("g", { class: "cmp-line", "data-side": i },
      svg("polyline", { points: points.map((p) => p.join(",")).join(" "), fill: "none", stroke: COLOURS[i], "stroke-width": 2 }),
      ...points.map(([px, py], l) => svg("circle", { cx: px, cy: py, r: 3, fill: COLOURS[i] },
        svg("title", {}, `${side.name}, ${side.lens.rows[l].layer}: ${number(value(side.lens.rows[l]), 3)}${unit}`))));
  });
  const axis = svg("g", { class: "cmp-axis" },
    svg("line", { x1: PAD.left, y1: HEIGHT - PAD.bottom, x2: WIDTH - PAD.right, y2: HEIGHT - PAD.bottom }),
    svg("text", { x: PAD.left, y: HEIGHT - 6 }, "embeddings"),
    svg("text", { x: WIDTH - PAD.right, y: HEIGHT - 6, "text-anchor": "end" }, "last layer"),
    svg("text", { x: PAD.left - 4, y: y(log ? 2 ** top : top) + 4, "text-anchor": "end" }, number(log ? 2 ** top : top, 2)),
    svg("text", { x: PAD.left - 4, y: HEIGHT - PAD.bottom, "text-anchor": "end" }, log ? "1" : "0"));
  return el("figure", { class: "cmp-chart" },
    el("figcaption", {}, title),
    svg("svg", { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, width: WIDTH, height: HEIGHT, role: "img", "aria-label": title }, axis, ...lines));
}

function table(side, i, advanced) {
  const rows = side.lens.rows.map((row) => el("tr", { class: "cmp-row", dataset: { layer: row.layer, rank: row.rank, entropy: row.entropy } },
    el("th", { scope: "row" }, advanced ? row.layer : row.block === null ? "embeddings" : `block ${row.block}`),
    el("td", {}, `${quoted(row.top[0].text)} ${percent(row.top[0].p, 0)}`),
    el("td", { class: row.rank === 1 ? "lens-first" : "" }, `#${row.rank}`),
    el("td", {}, `${number(row.entropy, 2)} nats`)));
  const last = side.lens.rows[side.lens.rows.length - 1];
  return el("div", { class: "cmp-side", dataset: { side: i, model: side.name } },
    el("h3", { style: { color: COLOURS[i] } }, side.label),
    el("p", { class: "cmp-final" }, `final choice ${quoted(side.lens.token.text)} (${percent(last.p, 1)}), ${number(last.entropy, 3)} nats`),
    el("table", { class: "lens cmp-table" },
      el("thead", {}, el("tr", {}, el("th", {}, "layer"), el("th", {}, "top-1"), el("th", {}, "final choice"), el("th", {}, "entropy"))),
      el("tbody", {}, rows)));
}

/**
 * The compare panel in `node`. options: {models (names that have a head), other (the chosen
 * name, or ""), sides: [{name, label, lens}] | null (null: loading), level, onPick(name)}.
 */
export function renderCompare(node, { models, other, sides, level, onPick }) {
  const pick = el("select", { class: "cmp-model", "aria-label": "compare with", onchange: () => onPick(pick.value) },
    el("option", { value: "" }, "—"),
    models.map((name) => el("option", { value: name, selected: name === other }, name)));
  const head = el("div", { class: "cmp-controls" }, el("label", {}, "compare with ", pick));
  const hint = el("p", { class: "hint" }, "Run a second model on the same text and read both with the logit lens, layer by layer. Choose the model itself to see what the interventions changed.");
  if (!other) {
    node.replaceChildren(hint, head);
    node.dataset.state = "none";
    return;
  }
  if (!sides) {
    node.replaceChildren(hint, head, el("p", { class: "loading" }, "running both…"));
    node.dataset.state = "loading";
    return;
  }
  node.replaceChildren(
    hint,
    head,
    el("div", { class: "cmp-charts" },
      chart("entropy of each layer's prediction (nats)", sides, (row) => row.entropy, { unit: " nats" }),
      chart("rank of the final choice (log scale)", sides, (row) => row.rank, { log: true })),
    el("div", { class: "cmp-sides" }, sides.map((side, i) => table(side, i, level === "advanced"))),
  );
  node.dataset.state = "ready";
}
