// The norms and the residual stream's equations (glassformer/nn/norms.py, nn/block.py): a
// sublayer's input normed or not, its output normed (a sandwich, OLMo 2), the residual add
// (post-norm: the sum normed), the final norm. Read from the architecture summary: norm,
// norm_eps, d_model and capabilities (norm_on_input, norm_on_output, norm_after_add).

import { eq, exact, num } from "./equations_tex.js";
import { texText } from "../core/tex.js";

const NORM_NAME = { rmsnorm: "RMSNorm", layernorm: "LayerNorm" };
export const normName = (arch) => NORM_NAME[arch.norm] ?? arch.norm;
/** The norm's name as LaTeX: \mathrm{RMSNorm}, or a name the page does not know as text. */
export const normTex = (arch) =>
  Object.hasOwn(NORM_NAME, arch.norm) ? `\\mathrm{${NORM_NAME[arch.norm]}}` : texText(arch.norm);

/** norm(u) over its d features as nn/norms.py computes it: LayerNorm with the biased
 * variance (as torch) and ε inside the root; RMSNorm with no centring and no β. */
export function normDefinition(arch, u = "x", moments = true) {
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
  const why = arch.capabilities.norm_on_output
    ? "the norm comes after the sublayer, on its output"
    : "post-norm: the norm comes after the residual add";
  return eq("\\hat{x} = x", why, value);
}

/** A sublayer's output normed before the add (a sandwich's second norm; OLMo 2's only one). */
function postNorm(arch, normed, output, value) {
  const which = arch.capabilities.norm_on_input
    ? "a sandwich: a norm before the sublayer and one after it"
    : "the only norm of the sublayer, on its output";
  return eq(
    `${normed} = ${normTex(arch)}(${output}), \\quad ${normDefinition(arch, "u", false)}`,
    `${which}; its own γ${momentsNote(arch) ? `; ${momentsNote(arch)}` : ""}`,
    value,
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

const CROSS_OUT = "\\mathrm{out}_{\\mathrm{cross}}";

/** The templates by step kind. */
export const NORM_EQUATIONS = {
  "attn.in": ({ arch, value }) => normStep(arch, value),
  "attn.post_norm": ({ arch, value, cross }) =>
    postNorm(arch, cross ? "\\hat{o}_{\\mathrm{cross}}" : "\\hat{o}", cross ? CROSS_OUT : "\\mathrm{out}", value),
  resid_mid: ({ arch, value }) => residual(arch, "\\mathrm{out}", value),
  resid_cross: ({ arch, value }) => residual(arch, CROSS_OUT, value),
  "ffn.in": ({ arch, value }) => normStep(arch, value),
  "ffn.post_norm": ({ arch, value }) => postNorm(arch, "\\hat{y}", "y", value),
  resid_post: ({ arch, value }) => residual(arch, "y", value),
  final_norm: ({ arch, value }) => eq(`\\hat{x} = ${normDefinition(arch)}`, "", value),
};
