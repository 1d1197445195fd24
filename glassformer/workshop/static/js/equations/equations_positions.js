// The position schemes' equations (glassformer/nn/positions.py): the sinusoid table added to
// the embeddings, RoPE's angles and pairs turned inside attention, and the bias ALiBi and T5
// add to the scores. Read from the architecture summary: positions, position_params (base,
// style, scaling, slopes, buckets), attention.d_head, attention.layer_windows and d_model.

import { eq, exact, num, real } from "./equations_tex.js";

const SINUSOID_BASE = 10000; // nn/positions.py sinusoidal_table (Vaswani et al., 2017)

/** Whether q and k are turned by RoPE: a RoPE model's self-attention (never cross-attention). */
export const isRope = (arch, cross) => arch.positions === "rope" && !cross;

/** The sinusoid table P, interleaved (sin, cos, ...) or halved (every sine, then every cosine). */
export function sinusoids(arch, value) {
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
export function ropeAngles(arch, layer = null) {
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

/** Which features RoPE turns together, in words. */
export function ropePairs(arch) {
  const e = arch.attention.d_head;
  const pairs = arch.position_params.style === "interleaved" ? "(2i, 2i + 1)" : `(i, i + ${e / 2})`;
  return `each pair of features ${pairs} rotated by its angle, p the position`;
}

/** The bias B added to self-attention's scores (ALiBi, T5) as [LaTeX, prose]. */
export function positionBias(arch, causal) {
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
