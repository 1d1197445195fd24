// The model in a few lines, from payload.architecture (architecture.summary(config)):
// plain words for beginners; the numbers, the heads and the stream's norm layer by layer
// above that; the config's own field names in advanced. The words come with the payload
// (architecture.words, glassformer/workshop/walk/model_words.py): this module shows them.

import { unpack } from "../core/arrays.js";
import { el, svg } from "../core/dom.js";
import { count, number } from "../core/format.js";

const CHART_HEIGHT = 60; // px
const CHART_BAR = 12; // px per layer

/** Which blocks look through a sliding window: "window of 4", or Gemma's mix "window of 4,
 * every 2nd block global"; "" when every block is global. */
export function windowWords(a) {
  const widths = [...new Set((a.layer_windows ?? []).filter((w) => w !== null))];
  if (!widths.length) return "";
  const every = a.global_every;
  const nth = every === 2 ? "2nd" : every === 3 ? "3rd" : `${every}th`;
  return `window of ${widths.join(", ")}${every ? `, every ${nth} block global` : ""}`;
}

/** A vision model's input: "1 × 8 × 8 pixels in 16 patches of 2 × 2; [CLS] + 16 = 17 tokens". */
function imageText(v) {
  return `${v.channels} × ${v.image_size} × ${v.image_size} pixels in ${v.patches} patches of ${v.patch_size} × ${v.patch_size}; [CLS] + ${v.patches} = ${v.patches + 1} tokens`;
}

function headsText(a) {
  if (a.kind === "MHA") return `${a.heads} heads of ${a.d_head} dimensions (multi-head attention: each head has its own queries, keys and values)`;
  const each = a.heads / a.kv_heads;
  return `${a.heads} query heads of ${a.d_head} dimensions; ${a.kind}: ${a.kv_heads} key/value head${a.kv_heads === 1 ? "" : "s"}, each shared by ${each} query heads`;
}

function facts(arch, model, level) {
  const a = arch.attention;
  const norm = arch.norm === "rmsnorm" ? "RMSNorm" : "LayerNorm";
  const rows = [
    ["family", arch.family.replace("_", "-")],
    ["blocks", arch.words.blocks],
    ["d_model", arch.d_model],
    ["attention", headsText(a)],
    ["feed-forward", `${arch.ffn.activation}${arch.ffn.gated ? " (gated)" : ""}, d_ff = ${arch.ffn.d_ff}`],
    ["positions", arch.positions_text],
    ["norm", `${norm}, ${arch.words.placement}`],
    arch.vision ? ["image", imageText(arch.vision)] : ["vocabulary", `${arch.vocab_size.toLocaleString("en")} tokens`],
  ];
  const limits = [windowWords(a), a.softcap ? `scores soft-capped at ±${a.softcap}` : "", arch.head?.softcap ? `logits soft-capped at ±${arch.head.softcap}` : ""];
  if (limits.some(Boolean)) rows.push(["limits", limits.filter(Boolean).join("; ")]);
  if (model) rows.push(["parameters", count(model.parameters)], ["max_seq_len", model.max_seq_len.toLocaleString("en")]);
  if (level === "advanced") {
    const heads = `n_heads=${a.heads} n_kv_heads=${a.kv_heads} d_head=${a.d_head}`;
    const rest = `positions=${arch.positions} norm=${arch.norm} norm_placement=${arch.placement} activation=${arch.ffn.activation}`;
    rows.push(["config", `${heads} ${rest}`]);
  }
  return el("dl", { class: "facts" }, rows.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, String(value))]));
}

/** Mean ‖x‖ of the residual stream after each block (and after the embedding), per stack:
 * Map stack -> [{label: "emb" | layer, mean}] (the charts', and the tour's words about them). */
export function streamNorms(stages) {
  const stacks = new Map();
  for (const stage of stages) {
    const { stack, layer, kind } = stage;
    if (!stage.value?.norms || !(kind === "resid_post" || kind === "embed.out")) continue;
    const norms = unpack(stage.value.norms).values;
    const mean = norms.reduce((sum, v) => sum + v, 0) / norms.length;
    if (!stacks.has(stack)) stacks.set(stack, []);
    stacks.get(stack).push({ label: layer === null ? "emb" : String(layer), mean });
  }
  return stacks;
}

function normChart(name, points) {
  const largest = Math.max(...points.map((p) => p.mean)) || 1;
  const width = points.length * CHART_BAR;
  const chart = svg("svg", { class: "layer-chart", width, height: CHART_HEIGHT, viewBox: `0 0 ${width} ${CHART_HEIGHT}` });
  points.forEach((point, i) => {
    const height = Math.max(1, ((CHART_HEIGHT - 2) * point.mean) / largest);
    const bar = svg("rect", { x: i * CHART_BAR + 1, y: CHART_HEIGHT - height, width: CHART_BAR - 2, height });
    bar.append(svg("title", {}, document.createTextNode(`${point.label === "emb" ? "after the embedding" : `after block ${point.label}`}: mean ‖x‖ ${number(point.mean)}`)));
    chart.append(bar);
  });
  const [first, last] = [number(points[0].mean, 3), number(points[points.length - 1].mean, 3)];
  const caption = `mean ‖x‖ of the residual stream after the embedding and after each block (${first} → ${last})`;
  return el("figure", { class: "layer-norms" }, chart, el("figcaption", {}, `${name ? `${name}: ` : ""}${caption}`));
}

/** The chart of one stack's stream ("" for a one-stack model): the tour's "other blocks". */
export function streamNormChart(stages, stack) {
  const points = streamNorms(stages).get(stack);
  return points ? normChart(stack, points) : null;
}

/** model: the /api/models entry (parameters, max_seq_len), or null. */
export function renderArchitecture(container, payload, model, level) {
  const arch = payload.architecture;
  const name = payload.model || model?.name || "this model";
  if (level === "beginner") {
    const size = model ? arch.words.parameters.replace("{parameters}", count(model.parameters)) : "";
    container.replaceChildren(el("p", { class: "plain" }, el("strong", {}, name), ` ${arch.words.plain}${size}.`));
    return;
  }
  const charts = [...streamNorms(payload.stages)].map(([stack, points]) => normChart(stack, points));
  container.replaceChildren(el("p", { class: "plain" }, el("strong", {}, name)), facts(arch, model, level), ...charts);
}
