// The model's ending (glassformer/nn/heads.py, glassformer/models/classifier.py): the LM head's
// logits (tied or not, a bias, T5's input scale, Gemma's soft-cap), the masked-LM head, and a
// classifier's pooling and class scores. Read from the architecture summary (head: tied, bias,
// input_scale, softcap; classifier: classes, pooling; capabilities: has_final_norm,
// masked_lm; vocab_size, d_model, norm_eps, ffn.activation).

import { activationName } from "./equations_ffn.js";
import { normTex } from "./equations_norm.js";
import { eq, exact, isRootOf, num, plusBias, real, sub, sup, W } from "./equations_tex.js";

/** The stream the head reads: x̂ after a final norm, x where the model has none (post-norm). */
const headInput = (arch) => (arch.capabilities.has_final_norm ? "\\hat{x}" : "x");

/** Soft-capped logits (Gemma 2, 3): the head's raw scores z squashed into (−c, c). */
function cappedLogits({ arch, value }) {
  const c = num(arch.head.softcap);
  return eq(
    `\\mathrm{logits} = ${c} \\tanh\\!\\left(\\dfrac{z}{${c}}\\right)`,
    `z: the raw logits; their order is kept, no score beyond ±${arch.head.softcap}`,
    value,
  );
}

function maskedLmLogits(arch, value, name, matrix, shape, tied) {
  const act = activationName(arch.ffn.activation);
  const dense = `\\mathrm{${act}}(${headInput(arch)}\\, ${W("dense")} + b_{\\mathrm{dense}})`;
  return eq(
    `${name} = ${normTex(arch)}\\bigl(${dense}\\bigr)\\, ${matrix} + b_{\\mathrm{vocab}},` +
      ` \\quad ${shape}, \\quad \\varepsilon = ${exact(arch.norm_eps)}`,
    `the masked-LM head; ${tied}`,
    value,
  );
}

function logits({ arch, value }, name = "\\mathrm{logits}") {
  const head = arch.head;
  const x = headInput(arch);
  const d = num(arch.d_model);
  const v = num(arch.vocab_size);
  const [matrix, shape] = head.tied ? ["E^{\\top}", `E \\in ${real(v, d)}`] : [W("U"), `${W("U")} \\in ${real(d, v)}`];
  const tied = head.tied ? "the output matrix is the token table E, transposed (tied)" : "its own output matrix (untied)";
  if (arch.capabilities.masked_lm) return maskedLmLogits(arch, value, name, matrix, shape, tied);
  let input = x;
  let scaled = "";
  if (head.input_scale !== 1) {
    const root = isRootOf(1 / head.input_scale, arch.d_model);
    input = `${root ? `\\tfrac{1}{\\sqrt{${d}}}` : num(head.input_scale)}\\, ${x}`;
    scaled = root
      ? ["; the stream first scaled by d", sub("model"), sup("−1/2"), " (T5)"]
      : "; the stream first scaled (lm_head_input_scale)";
  }
  return eq(
    `${name} = ${input}\\, ${matrix}${plusBias(head.bias, "U")}, \\quad ${shape}`,
    [`one score per vocabulary entry; ${tied}`, scaled],
    value,
  );
}

// the classifier's pooling (glassformer/models/classifier.py pool_sequence)
function pooled({ arch, value }) {
  const x = headInput(arch);
  const forms = {
    cls: [`p = ${x}_0`, "the first token's vector ([CLS]) stands for the sequence"],
    mean: [`p = \\tfrac{1}{T} \\sum_{t} ${x}_t`, "the mean over the real (not padding) tokens"],
    pooler: [`p = \\tanh(${x}_0\\, ${W("p")} + b_p)`, "BERT's pooler on the first token"],
    last: [`p = ${x}_{T-1}`, "the last real token: in a causal model only it has read the whole text"],
  };
  const [latex, note] = forms[arch.classifier.pooling] ?? [`p = \\operatorname{pool}(${x})`, ""];
  return eq(latex, note, value);
}

function classScores({ arch, value }) {
  const c = arch.classifier.classes.length;
  const shape = `${W("c")} \\in ${real(num(arch.d_model), num(c))}`;
  return eq(
    `z = p\\, ${W("c")} + b_c, \\quad ${shape}, \\quad P(\\text{class } k) = \\operatorname{softmax}(z)_k`,
    `one score per class: ${arch.classifier.classes.join(", ")}`, // labels from the model: text
    value,
  );
}

/** The templates by step kind. */
export const HEAD_EQUATIONS = {
  logits: (ctx) => (ctx.arch.head.softcap ? cappedLogits(ctx) : logits(ctx)),
  logits_raw: (ctx) => logits(ctx, "z"),
  "classifier.pooled": pooled,
  "classifier.logits": classScores,
};
