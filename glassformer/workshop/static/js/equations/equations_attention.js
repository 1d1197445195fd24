// Attention's equations (glassformer/nn/attention.py, nn/masks.py): Q, K and V projected (a
// bias, q/k-norm and RoPE where the model has them), the scores scaled (ALiBi's or T5's bias
// added), soft-capped (Gemma 2), masked (causal, a sliding window), the softmax, each head's
// weighted sum of values and the output projection. Read from the architecture summary
// (attention: kind, heads, kv_heads, d_head, scale, window, layer_windows, softcap, qkv_bias,
// qk_norm, qk_norm_scope, out_bias; positions; stacks) and the step (its stack, layer, cross).

import { normTex } from "./equations_norm.js";
import { isRope, positionBias, ropeAngles, ropePairs } from "./equations_positions.js";
import { eq, exact, num, plusBias, real, shownNum, sub } from "./equations_tex.js";

const stackOf = (arch, stage) => arch.stacks.find((s) => s.name === stage.stack);

function projection(letter, arch, cross, layer = null) {
  const a = arch.attention;
  const heads = letter === "Q" ? a.heads : a.kv_heads;
  const source = cross && letter !== "Q" ? "\\mathrm{enc}" : "\\hat{x}";
  const product = `${source}\\, W_{${letter}}${plusBias(a.qkv_bias, letter)}`;
  // q/k-norm (Qwen3): each head's q and k normalized over its d_head features, before RoPE
  const normed = letter !== "V" && a.qk_norm ? `${normTex(arch)}_{${letter.toLowerCase()}}(${product})` : product;
  const made = letter !== "V" && isRope(arch, cross) ? `\\mathrm{RoPE}(${normed})` : normed;
  const shape = real(num(arch.d_model), `(${num(heads)} \\cdot ${num(a.d_head)})`);
  const angles = letter === "Q" && isRope(arch, cross) ? `, \\quad ${ropeAngles(arch, layer)}` : "";
  return `${letter} = ${made}, \\quad W_{${letter}} \\in ${shape}${angles}`;
}

function queries({ arch, value, cross, stage }) {
  const a = arch.attention;
  const rope = isRope(arch, cross) ? `, then RoPE: ${ropePairs(arch)}` : "";
  const scope = a.qk_norm_scope === "all"
    ? `over all ${a.heads * a.d_head} query features at once, before the split into heads`
    : `over each head's ${a.d_head} features`;
  const normed = a.qk_norm ? `; q/k-norm ${scope}` : "";
  return eq(projection("Q", arch, cross, stage.layer), `${a.heads} heads of ${a.d_head}${normed}${rope}`, value);
}

function keyValueNote(letter, arch, cross) {
  const a = arch.attention;
  const each = `${a.kv_heads} key/value head${a.kv_heads === 1 ? "" : "s"} shared by ${a.heads} query heads`;
  const shared = a.kind === "MHA" ? `${a.kv_heads} heads of ${a.d_head}` : `${a.kind}: ${each} (${a.heads / a.kv_heads} each)`;
  const rope = letter === "K" && isRope(arch, cross) ? ", rotated by position as Q (RoPE)" : "";
  return `${cross ? "from the encoder's output: " : ""}${shared}${rope}`;
}

function scores({ arch, value, cross, stage }) {
  const e = arch.attention.d_head;
  const biased = !cross && (arch.positions === "alibi" || arch.positions === "t5_relative");
  const bias = biased ? " + B" : "";
  const qk = "Q K^{\\top}";
  // The multiplier is 1/√d_head unless the config says otherwise (T5: 1, no scaling).
  const scale = arch.attention.scale ?? 1 / Math.sqrt(e);
  let latex, note;
  if (Math.abs(scale * Math.sqrt(e) - 1) < 1e-6) {
    const over = (below) => `\\dfrac{${qk}}{${below}}${bias}`;
    latex = `S = ${over("\\sqrt{d_{\\mathrm{head}}}")} = ${over(`\\sqrt{${num(e)}}`)} = ${over(num(Math.sqrt(e)))}`;
    // Vaswani et al. (2017): dot products of d_head terms grow like √d_head.
    note = [`divided by √${e} so that the spread of the scores does not grow with d`, sub("head")];
  } else if (scale === 1) {
    latex = `S = ${qk}${bias}`;
    note = "not scaled: attn_scale = 1";
  } else {
    latex = `S = ${num(scale)}\\, ${qk}${bias}`;
    note = ["scaled by attn_scale = ", shownNum(scale)];
  }
  if (biased) {
    const [definition, words] = positionBias(arch, Boolean(stackOf(arch, stage)?.causal));
    latex += `, \\quad ${definition}`;
    note = [note, `; ${words}`];
  }
  return eq(latex, note, value, "scores");
}

/** The score soft-cap (Gemma 2): every score squashed into (−c, c) before the mask. */
function capped({ arch, value }) {
  const c = num(arch.attention.softcap);
  const words = `near 0 unchanged; no score beyond ±${arch.attention.softcap}`;
  return eq(`S \\gets ${c} \\tanh\\!\\left(\\dfrac{S}{${c}}\\right)`, words, value, "scores");
}

/** Self-attention's mask (nn/masks.py build_mask): causal hides the later keys, a sliding
 * window of w the keys w or more places back; each block its own window (Gemma 2, 3). */
function mask({ arch, stage }) {
  const layer = stage.layer;
  const windows = arch.attention.layer_windows;
  const window = layer !== null && windows ? windows[layer] ?? null : arch.attention.window;
  const causal = Boolean(stackOf(arch, stage)?.causal);
  const hidden = [causal ? "j > i" : null, window ? `j \\le i - ${exact(window)}` : null].filter(Boolean);
  if (!hidden.length) return eq("S_{ij} \\text{ unchanged}", "no key is hidden");
  const why = [causal ? "a key after its query" : null, window ? `a key ${window} or more places before its query` : null];
  return eq(
    `S_{ij} \\gets -\\infty \\quad \\text{where } ${hidden.join(" \\text{ or } ")}`,
    why.filter(Boolean).join("; "),
  );
}

function weighted({ arch, value }) {
  const a = arch.attention;
  const group = a.heads / a.kv_heads;
  const v = a.kind === "MHA" ? "V_h" : `V_{\\lfloor h / ${num(group)} \\rfloor}`;
  const shared = a.kind === "MHA" ? "" : `; ${group} query heads share each value head`;
  return eq(`Z_h = A_h\\, ${v}, \\quad h = 0, \\dots, ${num(a.heads - 1)}`, `in each of the ${a.heads} heads${shared}`, value);
}

function output({ arch, value }) {
  const a = arch.attention;
  const heads = `\\operatorname{concat}(Z_0, \\dots, Z_{${num(a.heads - 1)}})`;
  const shape = real(`(${num(a.heads)} \\cdot ${num(a.d_head)})`, num(arch.d_model));
  return eq(`\\mathrm{out} = ${heads}\\, W_O${plusBias(a.out_bias, "O")}, \\quad W_O \\in ${shape}`, "", value);
}

/** The templates by step kind (self- and cross-attention alike: ctx.cross tells them apart). */
export const ATTENTION_EQUATIONS = {
  "attn.q": queries,
  "attn.k": ({ arch, value, cross }) => eq(projection("K", arch, cross), keyValueNote("K", arch, cross), value),
  "attn.v": ({ arch, value, cross }) => eq(projection("V", arch, cross), keyValueNote("V", arch, cross), value),
  "attn.scores": scores,
  "attn.capped": capped,
  "attn.mask": mask,
  "attn.pattern": ({ sizes, value }) =>
    eq(
      "A_{ij} = \\operatorname{softmax}_j(S_{ij}) = \\dfrac{e^{S_{ij}}}{\\sum_{k} e^{S_{ik}}}",
      [shownNum(sizes.h), " heads × ", shownNum(sizes.t), " rows, each summing to 1"],
      value,
      "weights",
    ),
  "attn.z": weighted,
  "attn.out": output,
};
