// The intermediate level: each step's equation with this input's numbers in it, typeset by
// KaTeX (tex.js), followed by a line of prose: what the symbols stand for here and the range
// of this input's values. The equation is the model's own, read from the architecture
// summary (architecture.summary(config)), and says what glassformer/nn computes: a bias
// term only where the layer has one, the norm's ε, the embedding scale and norm, the RoPE
// base, the sinusoid layout, the head (tied or not, T5's input scale).
// This module picks a step's template by the name the stage catalogue gives it (stage.equation,
// or its kind); the templates live by concept beside it: the embeddings, attention, the norms
// and the residual stream, the feed-forward layer (or a mixture of experts), the head, a
// vision transformer's patches; equations_tex.js is how all of them typeset numbers.

import { ATTENTION_EQUATIONS } from "./equations_attention.js";
import { EMBEDDING_EQUATIONS } from "./equations_embedding.js";
import { FFN_EQUATIONS } from "./equations_ffn.js";
import { HEAD_EQUATIONS } from "./equations_head.js";
import { NORM_EQUATIONS } from "./equations_norm.js";
import { VISION_EQUATIONS } from "./equations_vision.js";

export { texConstant, texInteger, texNumber } from "./equations_tex.js";

const EQUATION = {
  ...EMBEDDING_EQUATIONS,
  ...ATTENTION_EQUATIONS,
  ...NORM_EQUATIONS, // a sublayer's norms and the residual adds, the final norm
  ...FFN_EQUATIONS, // the FFN, or a mixture of experts
  ...HEAD_EQUATIONS,
  ...VISION_EQUATIONS, // a vision transformer's image, patches and [CLS]
};

/** The step's equation as DOM nodes (a DocumentFragment), or null for a kind with none. */
export function equation(kind, ctx) {
  const make = EQUATION[kind];
  return make ? make(ctx) : null;
}
