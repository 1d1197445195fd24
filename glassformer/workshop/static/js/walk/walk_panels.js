// The walk (the tour's stops for a beginner, every step else), the whole model on one screen
// and which words look at which, drawn from the store; what the reader chooses in them (the
// step opened, the block, the zoom, the layer) goes back to the store and the URL. Teaching
// mode (?lock=1) reveals the walk step by step and keeps the other panels back until then.

import { renderLines } from "../views/attention_lines.js";
import { renderOverview } from "../overview/overview.js";
import { renderImageAttention } from "../views/patch_attention.js";
import { createReveal } from "./reveal.js";
import { markRoom } from "./slide.js";
import { stageDetail } from "./stage_detail.js";
import { loadStage } from "./stage_tensors.js";
import { readSettings, state, writeSettings } from "../core/state.js";
import { renderTour, tourStops } from "./tour.js";
import { renderWalk } from "./walk.js";

const $ = (id) => document.getElementById(id);
const walkPanel = $("walk");
const overviewPanel = $("overview");
const linesPanel = $("lines");
const HELD_BACK = ["prediction-panel", "generate-panel", "lens-panel", "compare-panel", "explain-panel"]; // until the last step

// teaching mode: the walk revealed step by step, the block being revealed open
export const reveal = readSettings(window.location.search).lock
  ? createReveal($("reveal"), () => state.update({ revealed: state.get().revealed + 1, ...revealedBlock(state.get().walk?.payload.stages ?? []) }))
  : null;

/** {openBlock} of the step ``id`` when it is in a block; {} for a step in none. */
function blockOf(stages, id) {
  const stage = stages.find((s) => s.id === id);
  return stage && stage.layer !== null ? { openBlock: stage.group } : {};
}

/** {openBlock}: the block of the last step revealed, if it is in one. */
export function revealedBlock(stages) {
  return reveal ? blockOf(stages, reveal.lastShown()) : {};
}

/** The steps the walk shows at ``level``: the tour's stops for a beginner, else every step. */
export function walkSteps(payload, level) {
  return level === "beginner" ? tourStops(payload) : payload.stages;
}

/** Open step ``id`` (or close the open one: ""), and keep the keyboard's focus on its head:
 * the walk is drawn again, and focus would fall to the page's body. */
export function selectStage(id) {
  const toggled = id || state.get().stage;
  state.update({ stage: id, ...(id ? blockOf(state.get().walk.payload.stages, id) : {}) });
  writeSettings(state.get());
  const step = walkPanel.querySelector(`.step[data-stage="${CSS.escape(toggled)}"]`);
  step?.querySelector(".step-head")?.focus({ preventScroll: true });
  if (reveal && id) step?.scrollIntoView({ block: "center" }); // teaching mode: the opened step is the slide
}

function openBlock(group) {
  const { walk, stage } = state.get();
  const opened = walk.payload.stages.find((s) => s.id === stage);
  const closes = opened && opened.group !== group && opened.layer !== null; // a step of another block
  state.update({ openBlock: group, ...(closes ? { stage: "" } : {}) });
  writeSettings(state.get());
  const shown = walkPanel.querySelector(`.group[data-group="${CSS.escape(group)}"]`);
  shown?.scrollIntoView({ block: "nearest" });
  shown?.querySelector(".step-head")?.focus({ preventScroll: true }); // focus stays with the reader
}

function detailFor(stage) {
  const { walk, level, head, lens } = state.get();
  return stageDetail({ stage, payload: walk.payload, level, head, onHead: (h) => state.update({ head: h }), loadStage, lens });
}

export function drawWalk() {
  const { walk, level, stage, openBlock: open, lessonsByKind } = state.get();
  const lessonsFor = (kind) => lessonsByKind.get(kind) ?? [];
  if (level === "beginner") {
    renderTour(walkPanel, { payload: walk.payload, selected: stage, onSelect: selectStage, detailFor, lessonsFor });
  } else {
    const onSelect = selectStage;
    renderWalk(walkPanel, { payload: walk.payload, level, lessonsFor, openBlock: open, selected: stage, onOpenBlock: openBlock, onSelect, detailFor });
  }
  if (!reveal) return;
  markRoom(); // the slide's room, before the reveal scrolls its current step into it
  reveal.apply(walkPanel);
  drawOverview(); // its boxes show their numbers once the reveal reaches them
  for (const id of HELD_BACK) $(id).hidden = !reveal.done(); // the answer (and generating one) waits for the last step
  $("lines-panel").hidden = !reveal.reached((step) => step.kind === "attn.pattern"); // once the first attention weights are out
}

/** Whether the teaching reveal has reached a step, by the steps' order in the pass: the tour
 * stops at a few of them, and its "other blocks" stop stands for every block of its stack. */
function revealedSteps() {
  if (!reveal || reveal.done()) return () => true;
  const order = state.get().walk.payload.stages.map((s) => s.id);
  const last = reveal.lastStep();
  // the "other blocks" stop reaches the last step of its stack's last block
  const lastId = last?.kind === "others" ? last.blocks.at(-1).stages.at(-1).id : last?.id;
  const upto = order.indexOf(lastId);
  return (id) => order.indexOf(id) <= upto;
}

/** The whole model on one screen, zoomed as `zoom` says (overview.js). */
export function drawOverview() {
  const { walk, level, zoom } = state.get();
  renderOverview(overviewPanel, {
    payload: walk.payload,
    level,
    zoom,
    loadStage,
    revealed: revealedSteps(),
    onZoom: (to) => {
      state.update({ zoom: to });
      writeSettings(state.get());
      overviewPanel.querySelector(".ov-back, .ov-box")?.focus({ preventScroll: true }); // focus stays in the picture
    },
    onOpenStage: (id) => {
      selectStage(id);
      walkPanel.querySelector(`.step[data-stage="${CSS.escape(id)}"]`)?.scrollIntoView({ block: "start" });
    },
  });
}

/** Which words look at which (a vision model: where each token looks in the image), for a beginner. */
export function drawLines() {
  const { walk, level, layer, linesPart } = state.get();
  if (level !== "beginner") {
    linesPanel.replaceChildren();
    return;
  }
  const vision = Boolean(walk.payload.image);
  $("lines-title").textContent = vision ? "Where each token looks in the image" : "Which words look at which";
  const onChange = ({ part = linesPart, layer: chosen }) => {
    state.update({ linesPart: part, layer: chosen });
    writeSettings(state.get());
  };
  if (vision) renderImageAttention(linesPanel, { payload: walk.payload, layer, loadStage, onChange });
  else renderLines(linesPanel, { payload: walk.payload, part: linesPart, layer, loadStage, onChange });
}

// Escape closes what is open: an open <details> around the focus, else the step opened
document.addEventListener("keydown", (event) => {
  if (event.key !== "Escape" || event.target.closest?.("input, textarea, select")) return;
  const details = event.target.closest?.("details[open]");
  if (details) {
    details.open = false;
    details.querySelector("summary")?.focus();
  } else if (state.get().stage && state.get().walk) {
    selectStage("");
  } else {
    return;
  }
  event.preventDefault();
});
