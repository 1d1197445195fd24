/* Glassformer neuron view: how one head turns the query of token t and every key into
 * attention weights. Rows are keys; columns show k (one cell per dimension), q ⊙ k
 * (its cells sum to q·k), q·k × scale, the position bias if the model adds one, the score
 * and the softmax weight. Blue < 0 < red; hover a cell for its value; click a token at the
 * top to choose the query.
 */

import * as core from "./core.js";
import { largestMagnitude, queryKeyTerms } from "./query_key_terms.js";

class NeuronView {
  // reading (payload.js): p (the payload), queries, keys, t, s, weights(layer)
  constructor(root, reading) {
    Object.assign(this, reading);
    this.root = root;
    this.row = this.s > 256 ? 12 : 16;
  }

  async render() {
    const { p, root } = this;
    const names = ["q", "k", "scaled", "scores", "pattern"].concat(p.bias ? ["bias"] : []);
    const arrays = await Promise.all(names.map((name) => core.array(p[name])));
    names.forEach((name, n) => (this[name] = arrays[n]));
    this.e = p.q.shape[1];
    this.cw = Math.max(3, Math.min(12, Math.floor(256 / this.e)));
    this.vmax = largestMagnitude([this.q, this.k]); // q and k share one colour scale

    core.header(root, p.title, "Click a token to choose the query; hover a cell for its value.");
    this.tip = core.tooltip(root);
    this.chips = this.queryChips(root.appendChild(core.el("div", "gfv-chips")));
    const scale = core.number(p.scale, 4);
    const root1 = 1 / (p.scale * p.scale);
    const sqrt = Math.abs(root1 - Math.round(root1)) < 1e-3 ? ` = 1/\u221a${Math.round(root1)}` : "";
    root.appendChild(
      core.el(
        "div",
        "gfv-formula",
        `score = q\u00b7k \u00d7 ${scale}${sqrt}` +
          (p.bias ? " + position bias" : "") +
          `;  weight = softmax of the scores over ${p.causal ? "the keys up to the query" : "all keys"}.` +
          "  q and k share one colour scale; q \u2299 k has its own.",
      ),
    );
    this.table(root.appendChild(core.el("div", "gfv-scroll")));
    this.setQuery(p.query);
  }

  queryChips(parent) {
    return this.queries.map((token, i) => {
      const chip = parent.appendChild(core.el("div", "gfv-tok gfv-chip", core.label(token)));
      chip.title = `query #${i} ${core.quoted(token)}`;
      chip.dataset.index = String(i);
      chip.addEventListener("click", () => this.setQuery(i));
      return chip;
    });
  }

  // A grid of columns; each column is a heading over a stack of s rows (or a canvas).
  table(parent) {
    const { e, cw, row, s } = this;
    const grid = parent.appendChild(core.el("div", "gfv-neuron"));
    grid.style.setProperty("--gfv-row", row + "px");
    const columns = ["key", `k (${e} dims)`, "q \u2299 k", "q\u00b7k \u00d7 scale"]
      .concat(this.bias ? ["+ bias"] : [])
      .concat(["score", "weight"]);
    grid.style.gridTemplateColumns = `repeat(${columns.length}, max-content)`;
    columns.forEach((name) => grid.appendChild(core.el("div", "gfv-neuron-head", name)));

    // the query row: its vector above the key vectors, dimension by dimension
    this.queryLabel = grid.appendChild(core.el("div", "gfv-tok"));
    this.qCanvas = grid.appendChild(core.canvas(e * cw, row));
    this.hover(this.qCanvas, (j, d) => `query dim ${d}: q = ${core.number(this.q[this.query * e + d])}`);
    for (let c = 2; c < columns.length; c++) grid.appendChild(core.el("div"));

    const stack = () => grid.appendChild(core.el("div", "gfv-col"));
    const labels = stack();
    this.keyLabels = this.keys.map((token, j) => {
      const cell = labels.appendChild(core.el("div", "gfv-tok", core.label(token)));
      cell.title = `key #${j} ${core.quoted(token)}`;
      return cell;
    });
    this.kCanvas = grid.appendChild(core.canvas(e * cw, s * row));
    this.pCanvas = grid.appendChild(core.canvas(e * cw, s * row));
    const describe = (j, d) => {
      const q = this.q[this.query * e + d];
      const k = this.k[j * e + d];
      return `key #${j} ${core.quoted(this.keys[j])}, dim ${d}\nk = ${core.number(k)}\nq = ${core.number(q)}\nq\u00b7k term = ${core.number(q * k)}`;
    };
    this.hover(this.kCanvas, describe);
    this.hover(this.pCanvas, describe);
    this.numbers = ["scaled"].concat(this.bias ? ["bias"] : []).concat(["scores"]).map((name) => {
      const column = stack();
      return { name, cells: this.keys.map(() => column.appendChild(core.el("div", "gfv-num"))) };
    });
    const weights = stack();
    this.bars = this.keys.map(() => {
      const cell = weights.appendChild(core.el("div", "gfv-bar-cell"));
      return { bar: cell.appendChild(core.el("span")), text: cell.appendChild(core.el("em")) };
    });
    this.drawKeys();
  }

  hover(canvas, describe) {
    canvas.addEventListener("mousemove", (event) => {
      const box = canvas.getBoundingClientRect();
      const d = Math.floor((event.clientX - box.left) / this.cw);
      const j = Math.floor((event.clientY - box.top) / this.row);
      if (d < 0 || d >= this.e || j < 0) return this.tip.hide();
      this.tip.show(event, describe(j, d));
    });
    canvas.addEventListener("mouseleave", () => this.tip.hide());
  }

  masked(j) {
    return this.p.causal && j > this.query;
  }

  // Cells of a vector row, coloured on a diverging scale of ±vmax.
  cells(ctx, values, offset, y, vmax, alpha) {
    const { cw, e, row } = this;
    ctx.globalAlpha = alpha;
    for (let d = 0; d < e; d++) {
      ctx.fillStyle = core.rgb(core.diverging(values[offset + d] / vmax));
      ctx.fillRect(d * cw, y + 1, cw > 4 ? cw - 1 : cw, row - 2);
    }
    ctx.globalAlpha = 1;
  }

  drawKeys() {
    const ctx = this.kCanvas.getContext("2d");
    for (let j = 0; j < this.s; j++) this.cells(ctx, this.k, j * this.e, j * this.row, this.vmax, 1);
  }

  setQuery(index) {
    const { e, s, row } = this;
    this.query = index;
    this.root.dataset.query = String(index);
    this.chips.forEach((chip, i) => chip.classList.toggle("gfv-current", i === index));
    this.queryLabel.textContent = "query: " + core.label(this.queries[index]);
    this.queryLabel.title = `query #${index} ${core.quoted(this.queries[index])}`;
    const qctx = this.qCanvas.getContext("2d");
    qctx.clearRect(0, 0, e * this.cw, row);
    this.cells(qctx, this.q, index * e, 0, this.vmax, 1);

    // q ⊙ k for every visible key, on its own scale
    const products = new Float32Array(s * e);
    const query = this.q.subarray(index * e, (index + 1) * e);
    for (let j = 0; j < s; j++) {
      if (!this.masked(j)) products.set(queryKeyTerms(query, this.k.subarray(j * e, (j + 1) * e)).product, j * e);
    }
    const pmax = largestMagnitude([products]); // masked keys' products stay 0
    const pctx = this.pCanvas.getContext("2d");
    pctx.clearRect(0, 0, e * this.cw, s * row);
    for (let j = 0; j < s; j++) if (!this.masked(j)) this.cells(pctx, products, j * e, j * row, pmax, 1);
    const kctx = this.kCanvas.getContext("2d");
    kctx.clearRect(0, 0, e * this.cw, s * row);
    for (let j = 0; j < s; j++) this.cells(kctx, this.k, j * e, j * row, this.vmax, this.masked(j) ? 0.25 : 1);

    this.keyLabels.forEach((cell, j) => cell.classList.toggle("gfv-masked", this.masked(j)));
    for (const { name, cells } of this.numbers) {
      const values = this[name];
      let vmax = 0;
      for (let j = 0; j < s; j++) if (!this.masked(j)) vmax = Math.max(vmax, Math.abs(values[index * s + j]));
      cells.forEach((cell, j) => {
        const v = values[index * s + j];
        const masked = this.masked(j);
        cell.textContent = core.number(v, 3);
        cell.classList.toggle("gfv-masked", masked);
        cell.style.background = masked ? "" : core.rgb(core.diverging((0.6 * v) / (vmax || 1)));
        cell.title = `${name === "scaled" ? "q\u00b7k \u00d7 scale" : name} = ${core.number(v, 5)}`;
      });
    }
    this.bars.forEach(({ bar, text }, j) => {
      const w = this.pattern[index * s + j];
      bar.style.width = (this.masked(j) ? 0 : Math.round(w * 64)) + "px";
      text.textContent = this.masked(j) ? "masked" : core.number(w, 3);
      text.className = this.masked(j) ? "gfv-masked" : "";
    });
  }
}

/** Draws the neuron view of a payload's reading (payload.js) into ``root``. */
export const kind = "neuron";
export const render = (root, reading) => new NeuronView(root, reading).render();
