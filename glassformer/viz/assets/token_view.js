/* Glassformer token view: the text, each token on a background coloured by a per-token
 * score (sequential: white -> blue; diverging: blue < center < red), the value on hover.
 * Several scores: a selector (layout "select"), or one row of the text per score, each with
 * its own label and legend (layout "rows": two methods side by side on one prediction;
 * hovering a token outlines it in every row and the tooltip lists every row's value).
 * NaN (no value) stays white.
 */

import * as core from "./core.js";

class TokenView {
  // reading (payload.js): p (the payload) and its tokens
  constructor(root, reading) {
    this.root = root;
    this.p = reading.p;
  }

  async render() {
    const { p, root } = this;
    this.values = await Promise.all(p.scores.map((score) => core.array(score.values)));
    const rows = p.layout === "rows";
    core.header(root, p.title, rows ? "Hover a token for its value in every row." : "Hover a token for its value.");
    this.tip = core.tooltip(root);
    if (rows) {
      // one panel per score, each drawn once
      this.panels = p.scores.map((score, n) => this.panel(root, n, "gfv-token-row"));
      this.panels.forEach((panel, n) => this.paint(panel, n));
    } else {
      const panel = this.panel(root, 0, "");
      if (p.scores.length > 1) {
        const wrap = panel.bar.insertBefore(core.el("label", "", "Score "), panel.legend);
        const select = wrap.appendChild(core.el("select", "gfv-select"));
        p.scores.forEach((score, n) => select.appendChild(new Option(score.name, String(n))));
        select.addEventListener("change", () => this.show(Number(select.value)));
      }
      this.panels = [panel];
      this.show(0);
    }
  }

  // A bar (legend, and in rows its label) above the tokens of one score.
  panel(root, n, className) {
    const { p } = this;
    const box = root.appendChild(core.el("div", className));
    const bar = box.appendChild(core.el("div", "gfv-bar"));
    const legend = bar.appendChild(core.el("div", "gfv-legend"));
    const text = box.appendChild(core.el("div", "gfv-text"));
    const words = p.tokens.map((token, i) => {
      const word = text.appendChild(core.el("span", "gfv-word", core.label(token)));
      word.dataset.index = String(i);
      if (token.includes("\n")) text.appendChild(core.el("br"));
      return word;
    });
    const panel = { box, bar, legend, words, score: n };
    text.addEventListener("mouseover", (event) => {
      const word = event.target.closest(".gfv-word");
      if (word) this.focus(Number(word.dataset.index), panel, event);
    });
    text.addEventListener("mousemove", (event) => {
      if (event.target.closest(".gfv-word") && this.text) this.tip.show(event, this.text);
    });
    text.addEventListener("mouseleave", () => this.focus(null));
    return panel;
  }

  // Position of v on the score's scale: [0, 1] sequential, [-1, 1] diverging.
  colour(score, v) {
    if (score.scale === "diverging") {
      const reach = v < score.center ? score.center - score.vmin : score.vmax - score.center;
      return core.diverging((v - score.center) / (reach || 1));
    }
    return core.sequential((v - score.vmin) / (score.vmax - score.vmin));
  }

  show(n) {
    this.root.dataset.score = this.p.scores[n].name;
    this.focus(null);
    this.paint(this.panels[0], n);
  }

  paint(panel, n) {
    const score = this.p.scores[n];
    const values = this.values[n];
    panel.score = n;
    panel.box.dataset.score = score.name;
    panel.words.forEach((word, i) => {
      const v = values[i];
      if (Number.isNaN(v)) {
        word.style.background = "";
        word.style.color = "";
        return;
      }
      const c = this.colour(score, v);
      word.style.background = core.rgb(c);
      word.style.color = core.textOn(c);
    });
    this.drawLegend(panel, score);
  }

  drawLegend(panel, score) {
    const width = 160;
    const strip = core.canvas(width, 12);
    const ctx = strip.getContext("2d");
    for (let x = 0; x < width; x++) {
      const v = score.vmin + ((score.vmax - score.vmin) * (x + 0.5)) / width;
      ctx.fillStyle = core.rgb(this.colour(score, v));
      ctx.fillRect(x, 0, 1, 12);
    }
    // enough decimals that the two ends of a narrow range read differently
    const digits = Math.min(6, Math.max(2, Math.ceil(-Math.log10(score.vmax - score.vmin)) + 1));
    const name = core.el(this.p.layout === "rows" ? "strong" : "span", "", score.name + ":");
    const items = [name, core.el("span", "", core.number(score.vmin, digits)), strip];
    items.push(core.el("span", "", core.number(score.vmax, digits)));
    if (score.scale === "diverging") items.push(core.el("span", "", `(white = ${core.number(score.center, 2)})`));
    panel.legend.replaceChildren(...items);
  }

  focus(index, panel, event) {
    const { p } = this;
    for (const each of this.panels) each.words.forEach((word, i) => word.classList.toggle("gfv-focus", i === index));
    if (index === null) {
      this.text = "";
      return this.tip.hide();
    }
    const shown = p.layout === "rows" ? this.panels : [panel];
    const lines = shown.map((each) => `${p.scores[each.score].name} = ${core.number(this.values[each.score][index], 4)}`);
    this.text = `#${index} ${core.quoted(p.tokens[index])}\n${lines.join("\n")}`;
    this.tip.show(event, this.text);
  }
}

/** Draws the token view of a payload's reading (payload.js) into ``root``. */
export const kind = "token";
export const render = (root, reading) => new TokenView(root, reading).render();
