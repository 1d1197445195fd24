// The neuron view of one attention head: how query i's score for each key j is made.
//   q_i        e      token i's query, head h                        <attn>.q       h t e
//   k_j        e      token j's key, kv head h // (h / g)            <attn>.k       g s e
//   q_i ⊙ k_j  e      their elementwise product; its sum is q_i · k_j
//   score      q_i · k_j × scale (+ B_ij, the ALiBi / T5 bias)        <attn>.scores  h t s
//   weight     softmax over j after the mask                         <attn>.pattern h t s
// q and k are traced after RoPE, so q_i · k_j × scale is the traced score (a position
// bias aside). The page recomputes it from the four tensors /api/stage gives, term by term as
// the notebooks' neuron view does (viz/query_key_terms.js).

import { unpack } from "../core/arrays.js";
import { css, divergingColour } from "../../viz/colours.js";
import { el } from "../core/dom.js";
import { number, quoted, tokenText } from "../core/format.js";
import { largestMagnitude, queryKeyTerms } from "../../viz/query_key_terms.js";
import { axisTokens } from "../core/stages.js";

const PARTS = ["q", "k", "scores", "pattern"];
const OPENS_ON = ["attn.q", "attn.scores", "attn.pattern"]; // the steps that open on q · k
const BIASED_POSITIONS = ["alibi", "t5_relative"]; // a bias added to self-attention's scores
const MAX_KEYS = 48; // a longer input shows the keys with the largest weights
const STRIP_WIDTH = 128; // px for a whole vector
const MIN_FEATURE = 2; // px per feature
const MAX_FEATURE = 12;
const WEIGHT_BAR = 50; // px for a weight of 1
const WEIGHT_DECIMALS = 3; // of the library's float32 weights (asked exact: a map's bytes are 1/255 apart)
const FLOAT32_EPSILON = 2 ** -23;

/** The traces of q, k, scores and pattern (PARTS) of the attention layer a q, scores or
 * pattern step is in: the walk's steps of its block, self or cross as it is; null for any other step. */
export function queryKeyTraces(stage, stages) {
  if (!stage.trace || !OPENS_ON.includes(stage.kind)) return null;
  const sibling = (part) => stages.find((s) => s.group === stage.group && s.cross === stage.cross && s.kind === `attn.${part}`);
  return PARTS.map((part) => sibling(part)?.trace ?? null);
}

function scaleText(scale, dHead) {
  if (Math.abs(scale - dHead ** -0.5) < 1e-9) return `1/√${dHead} = ${number(scale)}`;
  return number(scale);
}

/** One vector as a row of coloured cells, its value per feature on hover. */
function strip(values, extent, cls) {
  const e = values.length;
  const cell = Math.max(MIN_FEATURE, Math.min(MAX_FEATURE, Math.floor(STRIP_WIDTH / e)));
  const canvas = el("canvas", { class: `qk-strip ${cls}`, width: e, height: 1, style: { width: `${e * cell}px` } });
  const context = canvas.getContext("2d");
  values.forEach((value, c) => {
    context.fillStyle = css(divergingColour(value, extent));
    context.fillRect(c, 0, 1, 1);
  });
  canvas.addEventListener("mousemove", (event) => {
    const c = Math.min(e - 1, Math.floor(event.offsetX / cell));
    canvas.title = `feature ${c}: ${number(values[c])}`;
  });
  return canvas;
}

/** The keys a row shows: all of them, or the MAX_KEYS with the largest weights, in order. */
function shownKeys(weights) {
  const keys = Array.from(weights, (_, j) => j);
  if (keys.length <= MAX_KEYS) return keys;
  return keys.sort((a, b) => weights[b] - weights[a]).slice(0, MAX_KEYS).sort((a, b) => a - b);
}

/** Every number of query i's row for head h: [{key, k, product, dot, scaled, score, bias, weight}]. */
function queryKeyRows(tensors, head, query, scale) {
  const [heads, t, e] = tensors.q.shape;
  const [g, s] = tensors.k.shape;
  const kvHead = Math.floor(head / (heads / g)); // query head h reads kv head h // (h / g)
  const offset = (head * t + query) * e;
  const q = tensors.q.values.subarray(offset, offset + e); // e
  const row = (head * t + query) * s;
  const rows = Array.from({ length: s }, (_, j) => {
    const start = (kvHead * s + j) * e;
    const k = tensors.k.values.subarray(start, start + e); // e
    const { product, dot } = queryKeyTerms(q, k); // q ⊙ k (e) and q · k
    const score = tensors.scores.values[row + j];
    return { key: j, k, product, dot, scaled: dot * scale, score, bias: score - dot * scale, weight: tensors.pattern.values[row + j] };
  });
  return { q, kvHead, rows };
}

/** score − q·k × scale, 0 where it is only float32 rounding (ALiBi's bias at j = i is 0). */
function shownBias({ bias, score }) {
  return Math.abs(bias) <= 4 * FLOAT32_EPSILON * Math.max(1, Math.abs(score)) ? 0 : bias;
}

function caption(level, arch, scale, biased) {
  const cap = arch.attention.softcap; // Gemma 2: the weights are the softmax of cap · tanh(score / cap)
  const capped = cap ? ` The scores are soft-capped, ${cap} · tanh(score / ${cap}), before the softmax.` : "";
  if (level === "beginner") {
    return "A token's query is compared with every token's key: multiply them feature by feature, add up, scale. " +
      "That is the score; softmax turns the scores into the weights." + capped;
  }
  const bias = biased ? " + B_ij" : "";
  const words = biased ? "B_ij: the position bias; " : "";
  return `score(i, j) = (Σ_c q_i[c] k_j[c]) × scale${bias} = q_i · k_j × scale${bias}; ${words}` +
    `scale = ${scaleText(scale, arch.attention.d_head)}.${capped} Orange: positive, blue: negative.`;
}

function check(rows, biased) {
  if (biased) {
    return "The position bias is in neither q nor k: bias = score − q·k × scale, with the score as the model traced it.";
  }
  const gap = Math.max(...rows.map((r) => Math.abs(r.score - r.scaled)));
  return `Recomputed here from q and k; the traced scores differ by at most ${number(gap, 2)}.`;
}

function querySelect(tokens, onQuery) {
  const select = el(
    "select",
    { class: "qk-query", "aria-label": "query token", onchange: () => onQuery(Number(select.value)) },
    tokens.map((token, i) => el("option", { value: i }, `${i}: ${tokenText(token.text)}`)),
  );
  return select;
}

function weightCell(weight, masked) {
  if (masked) return el("td", { class: "qk-weight qk-num" }, "masked");
  return el(
    "td",
    { class: "qk-weight qk-num" },
    el("span", { class: "qk-weight-bar", style: { width: `${Math.max(1, WEIGHT_BAR * weight)}px` } }),
    weight.toFixed(WEIGHT_DECIMALS),
  );
}

function keyTable(picked, queryToken, keyTokens, biased, causal, query) {
  const { rows, q } = picked;
  const keys = shownKeys(rows.map((r) => r.weight));
  const vectorExtent = largestMagnitude([q, ...keys.map((j) => rows[j].k)]);
  const productExtent = largestMagnitude(keys.map((j) => rows[j].product));
  const sums = biased ? ["q_i · k_j", "× scale", "+ bias", "= score"] : ["q_i · k_j", "× scale = score"];
  const head = ["key j", "k_j", "q_i ⊙ k_j", ...sums, "softmax weight"];
  const queryRow = el(
    "tr",
    { class: "qk-query-row" },
    el("td", { class: "qk-token" }, `${tokenText(queryToken?.text ?? "?")} `, el("span", { class: "qk-index" }, query)),
    el("td", {}, strip(q, vectorExtent, "qk-q")),
    el("td", { class: "qk-label", colspan: head.length - 2 }, "← q_i, the query: each row multiplies it with one key"),
  );
  const body = keys.map((j) => {
    const r = rows[j];
    const masked = causal && j > query;
    const numbers = [r.dot, r.scaled, ...(biased ? [shownBias(r), r.score] : [])];
    const classes = ["qk-dot", "qk-scaled", "qk-bias", "qk-score"];
    return el(
      "tr",
      {
        class: masked ? "qk-row qk-masked" : "qk-row",
        dataset: { key: j, dot: r.dot, scaled: r.scaled, score: r.score, bias: r.bias, weight: r.weight },
      },
      el("td", { class: "qk-token" }, `${tokenText(keyTokens?.[j]?.text ?? "?")} `, el("span", { class: "qk-index" }, j)),
      el("td", {}, strip(r.k, vectorExtent, "qk-key")),
      el("td", {}, strip(r.product, productExtent, "qk-product")),
      numbers.map((value, n) => el("td", { class: `${classes[n]} qk-num` }, number(value))),
      weightCell(r.weight, masked),
    );
  });
  const clipped = keys.length < rows.length
    ? el("p", { class: "hint qk-clipped" }, `the ${keys.length} keys with the largest weights, of ${rows.length}`)
    : null;
  return {
    table: el(
      "div",
      { class: "qk-scroll" },
      el("table", { class: "qk-table" }, el("thead", {}, el("tr", {}, head.map((text) => el("th", {}, text))), queryRow), el("tbody", {}, body)),
    ),
    clipped,
  };
}

/**
 * The view for the opened step ``stage`` of the attention layer whose q, k, scores and pattern are ``traces``.
 * options: {traces, stage, payload, level, loadStage(name) -> Promise, onQuery(i)}
 * Returns {element, show(head, query)}; data-ready is set each time it is drawn.
 */
export function queryKeyView({ traces, stage, payload, level, loadStage, onQuery }) {
  const arch = payload.architecture;
  const { stack, cross } = stage;
  const biased = BIASED_POSITIONS.includes(arch.positions) && !cross;
  const causal = !cross && Boolean(arch.stacks.find((s) => s.name === stack)?.causal);
  const scale = arch.attention.scale;
  const queryTokens = axisTokens(stage, "t", payload) ?? [];
  const keyTokens = axisTokens(stage, "s", payload);
  const element = el("section", { class: "qk-view", "aria-label": "query · key" }, el("p", { class: "loading" }, "loading q, k and the scores…"));
  const select = querySelect(queryTokens, (i) => onQuery?.(i));
  let tensors = null;
  let wanted = null;

  const draw = () => {
    const { head, query } = wanted;
    const picked = queryKeyRows(tensors, head, query, scale);
    const { table, clipped } = keyTable(picked, queryTokens[query], keyTokens, biased, causal, query);
    select.value = String(query);
    const shared = tensors.k.shape[0] < tensors.q.shape[0]; // GQA / MQA
    const headText = shared ? `head ${head}, reading kv head ${picked.kvHead}` : `head ${head}`;
    element.replaceChildren(
      el("h4", { class: "qk-title" }, `Query · key for one query (${headText})`),
      el("p", { class: "detail-caption" }, caption(level, arch, scale, biased)),
      el("div", { class: "qk-query-line" },
        el("label", {}, "query i ", select),
        el("span", { class: "qk-query-token" }, quoted(queryTokens[query]?.text ?? "?")),
        el("span", { class: "hint" }, "or click a row of the map")),
      table,
      clipped ?? "",
      level === "beginner" ? "" : el("p", { class: "hint qk-check" }, check(picked.rows, biased)),
    );
    Object.assign(element.dataset, { head, query, kvHead: picked.kvHead, ready: "1" });
  };

  Promise.all(traces.map((trace, n) => loadStage(trace, PARTS[n] === "pattern"))).then(
    (answers) => {
      tensors = Object.fromEntries(PARTS.map((part, n) => [part, unpack(answers[n].value)]));
      if (wanted) draw();
    },
    (error) => {
      element.replaceChildren(el("p", { class: "error-inline" }, error.message));
      element.dataset.ready = "error";
    },
  );
  return {
    element,
    show(head, query) {
      wanted = { head, query };
      if (tensors) draw();
    },
  };
}
