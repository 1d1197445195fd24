// What each step says at each level, by step kind (stages.js `parseStage(id).kind`):
//   beginner      a plain sentence (EXPLAIN)
//   intermediate  the equation with this input's numbers in it (equation, typeset by KaTeX)
//   advanced      + the code that computes it (CODE)
// A context `ctx` carries what the sentences need: {stage, value, arch, cross, sizes},
// sizes being the shape letters read off the value (t, s, h, g, e, d, f, v).

import { number } from "./format.js";
import { texHtml } from "./tex.js";

export const CODE = {
  tokens: ["glassformer/inputs.py", "ModelInputs.ids"],
  "embed.tokens": ["glassformer/nn/embeddings.py", "Embeddings.forward"],
  "embed.positions": ["glassformer/nn/positions.py", "LearnedPositions / SinusoidalPositions"],
  "embed.out": ["glassformer/nn/embeddings.py", "Embeddings.forward"],
  "attn.in": ["glassformer/nn/blocks.py", "Block._sublayer"],
  "attn.q": ["glassformer/nn/attention.py", "Attention._self_projections"],
  "attn.k": ["glassformer/nn/attention.py", "Attention._self_projections"],
  "attn.v": ["glassformer/nn/attention.py", "Attention._self_projections"],
  "attn.scores": ["glassformer/nn/attention.py", "Attention.explicit_attention"],
  "attn.mask": ["glassformer/nn/masks.py", "build_mask"],
  "attn.pattern": ["glassformer/nn/attention.py", "Attention.explicit_attention"],
  "attn.z": ["glassformer/nn/attention.py", "Attention.explicit_attention"],
  "attn.out": ["glassformer/nn/attention.py", "Attention.forward"],
  resid_mid: ["glassformer/nn/blocks.py", "Block.forward"],
  resid_cross: ["glassformer/nn/blocks.py", "Block.forward"],
  "ffn.in": ["glassformer/nn/ffn.py", "FeedForward.forward"],
  "ffn.hidden": ["glassformer/nn/ffn.py", "FeedForward.forward"],
  "ffn.act": ["glassformer/nn/ffn.py", "FeedForward.forward"],
  "ffn.out": ["glassformer/nn/ffn.py", "FeedForward.forward"],
  resid_post: ["glassformer/nn/blocks.py", "Block.forward"],
  final_norm: ["glassformer/models/stack.py", "TransformerStack.forward"],
  logits: ["glassformer/models/base.py", "TransformerModel.unembed"],
};

// The cross-attention projections live in Attention.forward (keys and values from the
// encoder's output), not in the self-attention's fused projection.
const CROSS_CODE = {
  "attn.q": ["glassformer/nn/attention.py", "Attention.forward"],
  "attn.k": ["glassformer/nn/attention.py", "Attention.forward"],
  "attn.v": ["glassformer/nn/attention.py", "Attention.forward"],
};

export const PREDICTION_CODE = {
  logits: ["glassformer/workshop/prediction.py", "next_token"],
  repetition: ["glassformer/sampling.py", "apply_repetition_penalty"],
  temperature: ["glassformer/sampling.py", "apply_temperature"],
  top_k: ["glassformer/sampling.py", "top_k_filter"],
  top_p: ["glassformer/sampling.py", "top_p_filter"],
  sample: ["glassformer/sampling.py", "sample"],
};

export function codeLocation(kind, cross = false) {
  return (cross && CROSS_CODE[kind]) || CODE[kind] || null;
}

// beginner ---------------------------------------------------------------------------
const NORM_WORDS = "rescaled to a steady size (normalized), so the numbers stay in a good range";

const EXPLAIN = {
  tokens: () => "The text is cut into pieces called tokens, and each piece gets a number: its id.",
  "embed.tokens": () =>
    "Each token is looked up in a big table and becomes a long list of numbers (a vector) that stands for it.",
  "embed.positions": () =>
    "A vector for each position is added, so the model knows the order of the tokens.",
  "embed.out": ({ arch }) =>
    "This is the start of the residual stream: one vector per token, which every block reads and adds to." +
    (arch.positions === "rope" || arch.positions === "alibi" || arch.positions === "t5_relative"
      ? " Word order is not added here: it enters later, inside attention."
      : ""),
  "attn.in": ({ arch, cross }) =>
    (arch.placement === "pre" ? `Each token's vector is first ${NORM_WORDS}. ` : "") +
    (cross
      ? "Now the decoder's tokens get to look at the encoder's tokens."
      : "Attention is where tokens look at each other."),
  "attn.q": ({ cross }) =>
    `Each ${cross ? "decoder " : ""}token makes a query: a question, "what am I looking for?"`,
  "attn.k": ({ cross }) =>
    `Each ${cross ? "encoder " : ""}token makes a key: a label, "this is what I contain".`,
  "attn.v": ({ cross }) =>
    `Each ${cross ? "encoder " : ""}token makes a value: what it passes on when another token looks at it.`,
  "attn.scores": () => "Every query is compared with every key: a high score means a good match.",
  "attn.mask": ({ stage }) =>
    stage.title.startsWith("causal")
      ? "A token may not look at the tokens after it: when predicting, the future is not known yet."
      : "Nothing is hidden here: every token may look at every token.",
  "attn.pattern": () =>
    "The scores become weights that add up to 1 for each token: how much it looks at each other token.",
  "attn.z": () => "Each token collects the values of the tokens it looks at, mixed by those weights.",
  "attn.out": () => "The results of the attention heads are combined back into one vector per token.",
  resid_mid: () => "Attention's result is added to the stream: the token's vector now carries context.",
  resid_cross: () => "What the decoder read from the encoder is added to the stream.",
  "ffn.in": ({ arch }) =>
    (arch.placement === "pre" ? `The vectors are ${NORM_WORDS}, then ` : "Now ") +
    "each token is processed on its own by a small neural network: the feed-forward layer.",
  "ffn.hidden": () => "The vector is stretched into a much longer one…",
  "ffn.act": () => "…a non-linear function switches parts of it on and off…",
  "ffn.out": () => "…and it is squeezed back to the stream's size.",
  resid_post: () => "The feed-forward result is added to the stream. The block is done; the next block repeats it.",
  final_norm: () => "After the last block, the vectors are normalized one last time.",
  logits: ({ arch }) =>
    arch.family === "encoder"
      ? "Each vector is compared with every word in the vocabulary: a score for each word that could stand at that position."
      : "The last token's vector is compared with every word in the vocabulary: a score for each possible next token.",
};

// Step names without symbols, for beginners (the server's titles carry the maths).
const PLAIN_TITLES = {
  tokens: () => "cut the text into tokens",
  "embed.tokens": () => "look up each token's vector",
  "embed.positions": () => "add where each token stands",
  "embed.out": () => "the residual stream begins",
  "attn.in": ({ arch }) => (arch.placement === "pre" ? "normalize, then attention" : "into attention"),
  "attn.q": () => "queries: what each token looks for",
  "attn.k": () => "keys: what each token offers",
  "attn.v": () => "values: what each token passes on",
  "attn.scores": () => "match every query with every key",
  "attn.mask": ({ stage }) => (stage.title.startsWith("causal") ? "hide the future" : "nothing hidden"),
  "attn.pattern": () => "attention weights: who looks at whom",
  "attn.z": () => "mix the values by those weights",
  "attn.out": () => "combine the heads",
  resid_mid: () => "add to the stream",
  resid_cross: () => "add to the stream",
  "ffn.in": ({ arch }) => (arch.placement === "pre" ? "normalize, then the feed-forward layer" : "into the feed-forward layer"),
  "ffn.hidden": () => "stretch each vector",
  "ffn.act": () => "switch parts on and off",
  "ffn.out": () => "squeeze it back",
  resid_post: () => "add to the stream",
  final_norm: () => "normalize one last time",
  logits: () => "score every token in the vocabulary",
};

/** A beginner's name for a step ("cross-attention: " in front of a cross-attention step). */
export function plainTitle(kind, ctx) {
  const title = PLAIN_TITLES[kind]?.(ctx) ?? ctx.stage.title;
  return ctx.cross ? `cross-attention: ${title}` : title;
}

export function explain(kind, ctx) {
  const sentence = EXPLAIN[kind];
  return sentence ? sentence(ctx) : "";
}

// intermediate: the equation with this input's numbers ----------------------------------
// Each equation is LaTeX typeset by KaTeX (tex.js), followed by a line of prose: what the
// symbols stand for here and the range of this input's values. A number read from this
// input or this model is wrapped in \htmlClass{num}{...}.

/** A number as TeX, with the digits `number` prints: −1.2e−5 -> -1.2 \times 10^{-5}. */
export function texNumber(value, digits = 4) {
  const shown = number(value, digits).replace(/\u2212/g, "-");
  if (shown === "\u221e" || shown === "-\u221e") return shown.replace("\u221e", "\\infty");
  const [mantissa, exponent] = shown.split("e");
  return exponent === undefined ? mantissa : `${mantissa} \\times 10^{${Number(exponent)}}`;
}

const num = (value) => `\\htmlClass{num}{${texNumber(value)}}`;
const prose = (html) => (html ? ` <span class="eq-note">${html}</span>` : "");
const range = (value, what = "values") =>
  value ? ` <span class="range">${what} from ${htmlNum(value.min)} to ${htmlNum(value.max)}</span>` : "";
const htmlNum = (value) => `<span class="num">${number(value)}</span>`;
const real = (rows, cols) => `\\mathbb{R}^{${rows} \\times ${cols}}`;
const W = (name) => `W_{\\mathrm{${name}}}`;

/** An equation: the typeset LaTeX, its prose, the range of this step's values. */
function eq(latex, note = "", value = null, what = "values") {
  return texHtml(latex) + prose(note) + range(value, what);
}

const NORM_NAME = { rmsnorm: "RMSNorm", layernorm: "LayerNorm" };
const normName = (arch) => NORM_NAME[arch.norm] ?? arch.norm;

/** The norm applied to x, over its d features (LayerNorm: biased variance, as torch). */
function normEquation(arch) {
  const mean = (term) => `\\tfrac{1}{${num(arch.d_model)}} \\sum_{j} ${term}`;
  return arch.norm === "rmsnorm"
    ? "\\hat{x} = \\mathrm{RMSNorm}(x) = \\dfrac{x}{\\mathrm{RMS}(x)} \\odot \\gamma," +
        ` \\quad \\mathrm{RMS}(x) = \\sqrt{${mean("x_j^2")} + \\varepsilon}`
    : "\\hat{x} = \\mathrm{LayerNorm}(x) = \\dfrac{x - \\mu}{\\sqrt{\\sigma^2 + \\varepsilon}} \\odot \\gamma + \\beta," +
        ` \\quad \\mu = ${mean("x_j")}, \\quad \\sigma^2 = ${mean("(x_j - \\mu)^2")}`;
}

function normStep(arch, value) {
  return arch.placement === "pre"
    ? eq(normEquation(arch), "", value)
    : eq("\\hat{x} = x", "post-norm: the norm comes after the residual add", value);
}

const GELU_TANH = "\\mathrm{GELU}(z) \\approx \\tfrac{1}{2} z \\bigl(1 + \\tanh\\bigl(\\sqrt{2/\\pi}\\,(z + 0.044715\\, z^3)\\bigr)\\bigr)";
const ACTIVATIONS = {
  relu: ["ReLU", "\\mathrm{ReLU}(z) = \\max(0, z)"],
  gelu: ["GELU", "\\mathrm{GELU}(z) = z\\, \\Phi(z)"],
  gelu_tanh: ["GELU", GELU_TANH],
  silu: ["SiLU", "\\mathrm{SiLU}(z) = z\\, \\sigma(z)"],
  swiglu: ["SiLU", "\\mathrm{SiLU}(z) = z\\, \\sigma(z)"],
  geglu: ["GELU", "\\mathrm{GELU}(z) = z\\, \\Phi(z)"],
  geglu_tanh: ["GELU", GELU_TANH],
};
const activationName = (name) => ACTIVATIONS[name]?.[0] ?? `\\mathrm{${name.replace(/_/g, "\\_")}}`;

/** Self-attention reads the normed stream; cross-attention's keys and values the encoder. */
const rotated = (arch, cross, latex) => (arch.positions === "rope" && !cross ? `\\mathrm{RoPE}(${latex})` : latex);

function projection(letter, arch, cross) {
  const a = arch.attention;
  const heads = letter === "Q" ? a.heads : a.kv_heads;
  const source = cross && letter !== "Q" ? "\\mathrm{enc}" : "\\hat{x}";
  const product = `${source}\\, W_{${letter}}`;
  const made = letter === "V" ? product : rotated(arch, cross, product);
  return `${letter} = ${made}, \\quad W_{${letter}} \\in ${real(num(arch.d_model), `(${num(heads)} \\cdot ${num(a.d_head)})`)}`;
}

function keyValueNote(letter, arch, cross) {
  const a = arch.attention;
  const shared = a.kind === "MHA"
    ? `${a.kv_heads} heads of ${a.d_head}`
    : `${a.kind}: ${a.kv_heads} key/value head${a.kv_heads === 1 ? "" : "s"} shared by ${a.heads} query heads (${a.heads / a.kv_heads} each)`;
  const rope = letter === "K" && arch.positions === "rope" && !cross ? ", rotated by position (RoPE)" : "";
  return `${cross ? "from the encoder's output: " : ""}${shared}${rope}`;
}

function scores({ arch, value, cross }) {
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
    note = `divided by √${e} so that the spread of the scores does not grow with d<sub>head</sub>`;
  } else if (scale === 1) {
    latex = `S = ${qk}${bias}`;
    note = "not scaled: attn_scale = 1";
  } else {
    latex = `S = ${num(scale)}\\, ${qk}${bias}`;
    note = `scaled by attn_scale = ${htmlNum(scale)}`;
  }
  if (biased) note += `; B: ${arch.positions_text}`;
  return eq(latex, note, value, "scores");
}

function mask({ stage }) {
  const window = Number(stage.title.match(/sliding window of (\d+)/)?.[1] ?? NaN);
  const causal = stage.title.startsWith("causal");
  const hidden = [causal ? "j > i" : null, window ? `j \\le i - ${num(window)}` : null].filter(Boolean);
  if (!hidden.length) return eq("S_{ij} \\text{ unchanged}", "no key is hidden");
  const why = [causal ? "a key after its query" : null, window ? `a key ${window} or more places before its query` : null];
  return eq(
    `S_{ij} \\gets -\\infty \\quad \\text{where } ${hidden.join(" \\text{ or } ")}`,
    why.filter(Boolean).join("; "),
  );
}

function residual(arch, added, value) {
  return arch.placement === "pre"
    ? eq(`x \\gets x + ${added}`, "", value)
    : eq(`x \\gets \\mathrm{${normName(arch)}}(x + ${added})`, "", value);
}

const EQUATION = {
  tokens: ({ sizes, arch }) =>
    eq(`\\mathrm{ids} = \\mathrm{tokenize}(\\text{text}), \\quad t = ${num(sizes.t)}, \\quad 0 \\le \\mathrm{id}_i \\le ${num(arch.vocab_size - 1)}`),
  "embed.tokens": ({ arch, value }) =>
    eq(`x_i = E[\\mathrm{id}_i], \\quad E \\in ${real(num(arch.vocab_size), num(arch.d_model))}`, "", value),
  "embed.positions": ({ arch, value }) =>
    arch.positions === "sinusoidal"
      ? eq(
          `P_{p,\\,2k} = \\sin\\bigl(p / 10000^{2k/${num(arch.d_model)}}\\bigr), \\quad P_{p,\\,2k+1} = \\cos\\bigl(p / 10000^{2k/${num(arch.d_model)}}\\bigr)`,
          "p: the position",
          value,
        )
      : eq(`P[p] \\text{ learned}, \\quad P \\in ${real("\\mathit{max\\_seq\\_len}", num(arch.d_model))}`, "p: the position", value),
  "embed.out": ({ arch, value, sizes }) =>
    arch.positions === "learned" || arch.positions === "sinusoidal"
      ? eq(`x = E[\\mathrm{ids}] + P[0, \\dots, ${sizes.t ? num(sizes.t - 1) : "t - 1"}]`, "", value)
      : eq("x = E[\\mathrm{ids}]", arch.positions_text, value),
  "attn.in": ({ arch, value }) => normStep(arch, value),
  "attn.q": ({ arch, value, cross }) => {
    const a = arch.attention;
    const rope = arch.positions === "rope" && !cross ? ", then each pair of features rotated by the position (RoPE)" : "";
    return eq(projection("Q", arch, cross), `${a.heads} heads of ${a.d_head}${rope}`, value);
  },
  "attn.k": ({ arch, value, cross }) => eq(projection("K", arch, cross), keyValueNote("K", arch, cross), value),
  "attn.v": ({ arch, value, cross }) => eq(projection("V", arch, cross), keyValueNote("V", arch, cross), value),
  "attn.scores": scores,
  "attn.mask": mask,
  "attn.pattern": ({ sizes, value }) =>
    eq(
      "A_{ij} = \\operatorname{softmax}_j(S_{ij}) = \\dfrac{e^{S_{ij}}}{\\sum_{k} e^{S_{ik}}}",
      `${htmlNum(sizes.h)} heads × ${htmlNum(sizes.t)} rows, each summing to 1`,
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
      `\\mathrm{out} = \\operatorname{concat}(Z_0, \\dots, Z_{${num(a.heads - 1)}})\\, W_O, \\quad W_O \\in ${real(`(${num(a.heads)} \\cdot ${num(a.d_head)})`, num(arch.d_model))}`,
      "",
      value,
    );
  },
  resid_mid: ({ arch, value }) => residual(arch, "\\mathrm{out}", value),
  resid_cross: ({ arch, value }) => residual(arch, "\\mathrm{out}_{\\mathrm{cross}}", value),
  "ffn.in": ({ arch, value }) => normStep(arch, value),
  "ffn.hidden": ({ arch, value }) =>
    arch.ffn.gated
      ? eq(`z = \\hat{x}\\, ${W("gate")}, \\quad ${W("gate")} \\in ${real(num(arch.d_model), num(arch.ffn.d_ff))}`, "", value)
      : eq(`z = \\hat{x}\\, ${W("up")} + b_{\\mathrm{up}}, \\quad ${W("up")} \\in ${real(num(arch.d_model), num(arch.ffn.d_ff))}`, "", value),
  "ffn.act": ({ arch, value }) => {
    const [name, definition] = ACTIVATIONS[arch.ffn.activation] ?? [activationName(arch.ffn.activation), ""];
    const latex = arch.ffn.gated
      ? `a = \\mathrm{${name}}(z) \\odot (\\hat{x}\\, ${W("up")})`
      : `a = \\mathrm{${name}}(z)`;
    return eq(definition ? `${latex}, \\quad ${definition}` : latex, "", value);
  },
  "ffn.out": ({ arch, value }) => {
    // gated: the whole layer, (act(x̂ W_gate) ⊙ x̂ W_up) W_down (Shazeer, 2020)
    const whole = arch.ffn.gated
      ? ` = \\bigl(\\mathrm{${activationName(arch.ffn.activation)}}(\\hat{x}\\, ${W("gate")}) \\odot \\hat{x}\\, ${W("up")}\\bigr)\\, ${W("down")}`
      : " + b_{\\mathrm{down}}";
    return eq(`y = a\\, ${W("down")}${whole}, \\quad ${W("down")} \\in ${real(num(arch.ffn.d_ff), num(arch.d_model))}`, "", value);
  },
  resid_post: ({ arch, value }) => residual(arch, "y", value),
  final_norm: ({ arch, value }) => eq(normEquation(arch), "", value),
  logits: ({ arch, value }) => {
    const x = arch.placement === "pre" ? "\\hat{x}" : "x"; // post-norm: no final norm
    const vocab = real(num(arch.d_model), num(arch.vocab_size));
    return arch.family === "encoder"
      ? eq(
          `\\mathrm{logits} = \\mathrm{${normName(arch)}}\\bigl(\\mathrm{${activationName(arch.ffn.activation)}}(${x}\\, ${W("dense")} + b_{\\mathrm{dense}})\\bigr)\\, ${W("vocab")} + b_{\\mathrm{vocab}}, \\quad ${W("vocab")} \\in ${vocab}`,
          "the masked-LM head",
          value,
        )
      : eq(`\\mathrm{logits} = ${x}\\, W_U, \\quad W_U \\in ${vocab}`, "one score per vocabulary entry", value);
  },
};

/** The step's equation as HTML, or "" for a kind with none. */
export function equation(kind, ctx) {
  const make = EQUATION[kind];
  return make ? make(ctx) : "";
}

/** The shape letters of a stage zipped with its sizes: {h: 9, t: 5, e: 64}. */
export function letterSizes(stage, payload) {
  const letters = stage.shape.split(" ");
  const sizes = {};
  const shape = stage.value?.shape ?? (stage.id === "tokens" ? [payload.tokens.length] : null);
  if (shape) letters.forEach((letter, i) => { sizes[letter] = shape[i]; });
  return sizes;
}
