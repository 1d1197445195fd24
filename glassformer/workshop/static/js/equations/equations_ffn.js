// The feed-forward layer's equations (glassformer/nn/ffn.py), or a mixture of experts'
// (glassformer/nn/moe.py: a router, the top k of n experts, their weighted sum), and the
// activations they apply (the masked-LM head's too). Read from the architecture summary
// (ffn: activation, gated, d_ff, bias, experts, per_token, expert_d_ff, shared_d_ff, router,
// normalize_weights; d_model).

import { eq, num, plusBias, real, W } from "./equations_tex.js";
import { texText } from "../core/tex.js";

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
export const activationName = (name) => (Object.hasOwn(ACTIVATIONS, name) ? ACTIVATIONS[name][0] : texText(name));

function ffnHidden({ arch, value }) {
  const f = arch.ffn;
  const name = f.gated ? "gate" : "up";
  const latex = `z = \\hat{x}\\, ${W(name)}${plusBias(f.bias, `\\mathrm{${name}}`)}, \\quad ${W(name)} \\in ${real(num(arch.d_model), num(f.d_ff))}`;
  return eq(latex, "", value);
}

function ffnAct({ arch, value }) {
  const f = arch.ffn;
  const [name, definition, note] = Object.hasOwn(ACTIVATIONS, f.activation) ? ACTIVATIONS[f.activation] : [activationName(f.activation), "", ""];
  const latex = f.gated
    ? `a = \\mathrm{${name}}(z) \\odot (\\hat{x}\\, ${W("up")}${plusBias(f.bias, "\\mathrm{up}")})`
    : `a = \\mathrm{${name}}(z)`;
  return eq(definition ? `${latex}, \\quad ${definition}` : latex, note, value);
}

// a mixture of experts (glassformer/nn/moe.py): a router, the top k of n experts, their sum
function routerLogits({ arch, value }) {
  const f = arch.ffn;
  return eq(
    `r = \\hat{x}\\, ${W("router")}, \\quad ${W("router")} \\in ${real(num(arch.d_model), num(f.experts))}`,
    `one score per expert, ${f.experts} experts`,
    value,
  );
}

function routerProbs({ arch, value }) {
  const latex = arch.ffn.router === "sigmoid"
    ? "p_i = \\sigma(r_i) = \\dfrac{1}{1 + e^{-r_i}}"
    : "p_i = \\operatorname{softmax}_i(r) = \\dfrac{e^{r_i}}{\\sum_{j} e^{r_j}}";
  return eq(latex, arch.ffn.router === "sigmoid" ? "each expert scored on its own" : "the experts' scores share 1", value);
}

function chosenExperts({ arch }) {
  const f = arch.ffn;
  return eq(
    `E = \\operatorname{top}_{${num(f.per_token)}}(p) \\subset \\{0, \\dots, ${num(f.experts - 1)}\\}`,
    `the ${f.per_token} experts with the highest scores; the other ${f.experts - f.per_token} do nothing for this token`,
  );
}

function expertWeights({ arch, value }) {
  const normalized = arch.ffn.normalize_weights;
  return eq(
    normalized ? "w_j = \\dfrac{p_{E_j}}{\\sum_{i \\in E} p_i}" : "w_j = p_{E_j}",
    normalized ? "the chosen scores, rescaled to sum to 1" : "the chosen scores as they are (not rescaled)",
    value,
  );
}

function expertOut({ arch, value }) {
  const f = arch.ffn;
  const act = `\\mathrm{${activationName(f.activation)}}`;
  const up = `\\hat{x}\\, ${W("up")}^{(E_j)}`;
  const kind = f.gated ? `(${act}(\\hat{x}\\, ${W("gate")}^{(E_j)}) \\odot ${up})` : `${act}(${up})`;
  return eq(
    `y_j = \\mathrm{FFN}_{E_j}(\\hat{x}) = ${kind}\\, ${W("down")}^{(E_j)}, \\quad ${W("down")}^{(E_j)} \\in ${real(num(f.expert_d_ff), num(arch.d_model))}`,
    `each chosen expert's own feed-forward network, one at a time (${f.per_token} choices)`,
    value,
  );
}

function sharedOut({ value }) {
  return eq(
    `s = \\sigma(\\hat{x}\\, w_s)\\, \\mathrm{FFN}_{\\mathrm{shared}}(\\hat{x})`,
    "an expert every token uses, gated between 0 and 1",
    value,
  );
}

function ffnOut({ arch, value }) {
  const f = arch.ffn;
  if (f.experts) {
    const shared = f.shared_d_ff ? " + s" : "";
    return eq(`y = \\sum_{j=1}^{${num(f.per_token)}} w_j\\, y_j${shared}`, "the chosen experts' outputs, weighted", value);
  }
  const down = `${W("down")}${plusBias(f.bias, "\\mathrm{down}")}`;
  // gated: the whole layer, (act(x̂ W_gate) ⊙ x̂ W_up) W_down (Shazeer, 2020)
  const gate = `\\hat{x}\\, ${W("gate")}${plusBias(f.bias, "\\mathrm{gate}")}`;
  const up = `\\hat{x}\\, ${W("up")}${plusBias(f.bias, "\\mathrm{up}")}`;
  const upTerm = f.bias ? `(${up})` : up;
  const whole = f.gated ? ` = \\bigl(\\mathrm{${activationName(f.activation)}}(${gate}) \\odot ${upTerm}\\bigr)\\, ${down}` : "";
  return eq(`y = a\\, ${down}${whole}, \\quad ${W("down")} \\in ${real(num(f.d_ff), num(arch.d_model))}`, "", value);
}

/** The templates by step kind. */
export const FFN_EQUATIONS = {
  "ffn.hidden": ffnHidden,
  "ffn.act": ffnAct,
  "ffn.router_logits": routerLogits,
  "ffn.router_probs": routerProbs,
  "ffn.experts": chosenExperts,
  "ffn.expert_weights": expertWeights,
  "ffn.expert_out": expertOut,
  "ffn.shared_out": sharedOut,
  "ffn.out": ffnOut,
};
