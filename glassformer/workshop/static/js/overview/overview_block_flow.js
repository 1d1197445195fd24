// What the overview says a block is made of, from the architecture summary (attention: kind,
// heads, kv_heads, qk_norm, softcap, windows; ffn: activation, gated, d_ff, experts, router;
// norm, placement, capabilities, parallel_residual, shared_norm, positions): its attention
// and feed-forward layer in words, and its parts as chips in the order its data flows.

import { windowWords } from "../panels/architecture.js";
import { el } from "../core/dom.js";
import { count } from "../core/format.js";
import { NORM_NAMES } from "./overview_box.js";

const POSITION_WORDS = { rope: "RoPE on q and k", alibi: "ALiBi bias", t5_relative: "relative position bias" };

/** An attention in words: its heads, q/k-norm, positions, soft-cap and windows. */
export function attentionWords(arch, cross) {
  const a = arch.attention;
  const kvHeads = `${a.kv_heads} key/value head${a.kv_heads === 1 ? "" : "s"}`;
  const heads = a.kind === "MHA" ? `${a.heads} heads` : `${a.heads} query heads, ${kvHeads} (${a.kind})`;
  const where = cross ? "reads the encoder" : POSITION_WORDS[arch.positions] ?? "";
  // q/k-norm (before RoPE), the soft-cap on the scores (before the mask) and the windows
  const scope = a.qk_norm_scope === "all" ? "over all heads" : "per head";
  const qkNorm = a.qk_norm ? `q/k ${NORM_NAMES[arch.norm]} ${scope}` : "";
  const cap = a.softcap ? `scores soft-capped at ${a.softcap}` : "";
  return [heads, qkNorm, where, cap, cross ? "" : windowWords(a)].filter(Boolean).join(" · ");
}

/** The feed-forward layer in words: its sizes, or a mixture of experts' router and experts. */
export function ffnWords(arch) {
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
export function blockFlow(arch, hasCross) {
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
  const ffn = arch.ffn.experts ? `router → ${arch.ffn.per_token} of ${arch.ffn.experts} experts` : "feed-forward";
  return el("span", { class: "ov-flow", dataset: { placement }, title: PLACEMENT_FLOW[placement] ?? "" },
    sub("attention", "attn"), hasCross ? sub("cross-attention", "attn") : null, sub(ffn, "ffn"));
}
