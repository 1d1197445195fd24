// The input's equations (glassformer/nn/embeddings.py): the text tokenized, each id's row of
// the token table E (times the embedding scale), the position table P (learned or sinusoids),
// the segment table S and the norm after the sum (BERT). Read from the architecture summary
// (vocab_size, d_model, embeddings: scale, norm, segments; positions, positions_text,
// position_params, norm_eps) and this input's sizes (t).

import { normName, normTex } from "./equations_norm.js";
import { sinusoids } from "./equations_positions.js";
import { eq, exact, isRootOf, num, real, sub } from "./equations_tex.js";

/** E[ids] times the embedding scale (√d_model in the original Transformer), as LaTeX. */
function scaledTokens(arch, index) {
  const scale = arch.embeddings.scale;
  if (scale === 1) return `E[${index}]`;
  const root = isRootOf(scale, arch.d_model) ? `\\sqrt{${num(arch.d_model)}}` : num(scale);
  return `${root}\\, E[${index}]`;
}

function tokens({ sizes, arch }) {
  const ids = `0 \\le \\mathrm{id}_i \\le ${num(arch.vocab_size - 1)}`;
  return eq(`\\mathrm{ids} = \\mathrm{tokenize}(\\text{text}), \\quad t = ${num(sizes.t)}, \\quad ${ids}`);
}

function tokenVectors({ arch, value }) {
  const scaled = ["each token's vector scaled by √d", sub("model"), ", as in the original Transformer"];
  return eq(
    `x_i = ${scaledTokens(arch, "\\mathrm{id}_i")}, \\quad E \\in ${real(num(arch.vocab_size), num(arch.d_model))}`,
    arch.embeddings.scale === 1 ? "" : scaled,
    value,
  );
}

function positionVectors({ arch, value }) {
  if (arch.positions === "sinusoidal") return sinusoids(arch, value);
  const table = real(num(arch.position_params.max_seq_len), num(arch.d_model));
  return eq(`P[p] \\text{ learned}, \\quad P \\in ${table}`, "p: the position, below max_seq_len", value);
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

/** The templates by step kind. */
export const EMBEDDING_EQUATIONS = {
  tokens,
  "embed.tokens": tokenVectors,
  "embed.positions": positionVectors,
  "embed.out": embedOut,
};
