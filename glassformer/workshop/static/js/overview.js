// The whole model on one screen: a diagram of this model's own architecture, drawn from the
// payload's stages and architecture summary (architecture.py), with this pass's numbers in
// its boxes. Four zoom levels, each a click deeper, each in the URL (settings.zoom):
//   ""                  the model: tokens → embedding → the block × N → the head → the token
//   "blocks.3"          one block: its steps, with each attention head as a tile
//   "blocks.3.attn:2"   one head: its attention map, and query · key for one query
//   "blocks.3.attn:2:5" the same, query 5 chosen
// A box whose step the teaching reveal has not reached yet is drawn without its numbers.
// A vision model's tokens are its image cut into patches; a head's weights are laid on it too.

import { windowWords } from "./architecture.js";
import { slice, unpack } from "./arrays.js";
import { el } from "./dom.js";
import { count, number, percent, quoted, tokenText } from "./format.js";
import { heatmap, thumbnail } from "./heatmap.js";
import { plainTitle } from "./levels.js";
import { patchAttentionView, queryRow } from "./patch_attention.js";
import { cutImage } from "./patch_tokens.js";
import { queryKeyTraces, queryKeyView } from "./query_key.js";
import { axisTokens, sections } from "./stages.js";
import { vectorStrip } from "./strip.js";

const STRIP = { width: 150, height: 12 };
const MINI_MAP = 56; // px: a head-averaged pattern in a box
const HEAD_TILE = 44; // px: one head's map in the block view
const TOP_TOKENS = 3;
const NORM_NAMES = { rmsnorm: "RMSNorm", layernorm: "LayerNorm" };
const STACK_TITLES = { "": "", encoder: "Encoder", decoder: "Decoder" };

/** "blocks.3.attn:2:5" -> {base: "blocks.3.attn", block: "blocks.3", head: 2, query: 5}. */
export function parseZoom(zoom) {
  if (!zoom) return { block: "", base: "", head: null, query: null };
  const [path, head, query] = zoom.split(":");
  const base = /\.(attn|cross_attn)$/.test(path) ? path : "";
  const block = base ? path.replace(/\.(attn|cross_attn)$/, "") : path;
  const index = (text) => (text === undefined || text === "" || !/^\d+$/.test(text) ? null : Number(text));
  return { block, base, head: base ? index(head) ?? 0 : null, query: base ? index(query) : null };
}

function zoomText({ block, base, head, query }) {
  if (!base) return block;
  return `${base}:${head}${query === null ? "" : `:${query}`}`;
}

// live summaries ---------------------------------------------------------------------------
/** The last token's leading features of a t d stage (its preview), as a strip. */
function lastTokenStrip(stage, d) {
  const preview = stage?.value?.preview;
  if (!preview) return null;
  const array = unpack(preview);
  const [t, shown] = array.shape;
  const row = Array.from(array.values.subarray((t - 1) * shown, t * shown));
  return vectorStrip(row, { ...STRIP, label: `the last token's vector: its first ${shown} of ${d} features (blue negative, orange positive)` });
}

function miniMap(stage, size = MINI_MAP) {
  const packed = stage?.value?.mean_pattern;
  if (!packed) return null;
  const array = unpack(packed);
  const [rows, cols] = array.shape;
  const map = thumbnail(array.values, rows, cols, size);
  map.setAttribute("role", "img");
  map.setAttribute("aria-label", "attention weights, averaged over the heads: a row per token, a column per token it reads");
  return map;
}

const LETTER_WORDS = { h: "heads", g: "key/value heads", t: "tokens", s: "tokens", e: "numbers", d: "numbers", f: "numbers", v: "vocabulary scores", c: "classes" };

/** A step's shape with its sizes: "9 heads × 7 tokens × 64 numbers" (beginner) or "h t e = [9, 7, 64]". */
function sizeText(stage, level) {
  const sizes = stage.value?.shape;
  if (!sizes) return level === "beginner" ? "" : stage.shape;
  const letters = stage.shape.split(" ");
  if (level !== "beginner") return `${stage.shape} = [${sizes.join(", ")}]`;
  return letters.map((letter, i) => `${sizes[i]?.toLocaleString("en")} ${LETTER_WORDS[letter] ?? letter}`).join(" × ");
}

function meanNorm(stage) {
  const packed = stage?.value?.norms;
  if (!packed) return null;
  const values = unpack(packed).values;
  return values.reduce((a, b) => a + b, 0) / values.length;
}

// boxes ---------------------------------------------------------------------------------
/** One box of the diagram: a button when it zooms or opens something. */
function box({ title, detail = "", summary = null, onClick = null, kind = "", pending = false, label = "" }) {
  return el(
    onClick ? "button" : "div",
    {
      type: onClick ? "button" : null,
      class: `ov-box ov-${kind}${pending ? " pending" : ""}`,
      onclick: onClick,
      "aria-label": label || null,
      dataset: { kind },
    },
    el("span", { class: "ov-title" }, title),
    detail ? el("span", { class: "ov-detail" }, detail) : null,
    pending ? null : summary,
  );
}

const arrow = () => el("span", { class: "ov-arrow", "aria-hidden": "true" }, "↓");

function attentionWords(arch, cross) {
  const a = arch.attention;
  const heads = a.kind === "MHA" ? `${a.heads} heads` : `${a.heads} query heads, ${a.kv_heads} key/value head${a.kv_heads === 1 ? "" : "s"} (${a.kind})`;
  const where = cross ? "reads the encoder" : arch.positions === "rope" ? "RoPE on q and k" : arch.positions === "alibi" ? "ALiBi bias" : arch.positions === "t5_relative" ? "relative position bias" : "";
  // q/k-norm (before RoPE), the soft-cap on the scores (before the mask) and the windows
  const qkNorm = a.qk_norm ? `q/k ${NORM_NAMES[arch.norm]} ${a.qk_norm_scope === "all" ? "over all heads" : "per head"}` : "";
  const cap = a.softcap ? `scores soft-capped at ${a.softcap}` : "";
  return [heads, qkNorm, where, cap, cross ? "" : windowWords(a)].filter(Boolean).join(" · ");
}

function ffnWords(arch) {
  const f = arch.ffn;
  const kind = f.gated ? `gated ${f.activation}` : f.activation;
  if (!f.experts) return `${kind}: ${count(arch.d_model)} → ${count(f.d_ff)} → ${count(arch.d_model)}`;
  // a mixture of experts: a router picks k of n experts per token and mixes them by weight
  const shared = f.shared_d_ff ? ` + a shared expert (${count(f.shared_d_ff)})` : "";
  return `${f.router} router → ${f.per_token} of ${f.experts} experts per token, each ${kind}: ` +
    `${count(arch.d_model)} → ${count(f.expert_d_ff)} → ${count(arch.d_model)}${shared}; Σ w_j · expert_j(x)`;
}

// where each sublayer's norms sit (config.norm_placement), as the block's equation
const PLACEMENT_FLOW = {
  pre: "x + f(norm(x))",
  post: "norm(x + f(x))",
  sandwich: "x + norm(f(norm(x)))", // Gemma 2, 3
  output: "x + norm(f(x))", // OLMo 2
};

/** The parts of a block in the order its data flows, as small labelled chips. */
function blockFlow(arch, hasCross) {
  const norm = NORM_NAMES[arch.norm];
  const { placement, capabilities: can } = arch;
  const part = (name, cls) => el("span", { class: `ov-part ov-part-${cls}` }, name);
  const sub = (name, cls) => {
    if (can.norm_after_add) return [part(name, cls), part("+ x", "add"), part(norm, "norm")];
    const before = can.norm_on_input ? [part(norm, "norm")] : []; // on the sublayer's input
    const after = can.norm_on_output ? [part(norm, "norm")] : []; // on its output
    return [...before, part(name, cls), ...after, part("+ x", "add")];
  };
  if (arch.parallel_residual) { // both read the block's input: side by side, one sum
    const own = arch.shared_norm ? null : part(norm, "norm"); // Phi-2: one norm feeds both
    return el("span", { class: "ov-flow ov-parallel", title: "x + Attn(norm(x)) + FFN(norm(x))" },
      arch.shared_norm ? part(norm, "norm") : null,
      el("span", { class: "ov-branch" }, own, part("attention", "attn")), part("∥", "add"),
      el("span", { class: "ov-branch" }, own?.cloneNode(true), part("feed-forward", "ffn")), part("+ x", "add"));
  }
  return el("span", { class: "ov-flow", dataset: { placement }, title: PLACEMENT_FLOW[placement] ?? "" },
    sub("attention", "attn"), hasCross ? sub("cross-attention", "attn") : null,
    sub(arch.ffn.experts ? `router → ${arch.ffn.per_token} of ${arch.ffn.experts} experts` : "feed-forward", "ffn"));
}

/** The residual stream's mean ‖x‖ after each block: one bar per block, each a way in. */
function blockBars(blocks, onZoom, revealed) {
  const norms = blocks.map((b) => meanNorm(b.stages[b.stages.length - 1]));
  const largest = Math.max(...norms.filter((n) => n !== null), 0) || 1;
  return el("span", { class: "ov-bars", role: "group", "aria-label": "open one block" },
    blocks.map((b, i) => {
      const n = norms[i];
      const shown = n !== null && revealed(b.stages[b.stages.length - 1].id);
      return el("button", {
        type: "button",
        class: "ov-bar",
        title: `block ${b.layer}${shown ? `: mean ‖x‖ ${number(n, 3)} after it` : ""}`,
        "aria-label": `open block ${b.layer}`,
        onclick: (event) => { event.stopPropagation(); onZoom(b.group); },
        style: { height: `${shown ? Math.max(3, Math.round((28 * n) / largest)) : 3}px` },
      });
    }));
}

function stackColumn(stack, view) {
  const { payload, onZoom, revealed } = view;
  const arch = payload.architecture;
  const parts = sections(payload.stages).filter((s) => s.stack === stack);
  const embed = parts.find((s) => s.kind === "embed");
  const blocks = parts.filter((s) => s.kind === "block");
  const final = parts.find((s) => s.kind === "final");
  const out = [];
  if (embed) {
    const stream = embed.stages.find((s) => s.id.endsWith("embed.out"));
    const positions = embed.stages.some((s) => s.id.endsWith("embed.positions"));
    const v = arch.vision; // a ViT: W_patch, a P × P convolution with stride P, then [CLS]
    const table = v
      ? `W_patch: ${v.channels * v.patch_size ** 2} → ${arch.d_model} (a ${v.patch_size} × ${v.patch_size} convolution, stride ${v.patch_size}) + [CLS]`
      : `E: ${arch.vocab_size.toLocaleString("en")} × ${arch.d_model}`;
    out.push(box({
      kind: "embed",
      title: v ? "Patch embedding" : "Embedding",
      detail: table + (positions ? ` + ${arch.positions} positions` : ""),
      summary: lastTokenStrip(stream, arch.d_model),
      pending: !revealed(stream.id),
      onClick: () => view.onOpenStage(stream.id),
      label: "the embedding: open its step in the walk",
    }), arrow());
  }
  if (blocks.length) {
    const first = blocks[0];
    const hasCross = first.stages.some((s) => s.cross);
    const pattern = first.stages.find((s) => s.id.endsWith(".attn.pattern"));
    out.push(box({
      kind: "block",
      title: `Block × ${blocks.length}`,
      detail: [attentionWords(arch, false), hasCross ? `cross-attention: ${attentionWords(arch, true)}` : "", `feed-forward ${ffnWords(arch)}`].filter(Boolean).join(" · "),
      summary: el("span", { class: "ov-block-summary" }, blockFlow(arch, hasCross), pattern && revealed(pattern.id) ? miniMap(pattern) : null,
        blockBars(blocks, onZoom, revealed), el("span", { class: "ov-detail" }, "the stream's size after each block: click a bar to open that block")),
      onClick: () => onZoom(first.group),
      label: `the ${blocks.length} blocks: open block ${first.layer}`,
    }), arrow());
  }
  if (final) {
    const stage = final.stages[0];
    out.push(box({
      kind: "norm",
      title: `Final ${NORM_NAMES[arch.norm]}`,
      summary: lastTokenStrip(stage, arch.d_model),
      pending: !revealed(stage.id),
      onClick: () => view.onOpenStage(stage.id),
    }));
  }
  return el("div", { class: "ov-stack", dataset: { stack } }, STACK_TITLES[stack] ? el("h3", { class: "ov-stack-title" }, STACK_TITLES[stack]) : null, out);
}

/** A vision model's input: the image cut into its patches, [CLS] in front. */
function imageBox(payload, pending) {
  const [rows, cols] = payload.image.grid;
  return box({ kind: "tokens", title: "Image → patches", detail: `[CLS] + ${rows} × ${cols} patches = ${payload.tokens.length} tokens`, summary: cutImage(payload, 96), pending });
}

function tokensBox(tokens, title, pending) {
  const shown = tokens.slice(0, 12).map((t) => tokenText(t.text)).join(" ");
  return box({ kind: "tokens", title, detail: `${tokens.length} token${tokens.length === 1 ? "" : "s"}`, summary: el("span", { class: "ov-tokens" }, shown + (tokens.length > 12 ? " …" : "")), pending });
}

/** What the model ends with: the next token, a label, the sentence vector or word scores. */
function outputBoxes(view) {
  const { payload, revealed } = view;
  const arch = payload.architecture;
  const stages = payload.stages.filter((s) => s.group === "output");
  const last = stages[stages.length - 1];
  const pending = last ? !revealed(last.id) : false;
  const open = (stage) => () => view.onOpenStage(stage.id);
  if (payload.prediction) {
    const top = payload.prediction.steps[0].top.slice(0, TOP_TOKENS);
    const { settings, token } = payload.prediction;
    return [
      box({ kind: "head", title: "LM head", detail: `scores for all ${arch.vocab_size.toLocaleString("en")} tokens` + (arch.head.softcap ? `, soft-capped: ${arch.head.softcap} · tanh(z / ${arch.head.softcap})` : ""),
        summary: el("ol", { class: "ov-top" }, top.map((e) => el("li", {}, `${quoted(e.token)} ${percent(e.p, 1)}`))), pending, onClick: open(last) }),
      arrow(),
      box({ kind: "sample", title: "Sampling", detail: settings.greedy ? "greedy: the likeliest" : `temperature ${settings.temperature}${settings.top_k ? ` · top-k ${settings.top_k}` : ""}${settings.top_p < 1 ? ` · top-p ${settings.top_p}` : ""}`,
        summary: el("span", { class: "ov-token" }, quoted(token.text)), pending }),
    ];
  }
  if (payload.classification) {
    const { classes, label } = payload.classification;
    return stages.flatMap((stage, i) => [...(i ? [arrow()] : []), box({ kind: "head", title: plainTitle(stage), pending: !revealed(stage.id), onClick: open(stage),
      summary: stage.id === "classifier.logits" ? el("span", { class: "ov-token" }, `${classes[label].label} ${percent(classes[label].p, 1)}`) : lastTokenStrip(stage, arch.d_model) })]);
  }
  if (arch.sentence) {
    const vector = stages.find((s) => s.id === "sentence.vector");
    return [box({ kind: "head", title: "The sentence vector", detail: `${arch.sentence.pooling} pooling, then length 1`,
      summary: lastTokenStrip(vector, arch.d_model), pending, onClick: open(vector) })];
  }
  const guesses = (payload.masked?.positions ?? []).slice(0, TOP_TOKENS);
  return stages.map((stage) => box({ kind: "head", title: "Masked-LM head", detail: `a score for each of ${arch.vocab_size.toLocaleString("en")} words at each position`, pending: !revealed(stage.id), onClick: open(stage),
    summary: el("ol", { class: "ov-top" }, guesses.map((g) => el("li", {}, `${g.position}: ${quoted(g.top[0].token)} ${percent(g.top[0].p, 1)}`))) }));
}

function modelView(view) {
  const { payload, revealed } = view;
  const stacks = [...new Set(sections(payload.stages).map((s) => s.stack).filter((s) => s !== ""))];
  const tokensPending = !revealed("tokens");
  if (!stacks.length) { // one stack: a single column
    const column = stackColumn("", view);
    column.prepend(payload.image ? imageBox(payload, tokensPending) : tokensBox(payload.tokens, "Tokens", tokensPending), arrow());
    column.append(arrow(), ...outputBoxes(view));
    return el("div", { class: "ov-model" }, column);
  }
  const [encoder, decoder] = stacks.map((s) => stackColumn(s, view));
  const under = (column, node) => column.querySelector(".ov-stack-title").after(node, arrow()); // under its title
  under(encoder, tokensBox(payload.tokens, "Tokens", tokensPending));
  under(decoder, tokensBox(payload.decoder_tokens ?? [], "Tokens", tokensPending));
  decoder.append(arrow(), ...outputBoxes(view));
  return el("div", { class: "ov-model ov-two" }, encoder,
    el("span", { class: "ov-cross", "aria-hidden": "true" }, "the encoder's output feeds every decoder block's cross-attention →"), decoder);
}

// a block -------------------------------------------------------------------------------
function blockView(view, group) {
  const { payload, revealed, onZoom } = view;
  const arch = payload.architecture;
  const section = sections(payload.stages).find((s) => s.group === group);
  if (!section) return el("p", { class: "hint" }, `This model has no ${group}.`);
  const items = [];
  for (const stage of section.stages) {
    const { kind, cross } = stage;
    const pending = !revealed(stage.id);
    const title = view.level === "beginner" ? plainTitle(stage, cross) : stage.title;
    let summary = null;
    if (kind === "attn.pattern") summary = headTiles(view, stage);
    else if (stage.value?.preview) summary = lastTokenStrip(stage, stage.value.shape[stage.value.shape.length - 1]);
    items.push(box({ kind: kind.split(".")[0].replace("_", "-"), title, detail: sizeText(stage, view.level), summary, pending,
      onClick: stage.trace ? () => view.onOpenStage(stage.id) : null }));
  }
  return el("div", { class: "ov-block-steps" },
    el("button", { type: "button", class: "ov-back", onclick: () => onZoom("") }, "← the whole model"), items);
}

/** One tile per head of an attention step: its own map once the whole pattern has come. */
function headTiles(view, stage) {
  const base = stage.id.replace(/\.pattern$/, "");
  const heads = stage.value?.shape?.[0] ?? view.payload.architecture.attention.heads;
  const tiles = el("span", { class: "ov-heads", role: "group", "aria-label": "open one head" });
  const tile = (h, picture) => el("button", {
    type: "button", class: "ov-head", "aria-label": `open head ${h}`, title: `head ${h}`,
    onclick: (event) => { event.stopPropagation(); view.onZoom(`${base}:${h}`); },
  }, picture ?? el("span", { class: "ov-head-name" }, `h${h}`));
  tiles.append(...Array.from({ length: heads }, (_, h) => tile(h)));
  view.loadStage(stage.trace).then((answer) => {
    const all = unpack(answer.value);
    const [, rows, cols] = all.shape;
    tiles.replaceChildren(...Array.from({ length: heads }, (_, h) => tile(h, thumbnail(slice(all, h).values, rows, cols, HEAD_TILE))));
  }, () => {}); // the tiles stay named buttons: the map is an extra
  return tiles;
}

// one head -------------------------------------------------------------------------------
function headView(view, zoom) {
  const { payload } = view;
  const stage = payload.stages.find((s) => s.trace === `${zoom.base}.pattern`);
  if (!stage) return el("p", { class: "hint" }, `This model has no ${zoom.base}.`);
  const queries = axisTokens(stage, "t", payload) ?? [];
  const keys = axisTokens(stage, "s", payload) ?? [];
  const head = zoom.head;
  const query = zoom.query ?? (payload.image ? 0 : queries.length - 1); // an image: [CLS], what the label reads
  const mapBox = el("div", { class: "ov-head-map" }, el("p", { class: "loading" }, "loading the attention weights…"));
  const pair = queryKeyView({ traces: queryKeyTraces(stage, payload.stages), stage, payload, level: view.level, loadStage: view.loadStage, onQuery: (q) => view.onZoom(zoomText({ ...zoom, query: q })) });
  pair.show(head, query);
  view.loadStage(stage.trace).then((answer) => {
    const all = unpack(answer.value);
    const [heads, rows, cols] = all.shape;
    if (head >= heads) {
      mapBox.replaceChildren(el("p", { class: "hint" }, `This attention has heads 0 to ${heads - 1}.`));
      return;
    }
    const map = heatmap({
      values: slice(all, head).values, rows, cols, scale: "unit", square: true,
      rowLabels: queries.map((t) => tokenText(t.text)), colLabels: keys.map((t) => tokenText(t.text)),
      rowTitle: "query", colTitle: "key",
      describe: (r, c, v) => `${quoted(queries[r]?.text ?? "?")} reads ${quoted(keys[c]?.text ?? "?")}: weight ${number(v, 3)} (click: this query)`,
    });
    const canvas = map.querySelector("canvas");
    canvas.addEventListener("click", (event) => {
      const row = Math.min(rows - 1, Math.max(0, Math.floor((event.offsetY / canvas.clientHeight) * rows)));
      view.onZoom(zoomText({ ...zoom, query: row }));
    });
    const overlay = payload.image ? patchAttentionView({ payload, onQuery: (q) => view.onZoom(zoomText({ ...zoom, query: q })) }) : null;
    overlay?.show(queryRow(slice(all, head), query), query, `head ${head}`);
    mapBox.replaceChildren(
      el("nav", { class: "ov-head-picker", "aria-label": "heads" }, Array.from({ length: heads }, (_, h) =>
        el("button", { type: "button", class: `ov-head-pick${h === head ? " current" : ""}`, "aria-current": h === head ? "true" : null,
          onclick: () => view.onZoom(zoomText({ ...zoom, head: h })) }, String(h)))),
      map, overlay?.element ?? "");
    mapBox.dataset.ready = "1";
  }, (error) => mapBox.replaceChildren(el("p", { class: "error-inline" }, error.message)));
  return el("div", { class: "ov-head-view" },
    el("button", { type: "button", class: "ov-back", onclick: () => view.onZoom(zoom.block) }, `← block ${stage.layer}`),
    el("p", { class: "hint" }, "Each row is one token (the query) and how it spreads its attention over the tokens it may read (the keys); each row adds up to 1. Click a row to see how its weights are made from q · k."),
    mapBox, pair.element);
}

// the panel -------------------------------------------------------------------------------
function crumbs(view, zoom) {
  const parts = [["Model", ""]];
  const block = zoom.block ? view.payload.stages.find((s) => s.group === zoom.block) : null; // its first step says its layer and stack
  if (zoom.block) parts.push([`Block ${block?.layer ?? null}${block?.stack ? ` (${block.stack})` : ""}`, zoom.block]);
  if (zoom.base) parts.push([`${zoom.base.endsWith("cross_attn") ? "cross-attention " : ""}head ${zoom.head}`, zoomText({ ...zoom, query: null })]);
  if (zoom.base && zoom.query !== null) parts.push(["query · key", zoomText(zoom)]);
  return el("nav", { class: "ov-crumbs", "aria-label": "zoom" }, parts.map(([label, target], i) => [
    i ? el("span", { "aria-hidden": "true" }, " › ") : null,
    i === parts.length - 1
      ? el("span", { class: "ov-crumb current", "aria-current": "location" }, label)
      : el("button", { type: "button", class: "ov-crumb", onclick: () => view.onZoom(target) }, label),
  ]));
}

/**
 * view: {payload, level, zoom, onZoom(zoom), onOpenStage(id), loadStage(name) -> Promise,
 *        revealed(id) -> bool (teaching mode: whether the reveal has reached a step)}
 */
export function renderOverview(container, view) {
  const zoom = parseZoom(view.zoom);
  let body;
  if (zoom.base) body = headView(view, zoom);
  else if (zoom.block) body = blockView(view, zoom.block);
  else body = modelView(view);
  container.replaceChildren(crumbs(view, zoom), body);
  container.dataset.zoom = view.zoom || "model";
}
