// The beginner's tour: the forward pass in at most about twenty stops, not every step of
// every block. For each stack: its embedding; its first block opened (attention with its
// heads, then the feed-forward layer); one stop for "the other N − 1 blocks", with the
// stream's size after each; its final norm. Then the model's ending: the logits and the
// sampling, a classifier's label, or a sentence encoder's vector. An encoder-decoder's
// second stack shows fewer steps of its first block, so the whole tour stays short.
// Each stop says in words what its numbers mean; the intermediate and advanced levels
// keep the full walk (walk.js).

import { el } from "../core/dom.js";
import { number, percent, quoted } from "../core/format.js";
import { streamNormChart, streamNorms } from "../panels/architecture.js";
import { plainTitle } from "./levels.js";
import { unpack } from "../core/arrays.js";
import { axisTokens, sections } from "../core/stages.js";
import { lessonLinks } from "./walk.js";

// the steps of a first block the tour stops at: all of attention and the FFN for the model's
// only (or first) stack; the three that matter for a second one (the decoder)
const FULL_BLOCK = [
  "attn.in", "attn.q", "attn.k", "attn.scores", "attn.pattern", "attn.out",
  "resid_mid", "ffn.hidden", "ffn.act", "ffn.out", "resid_post",
];
const SHORT_BLOCK = ["attn.pattern", "cross:attn.pattern", "ffn.act", "resid_post"];
const FIRST_STACK_BLOCK = ["attn.pattern", "ffn.act", "resid_post"]; // an encoder-decoder's encoder
const NORM_KINDS = new Set(["attn.in", "ffn.in", "final_norm"]);
const STREAM_KINDS = new Set(["embed.out", "resid_mid", "resid_cross", "resid_post"]);
const STEADY = 0.02; // a stream whose mean length changes by less than 2% "stays about the same"

function wanted(stage, kinds, pre) {
  const { kind, cross } = stage;
  if (kind === "attn.in" && !pre) return false; // a post-norm block has no norm there
  return kinds.includes(cross ? `cross:${kind}` : kind);
}

/** The tour's stops: [{id, group, stage (null for the two stops of its own), kind}]. */
export function tourStops(payload) {
  const arch = payload.architecture;
  const pre = arch.capabilities.norm_on_input; // a norm on attention's input
  const parts = sections(payload.stages);
  const stacks = [...new Set(parts.map((s) => s.stack).filter(Boolean))];
  const stops = [];
  const add = (stage) => stops.push({ id: stage.id, group: stage.group, stage, kind: stage.kind });
  for (const part of parts) {
    if (part.kind === "input" || part.kind === "final") part.stages.forEach(add);
    else if (part.kind === "embed") part.stages.filter((s) => stacks.length < 2 || s.kind === "embed.out" || part.stack === stacks[0]).forEach(add);
    else if (part.kind === "block" && part.layer === 0) {
      const kinds = stacks.length < 2 ? FULL_BLOCK : part.stack === stacks[0] ? FIRST_STACK_BLOCK : SHORT_BLOCK;
      part.stages.filter((s) => wanted(s, kinds, pre)).forEach(add);
      const blocks = parts.filter((p) => p.kind === "block" && p.stack === part.stack);
      if (blocks.length > 1) {
        const prefix = part.stack ? `${part.stack}.` : "";
        stops.push({ id: `${prefix}tour.others`, group: `${prefix}others`, stage: null, kind: "others", blocks });
      }
    } else if (part.kind === "output") {
      part.stages.forEach(add);
    }
  }
  if (payload.prediction) stops.push({ id: "tour.sample", group: "output", stage: null, kind: "sample" });
  return stops;
}

// what the numbers mean -------------------------------------------------------------------
// The sentences come with the payload (payload.tour, glassformer/workshop/walk/model_words.py);
// a {field} of one is this input's number, filled here.

/** payload.tour's ``template`` with each {field} replaced by values[field]. */
function fill(template, values) {
  return template.replace(/\{(\w+)\}/g, (_, field) => String(values[field]));
}

function meanNorm(stage) {
  const packed = stage?.value?.norms;
  if (!packed) return null;
  const { values } = unpack(packed);
  return values.reduce((a, b) => a + b, 0) / values.length;
}

/** The stream's mean length before a step (at the last stream step ahead of it) and after it:
 * {before, after} as printed, or null where either is not measured. */
function streamLengths(stage, payload) {
  const index = payload.stages.findIndex((s) => s.id === stage.id);
  const before = payload.stages.slice(0, index).reverse().find((s) => STREAM_KINDS.has(s.kind));
  const [from, to] = [meanNorm(before), meanNorm(stage)];
  return from === null || to === null ? null : { before: number(from, 3), after: number(to, 3) };
}

/** A norm's sizes before and after, and why they changed. */
function normWords(stop, payload) {
  const lengths = streamLengths(stop.stage, payload);
  return lengths ? fill(payload.tour.norm, lengths) : "";
}

/** What this stop's numbers are, in the model's sizes (payload.tour.stops, by the step's kind)
 * and this input's: t tokens, s keys, the scores' count, the stream's length around the step. */
function sizeWords(stage, payload) {
  const template = payload.tour.stops?.[stage.kind];
  if (!template) return "";
  const t = (axisTokens(stage, "t", payload) ?? payload.tokens).length;
  const s = axisTokens(stage, "s", payload)?.length ?? t;
  const cells = (stage.value?.shape ?? []).reduce((a, b) => a * b, 1);
  const needsLengths = /\{before\}/.test(template);
  const lengths = needsLengths ? streamLengths(stage, payload) : {};
  if (!lengths) return "";
  const counts = { t: t.toLocaleString("en"), s: s.toLocaleString("en"), scores: cells.toLocaleString("en") };
  const causal = !stage.cross && payload.architecture.stacks.find((x) => x.name === stage.stack)?.causal;
  return fill(template, { ...counts, ...lengths, ahead: causal ? payload.tour.ahead : "" });
}

function featureWords(stop, words) {
  const d = stop.stage?.value?.shape?.at(-1);
  return d ? fill(words.features, { features: d.toLocaleString("en") }) : "";
}

function maskedWords(masked, words) {
  const lead = masked.masked ? fill(words.masked, { mask: masked.mask_token }) : words.unmasked;
  const row = ({ position, top }) =>
    el("li", {}, fill(words.position, { position }), el("span", { class: "tour-token" }, quoted(top[0].token)), ` ${percent(top[0].p, 1)}`);
  return [el("p", { class: "step-explain" }, lead), el("ol", { class: "tour-top" }, masked.positions.slice(0, 5).map(row))];
}

function logitWords(payload) {
  const prediction = payload.prediction;
  if (payload.masked) return maskedWords(payload.masked, payload.tour);
  if (!prediction) return null;
  const top = prediction.steps[0].top.slice(0, 5);
  return [
    el("p", { class: "step-explain" }, payload.tour.logits),
    el("ol", { class: "tour-top" }, top.map((e) => el("li", {}, el("span", { class: "tour-token" }, quoted(e.token)), ` ${percent(e.p, 1)}`))),
  ];
}

function sampleWords(payload) {
  const words = payload.tour;
  const { settings, token, steps } = payload.prediction;
  const how = settings.greedy ? words.greedy : fill(words.sampled, {
    temperature: settings.temperature,
    top_k: settings.top_k ? fill(words.top_k, settings) : "",
    top_p: settings.top_p < 1 ? fill(words.top_p, settings) : "",
    kept: steps[steps.length - 1].kept.toLocaleString("en"),
    seed: settings.seed,
  });
  return [
    el("p", { class: "step-explain" }, how),
    el("p", { class: "step-explain tour-drawn" }, words.drawn, el("span", { class: "tour-token" }, quoted(token.text))),
  ];
}

/** The chart's words, from what it shows: the stream's mean length grows, shrinks or stays. */
function trendWords(payload, stack) {
  const points = streamNorms(payload.stages).get(stack);
  if (!points) return "";
  const [first, last] = [points[0].mean, points[points.length - 1].mean];
  const change = last / first - 1;
  const words = payload.tour;
  const sentence = change >= STEADY ? words.grows : change <= -STEADY ? words.shrinks : words.steady;
  return fill(sentence, { first: number(first, 3), last: number(last, 3) });
}

function othersWords(stop, payload) {
  const { stack } = stop.blocks[0];
  const others = stop.blocks.length - 1;
  return [
    el("p", { class: "step-explain" }, fill(others === 1 ? payload.tour.others_one : payload.tour.others, { others, trend: trendWords(payload, stack) })),
    streamNormChart(payload.stages, stack),
  ];
}

/** The words of one stop (and its own picture, for the two stops that are not steps). */
function stopNotes(stop, payload) {
  if (stop.kind === "others") return othersWords(stop, payload);
  if (stop.kind === "sample") return sampleWords(payload);
  const { kind } = stop.stage;
  const why = (text) => el("p", { class: "step-explain tour-why" }, text);
  const notes = [el("p", { class: "step-explain" }, stop.stage.words)];
  const sizes = sizeWords(stop.stage, payload);
  if (sizes) notes.push(el("p", { class: "step-explain tour-sizes" }, sizes));
  if (kind === "logits") notes.push(...(logitWords(payload) ?? []));
  else if (NORM_KINDS.has(kind)) notes.push(why(normWords(stop, payload)));
  else if (kind === "embed.tokens") notes.push(why(featureWords(stop, payload.tour)));
  else if (kind === "attn.pattern") notes.push(why(payload.tour.heads));
  return notes;
}

function stopTitle(stop, words) {
  if (stop.kind === "others") {
    const others = stop.blocks.length - 1;
    return others === 1 ? words.others_title_one : fill(words.others_title, { others });
  }
  if (stop.kind === "sample") return words.sample_title;
  const { kind, cross, stack, layer } = stop.stage;
  const block = layer !== null ? `block ${layer}${stack ? ` of the ${stack}` : ""}: ` : "";
  const where = block || (stack && kind.startsWith("embed") ? `${stack}: ` : "");
  return where + plainTitle(stop.stage, cross);
}

/**
 * view: {payload, selected, onSelect(id), detailFor(stage), lessonsFor(kind)}: one card per
 * stop, its words, the lessons that explain it, and (when opened) the numbers of its step.
 */
export function renderTour(container, view) {
  const { payload, selected } = view;
  const stops = tourStops(payload);
  const cards = stops.map((stop, i) => {
    const openable = Boolean(stop.stage?.trace);
    const isOpen = openable && selected === stop.id;
    const head = el(openable ? "button" : "div", {
      class: "step-head",
      type: openable ? "button" : null,
      "aria-expanded": openable ? String(isOpen) : null,
      onclick: openable ? () => view.onSelect(isOpen ? "" : stop.id) : null,
    },
    el("span", { class: "tour-number" }, `${i + 1}`),
    el("span", { class: "step-title" }, stopTitle(stop, payload.tour)),
    openable ? el("span", { class: "tour-open" }, isOpen ? payload.tour.close : payload.tour.open) : null);
    return el("li", { class: `step tour-stop${isOpen ? " selected" : ""}`, dataset: { stage: stop.id, kind: stop.kind } },
      head, stopNotes(stop, payload), stop.stage ? lessonLinks(view.lessonsFor?.(stop.kind) ?? []) : null,
      isOpen ? view.detailFor(stop.stage) : null);
  });
  container.replaceChildren(
    el("p", { class: "hint tour-intro" }, fill(payload.tour.intro, { stops: stops.length, steps: payload.stages.length })),
    el("ol", { class: "steps tour" }, cards),
  );
}
