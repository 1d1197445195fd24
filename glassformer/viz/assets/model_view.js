/* Glassformer model view: every layer x head attention pattern as a small heatmap
 * (queries down, keys across, darker = more weight); click one to enlarge it with token
 * labels, under its row.
 *
 * Thumbnails are drawn straight from the uint8 weights into canvases of at most one
 * pixel per device pixel: long inputs are max-pooled (a sharp diagonal or a column on
 * the first token stays visible), short ones scaled up without smoothing. Cells a causal
 * mask hides are grey, so "masked" and "weight 0" look different.
 */

import * as core from "./core.js";

const THUMB = 76; // css px of a thumbnail side
const BIG = 720; // css px the enlarged heatmap aims at
const LABEL_PX = 13; // vertical room one token label needs
const LABEL_CHARS = 18;

class ModelView {
  // reading (payload.js): p (the payload), queries, keys, t, s, weights(layer)
  constructor(root, reading) {
    Object.assign(this, reading);
    this.root = root;
    this.thumbs = [];
  }

  async render() {
    const { p, root } = this;
    core.header(
      root,
      p.title,
      "One square per layer and head: queries down, keys across" +
        (p.causal ? " (causal: a query sees only the keys up to itself)" : "") +
        ". Click a square to enlarge it.",
    );
    this.tip = core.tooltip(root);
    root.appendChild(this.legend());
    this.panel = this.makePanel();
    this.arrays = await Promise.all(p.layers.map((_, layer) => this.weights(layer)));
    const grid = root.appendChild(core.el("div", "gfv-grid gfv-scroll"));
    const top = grid.appendChild(core.el("div", "gfv-row"));
    top.appendChild(core.el("div", "gfv-row-label", ""));
    p.heads.forEach((name) => {
      const label = top.appendChild(core.el("div", "gfv-col-label", name));
      label.style.width = THUMB + "px";
    });
    p.layers.forEach((layer, li) => {
      const row = grid.appendChild(core.el("div", "gfv-row"));
      row.appendChild(core.el("div", "gfv-row-label", layer.label));
      p.heads.forEach((head, h) => {
        const thumb = row.appendChild(this.thumbnail(li, h));
        thumb.title = `${layer.label}, ${head}`;
        thumb.addEventListener("click", () => this.open(li, h, row));
        this.thumbs.push(thumb);
      });
    });
  }

  // weight 0 [white .. dark blue] 1, and the grey of masked cells
  legend() {
    const legend = core.el("div", "gfv-legend gfv-bar");
    const strip = core.canvas(120, 10);
    const ctx = strip.getContext("2d");
    for (let x = 0; x < 120; x++) {
      ctx.fillStyle = core.rgb(core.sequential((x + 0.5) / 120));
      ctx.fillRect(x, 0, 1, 10);
    }
    legend.append(core.el("span", "", "weight 0"), strip, core.el("span", "", "1"));
    if (this.p.causal) {
      const masked = core.el("span", "gfv-key");
      masked.style.background = core.rgb(core.MASKED);
      legend.append(masked, core.el("span", "", "masked"));
    }
    return legend;
  }

  // Max-pool the t x s weights of one head into a canvas of at most THUMB device pixels a side.
  thumbnail(li, h) {
    const { t, s } = this;
    const A = this.arrays[li];
    const device = Math.max(1, Math.round(THUMB * (window.devicePixelRatio || 1)));
    const rows = Math.min(t, device);
    const cols = Math.min(s, device);
    const colOf = new Int32Array(s);
    for (let j = 0; j < s; j++) colOf[j] = Math.floor((j * cols) / s);
    const best = new Int16Array(rows * cols).fill(-1); // -1: every cell of the bin is masked
    for (let i = 0; i < t; i++) {
      const out = Math.floor((i * rows) / t) * cols;
      const base = (h * t + i) * s;
      const visible = this.p.causal ? Math.min(s, i + 1) : s;
      for (let j = 0; j < visible; j++) {
        const q = A[base + j];
        if (q > best[out + colOf[j]]) best[out + colOf[j]] = q;
      }
    }
    const canvas = core.el("canvas", "gfv-thumb");
    canvas.width = cols;
    canvas.height = rows;
    canvas.style.width = THUMB + "px";
    canvas.style.height = THUMB + "px";
    canvas.dataset.layer = String(li);
    canvas.dataset.head = String(h);
    this.paintWeights(canvas, best);
    return canvas;
  }

  // One pixel per pooled weight q in 0..255 (-1 = masked), on the shared weight scale.
  paintWeights(canvas, values) {
    const { paint, sequential, MASKED } = core;
    paint(canvas, values, (q) => (q < 0 ? MASKED : sequential(q / 255)));
  }

  makePanel() {
    const panel = core.el("div", "gfv-panel");
    const head = panel.appendChild(core.el("div", "gfv-panel-head"));
    this.panelTitle = head.appendChild(core.el("span", "gfv-panel-title"));
    const close = head.appendChild(core.el("button", "gfv-close", "\u00d7"));
    close.type = "button";
    close.title = "close";
    close.addEventListener("click", () => this.close());
    head.appendChild(core.el("span", "gfv-hint", "rows: queries, columns: keys; hover a cell for its weight"));
    this.panelBody = panel.appendChild(core.el("div", "gfv-scroll"));
    return panel;
  }

  close() {
    this.panel.classList.remove("gfv-open");
    this.thumbs.forEach((thumb) => thumb.classList.remove("gfv-selected"));
    this.root.dataset.open = "";
  }

  open(li, h, row) {
    const { p } = this;
    this.thumbs.forEach((thumb) =>
      thumb.classList.toggle("gfv-selected", thumb.dataset.layer === String(li) && thumb.dataset.head === String(h)),
    );
    this.panelTitle.textContent = `${p.layers[li].label}, ${p.heads[h]}`;
    this.panelBody.replaceChildren(this.heatmap(li, h));
    row.after(this.panel);
    this.panel.classList.add("gfv-open");
    this.root.dataset.open = `${li},${h}`;
  }

  short(token) {
    const text = core.label(token);
    return text.length > LABEL_CHARS ? text.slice(0, LABEL_CHARS - 1) + "\u2026" : text;
  }

  // The enlarged pattern: cells of `cell` px, every `every`-th token labelled (so labels
  // never overlap), the rest on hover.
  heatmap(li, h) {
    const { t, s, p } = this;
    const A = this.arrays[li];
    const cell = Math.max(3, Math.min(24, Math.floor(BIG / Math.max(t, s))));
    const every = Math.ceil(LABEL_PX / cell);
    const font = "11px system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif";
    const measure = document.createElement("canvas").getContext("2d");
    measure.font = font;
    const widest = (tokens) =>
      tokens.reduce((w, token, i) => (i % every ? w : Math.max(w, measure.measureText(this.short(token)).width)), 0);
    const left = Math.ceil(Math.min(150, widest(this.queries) + 10));
    const top = Math.ceil(Math.min(150, widest(this.keys) + 10));
    const width = left + s * cell + 8;
    const height = top + t * cell + 8;
    const canvas = core.canvas(width, height);
    const ctx = canvas.getContext("2d");

    const values = new Int16Array(t * s);
    for (let i = 0; i < t; i++) {
      for (let j = 0; j < s; j++) values[i * s + j] = p.causal && j > i ? -1 : A[(h * t + i) * s + j];
    }
    const pixels = document.createElement("canvas");
    pixels.width = s;
    pixels.height = t;
    this.paintWeights(pixels, values);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(pixels, left, top, s * cell, t * cell);
    ctx.strokeStyle = "#d0d7de";
    ctx.strokeRect(left - 0.5, top - 0.5, s * cell + 1, t * cell + 1);

    ctx.font = font;
    ctx.fillStyle = "#1f2328";
    ctx.textBaseline = "middle";
    ctx.textAlign = "right";
    for (let i = 0; i < t; i += every) ctx.fillText(this.short(this.queries[i]), left - 5, top + i * cell + cell / 2);
    ctx.textAlign = "left";
    for (let j = 0; j < s; j += every) {
      ctx.save();
      ctx.translate(left + j * cell + cell / 2, top - 5);
      ctx.rotate(-Math.PI / 2);
      ctx.fillText(this.short(this.keys[j]), 0, 0);
      ctx.restore();
    }

    canvas.addEventListener("mousemove", (event) => {
      const box = canvas.getBoundingClientRect();
      const j = Math.floor((event.clientX - box.left - left) / cell);
      const i = Math.floor((event.clientY - box.top - top) / cell);
      if (i < 0 || j < 0 || i >= t || j >= s) return this.tip.hide();
      const q = A[(h * t + i) * s + j];
      const weight = p.causal && j > i ? "masked (causal)" : "weight \u2248 " + core.number(q / 255, 3);
      this.tip.show(event, `query #${i} ${core.quoted(this.queries[i])}\nkey #${j} ${core.quoted(this.keys[j])}\n${weight}`);
    });
    canvas.addEventListener("mouseleave", () => this.tip.hide());
    return canvas;
  }
}

/** Draws the model view of a payload's reading (payload.js) into ``root``. */
export const kind = "model";
export const render = (root, reading) => new ModelView(root, reading).render();
