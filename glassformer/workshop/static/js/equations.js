// The intermediate level: each step's equation with this input's numbers in it, typeset by
// KaTeX (tex.js), followed by a line of prose: what the symbols stand for here and the range
// of this input's values. The equation is the model's own, read from the architecture
// summary (architecture.summary(config)), and says what glassformer/nn computes: a bias
// term only where the layer has one, the norm's ε, the embedding scale and norm, the RoPE
// base, the sinusoid layout, the head (tied or not, T5's input scale). A number read from
// this input or this model is wrapped in \htmlClass{num}{...}; a name read from the model
// enters the LaTeX only through tex.js `texText`.
// An equation is DOM nodes, never an HTML string: its prose is text (a class's label, from the
// model, stays a label however it is spelled), with <sub>, <sup> and numbers made as elements.

import { el } from "./dom.js";
import { ffnEquations } from "./equations_ffn.js";
import { visionEquations } from "./equations_vision.js";
import { number } from "./format.js";
import { tex, texText } from "./tex.js";

/** A number as TeX, with the digits `number` prints: −1.2e−5 -> -1.2 \times 10^{-5}. */
export function texNumber(value, digits = 4) {
  const shown = number(value, digits).replace(/\u2212/g, "-");
  if (shown === "\u221e" || shown === "-\u221e") return shown.replace("\u221e", "\\infty");
  const [mantissa, exponent] = shown.split("e");
  return exponent === undefined ? mantissa : `${mantissa} \\times 10^{${Number(exponent)}}`;
}

/** A constant of the config as TeX to float32's 7 significant digits, the precision the
 * model computes with (a GGUF file stores 1e-5 as 9.99999974e-6): 1e-12 -> 10^{-12}. */
export function texConstant(raw) {
  const value = Number(raw.toPrecision(7));
  if (value === 0 || (Math.abs(value) >= 1e-3 && Math.abs(value) < 1e7)) return String(value);
  const [mantissa, exponent] = value.toExponential().split("e");
  const power = `10^{${Number(exponent)}}`;
  return mantissa === "1" ? power : `${mantissa} \\times ${power}`;
}

/** An integer exactly, its thousands grouped: 49151 -> 49{,}151 (TeX's comma, no space). */
export function texInteger(value) {
  return value.toLocaleString("en-US").replace(/,/g, "{,}");
}

// Numbers of the model and its config: integers exact (a vocabulary of 49,152 tokens ends at
// id 49,151, not "49,150" rounded), other constants at float32 precision.
const num = (value) => `\\htmlClass{num}{${Number.isInteger(value) ? texInteger(value) : texConstant(value)}}`;
const exact = num;
// A note is a string or a list of strings and nodes (el appends each as text or as itself).
const prose = (note) => (note?.length ? [" ", el("span", { class: "eq-note" }, note)] : []);
const range = (value, what = "values") =>
  value?.min !== undefined ? [" ", el("span", { class: "range" }, `${what} from `, shownNum(value.min), " to ", shownNum(value.max))] : [];
const shownNum = (value) => el("span", { class: "num" }, number(value));
const sub = (text) => el("sub", {}, text);
const sup = (text) => el("sup", {}, text);
const real = (rows, cols) => `\\mathbb{R}^{${rows} \\times ${cols}}`;
const W = (name) => `W_{\\mathrm{${name}}}`;
/** "+ b_name" where the layer has a bias (config qkv_bias, out_bias, ffn_bias, lm_head_bias). */
const plusBias = (present, name) => (present ? ` + b_{${name}}` : "");
/** Whether value is √d (an embedding scale, or the inverse of T5's head input scale). */
const isRootOf = (value, d) => Math.abs(value * value - d) < 1e-6 * d;

/** An equation as a DocumentFragment: the typeset LaTeX, its prose, the range of this step's values. */
function eq(latex, note = "", value = null, what = "values") {
  const out = document.createDocumentFragment();
  out.append(tex(latex), ...prose(note), ...range(value, what));
  return out;
}

const NORM_NAME = { rmsnorm: "RMSNorm", layernorm: "LayerNorm" };
const normName = (arch) => NORM_NAME[arch.norm] ?? arch.norm;
/** The norm's name as LaTeX: \mathrm{RMSNorm}, or a name the page does not know as text. */
const normTex = (arch) => (Object.hasOwn(NORM_NAME, arch.norm) ? `\\mathrm{${NORM_NAME[arch.norm]}}` : texText(arch.norm));

/** norm(u) over its d features as nn/norms.py computes it: LayerNorm with the biased
 * variance (as torch) and ε inside the root; RMSNorm with no centring and no β. */
function normDefinition(arch, u = "x", moments = true) {
  const mean = (term) => `\\tfrac{1}{${num(arch.d_model)}} \\sum_{j} ${term}`;
  const definition =
    arch.norm === "rmsnorm"
      ? `\\mathrm{RMSNorm}(${u}) = \\dfrac{${u}}{\\sqrt{${mean(`${u}_j^2`)} + \\varepsilon}} \\odot \\gamma`
      : `\\mathrm{LayerNorm}(${u}) = \\dfrac{${u} - \\mu}{\\sqrt{\\sigma^2 + \\varepsilon}} \\odot \\gamma + \\beta` +
        (moments ? `, \\quad \\mu = ${mean(`${u}_j`)}, \\quad \\sigma^2 = ${mean(`(${u}_j - \\mu)^2`)}` : "");
  return `${definition}, \\quad \\varepsilon = ${exact(arch.norm_eps)}`;
}

/** What normDefinition(arch, u, false) leaves to words: LayerNorm's mean and variance. */
const momentsNote = (arch) =>
  arch.norm === "rmsnorm" ? "" : `μ, σ²: the mean and the (biased) variance of the ${arch.d_model} features`;

/** A sublayer's input: normed first (pre-norm, a sandwich's first norm) or read as it is. */
function normStep(arch, value) {
  if (arch.capabilities.norm_on_input) return eq(`\\hat{x} = ${normDefinition(arch)}`, "", value);
  const why = arch.capabilities.norm_on_output ? "the norm comes after the sublayer, on its output" : "post-norm: the norm comes after the residual add";
  return eq("\\hat{x} = x", why, value);
}

/** A sublayer's output normed before the add (a sandwich's second norm; OLMo 2's only one). */
function postNorm(arch, normed, output, value) {
  const which = arch.capabilities.norm_on_input ? "a sandwich: a norm before the sublayer and one after it" : "the only norm of the sublayer, on its output";
  return eq(
    `${normed} = ${normTex(arch)}(${output}), \\quad ${normDefinition(arch, "u", false)}`,
    `${which}; its own γ${momentsNote(arch) ? `; ${momentsNote(arch)}` : ""}`,
    value,
  );
}

// [name, definition, note]: exact GELU uses the normal CDF, the tanh variants approximate it
const GELU = ["GELU", "\\mathrm{GELU}(z) = z\\, \\Phi(z)", "Φ: the standard normal distribution function (exact GELU)"];
const GELU_TANH = [
  "GELU",
  "\\mathrm{GELU}(z) \\approx \\tfrac{1}{2} z \\bigl(1 + \\tanh\\bigl(\\sqrt{2/\\pi}\\,(z + 0.044715\\, z^3)\\bigr)\\bigr)",
  "GELU's tanh approximation",
];
const SILU = ["SiLU", "\\mathrm{SiLU}(z) = z\\, \\sigma(z)", "σ: the logistic sigmoid"];
const ACTIVATIONS = {
  relu: ["ReLU", "\\mathrm{ReLU}(z) = \\max(0, z)", ""],
  gelu: GELU,
  gelu_tanh: GELU_TANH,
  silu: SILU,
  swiglu: SILU,
  geglu: GELU,
  geglu_tanh: GELU_TANH,
};
/** An activation's name as LaTeX (inside \mathrm{}): its own, or a name the page does not know as text. */
const activationName = (name) => (Object.hasOwn(ACTIVATIONS, name) ? ACTIVATIONS[name][0] : texText(name));

// positions ---------------------------------------------------------------------------
const SINUSOID_BASE = 10000; // nn/positions.py sinusoidal_table (Vaswani et al., 2017)

function sinusoids(arch, value) {
  const d = num(arch.d_model);
  const angle = `p / ${SINUSOID_BASE}^{2k/${d}}`;
  const k = `k = 0, \\dots, ${num(arch.d_model / 2 - 1)}`;
  return arch.position_params.style === "halved"
    ? eq(
        `P_{p,\\,k} = \\sin(${angle}), \\quad P_{p,\\,${num(arch.d_model / 2)} + k} = \\cos(${angle}), \\quad ${k}`,
        "p: the position; halved: every sine first, then every cosine",
        value,
      )
    : eq(
        `P_{p,\\,2k} = \\sin(${angle}), \\quad P_{p,\\,2k+1} = \\cos(${angle}), \\quad ${k}`,
        "p: the position; interleaved: sine and cosine alternate",
        value,
      );
}

/** RoPE's angle for pair i at position p: p θ_i, θ_i = base^(−2i/e) (NTK: a raised base;
 * linear: positions divided by the factor), as nn/positions.py RotaryEmbedding. */
function ropeAngles(arch, layer = null) {
  const rope = ropeOf(arch, layer);
  const e = arch.attention.d_head;
  const ntk = rope.scaling === "ntk";
  const theta = `\\theta_i = ${ntk ? "b" : exact(rope.base)}^{-2i/${num(e)}}`;
  const raised = ntk
    ? `, \\quad b = ${exact(rope.base)} \\cdot ${exact(rope.factor)}^{${num(e)}/${num(e - 2)}} = ${num(rope.scaled_base)}`
    : "";
  const p = rope.position_scale !== 1 ? `\\tfrac{p}{${num(1 / rope.position_scale)}}` : "p"; // linear scaling
  return `\\text{angle}_i = ${p}\\, \\theta_i, \\quad ${theta}${raised}`;
}

/** The RoPE constants of a block: Gemma 3's windowed blocks turn by their own base, unscaled. */
function ropeOf(arch, layer) {
  const rope = arch.position_params;
  const windowed = layer !== null && (arch.attention.layer_windows ?? [])[layer] != null;
  if (!rope.local_base || !windowed) return rope;
  return { ...rope, base: rope.local_base, scaled_base: rope.local_base, scaling: "none", position_scale: 1 };
}

function ropePairs(arch) {
  const e = arch.attention.d_head;
  const pairs = arch.position_params.style === "interleaved" ? "(2i, 2i + 1)" : `(i, i + ${e / 2})`;
  return `each pair of features ${pairs} rotated by its angle, p the position`;
}

/** The bias B added to self-attention's scores (ALiBi, T5) as LaTeX and prose. */
function positionBias(arch, causal) {
  const params = arch.position_params;
  if (arch.positions === "alibi") {
    const m = params.slopes;
    const shown = m.length <= 4 ? m.map(num) : [num(m[0]), num(m[1]), "\\dots", num(m[m.length - 1])];
    return [
      `B_{h,i,j} = -m_h\\, |i - j|, \\quad (m_0, \\dots, m_{${num(m.length - 1)}}) = (${shown.join(", ")})`,
      "B: ALiBi, a penalty growing with the distance, one slope per head",
    ];
  }
  const buckets = causal ? params.buckets : params.buckets / 2;
  const direction = causal ? "past keys only" : `${buckets} buckets each way`;
  return [
    `B_{h,i,j} = R_{\\mathrm{bucket}(j - i),\\, h}, \\quad R \\in ${real(num(params.buckets), num(arch.attention.heads))}`,
    `B: T5's learned bias per head and bucket of the distance; ${direction}, one bucket per distance below ` +
      `${Math.floor(buckets / 2)}, then logarithmic ones up to ${params.max_distance}`,
  ];
}

// attention ---------------------------------------------------------------------------
const isRope = (arch, cross) => arch.positions === "rope" && !cross;
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

function keyValueNote(letter, arch, cross) {
  const a = arch.attention;
  const shared =
    a.kind === "MHA"
      ? `${a.kv_heads} heads of ${a.d_head}`
      : `${a.kind}: ${a.kv_heads} key/value head${a.kv_heads === 1 ? "" : "s"} shared by ${a.heads} query heads (${a.heads / a.kv_heads} each)`;
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
    latex = `S = \\dfrac{${qk}}{\\sqrt{d_{\\mathrm{head}}}}${bias} = \\dfrac{${qk}}{\\sqrt{${num(e)}}}${bias} = \\dfrac{${qk}}{${num(Math.sqrt(e))}}${bias}`;
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
  return eq(`S \\gets ${c} \\tanh\\!\\left(\\dfrac{S}{${c}}\\right)`, `near 0 unchanged; no score beyond ±${arch.attention.softcap}`, value, "scores");
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

function residual(arch, added, value) {
  if (arch.capabilities.norm_on_output) {
    return eq(`x \\gets x + ${normTex(arch)}(${added})`, "the sublayer's output, normed, added to the stream", value);
  }
  return !arch.capabilities.norm_after_add
    ? eq(`x \\gets x + ${added}`, "", value)
    : eq(
        `x \\gets ${normTex(arch)}(u), \\quad u = x + ${added}, \\quad ${normDefinition(arch, "u", false)}`,
        `post-norm: the sum normalized; ${momentsNote(arch)}`.replace(/; $/, ""),
        value,
      );
}

// embeddings --------------------------------------------------------------------------
/** E[ids] times the embedding scale (√d_model in the original Transformer), as LaTeX. */
function scaledTokens(arch, index) {
  const scale = arch.embeddings.scale;
  if (scale === 1) return `E[${index}]`;
  const root = isRootOf(scale, arch.d_model) ? `\\sqrt{${num(arch.d_model)}}` : num(scale);
  return `${root}\\, E[${index}]`;
}

function embedOut({ arch, value, sizes }) {
  const terms = [scaledTokens(arch, "\\mathrm{ids}")];
  const notes = [];
  if (arch.positions === "learned" || arch.positions === "sinusoidal") {
    terms.push(`P[0, \\dots, ${sizes.t ? num(sizes.t - 1) : "t - 1"}]`);
  } else {
    notes.push(arch.positions_text); // positions enter inside attention, or not at all
  }
  if (arch.embeddings.segments) {
    terms.push("S[0]");
    notes.push(`S: the table of ${arch.embeddings.segments} segments; one text is segment 0`);
  }
  let latex = `x = ${terms.join(" + ")}`;
  if (arch.embeddings.norm) {
    latex = `x = ${normTex(arch)}(u), \\quad u = ${terms.join(" + ")}, \\quad \\varepsilon = ${exact(arch.norm_eps)}`;
    notes.push(`a ${normName(arch)} right after the embeddings`);
  }

  return eq(latex, notes.join("; "), value);
}

/** Soft-capped logits (Gemma 2, 3): the head's raw scores z squashed into (−c, c). */
function cappedLogits({ arch, value }) {
  const c = num(arch.head.softcap);
  return eq(
    `\\mathrm{logits} = ${c} \\tanh\\!\\left(\\dfrac{z}{${c}}\\right)`,
    `z: the raw logits; their order is kept, no score beyond ±${arch.head.softcap}`,
    value,
  );
}

function logits({ arch, value }, name = "\\mathrm{logits}") {
  const head = arch.head;
  const x = arch.capabilities.has_final_norm ? "\\hat{x}" : "x"; // post-norm: no final norm
  const d = num(arch.d_model);
  const v = num(arch.vocab_size);
  const [matrix, shape] = head.tied ? ["E^{\\top}", `E \\in ${real(v, d)}`] : [W("U"), `${W("U")} \\in ${real(d, v)}`];
  const tied = head.tied ? "the output matrix is the token table E, transposed (tied)" : "its own output matrix (untied)";
  if (arch.capabilities.masked_lm) {
    const act = activationName(arch.ffn.activation);
    return eq(
      `${name} = ${normTex(arch)}\\bigl(\\mathrm{${act}}(${x}\\, ${W("dense")} + b_{\\mathrm{dense}})\\bigr)\\, ${matrix} + b_{\\mathrm{vocab}},` +
        ` \\quad ${shape}, \\quad \\varepsilon = ${exact(arch.norm_eps)}`,
      `the masked-LM head; ${tied}`,
      value,
    );
  }
  let input = x;
  let scaled = "";
  if (head.input_scale !== 1) {
    const root = isRootOf(1 / head.input_scale, arch.d_model);
    input = `${root ? `\\tfrac{1}{\\sqrt{${d}}}` : num(head.input_scale)}\\, ${x}`;
    scaled = root ? ["; the stream first scaled by d", sub("model"), sup("−1/2"), " (T5)"] : "; the stream first scaled (lm_head_input_scale)";
  }
  return eq(
    `${name} = ${input}\\, ${matrix}${plusBias(head.bias, "U")}, \\quad ${shape}`,
    [`one score per vocabulary entry; ${tied}`, scaled],
    value,
  );
}

// the classifier's pooling (glassformer/models/classifier.py pool_sequence)
function pooled({ arch, value }) {
  const x = arch.capabilities.has_final_norm ? "\\hat{x}" : "x";
  const forms = {
    cls: [`p = ${x}_0`, "the first token's vector ([CLS]) stands for the sequence"],
    mean: [`p = \\tfrac{1}{T} \\sum_{t} ${x}_t`, "the mean over the real (not padding) tokens"],
    pooler: [`p = \\tanh(${x}_0\\, ${W("p")} + b_p)`, "BERT's pooler on the first token"],
    last: [`p = ${x}_{T-1}`, "the last real token: in a causal model only it has read the whole text"],
  };
  const [latex, note] = forms[arch.classifier.pooling] ?? [`p = \\operatorname{pool}(${x})`, ""];
  return eq(latex, note, value);
}

const EQUATION = {
  tokens: ({ sizes, arch }) =>
    eq(`\\mathrm{ids} = \\mathrm{tokenize}(\\text{text}), \\quad t = ${num(sizes.t)}, \\quad 0 \\le \\mathrm{id}_i \\le ${num(arch.vocab_size - 1)}`),
  "embed.tokens": ({ arch, value }) =>
    eq(
      `x_i = ${scaledTokens(arch, "\\mathrm{id}_i")}, \\quad E \\in ${real(num(arch.vocab_size), num(arch.d_model))}`,
      arch.embeddings.scale === 1 ? "" : ["each token's vector scaled by √d", sub("model"), ", as in the original Transformer"],
      value,
    ),
  "embed.positions": ({ arch, value }) =>
    arch.positions === "sinusoidal"
      ? sinusoids(arch, value)
      : eq(`P[p] \\text{ learned}, \\quad P \\in ${real(num(arch.position_params.max_seq_len), num(arch.d_model))}`, "p: the position, below max_seq_len", value),
  "embed.out": embedOut,
  "attn.in": ({ arch, value }) => normStep(arch, value),
  "attn.q": ({ arch, value, cross, stage }) => {
    const a = arch.attention;
    const rope = isRope(arch, cross) ? `, then RoPE: ${ropePairs(arch)}` : "";
    const scope = a.qk_norm_scope === "all" ? `over all ${a.heads * a.d_head} query features at once, before the split into heads` : `over each head's ${a.d_head} features`;
    const normed = a.qk_norm ? `; q/k-norm ${scope}` : "";
    return eq(projection("Q", arch, cross, stage.layer), `${a.heads} heads of ${a.d_head}${normed}${rope}`, value);
  },
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
  "attn.z": ({ arch, value }) => {
    const a = arch.attention;
    const group = a.heads / a.kv_heads;
    const v = a.kind === "MHA" ? "V_h" : `V_{\\lfloor h / ${num(group)} \\rfloor}`;
    const shared = a.kind === "MHA" ? "" : `; ${group} query heads share each value head`;
    return eq(`Z_h = A_h\\, ${v}, \\quad h = 0, \\dots, ${num(a.heads - 1)}`, `in each of the ${a.heads} heads${shared}`, value);
  },
  "attn.out": ({ arch, value }) => {
    const a = arch.attention;
    return eq(
      `\\mathrm{out} = \\operatorname{concat}(Z_0, \\dots, Z_{${num(a.heads - 1)}})\\, W_O${plusBias(a.out_bias, "O")}, \\quad W_O \\in ${real(`(${num(a.heads)} \\cdot ${num(a.d_head)})`, num(arch.d_model))}`,
      "",
      value,
    );
  },
  "attn.post_norm": ({ arch, value, cross }) =>
    postNorm(arch, cross ? "\\hat{o}_{\\mathrm{cross}}" : "\\hat{o}", cross ? "\\mathrm{out}_{\\mathrm{cross}}" : "\\mathrm{out}", value),
  resid_mid: ({ arch, value }) => residual(arch, "\\mathrm{out}", value),
  resid_cross: ({ arch, value }) => residual(arch, "\\mathrm{out}_{\\mathrm{cross}}", value),
  "ffn.in": ({ arch, value }) => normStep(arch, value),
  ...ffnEquations({ eq, num, real, W, plusBias, ACTIVATIONS, activationName }), // the FFN, or a mixture of experts
  "ffn.post_norm": ({ arch, value }) => postNorm(arch, "\\hat{y}", "y", value),
  resid_post: ({ arch, value }) => residual(arch, "y", value),
  final_norm: ({ arch, value }) => eq(`\\hat{x} = ${normDefinition(arch)}`, "", value),
  logits: (ctx) => (ctx.arch.head.softcap ? cappedLogits(ctx) : logits(ctx)),
  logits_raw: (ctx) => logits(ctx, "z"),
  "classifier.pooled": pooled,
  "classifier.logits": ({ arch, value }) => {
    const c = arch.classifier.classes.length;
    return eq(
      `z = p\\, ${W("c")} + b_c, \\quad ${W("c")} \\in ${real(num(arch.d_model), num(c))}, \\quad P(\\text{class } k) = \\operatorname{softmax}(z)_k`,
      `one score per class: ${arch.classifier.classes.join(", ")}`, // labels from the model: text
      value,
    );
  },
  ...visionEquations({ eq, num, real, W, sub }), // a vision transformer's image, patches and [CLS]
};

/** The step's equation as DOM nodes (a DocumentFragment), or null for a kind with none. */
export function equation(kind, ctx) {
  const make = EQUATION[kind];
  return make ? make(ctx) : null;
}
