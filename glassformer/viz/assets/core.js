/* Glassformer HTML views: the views' library (tokens, numbers, DOM, tooltips, start-up), over
 * the shared modules (payload decoding, colours, painting).
 *
 * Plain modern JS, no dependencies, no build step. Every view file inlines it; a page that
 * holds several views runs it several times, and every run after the first does nothing.
 * A view's script calls glassformerViews.start(root): the payload is the JSON script tag
 * with id root.id + "-data" (format in glassformer/viz/html.py).
 */
(function () {
  "use strict";
  const LIB = (window.glassformerViews = window.glassformerViews || {});
  if (LIB.core) return;

  const FORMAT = "glassformer-view";
  const VERSION = 1;

  // The shared ES modules (blocks.js, colours.js, paint.js), inlined before this script as
  // window.glassformerViews.shared (glassformer/viz/modules.py): one decoder, one colour
  // scale per quantity and one heatmap painter for these views and the workshop.
  const S = LIB.shared;

  /* ---- tokens and numbers ---- */
  // Characters a reader could not see: newline as ↵, tab as ⇥, other control characters as
  // their byte in hex (U+0000 as <0x00>, as Llama's byte tokens; every font has these
  // glyphs), the empty token as ∅.
  function label(token) {
    const text = token
      .replace(/\n/g, "\u21b5")
      .replace(/\t/g, "\u21e5")
      .replace(/[\u0000-\u001f\u007f]/g, (c) => "<0x" + c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0") + ">");
    return text === "" ? "\u2205" : text;
  }

  const quoted = (token) => JSON.stringify(token);

  // Fixed-point with `digits` decimals; exponent form where that would show only zeros.
  function number(x, digits) {
    if (!Number.isFinite(x)) return Number.isNaN(x) ? "n/a" : String(x);
    const d = digits === undefined ? 3 : digits;
    const tiny = x !== 0 && Math.abs(x) < 0.5 * 10 ** -d;
    return Math.abs(x) >= 1e5 || tiny ? x.toExponential(1) : x.toFixed(d);
  }

  /* ---- DOM ---- */
  function el(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  // A canvas of cssWidth x cssHeight pixels, sharp on high-DPI screens but never past the
  // browsers' 32,767-pixel side limit; its context is scaled to CSS pixels.
  function canvas(cssWidth, cssHeight, className) {
    const node = el("canvas", className);
    const side = Math.max(cssWidth, cssHeight, 1);
    const ratio = Math.min(window.devicePixelRatio || 1, 32000 / side);
    node.width = Math.max(1, Math.round(cssWidth * ratio));
    node.height = Math.max(1, Math.round(cssHeight * ratio));
    node.style.width = cssWidth + "px";
    node.style.height = cssHeight + "px";
    node.ratio = ratio;
    const context = node.getContext("2d");
    context.setTransform(ratio, 0, 0, ratio, 0, 0);
    return node;
  }

  // One tooltip per view, inside its root (so it scrolls with it and is scoped to it).
  function tooltip(root) {
    const tip = el("div", "gfv-tip");
    root.appendChild(tip);
    return {
      show(event, text) {
        tip.textContent = text;
        tip.style.display = "block";
        const box = root.getBoundingClientRect();
        let x = event.clientX - box.left + 14;
        const y = event.clientY - box.top + 14;
        if (x + tip.offsetWidth > root.clientWidth) x = Math.max(0, event.clientX - box.left - tip.offsetWidth - 10);
        tip.style.left = x + "px";
        tip.style.top = y + "px";
      },
      hide() {
        tip.style.display = "none";
      },
    };
  }

  function header(root, title, hint) {
    if (title) root.appendChild(el("div", "gfv-title", title));
    if (hint) root.appendChild(el("div", "gfv-hint", hint));
  }

  /* ---- start-up ---- */
  function fail(root, error) {
    root.dataset.error = String(error && error.message ? error.message : error);
    root.appendChild(el("div", "gfv-error", "This view could not be drawn: " + root.dataset.error));
    console.error("glassformer view", root.id, error);
  }

  function start(root) {
    try {
      const source = document.getElementById(root.id + "-data");
      const payload = JSON.parse(source.textContent);
      if (payload.format !== FORMAT || payload.version > VERSION) {
        throw new Error(`payload ${payload.format} v${payload.version} is newer than this library (v${VERSION})`);
      }
      const view = LIB[payload.view];
      if (!view) throw new Error("no renderer for the " + payload.view + " view");
      Promise.resolve(view.render(root, payload, core)).then(
        // data-ready: when the first drawing is done, in ms since navigation started.
        () => (root.dataset.ready = performance.now().toFixed(1)),
        (error) => fail(root, error),
      );
    } catch (error) {
      fail(root, error);
    }
  }

  const core = {
    array: S.inflateBlock, // a payload block's typed array (a Promise)
    headColours: S.headColours,
    sequential: S.unitColour, // x in [0, 1]
    diverging: (x) => S.divergingColour(x, 1), // x in [-1, 1]
    rgb: S.css,
    textOn: S.textOn,
    paint: S.paint,
    MASKED: S.MASKED,
    label, quoted, number, el, canvas, tooltip, header,
  };
  LIB.core = core;
  LIB.start = start;
})();
