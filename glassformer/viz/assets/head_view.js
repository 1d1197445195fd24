/* Glassformer head view: for one layer, a line from each query token (left) to each key
 * token (right); opacity = attention weight; one colour per head.
 *
 * All lines go on one canvas (thousands of SVG elements would not open fast at 512
 * tokens): per head, lines are bucketed by opacity into 32 Path2D objects and stroked
 * once per bucket (lines.js, which the workshop's lines walk the weights with too). Weights
 * under 2/255 are skipped: at canvas alpha resolution they draw nothing. Layers are inflated
 * from their deflated uint8 blocks when first shown (payload.js).
 */

import * as core from "./core.js";
import { budgetLevel, eachLine, strokeLines } from "./lines.js";

const GAP = 220; // px between the token columns, where the lines go
const MIN_Q = 2; // smallest weight drawn, in 1/255
const ALWAYS = 128; // weights >= 0.5 show whatever the budget
// Pixels of line the overview may stroke. Chromium's software rasterizer takes ~40-80 ns a
// pixel: 5 M keep the first drawing near 0.3 s. Past it only the strongest weights are drawn.
const LINE_BUDGET = 5e6;

class HeadView {
  // reading (payload.js): p (the payload), queries, keys, t, s, weights(layer)
  constructor(root, reading) {
    Object.assign(this, reading);
    this.root = root;
    this.nHeads = this.p.heads.length;
    this.colours = core.headColours(this.nHeads);
    this.active = new Array(this.nHeads).fill(true);
    this.focus = null; // {side: "query" | "key", index}
    this.row = Math.max(this.t, this.s) > 1024 ? 12 : 16;
  }

  async render() {
    const { p, root } = this;
    core.header(
      root,
      p.title,
      "Hover a token to follow its attention; click a head's colour to hide or show it, " +
        "double-click to show that head alone.",
    );
    const bar = root.appendChild(core.el("div", "gfv-bar"));
    this.select = this.layerSelect(bar);
    const swatches = bar.appendChild(core.el("div", "gfv-swatches"));
    this.swatches = p.heads.map((name, h) => this.swatch(swatches, name, h));
    this.note = root.appendChild(core.el("div", "gfv-hint"));
    this.body(root.appendChild(core.el("div", "gfv-scroll")));
    await this.showLayer(p.layer);
  }

  layerSelect(bar) {
    const wrap = bar.appendChild(core.el("label", "", "Layer "));
    const select = wrap.appendChild(core.el("select", "gfv-select"));
    this.p.layers.forEach((layer, i) => select.appendChild(new Option(layer.label, String(i))));
    select.value = String(this.p.layer);
    select.addEventListener("change", () => this.showLayer(Number(select.value)));
    return select;
  }

  swatch(parent, name, h) {
    const button = parent.appendChild(core.el("button", "gfv-swatch", String(h)));
    button.type = "button";
    button.title = name + " (click: hide/show, double-click: only this head)";
    button.style.setProperty("--gfv-c", core.rgb(this.colours[h]));
    button.setAttribute("aria-pressed", "true");
    button.dataset.head = String(h);
    button.addEventListener("click", () => this.setHeads(this.active.map((on, i) => (i === h ? !on : on))));
    button.addEventListener("dblclick", () => {
      const alone = this.active.every((on, i) => on === (i === h));
      this.setHeads(this.active.map((_, i) => alone || i === h));
    });
    return button;
  }

  body(parent) {
    const grid = parent.appendChild(core.el("div", "gfv-lines"));
    grid.style.setProperty("--gfv-row", this.row + "px");
    this.left = this.column(grid, this.queries, "left", "query");
    const height = Math.max(this.t, this.s) * this.row;
    this.canvas = grid.appendChild(core.canvas(GAP, height));
    this.ctx = this.canvas.getContext("2d");
    this.right = this.column(grid, this.keys, "right", "key");
    grid.addEventListener("mouseleave", () => this.setFocus(null));
  }

  column(grid, tokens, side, role) {
    const column = grid.appendChild(core.el("div", "gfv-col gfv-col-" + side));
    const cells = tokens.map((token, i) => {
      const cell = column.appendChild(core.el("div", "gfv-tok", core.label(token)));
      cell.dataset.index = String(i);
      cell.title = `${role} #${i} ${core.quoted(token)}`; // the browser's own tooltip covers no line
      return cell;
    });
    column.addEventListener("mouseover", (event) => {
      const cell = event.target.closest(".gfv-tok");
      if (cell) this.setFocus({ side: role, index: Number(cell.dataset.index) });
    });
    return cells;
  }

  async showLayer(layer) {
    this.layer = layer;
    const weights = await this.weights(layer);
    if (this.layer !== layer) return; // another layer was chosen meanwhile
    this.A = weights;
    this.full = null;
    this.root.dataset.layer = String(layer);
    this.draw();
  }

  setHeads(active) {
    this.active = active;
    this.swatches.forEach((button, h) => {
      button.classList.toggle("gfv-off", !active[h]);
      button.setAttribute("aria-pressed", String(active[h]));
    });
    this.full = null;
    this.draw();
  }

  setFocus(focus) {
    this.focus = focus;
    this.draw();
  }

  y(index) {
    return index * this.row + this.row / 2;
  }

  draw() {
    if (!this.A) return;
    const ctx = this.ctx;
    ctx.save();
    ctx.setTransform(1, 0, 0, 1, 0, 0);
    ctx.clearRect(0, 0, this.canvas.width, this.canvas.height);
    if (!this.focus) {
      this.full = this.full || this.drawAll();
      ctx.drawImage(this.full, 0, 0);
    }
    ctx.restore();
    this.markTokens();
    if (this.focus) this.drawFocus();
  }

  // The smallest weight (in 1/255) the overview draws: MIN_Q, or higher where the lines of
  // all weights from MIN_Q up would be longer in total than LINE_BUDGET pixels.
  threshold() {
    const { t, s, A, row } = this;
    const length = new Float64Array(256);
    const count = new Float64Array(256);
    for (let h = 0; h < this.nHeads; h++) {
      if (!this.active[h]) continue;
      eachLine(A, t, s, MIN_Q, (i, j, q) => {
        length[q] += Math.max(GAP, Math.abs(i - j) * row);
        count[q] += 1;
      }, h * t * s);
    }
    const { lowest, shown, all } = budgetLevel(length, count, MIN_Q, LINE_BUDGET, ALWAYS);
    this.note.textContent =
      shown < all
        ? `Showing the ${shown.toLocaleString("en")} strongest of ${all.toLocaleString("en")} lines ` +
          `(weight \u2265 ${core.number(lowest / 255, 2)}) so that the page stays fast; ` +
          "hover a token to see all of its lines."
        : "";
    this.root.dataset.minWeight = String(lowest);
    return lowest;
  }

  // The lines of the active heads, into an offscreen canvas kept until heads or layer change.
  drawAll() {
    const { t, s, A } = this;
    const off = core.canvas(GAP, Math.max(t, s) * this.row);
    const ctx = off.getContext("2d");
    ctx.lineWidth = 1;
    const lowest = this.threshold();
    const y = (index) => this.y(index);
    for (let h = 0; h < this.nHeads; h++) {
      if (!this.active[h]) continue;
      const colour = core.rgb(this.colours[h]);
      strokeLines(ctx, { weights: A, t, s, offset: h * t * s, lowest, gap: GAP, y, colour });
    }
    return off;
  }

  // The focused token's lines only, each at its own opacity, a little thicker.
  drawFocus() {
    const { t, s, A, ctx } = this;
    const { side, index } = this.focus;
    ctx.lineWidth = 2;
    for (let h = 0; h < this.nHeads; h++) {
      if (!this.active[h]) continue;
      ctx.strokeStyle = core.rgb(this.colours[h]);
      const count = side === "query" ? s : t;
      for (let n = 0; n < count; n++) {
        const [i, j] = side === "query" ? [index, n] : [n, index];
        const q = A[(h * t + i) * s + j];
        if (q < 1) continue;
        ctx.globalAlpha = q / 255;
        ctx.beginPath();
        ctx.moveTo(0, this.y(i));
        ctx.lineTo(GAP, this.y(j));
        ctx.stroke();
      }
    }
    ctx.globalAlpha = 1;
  }

  // The focused token in yellow; on the other side, each token shaded by the largest
  // weight any active head gives it, in that head's colour.
  markTokens() {
    const { t, s, A } = this;
    const focus = this.focus;
    const own = !focus ? null : focus.side === "query" ? this.left : this.right;
    const other = !focus ? null : focus.side === "query" ? this.right : this.left;
    for (const cells of [this.left, this.right]) {
      cells.forEach((cell, i) => {
        cell.classList.toggle("gfv-focus", cells === own && i === focus.index);
        cell.classList.toggle("gfv-dim", cells === own && i !== focus.index);
        if (cells !== other) cell.style.background = "";
      });
    }
    if (!other) return;
    other.forEach((cell, n) => {
      let best = 0;
      let head = 0;
      for (let h = 0; h < this.nHeads; h++) {
        if (!this.active[h]) continue;
        const q = focus.side === "query" ? A[(h * t + focus.index) * s + n] : A[(h * t + n) * s + focus.index];
        if (q > best) [best, head] = [q, h];
      }
      cell.style.background = best ? core.rgb(this.colours[head], (0.8 * best) / 255) : "";
    });
  }
}

/** Draws the head view of a payload's reading (payload.js) into ``root``. */
export const kind = "head";
export const render = (root, reading) => new HeadView(root, reading).render();
