/* Glassformer HTML views: the shared library (payload decoding, colours, tooltips, start-up).
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

  /* ---- arrays: base64 blocks {dtype, shape, compression, data} -> typed arrays ---- */
  function bytes(b64) {
    if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(b64);
    const text = atob(b64);
    const out = new Uint8Array(text.length);
    for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
    return out;
  }

  async function array(block) {
    let raw = bytes(block.data);
    if (block.compression === "deflate") {
      // zlib-wrapped DEFLATE, what Python's zlib.compress writes.
      const stream = new Blob([raw]).stream().pipeThrough(new DecompressionStream("deflate"));
      raw = new Uint8Array(await new Response(stream).arrayBuffer());
    } else if (block.compression) {
      throw new Error("unknown compression " + block.compression);
    }
    const size = block.shape.reduce((a, b) => a * b, 1);
    if (block.dtype === "uint8") {
      if (raw.length !== size) throw new Error("uint8 block of " + raw.length + " bytes, expected " + size);
      return raw;
    }
    if (block.dtype === "float32") {
      if (raw.byteOffset % 4) raw = raw.slice();
      const values = new Float32Array(raw.buffer, raw.byteOffset, raw.byteLength / 4);
      if (values.length !== size) throw new Error("float32 block of " + values.length + " values, expected " + size);
      return values;
    }
    throw new Error("unknown dtype " + block.dtype);
  }

  /* ---- colours ---- */
  // Tableau 10 (as d3's category10): distinct hues for up to 10 heads; more heads step
  // round the colour wheel by the golden angle.
  const CATEGORY10 = [
    [31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40], [148, 103, 189],
    [140, 86, 75], [227, 119, 194], [127, 127, 127], [188, 189, 34], [23, 190, 207],
  ];

  function hsl(h, s, l) {
    const k = (n) => (n + h / 30) % 12;
    const a = s * Math.min(l, 1 - l);
    const f = (n) => l - a * Math.max(-1, Math.min(k(n) - 3, 9 - k(n), 1));
    return [Math.round(255 * f(0)), Math.round(255 * f(8)), Math.round(255 * f(4))];
  }

  function headColours(n) {
    if (n <= CATEGORY10.length) return CATEGORY10.slice(0, n);
    return Array.from({ length: n }, (_, h) => hsl((h * 137.508) % 360, 0.65, 0.45));
  }

  // ColorBrewer "Blues" (sequential) and "RdBu" reversed (diverging: blue < 0 < red).
  const BLUES = [[247, 251, 255], [198, 219, 239], [107, 174, 214], [33, 113, 181], [8, 48, 107]];
  const RDBU = [[33, 102, 172], [146, 197, 222], [247, 247, 247], [244, 165, 130], [178, 24, 43]];

  function ramp(stops, x) {
    const t = Math.max(0, Math.min(1, x)) * (stops.length - 1);
    const i = Math.min(stops.length - 2, Math.floor(t));
    const f = t - i;
    return stops[i].map((c, n) => Math.round(c + (stops[i + 1][n] - c) * f));
  }

  const sequential = (x) => ramp(BLUES, x); // x in [0, 1]
  const diverging = (x) => ramp(RDBU, (x + 1) / 2); // x in [-1, 1]
  const rgb = (c, alpha) => (alpha === undefined ? `rgb(${c[0]},${c[1]},${c[2]})` : `rgba(${c[0]},${c[1]},${c[2]},${alpha})`);
  // Dark text on light colours, white on dark ones (relative luminance, sRGB approximated).
  const textOn = (c) => (0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2] < 140 ? "#fff" : "#1f2328");

  // 256-entry RGBA table of the sequential ramp, for heatmaps drawn from uint8 weights.
  let blueTable = null;
  function weightColours() {
    if (!blueTable) {
      blueTable = new Uint8ClampedArray(256 * 4);
      for (let q = 0; q < 256; q++) {
        const c = sequential(q / 255);
        blueTable.set([c[0], c[1], c[2], 255], q * 4);
      }
    }
    return blueTable;
  }
  const MASKED = [228, 230, 233]; // cells a causal mask hides

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
    array, headColours, sequential, diverging, rgb, textOn, weightColours, MASKED,
    label, quoted, number, el, canvas, tooltip, header,
  };
  LIB.core = core;
  LIB.start = start;
})();
