/* Glassformer token view: the text, each token on a background coloured by a per-token
 * score (sequential: white -> blue; diverging: blue < center < red), the value on hover;
 * a selector when there are several scores. NaN (no value) stays white.
 */
(function () {
  "use strict";
  const LIB = (window.glassformerViews = window.glassformerViews || {});
  if (LIB.token) return;

  class TokenView {
    constructor(root, payload, core) {
      this.root = root;
      this.p = payload;
      this.core = core;
    }

    async render() {
      const { core, p, root } = this;
      this.values = await Promise.all(p.scores.map((score) => core.array(score.values)));
      core.header(root, p.title, "Hover a token for its value.");
      this.tip = core.tooltip(root);
      const bar = root.appendChild(core.el("div", "gfv-bar"));
      if (p.scores.length > 1) {
        const wrap = bar.appendChild(core.el("label", "", "Score "));
        const select = wrap.appendChild(core.el("select", "gfv-select"));
        p.scores.forEach((score, n) => select.appendChild(new Option(score.name, String(n))));
        select.addEventListener("change", () => this.show(Number(select.value)));
      }
      this.legend = bar.appendChild(core.el("div", "gfv-legend"));
      const text = root.appendChild(core.el("div", "gfv-text"));
      this.words = p.tokens.map((token, i) => {
        const word = text.appendChild(core.el("span", "gfv-word", core.label(token)));
        word.dataset.index = String(i);
        if (token.includes("\n")) text.appendChild(core.el("br"));
        return word;
      });
      text.addEventListener("mouseover", (event) => {
        const word = event.target.closest(".gfv-word");
        if (!word) return;
        this.focus(Number(word.dataset.index), event);
      });
      text.addEventListener("mousemove", (event) => {
        if (event.target.closest(".gfv-word") && this.text) this.tip.show(event, this.text);
      });
      text.addEventListener("mouseleave", () => this.focus(null));
      this.show(0);
    }

    // Position of v on the score's scale: [0, 1] sequential, [-1, 1] diverging.
    colour(score, v) {
      const { core } = this;
      if (score.scale === "diverging") {
        const reach = v < score.center ? score.center - score.vmin : score.vmax - score.center;
        return core.diverging((v - score.center) / (reach || 1));
      }
      return core.sequential((v - score.vmin) / (score.vmax - score.vmin));
    }

    show(n) {
      const { core } = this;
      this.current = n;
      const score = this.p.scores[n];
      const values = this.values[n];
      this.root.dataset.score = score.name;
      this.focus(null);
      this.words.forEach((word, i) => {
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
      this.drawLegend(score);
    }

    drawLegend(score) {
      const { core } = this;
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
      const items = [core.el("span", "", score.name + ":"), core.el("span", "", core.number(score.vmin, digits)), strip];
      items.push(core.el("span", "", core.number(score.vmax, digits)));
      if (score.scale === "diverging") items.push(core.el("span", "", `(white = ${core.number(score.center, 2)})`));
      this.legend.replaceChildren(...items);
    }

    focus(index, event) {
      const { core, p } = this;
      this.words.forEach((word, i) => word.classList.toggle("gfv-focus", i === index));
      if (index === null) {
        this.text = "";
        return this.tip.hide();
      }
      const score = p.scores[this.current];
      this.text = `#${index} ${core.quoted(p.tokens[index])}\n${score.name} = ${core.number(this.values[this.current][index], 4)}`;
      this.tip.show(event, this.text);
    }
  }

  LIB.token = { version: 1, render: (root, payload, core) => new TokenView(root, payload, core).render() };
})();
