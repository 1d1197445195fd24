// The walk: every step of the payload, in order, as a vertical diagram grouped into the
// input, each stack's embedding, its blocks, its end and the output. A block is one line
// unless it is the open one, so 30 layers stay one screen. Only the steps the payload
// lists are drawn: an encoder has no prediction, T5 has encoder and decoder stacks.

import { unpack } from "../core/arrays.js";
import { el } from "../core/dom.js";
import { number, shape } from "../core/format.js";
import { codeLine, equation, letterSizes, plainTitle } from "./levels.js";
import { meanOverHeads, sparkline } from "./norms.js";
import { sections } from "../core/stages.js";

const STACK_TITLES = { encoder: "Encoder", decoder: "Decoder" };
const SECTION_TITLES = {
  input: "Input",
  embed: "Embedding",
  final: "After the last block",
  output: "Output",
};

function partOf(kind) {
  if (kind.startsWith("attn.")) return "attn";
  if (kind.startsWith("ffn.")) return "ffn";
  if (kind.startsWith("resid")) return "resid";
  return "other";
}

/** The norms of a stage as one value per token (mean over heads for h t norms). */
function tokenNorms(stage) {
  const packed = stage.value?.norms;
  if (!packed) return null;
  const norms = unpack(packed);
  return norms.shape.length === 2 ? meanOverHeads(norms.values, norms.shape[0]) : norms.values;
}

function shapeText(stage, payload) {
  const sizes = letterSizes(stage, payload);
  const letters = stage.shape.split(" ");
  if (!letters.every((letter) => letter in sizes)) return stage.shape;
  return `${stage.shape} → ${shape(letters.map((letter) => sizes[letter]))}`;
}

/** "lessons 4 · 5": links to the lessons that explain a step (null when none does). */
export function lessonLinks(lessons) {
  if (!lessons.length) return null;
  return el("p", { class: "step-lessons" }, lessons.length > 1 ? "lessons " : "lesson ",
    lessons.flatMap((lesson, i) => [i ? " · " : "", el("a", {
      href: `lessons?lesson=${lesson.number}`,
      class: "lesson-link",
      title: `lesson ${lesson.number}: ${lesson.title}`,
      dataset: { lesson: lesson.number },
    }, String(lesson.number))]));
}

function stepRow(stage, view) {
  const { payload, level, selected } = view;
  const { kind, cross } = stage;
  const ctx = {
    stage,
    value: stage.value,
    arch: payload.architecture,
    cross,
    sizes: letterSizes(stage, payload),
  };
  const openable = Boolean(stage.trace);
  const norms = level !== "beginner" ? tokenNorms(stage) : null;
  const head = el(
    openable ? "button" : "div",
    {
      class: "step-head",
      type: openable ? "button" : null,
      "aria-expanded": openable ? String(selected === stage.id) : null,
      onclick: openable ? () => view.onSelect(selected === stage.id ? "" : stage.id) : null,
    },
    el("span", { class: "step-dot", "aria-hidden": "true" }),
    el("span", { class: "step-title" }, level === "beginner" ? plainTitle(stage, cross) : stage.title),
    level !== "beginner" ? el("span", { class: "step-shape" }, shapeText(stage, payload)) : null,
    level === "advanced" && stage.trace ? el("code", { class: "step-trace" }, stage.trace) : null,
    norms ? sparkline(norms, "‖x‖ per token") : null,
  );
  const notes = [];
  if (level === "beginner") notes.push(el("p", { class: "step-explain" }, stage.words));
  else {
    const maths = equation(stage.equation, ctx);
    if (maths) notes.push(el("p", { class: "step-eq" }, maths));
  }
  const lessons = lessonLinks(view.lessonsFor?.(kind) ?? []);
  if (lessons) notes.push(lessons);
  if (level === "advanced") {
    notes.push(
      el(
        "p",
        { class: "step-code" },
        codeLine(stage.code),
        stage.value?.min !== undefined ? el("span", { class: "step-range" }, ` min ${number(stage.value.min)}, max ${number(stage.value.max)}`) : null,
      ),
    );
  }
  return el(
    "li",
    {
      class: `step part-${partOf(kind)}${selected === stage.id ? " selected" : ""}${openable ? "" : " static"}`,
      dataset: { stage: stage.id, kind },
    },
    head,
    notes,
    selected === stage.id ? view.detailFor(stage) : null,
  );
}

function blockTitle(section) {
  return `Block ${section.layer}`;
}

function blockParts(section) {
  const parts = [];
  for (const stage of section.stages) {
    const { cross, kind } = stage;
    const part = kind.startsWith("attn.") ? (cross ? "cross-attention" : "self-attention") : kind.startsWith("ffn.") ? "feed-forward" : null;
    if (part && !parts.includes(part)) parts.push(part);
  }
  return parts.join(" → ");
}

function collapsedBlock(section, view) {
  const { level } = view;
  const last = section.stages[section.stages.length - 1]; // resid_post: the block's output
  const norms = level !== "beginner" ? tokenNorms(last) : null;
  const mean = norms ? norms.reduce((a, b) => a + b, 0) / norms.length : null;
  return el(
    "button",
    {
      type: "button",
      class: "block-line",
      dataset: { group: section.group },
      "aria-expanded": "false",
      onclick: () => view.onOpenBlock(section.group),
    },
    el("span", { class: "block-name" }, blockTitle(section)),
    el("span", { class: "block-parts" }, blockParts(section)),
    norms ? sparkline(norms, `‖x‖ per token after ${blockTitle(section).toLowerCase()}`) : null,
    mean !== null ? el("span", { class: "block-norm" }, `mean ‖x‖ ${number(mean, 3)}`) : null,
    level === "advanced" ? el("code", { class: "block-trace" }, `${section.group}.*`) : null,
    level === "advanced" ? el("span", { class: "block-count" }, `${section.stages.length} steps`) : null,
  );
}

function sectionView(section, view) {
  if (section.kind === "block" && section.group !== view.openBlock) return collapsedBlock(section, view);
  const title = section.kind === "block" ? blockTitle(section) : SECTION_TITLES[section.kind];
  const heading = section.kind === "block"
    ? el("h4", { class: "group-title" }, title, el("span", { class: "block-parts" }, blockParts(section)))
    : el("h4", { class: "group-title" }, title);
  return el(
    "div",
    { class: `group group-${section.kind}${section.kind === "block" ? " open" : ""}`, dataset: { group: section.group } },
    heading,
    el("ol", { class: "steps" }, section.stages.map((stage) => stepRow(stage, view))),
  );
}

/** The first block of the walk: the one open when nothing else was chosen. */
export function firstBlock(stages) {
  return sections(stages).find((s) => s.kind === "block")?.group ?? "";
}

/** The group a stage belongs to (its block, when it is in one). */
export function groupOf(stages, id) {
  return stages.find((s) => s.id === id)?.group ?? "";
}

/**
 * view: {payload, level, openBlock, selected, onOpenBlock(group), onSelect(id), detailFor(stage),
 *        lessonsFor(kind) -> [{number, title}] (the lessons that link to a step of that kind)}
 */
export function renderWalk(container, view) {
  const out = [];
  let stackBox = null;
  for (const section of sections(view.payload.stages)) {
    const node = sectionView(section, view);
    if (!section.stack) {
      stackBox = null;
      out.push(node);
      continue;
    }
    if (!stackBox || stackBox.dataset.stack !== section.stack) {
      const title = el("h3", { class: "stack-title" }, STACK_TITLES[section.stack] ?? section.stack);
      stackBox = el("section", { class: "stack", dataset: { stack: section.stack } }, title);
      out.push(stackBox);
    }
    stackBox.append(node);
  }
  container.replaceChildren(...out);
}
