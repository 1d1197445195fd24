// What an opened step's map is and the words around it: the kind of map a step is drawn as
// (read from stage.kind: attention weights, scores, a router's scores, or features), its
// caption at the reader's level, the text of a hovered cell, and the labels of a token axis.

import { number, quoted, tokenText } from "../core/format.js";

const WEIGHT_DECIMALS = 3;

const CAPTIONS = {
  pattern: {
    beginner: "Each row is a token looking at the others (its columns). Darker: it looks there more. Each row adds up to 1.",
    other: "Rows are queries (t), columns keys (s); each row sums to 1. Hover a cell for its weight.",
  },
  scores: {
    beginner: "How well each token's question matches each other token. Orange: a good match, blue: a poor one.",
    other: "Scores before the mask and softmax: rows queries (t), columns keys (s). Hover a cell for its value.",
  },
  routing: {
    beginner: "Each row is a token, each column an expert: how strongly the router sends the token there. " +
      "Each token goes to its few best experts only.",
    other: "Rows are tokens (t), columns experts (n): the router's scores. Hover a cell for its value.",
  },
  features: {
    beginner: "Each row is a token; each column is one feature, one of the numbers in its vector. No feature has a " +
      "meaning anyone chose: together they hold what the model has worked out about the token. Orange: positive, blue: negative.",
    other: "Rows are tokens, columns features. Hover a cell for its value.",
  },
};

const MAP_KINDS = {
  "attn.pattern": "pattern",
  "attn.scores": "scores",
  "attn.capped": "scores", // soft-capped: still scores
  "ffn.router_probs": "routing", // a mixture of experts' router: tokens x experts
};

/** The map a step is drawn as: "pattern", "scores", "routing" or "features". */
export function mapKind(stage) {
  return MAP_KINDS[stage.kind] ?? "features";
}

export function caption(kind, level) {
  const texts = CAPTIONS[kind];
  return level === "beginner" ? texts.beginner : texts.other;
}

/** An axis's labels: its tokens' text, or the indices of an axis of features. */
export function tokenLabels(tokens, count) {
  return Array.from({ length: count }, (_, i) => (tokens ? tokenText(tokens[i]?.text ?? "?") : String(i)));
}

/** The text of a hovered cell: (row, col, value) -> words. An axis: {letter, tokens}. */
export function describeCell(kind, rowAxis, colAxis, head, headLetter) {
  const name = (axis, i) => (axis.tokens ? `${quoted(axis.tokens[i]?.text ?? "?")} (${i})` : `${i}`);
  const headText = head === null ? "" : `${headLetter === "g" ? "kv head" : "head"} ${head}: `;
  if (kind === "pattern") {
    return (row, col, value) =>
      `${headText}query ${name(rowAxis, row)} → key ${name(colAxis, col)}: weight ${value.toFixed(WEIGHT_DECIMALS)}`;
  }
  if (kind === "scores") {
    return (row, col, value) => `${headText}query ${name(rowAxis, row)} → key ${name(colAxis, col)}: score ${number(value)}`;
  }
  const colName = { v: "vocabulary id", n: "expert" }[colAxis.letter] ?? "feature";
  return (row, col, value) => `${headText}token ${name(rowAxis, row)}, ${colName} ${col}: ${number(value)}`;
}
