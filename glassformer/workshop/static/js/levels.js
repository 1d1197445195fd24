// What each step says at each level, by step kind (stages.js `parseStage(id).kind`):
//   beginner      a plain sentence (EXPLAIN)
//   intermediate  the equation with this input's numbers in it (equation)
//   advanced      + the code that computes it (CODE)
// A context `ctx` carries what the sentences need: {stage, value, arch, cross, sizes},
// sizes being the shape letters read off the value (t, s, h, g, e, d, f, v).

import { number } from "./format.js";

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
const sub = (base, index) => `<i>${base}</i><sub>${index}</sub>`;
const num = (value) => `<span class="num">${number(value)}</span>`;
const range = (value) => (value ? ` <span class="range">values from ${num(value.min)} to ${num(value.max)}</span>` : "");

function normEquation(arch, x = "x") {
  return arch.norm === "rmsnorm"
    ? `RMSNorm(<i>${x}</i>) = <i>${x}</i> / √(mean(<i>${x}</i>²) + ε) ⊙ <i>g</i>`
    : `LayerNorm(<i>${x}</i>) = (<i>${x}</i> − μ) / √(σ² + ε) ⊙ γ + β`;
}

const ACTIVATIONS = {
  relu: "ReLU(<i>z</i>) = max(0, <i>z</i>)",
  gelu: "GELU(<i>z</i>) = <i>z</i> Φ(<i>z</i>)",
  gelu_tanh: "GELU(<i>z</i>) ≈ ½<i>z</i>(1 + tanh(√(2/π)(<i>z</i> + 0.044715<i>z</i>³)))",
  silu: "SiLU(<i>z</i>) = <i>z</i> σ(<i>z</i>)",
  swiglu: "SiLU(<i>z</i>) = <i>z</i> σ(<i>z</i>)",
  geglu: "GELU(<i>z</i>) = <i>z</i> Φ(<i>z</i>)",
};
const GATE_FN = { swiglu: "SiLU", geglu: "GELU" };

const EQUATION = {
  tokens: ({ sizes, arch }) =>
    `ids = tokenize(text): <i>t</i> = ${num(sizes.t)} ids, each in 0 … ${num(arch.vocab_size - 1)}`,
  "embed.tokens": ({ arch, value }) =>
    `<i>x</i><sub>i</sub> = <i>E</i>[id<sub>i</sub>], &nbsp;<i>E</i> ∈ ℝ<sup>${arch.vocab_size}×${arch.d_model}</sup>` +
    range(value),
  "embed.positions": ({ arch, value }) =>
    (arch.positions === "sinusoidal"
      ? `<i>P</i>[pos, 2i] = sin(pos / 10000<sup>2i/${arch.d_model}</sup>), &nbsp;<i>P</i>[pos, 2i+1] = cos(…)`
      : `<i>P</i>[pos] is learned, &nbsp;<i>P</i> ∈ ℝ<sup>max_seq_len×${arch.d_model}</sup>`) + range(value),
  "embed.out": ({ arch, value }) =>
    (arch.positions === "learned" || arch.positions === "sinusoidal"
      ? "<i>x</i> = <i>E</i>[ids] + <i>P</i>[0 … <i>t</i>−1]"
      : `<i>x</i> = <i>E</i>[ids] &nbsp;(${arch.positions_text})`) + range(value),
  "attn.in": ({ arch, value }) =>
    (arch.placement === "pre" ? `<i>x̂</i> = ${normEquation(arch)}` : "<i>x̂</i> = <i>x</i> (post-norm: the norm comes after the residual add)") +
    range(value),
  "attn.q": ({ arch, value, cross }) => {
    const a = arch.attention;
    const rope = arch.positions === "rope" && !cross ? ", then each pair of features rotated by the position (RoPE)" : "";
    return `<i>Q</i> = <i>x̂</i> ${sub("W", "Q")}, &nbsp;${sub("W", "Q")} ∈ ℝ<sup>${arch.d_model}×(${a.heads}·${a.d_head})</sup>: ${a.heads} heads of ${a.d_head}${rope}` + range(value);
  },
  "attn.k": ({ arch, value, cross }) => keyValue("K", arch, value, cross),
  "attn.v": ({ arch, value, cross }) => keyValue("V", arch, value, cross),
  "attn.scores": ({ arch, value, cross }) => {
    const e = arch.attention.d_head;
    const bias = !cross && (arch.positions === "alibi" || arch.positions === "t5_relative") ? " + <i>B</i>" : "";
    // The multiplier is 1/√d_head unless the config says otherwise (T5: 1, no scaling).
    const scale = arch.attention.scale ?? 1 / Math.sqrt(e);
    const qk = "<i>Q K</i><sup>T</sup>";
    const scaled = Math.abs(scale * Math.sqrt(e) - 1) < 1e-6
      ? `${qk} / √${e}${bias} = ${qk} / ${num(Math.sqrt(e))}${bias}`
      : scale === 1 ? `${qk}${bias} &nbsp;(not scaled: attn_scale = 1)` : `${qk} × ${num(scale)}${bias}`;
    return `<i>S</i> = ${scaled}` +
      (value ? ` <span class="range">scores from ${num(value.min)} to ${num(value.max)}</span>` : "");
  },
  "attn.mask": ({ stage }) =>
    stage.title.startsWith("causal")
      ? "<i>S</i><sub>ij</sub> = −∞ where <i>j</i> &gt; <i>i</i> &nbsp;(a key after its query)"
      : "no key is hidden: one unpadded input needs no mask",
  "attn.pattern": ({ sizes, value }) =>
    `<i>A</i> = softmax(<i>S</i>) along each row: ${num(sizes.h)} heads × ${num(sizes.t)} rows, each summing to 1` +
    (value ? ` <span class="range">weights from ${num(value.min)} to ${num(value.max)}</span>` : ""),
  "attn.z": ({ arch, value }) => {
    const a = arch.attention;
    const shared = a.kind === "MHA" ? "" : `; query head <i>i</i> reads value head ⌊<i>i</i> / ${a.heads / a.kv_heads}⌋`;
    return `<i>Z</i> = <i>A V</i> in each of the ${a.heads} heads${shared}` + range(value);
  },
  "attn.out": ({ arch, value }) =>
    `out = concat(<i>Z</i><sub>1</sub> … <i>Z</i><sub>${arch.attention.heads}</sub>) ${sub("W", "O")}, &nbsp;${sub("W", "O")} ∈ ℝ<sup>${arch.attention.heads * arch.attention.d_head}×${arch.d_model}</sup>` +
    range(value),
  resid_mid: ({ arch, value }) => residual(arch, "attention(x)", value),
  resid_cross: ({ arch, value }) => residual(arch, "cross-attention(x, encoder output)", value),
  "ffn.in": ({ arch, value }) =>
    (arch.placement === "pre" ? `<i>x̂</i> = ${normEquation(arch)}` : "<i>x̂</i> = <i>x</i>") + range(value),
  "ffn.hidden": ({ arch, value }) =>
    (arch.ffn.gated
      ? `<i>z</i> = <i>x̂</i> ${sub("W", "gate")}, &nbsp;${sub("W", "gate")} ∈ ℝ<sup>${arch.d_model}×${arch.ffn.d_ff}</sup>`
      : `<i>z</i> = <i>x̂</i> ${sub("W", "up")} + <i>b</i>, &nbsp;${sub("W", "up")} ∈ ℝ<sup>${arch.d_model}×${arch.ffn.d_ff}</sup>`) +
    range(value),
  "ffn.act": ({ arch, value }) =>
    (arch.ffn.gated
      ? `<i>a</i> = ${GATE_FN[arch.ffn.activation] ?? arch.ffn.activation}(<i>z</i>) ⊙ (<i>x̂</i> ${sub("W", "up")}), &nbsp;${ACTIVATIONS[arch.ffn.activation] ?? ""}`
      : `<i>a</i> = ${ACTIVATIONS[arch.ffn.activation] ?? `${arch.ffn.activation}(<i>z</i>)`}`) + range(value),
  "ffn.out": ({ arch, value }) =>
    `<i>y</i> = <i>a</i> ${sub("W", "down")}, &nbsp;${sub("W", "down")} ∈ ℝ<sup>${arch.ffn.d_ff}×${arch.d_model}</sup>` + range(value),
  resid_post: ({ arch, value }) => residual(arch, "FFN(x)", value),
  final_norm: ({ arch, value }) => `<i>x̂</i> = ${normEquation(arch)}` + range(value),
  logits: ({ arch, value }) =>
    arch.family === "encoder"
      ? `logits = ${arch.norm === "rmsnorm" ? "RMSNorm" : "LayerNorm"}(act(<i>x̂</i> ${sub("W", "dense")})) ${sub("W", "vocab")}, &nbsp;${sub("W", "vocab")} ∈ ℝ<sup>${arch.d_model}×${arch.vocab_size}</sup>: the masked-LM head` + range(value)
      : `logits = <i>x̂</i> ${sub("W", "U")}, &nbsp;${sub("W", "U")} ∈ ℝ<sup>${arch.d_model}×${arch.vocab_size}</sup>: one score per vocabulary entry` +
    range(value),
};

function keyValue(letter, arch, value, cross) {
  const a = arch.attention;
  const source = cross ? "<i>enc</i>" : "<i>x̂</i>";
  const shared = a.kind === "MHA"
    ? `${a.kv_heads} heads of ${a.d_head}`
    : `${a.kind}: ${a.kv_heads} key/value head${a.kv_heads === 1 ? "" : "s"} shared by ${a.heads} query heads (${a.heads / a.kv_heads} each)`;
  const rope = letter === "K" && arch.positions === "rope" && !cross ? ", rotated by position (RoPE)" : "";
  return `<i>${letter}</i> = ${source} ${sub("W", letter)}, &nbsp;${sub("W", letter)} ∈ ℝ<sup>${arch.d_model}×(${a.kv_heads}·${a.d_head})</sup>: ${shared}${rope}` +
    range(value);
}

function residual(arch, what, value) {
  const update = arch.placement === "pre"
    ? `<i>x</i> ← <i>x</i> + ${what}`
    : `<i>x</i> ← ${arch.norm === "rmsnorm" ? "RMSNorm" : "LayerNorm"}(<i>x</i> + ${what})`;
  return update + range(value);
}

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
