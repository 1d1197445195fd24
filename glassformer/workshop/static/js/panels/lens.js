// The logit lens: each layer's residual stream at the last position, read through the
// model's final norm and head (POST api/lens via api.js, glassformer/inspect/logit_lens.py). A row per
// layer: its likeliest next tokens, and where the model's final choice stands there.

import { el } from "../core/dom.js";
import { number, percent, quoted } from "../core/format.js";

/** A lens row's layer in words: "after block 3", or "embeddings" (row.block null). */
export function layerWords(row) {
  return row.block === null ? "embeddings" : `after block ${row.block}`;
}

/** A table of the lens in `node`; `level` adds trace names and probabilities. */
export function renderLens(node, lens, level) {
  const advanced = level === "advanced";
  const rows = lens.rows.map((row) => el("tr", { class: "lens-row", dataset: { layer: row.layer, rank: row.rank } },
    el("th", { scope: "row" }, advanced ? row.layer : layerWords(row)),
    el("td", {}, row.top.map((t) => el("span", { class: "lens-token", dataset: { id: t.id }, title: `id ${t.id}` }, `${quoted(t.text)} ${percent(t.p, 0)}`))),
    el("td", { class: row.rank === 1 ? "lens-rank lens-first" : "lens-rank" }, `#${row.rank}${advanced ? ` (${percent(row.p, 1)})` : ""}`),
    el("td", { class: "lens-entropy", title: "entropy of this layer's distribution: 0 nats = certain" }, `${number(row.entropy, 2)} nats`),
  ));
  node.replaceChildren(
    el("p", { class: "hint" },
      "Read each layer's stream with the model's own head: what would it predict after the last token? " +
      `The last column follows the final choice ${quoted(lens.token.text)}: its rank at each layer.`),
    el("table", { class: "lens" },
      el("thead", {}, el("tr", {}, ...["layer", "likeliest next tokens", "final choice", "uncertainty"].map((h) => el("th", {}, h)))),
      el("tbody", {}, rows)),
  );
}
