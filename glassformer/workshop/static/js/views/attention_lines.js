// "Which words look at which": one layer's attention averaged over its heads (t s), drawn
// as lines from each token on the left (the one looking: a query) to the tokens on the
// right it looks at (keys); a line's strength is its weight. The walk payload carries the
// averaged pattern for short inputs (`mean_pattern`); for longer ones the layer's whole
// pattern (h t s) is fetched and averaged here. Past 128 tokens the lines would be
// thousands: the same weights are drawn as a map instead (attention_canvas.js). The pattern
// is walked as the notebooks' head view walks it (viz/lines.js), one SVG line per weight.

import { meanFirst, unpack } from "../core/arrays.js";
import { attentionCanvas, isLargeMap } from "./attention_canvas.js";
import { el, svg } from "../core/dom.js";
import { quoted, tokenText } from "../core/format.js";
import { eachLine } from "../../viz/lines.js";
import { attentionParts, axisTokens } from "../core/stages.js";
import { tokenColour } from "../panels/tokens.js";

const ROW_HEIGHT = 22; // px per token
const WIDTH = 540;
const LABEL_WIDTH = 120; // px of each token column
const MIN_WEIGHT = 0.02; // lighter lines are left out: noise, and thousands of them
const MAX_STROKE = 5;

async function averagedPattern(stage, loadStage) {
  if (stage.value?.mean_pattern) return unpack(stage.value.mean_pattern); // t s
  const answer = await loadStage(stage.trace);
  return meanFirst(unpack(answer.value)); // h t s -> t s
}

function drawLines(pattern, queries, keys) {
  const [t, s] = pattern.shape;
  const height = Math.max(t, s) * ROW_HEIGHT + 8;
  const left = LABEL_WIDTH;
  const right = WIDTH - LABEL_WIDTH;
  const y = (i) => 4 + i * ROW_HEIGHT + ROW_HEIGHT / 2;
  const lines = svg("g", { class: "lines" });
  eachLine(pattern.values, t, s, MIN_WEIGHT, (i, j, weight) => {
    const line = svg("line", {
      x1: left + 4, y1: y(i), x2: right - 4, y2: y(j),
      "stroke-width": (0.5 + MAX_STROKE * weight).toFixed(2),
      "stroke-opacity": Math.min(1, 0.15 + weight).toFixed(3),
      "data-query": i, "data-key": j, "data-weight": weight.toFixed(4),
    });
    line.append(svg("title", {}, document.createTextNode(
      `${quoted(queries[i].text)} looks at ${quoted(keys[j].text)}: ${(100 * weight).toFixed(0)}%`)));
    lines.append(line);
  });
  const label = (token, i, x, anchor, side) => {
    const group = svg("g", { class: `line-token line-token-${side}`, "data-index": i });
    group.append(
      svg("rect", { x: side === "query" ? 0 : right, y: y(i) - ROW_HEIGHT / 2 + 2, width: LABEL_WIDTH, height: ROW_HEIGHT - 4, rx: 4, fill: tokenColour(i) }),
      svg("text", { x, y: y(i) + 4, "text-anchor": anchor }, document.createTextNode(tokenText(token.text))),
    );
    return group;
  };
  const picture = svg("svg", { class: "lines-svg", width: WIDTH, height, viewBox: `0 0 ${WIDTH} ${height}` },
    lines,
    ...queries.slice(0, t).map((token, i) => label(token, i, LABEL_WIDTH - 8, "end", "query")),
    ...keys.slice(0, s).map((token, j) => label(token, j, right + 8, "start", "key")),
  );
  // Hovering a token on the left keeps only its lines: what that one token looks at.
  picture.addEventListener("mouseover", (event) => {
    const token = event.target.closest(".line-token-query");
    if (!token) return;
    picture.classList.add("focused");
    for (const line of lines.children) line.classList.toggle("on", line.dataset.query === token.dataset.index);
  });
  picture.addEventListener("mouseleave", () => picture.classList.remove("focused"));
  return picture;
}

/** A long input's averaged weights as an overview and a detail window. */
function drawMap(pattern, queries, keys) {
  const [t, s] = pattern.shape;
  return attentionCanvas({
    values: pattern.values,
    rows: t,
    cols: s,
    rowLabels: queries.slice(0, t).map((token) => tokenText(token.text)),
    colLabels: keys.slice(0, s).map((token) => tokenText(token.text)),
    scale: "unit",
    rowTitle: "tokens",
    colTitle: "tokens looked at",
    describe: (i, j, weight) => `${quoted(queries[i].text)} looks at ${quoted(keys[j].text)}: ${(100 * weight).toFixed(0)}%`,
  }).element;
}

function captionText(long, heads) {
  const averaged = heads ? `, averaged over the ${heads} heads` : "";
  if (long) {
    return `Too many tokens for lines: each row is a token, each column a token it looks at; darker means more attention${averaged}. ` +
      "Move the window over the whole map to read the tokens.";
  }
  return `Each line joins a token (left) to a token it looks at (right); a stronger line means more attention${averaged}. ` +
    "Hover a token on the left to see only its lines.";
}

// The latest drawing asked of each container: an older fetch that answers late is dropped.
const latest = new WeakMap();

/**
 * view: {payload, part (key), layer, onChange({part, layer}), loadStage(name)}
 * Draws into ``container`` and redraws itself when the part or layer changes (telling
 * ``onChange``); sets data-ready and data-layer on the container when the lines are in.
 */
export function renderLines(container, view) {
  const parts = attentionParts(view.payload.stages);
  if (!parts.length) {
    container.replaceChildren(el("p", { class: "hint" }, "This model has no attention to show."));
    container.dataset.ready = "1";
    return;
  }
  const part = parts.find((p) => p.key === view.part) ?? parts[0];
  const index = Math.max(0, part.layers.findIndex((l) => l.layer === view.layer));
  const last = part.layers.length - 1;

  const choose = parts.length > 1
    ? el("label", { class: "field" }, el("span", { class: "field-name" }, "attention"),
      el("select", {
        class: "lines-part",
        "aria-label": "attention",
        onchange: (e) => {
          const chosen = parts.find((p) => p.key === e.target.value);
          view.onChange({ part: chosen.key, layer: chosen.layers[0].layer });
          renderLines(container, { ...view, part: chosen.key, layer: chosen.layers[0].layer });
        },
      }, parts.map((p) => el("option", { value: p.key, selected: p.key === part.key }, p.label))))
    : null;
  const layerName = el("span", { class: "field-name" });
  const slider = el("input", {
    type: "range", class: "lines-layer", min: 0, max: last, step: 1, value: index, "aria-label": "layer",
    oninput: (e) => {
      const { layer } = part.layers[Number(e.target.value)];
      view.onChange({ part: part.key, layer });
      show(Number(e.target.value));
    },
  });
  const picture = el("div", { class: "lines-picture" });
  const caption = el("p", { class: "hint" });
  container.replaceChildren(
    el("div", { class: "lines-controls" }, choose, el("label", { class: "field" }, layerName, slider)),
    caption,
    picture,
  );

  function show(i) {
    const { layer, stage } = part.layers[i];
    const queries = axisTokens(stage, "t", view.payload);
    const keys = axisTokens(stage, "s", view.payload);
    const long = isLargeMap(queries.length, keys.length);
    layerName.textContent = `layer ${layer} (of 0–${part.layers[last].layer})`;
    caption.textContent = captionText(long, stage.value?.shape?.[0]);
    const ticket = {};
    latest.set(container, ticket);
    container.dataset.ready = "";
    picture.replaceChildren(el("p", { class: "loading" }, "loading…"));
    averagedPattern(stage, view.loadStage).then(
      (pattern) => {
        if (latest.get(container) !== ticket) return;
        picture.replaceChildren(long ? drawMap(pattern, queries, keys) : drawLines(pattern, queries, keys));
        container.dataset.layer = layer;
        container.dataset.ready = "1";
      },
      (error) => {
        if (latest.get(container) !== ticket) return;
        picture.replaceChildren(el("p", { class: "error-inline" }, error.message));
        container.dataset.ready = "error";
      },
    );
  }
  show(index);
}
