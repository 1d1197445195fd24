// What each step says at each level, by step kind (stages.js `parseStage(id).kind`):
//   beginner      a plain sentence (EXPLAIN)
//   intermediate  the equation with this input's numbers in it (equations.js `equation`,
//                 typeset by KaTeX)
//   advanced      + the code that computes it (CODE)
// A context `ctx` carries what the sentences need: {stage, value, arch, cross, sizes},
// sizes being the shape letters read off the value (t, s, h, g, e, d, f, v).

import { parseStage } from "./stages.js";

export { equation, texNumber } from "./equations.js";

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
  "classifier.pooled": ["glassformer/models/classifier.py", "pool_sequence"],
  "classifier.logits": ["glassformer/models/classifier.py", "ClassificationHead.forward"],
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
/** Whether a step's stack is causal (a decoder's): its mask hides the later tokens. */
const causal = (arch, stage) => Boolean(arch.stacks.find((s) => s.name === parseStage(stage.id).stack)?.causal);

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
  "attn.mask": ({ arch, stage }) => {
    const window = arch.attention.window;
    const reach = window ? ` Nor may it look ${window} or more tokens back: a sliding window.` : "";
    return causal(arch, stage)
      ? `A token may not look at the tokens after it: when predicting, the future is not known yet.${reach}`
      : window
        ? `A token may look at every token after it, but not ${window} or more tokens back: a sliding window.`
        : "Nothing is hidden here: every token may look at every token.";
  },
  "attn.pattern": () =>
    "The scores become weights that add up to 1 for each token: how much it looks at each other token.",
  "attn.z": () => "Each token collects the values of the tokens it looks at, mixed by those weights.",
  "attn.out": () => "The results of the attention heads are combined back into one vector per token.",
  resid_mid: ({ arch }) =>
    "Attention's result is added to the stream: the token's vector now carries context." + thenNormalized(arch),
  resid_cross: ({ arch }) => "What the decoder read from the encoder is added to the stream." + thenNormalized(arch),
  "ffn.in": ({ arch }) =>
    (arch.placement === "pre" ? `The vectors are ${NORM_WORDS}, then ` : "Now ") +
    "each token is processed on its own by a small neural network: the feed-forward layer.",
  "ffn.hidden": () => "The vector is stretched into a much longer one…",
  "ffn.act": () => "…a non-linear function switches parts of it on and off…",
  "ffn.out": () => "…and it is squeezed back to the stream's size.",
  resid_post: ({ arch }) =>
    `The feed-forward result is added to the stream.${thenNormalized(arch)} The block is done; the next block repeats it.`,
  final_norm: () => "After the last block, the vectors are normalized one last time.",
  logits: ({ arch }) =>
    arch.family === "encoder"
      ? "Each vector is compared with every word in the vocabulary: a score for each word that could stand at that position."
      : "The last token's vector is compared with every word in the vocabulary: a score for each possible next token.",
  "classifier.pooled": ({ arch }) =>
    arch.classifier.pooling === "mean"
      ? "The vectors of all the tokens are averaged into one vector for the whole text."
      : "One vector is picked to stand for the whole text.",
  "sentence.pooled": ({ arch }) =>
    arch.sentence.pooling === "mean"
      ? "The vectors of all the tokens are averaged into one vector for the whole text."
      : "The first token's vector is taken to stand for the whole text.",
  "sentence.vector": () =>
    "That vector is scaled to length 1: the sentence vector. Texts with a similar meaning get vectors that point the same way.",
  "classifier.logits": ({ arch }) =>
    `That vector gets one score per label (${arch.classifier.classes.join(", ")}); the softmax turns the scores into probabilities.`,
};

// A post-norm block (the original Transformer, BERT) normalizes each sum it makes.
const addTitle = (arch) => (arch.placement === "pre" ? "add to the stream" : "add to the stream, then normalize");
const thenNormalized = (arch) =>
  arch.placement === "pre" ? "" : ` Then the sum is ${NORM_WORDS}: this model normalizes after each addition (post-norm).`;

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
  "attn.mask": ({ arch, stage }) =>
    causal(arch, stage) ? "hide the future" : arch.attention.window ? "hide the distant past" : "nothing hidden",
  "attn.pattern": () => "attention weights: who looks at whom",
  "attn.z": () => "mix the values by those weights",
  "attn.out": () => "combine the heads",
  resid_mid: ({ arch }) => addTitle(arch),
  resid_cross: ({ arch }) => addTitle(arch),
  "ffn.in": ({ arch }) => (arch.placement === "pre" ? "normalize, then the feed-forward layer" : "into the feed-forward layer"),
  "ffn.hidden": () => "stretch each vector",
  "ffn.act": () => "switch parts on and off",
  "ffn.out": () => "squeeze it back",
  resid_post: ({ arch }) => addTitle(arch),
  final_norm: () => "normalize one last time",
  logits: () => "score every token in the vocabulary",
  "classifier.pooled": () => "one vector for the whole text",
  "sentence.pooled": () => "one vector for the whole text",
  "sentence.vector": () => "scale it to length 1: the sentence vector",
  "classifier.logits": () => "score each label",
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

/** The shape letters of a stage zipped with its sizes: {h: 9, t: 5, e: 64}. */
export function letterSizes(stage, payload) {
  const letters = stage.shape.split(" ");
  const sizes = {};
  const shape = stage.value?.shape ?? (stage.id === "tokens" ? [payload.tokens.length] : null);
  if (shape) letters.forEach((letter, i) => { sizes[letter] = shape[i]; });
  return sizes;
}
