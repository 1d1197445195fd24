// The tokens as coloured chips: the text as the model reads it. A chip's colour follows its
// position, so the same token keeps its colour in the attention lines and the heatmaps.

import { el } from "../core/dom.js";
import { tokenText } from "../core/format.js";
import { tokenizationDetails } from "./tokenization.js";

const HUE_STEP = 47; // degrees between neighbours: adjacent chips never look alike
const SATURATION = 70;
const LIGHTNESS = 87;

export function tokenColour(position) {
  return `hsl(${(position * HUE_STEP) % 360} ${SATURATION}% ${LIGHTNESS}%)`;
}

/** One chip; the id shows on hover, and under the text when ``showId``. */
export function chip(token, position, showId = false) {
  return el(
    "span",
    {
      class: "chip",
      title: `token ${position}: id ${token.id}`,
      style: { background: tokenColour(position) },
      dataset: { position, id: token.id },
    },
    el("span", { class: "chip-text" }, tokenText(token.text)),
    showId ? el("span", { class: "chip-id" }, token.id) : null,
  );
}

/** A row of chips with an optional label ("decoder input"); the last `generated` chips are
 * tokens a generation appended (a timeline step), outlined. `characters`: runs of tokens
 * whose bytes together make characters none holds whole ([{first, last, text}]): their chips
 * are held together under the characters they make, so "⟨F0 9F⟩ ⟨8C 8A⟩" reads as 🌊. */
export function tokenRow(tokens, { showId = false, label = "", generated = 0, characters = [] } = {}) {
  const first = tokens.length - generated;
  const chips = tokens.map((token, i) => {
    const node = chip(token, i, showId);
    if (i >= first) node.classList.add("chip-generated");
    return node;
  });
  const row = [];
  let next = 0;
  for (const group of characters) {
    row.push(...chips.slice(next, group.first));
    row.push(el("span", { class: "char-group", title: `these tokens' bytes together make ${group.text}`, dataset: { text: group.text } },
      el("span", { class: "char-group-chips" }, chips.slice(group.first, group.last + 1)),
      el("span", { class: "char-group-text" }, group.text)));
    next = group.last + 1;
  }
  row.push(...chips.slice(next));
  return el(
    "div",
    { class: "token-row" },
    label ? el("span", { class: "token-row-label" }, label) : null,
    el("div", { class: "chips" }, row),
  );
}

/** The tokens panel: the input, and an encoder-decoder's decoder input; beyond the beginner
 * level, how the tokenizer cut the text (`explain()` -> Promise of /api/tokens's answer). */
export function renderTokens(container, payload, level, explain) {
  const showId = level === "advanced";
  const rows = [];
  const n = payload.tokens.length;
  const intro = level === "beginner"
    ? `The model reads your text as ${n} token${n === 1 ? "" : "s"}. Hover a token for its id.`
    : `t = ${n} tokens${showId ? "; the id under each" : "; hover for the id"}.`;
  const generated = payload.generated;
  rows.push(el("p", { class: "hint" }, intro, generated ? ` The last ${generated} (outlined) were generated: this is the forward pass of generation step ${generated}.` : ""));
  const seq2seq = Boolean(payload.decoder_tokens);
  const characters = payload.characters ?? [];
  rows.push(tokenRow(payload.tokens, { showId, label: seq2seq ? "encoder input" : "", generated: seq2seq ? 0 : generated, characters }));
  if (seq2seq) rows.push(tokenRow(payload.decoder_tokens, { showId, label: "decoder input", generated, characters: payload.decoder_characters ?? [] }));
  if (characters.length) {
    rows.push(el("p", { class: "hint" },
      "A token in ⟨ ⟩ holds bytes, not a whole character: this tokenizer cuts text into bytes, and some characters take " +
      "several tokens. Those tokens are held together under the character they make."));
  }
  if (level !== "beginner") rows.push(tokenizationDetails(explain));
  container.replaceChildren(...rows);
}
