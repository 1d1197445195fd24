// Links that open the views of glassformer.viz (head, model, neuron, token, lens, embeddings) for
// the current model and text, each a self-contained page the server builds (/views/...).

import { el } from "../core/dom.js";

const VIEWS = [
  ["head", "head view", "every head of one layer: which tokens each token attends to"],
  ["model", "model view", "every layer x head at once"],
  ["neuron", "neuron view", "how one query's q·k makes its attention weights"],
  ["tokens", "token view", "how surprising each token was to the model"],
  ["lens", "lens table", "the logit lens at every position: each layer's top next-token guess"],
  ["embeddings", "embeddings", "the tokens' vectors moving layer by layer (PCA)"],
];

/** Fill `node` with one link per view for `model`, `text` and the chosen `layer`. */
export function renderViewLinks(node, model, text, layer) {
  const links = VIEWS.map(([view, name, title]) => {
    const query = new URLSearchParams({ model, text, layer: String(layer ?? 0), head: "0" });
    return el("a", { href: `views/${view}?${query}`, target: "_blank", rel: "noopener", title, dataset: { view } }, name);
  });
  node.replaceChildren(el("p", { class: "hint" }, "Open this text in the notebook views:"), el("p", { class: "view-links" }, links));
}
