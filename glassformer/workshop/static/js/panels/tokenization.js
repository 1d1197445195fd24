// How the text became tokens: the tokenizer's own account (POST api/tokens,
// glassformer/workshop/reading/tokenization.py), one row per piece of the text:
//   byte-level BPE   the piece's bytes, then each merge (the pair and its rank), the tokens
//   SentencePiece BPE  the same over characters ("▁" shown as a space, <0xE4> as its byte)
//   Unigram          the lattice: every vocabulary piece matching at each position, its
//                    log-probability, the best path (the largest sum) marked
//   WordPiece        the word normalized, then its longest vocabulary pieces (or [UNK])
//   characters       one token per character (its code point and name)
// Opened on demand: a long text's merges are many and nobody reads them all at once.

import { el } from "../core/dom.js";
import { quoted, tokenText } from "../core/format.js";

const SHOWN_PIECES = 200; // the rest is counted, not drawn

// SentencePiece's pieces (SentencePiece BPE, Unigram) are spelled with "▁" for a space and
// <0xE4> for a byte of byte fallback: shown as a reader sees a token, ␣ and ⟨E4⟩
const SENTENCEPIECE = new Set(["sentencepiece_bpe", "unigram"]);
// how to read each tokenizer's parts (WordPiece's pieces say it themselves)
const BPE_HINT = "Each part is shown as its characters (␣ a space, ↵ a newline); a byte that is only part of a character " +
  "shows as hex, ⟨F0 9F⟩. A lower rank merges first.";
const HINTS = {
  bpe: BPE_HINT,
  sentencepiece_bpe: BPE_HINT,
  unigram: "Every vocabulary piece that matches the text, with its log-probability; the tokens are the path through " +
    "the text whose sum is largest (Viterbi).",
};

function pieceText(kind, text) {
  if (!SENTENCEPIECE.has(kind)) return tokenText(text);
  return tokenText(text.replaceAll("\u2581", " ").replace(/<0x([0-9A-F]{2})>/g, "\u27e8$1\u27e9"));
}

function steps(kind, piece) {
  const shown = (text) => pieceText(kind, text);
  if (piece.special && kind !== "char" && kind !== "wordpiece") return [el("li", {}, "a special token, kept whole")];
  if (kind === "unigram") {
    return [
      ...piece.steps.map((s) => el("li", { class: s.best ? "tk-merge tk-best" : "tk-merge" },
        `at ${s.at}: `, el("code", {}, shown(s.piece)), ` log p = ${s.score.toFixed(2)}`,
        s.unknown ? " (unknown)" : "", s.best ? " ← on the best path" : "")),
      el("li", {}, `best path: ${piece.parts.map(shown).join(" + ")}, sum of log p = ${piece.score.toFixed(2)}`),
    ];
  }
  if (kind === "bpe" || kind === "sentencepiece_bpe") {
    return [
      el("li", { class: "tk-start" }, kind === "bpe" ? "bytes: " : "characters: ", piece.parts.map((p) => el("code", {}, shown(p)))),
      ...piece.steps.map((s) => el("li", { class: "tk-merge", dataset: { rank: s.rank } },
        "merge ", el("code", {}, s.merge.map(shown).join(" + ")), ` (rank ${s.rank}) → `,
        // a long piece's steps name where the merge happened instead of listing every part
        s.parts ? s.parts.map((p) => el("code", {}, shown(p))) : `one part at byte ${s.at}`)),
    ];
  }
  if (kind === "wordpiece") {
    return [
      el("li", {}, `normalized: ${quoted(piece.normalized)}`),
      ...piece.steps.map((s) => el("li", {}, `${s.rule}${s.pieces ? `: ${s.pieces.join(" ")}` : ""}`)),
    ];
  }
  return piece.steps.map((s) => el("li", {}, s.rule === "special" ? "a special token" : `${s.code_point} ${s.name}`));
}

function pieceRow(kind, piece) {
  return el("li", { class: "tk-piece", dataset: { start: piece.start } },
    el("span", { class: "tk-text" }, `\u2018${pieceText(kind, piece.text)}\u2019`),
    el("ol", { class: "tk-steps" }, steps(kind, piece)),
    el("span", { class: "tk-result" }, "→ ", piece.tokens.map((t, i) => el("span", { class: "tk-token", title: `id ${piece.ids[i]}` }, `${tokenText(t)} `, el("small", {}, piece.ids[i])))));
}

/** A closed <details> that fetches and draws the account when opened (`load()` -> Promise). */
export function tokenizationDetails(load) {
  const body = el("div", { class: "tk-body" });
  const details = el("details", { class: "tokenization" }, el("summary", {}, "How the text became these tokens"), body);
  details.addEventListener("toggle", async () => {
    if (!details.open || details.dataset.state) return;
    details.dataset.state = "loading";
    body.replaceChildren(el("p", { class: "loading" }, "asking the tokenizer…"));
    try {
      const answer = await load();
      const pieces = answer.pieces.slice(0, SHOWN_PIECES);
      const more = answer.pieces.length - pieces.length;
      body.replaceChildren(
        HINTS[answer.kind] ? el("p", { class: "hint" }, HINTS[answer.kind]) : "",
        el("ol", { class: "tk-pieces" }, pieces.map((p) => pieceRow(answer.kind, p))),
        more > 0 || answer.cut ? el("p", { class: "hint" }, `… and ${more > 0 ? more : "more"} pieces not drawn.`) : "",
      );
      details.dataset.state = "ready";
    } catch (error) {
      body.replaceChildren(el("p", { class: "error-inline" }, error.message));
      details.dataset.state = "error";
    }
  });
  return details;
}
