// What the model costs (GET api/costs, glassformer/inspect/cost_report.py): parameters by
// component (tied weights counted once), FLOPs per token (forward, and training ≈ 3×, with
// the attention term), the KV cache per token and at a length, and the activations one
// training step keeps — for this model, at a length, batch and number format the learner
// picks. Every figure is computed from the config; the model's own count stands beside it.

import { el } from "../core/dom.js";

const DTYPES = ["float32", "bfloat16", "float16"];

function bytes(n) {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit ? 1 : 0)} ${units[unit]}`;
}

function flops(n) {
  const units = [[1e12, "TFLOP"], [1e9, "GFLOP"], [1e6, "MFLOP"], [1e3, "kFLOP"]];
  const [size, name] = units.find(([s]) => n >= s) ?? [1, "FLOP"];
  return `${(n / size).toFixed(n >= 1e3 ? 2 : 0)} ${name}`;
}

const count = (n) => n.toLocaleString("en");
const row = (name, value, note = "") => el("tr", {}, el("th", {}, name), el("td", {}, value), el("td", { class: "hint" }, note));

function table(figures) {
  const total = figures.total_parameters;
  const parameters = Object.entries(figures.parameters).map(([name, n]) =>
    row(name, count(n), n === 0 && name.endsWith("head") ? "tied: its matrix is the token table's, counted once" : `${((100 * n) / total).toFixed(1)}%`));
  const f = figures.flops_per_token;
  const real = figures.real_parameters;
  return el("table", { class: "costs-table", dataset: { total, forward: f.forward, kv: figures.kv_cache_bytes_per_token } },
    el("tbody", {},
      parameters,
      row("total", count(total), real === null ? "" : real === total ? "= the model's own count" : `the model counts ${count(real)}`),
      row("FLOPs per token: weights", flops(f.weights), "2 × the matrix parameters"),
      row("FLOPs per token: attention", flops(f.attention), `q·k and the weighted sum over ${figures.seq_len} keys`),
      row("forward, per token", flops(f.forward)),
      row("training, per token", flops(f.training), "≈ 3 × forward (backward: twice the forward)"),
      row("KV cache per token", bytes(figures.kv_cache_bytes_per_token), "2 · layers · kv heads · d_head · bytes"),
      row(`KV cache at ${count(figures.seq_len)} × ${figures.batch}`, bytes(figures.kv_cache_bytes)),
      row("weights", bytes(figures.weight_bytes)),
      row("activations kept for backward", bytes(figures.activation_bytes), "one training step"),
    ));
}

/** The costs of ``model`` in ``node``, with fields for the length, the batch and the dtype. */
export function renderCosts(node, model, maxSeqLen) {
  const seqLen = el("input", { type: "number", min: "1", step: "1", value: String(maxSeqLen), class: "costs-seq", "aria-label": "sequence length" });
  const batch = el("input", { type: "number", min: "1", step: "1", value: "1", class: "costs-batch", "aria-label": "batch" });
  const dtype = el("select", { class: "costs-dtype", "aria-label": "number format" }, ...DTYPES.map((d) => el("option", { value: d }, d)));
  const out = el("div", { class: "costs-out" });
  const draw = async () => {
    node.dataset.state = "loading";
    const query = new URLSearchParams({ model, seq_len: seqLen.value, batch: batch.value, dtype: dtype.value });
    try {
      const response = await fetch(`api/costs?${query}`);
      const answer = await response.json();
      if (!response.ok) throw new Error(answer.error);
      out.replaceChildren(table(answer), ...answer.notes.map((n) => el("p", { class: "hint" }, n)));
      node.dataset.state = "ready";
    } catch (error) {
      out.replaceChildren(el("p", { class: "error-inline" }, error.message));
      node.dataset.state = "error";
    }
  };
  for (const input of [seqLen, batch, dtype]) input.addEventListener("change", draw);
  node.replaceChildren(el("details", { class: "costs" },
    el("summary", {}, "What it costs: parameters, FLOPs, memory"),
    el("div", { class: "costs-controls" },
      el("label", {}, "tokens ", seqLen), el("label", {}, "batch ", batch), el("label", {}, "format ", dtype)),
    out));
  node.querySelector("details").addEventListener("toggle", (event) => {
    if (event.target.open && node.dataset.state !== "ready") draw();
  });
  node.dataset.state = "none";
}
