// A vision model's input, in place of the text box: the image shown large, on a grid one can
// paint (mouse, pen or finger: press and drag; keyboard: arrow keys move a cursor, Space or
// Enter toggles the pixel under it), and a picker of the held-out digits the model never saw
// (previous / next, a page of thumbnails). It reads and shows an image; what a new one does
// is image_source.js's business (handlers passed in), as the form's controls (controls.js).
// Painting sets a pixel to 1 (ink) or, when the stroke starts on ink, to 0.

import { el } from "../core/dom.js";
import { percent } from "../core/format.js";
import { imageCanvas, pixelColour } from "./image_canvas.js";
import { blankImage, copyImage, imageAt } from "./pixels.js";

const EDITOR_PX = 320; // the image's width on the page (it shrinks to fit a phone)
const GRID_MIN_CELL = 8; // px: past this a line is drawn between pixels
const PAGE = 24; // thumbnails shown at once
const THUMB_PX = 32;
const CURSOR = "#f0b429"; // --chosen
const PATCH_LINE = "rgb(31 95 168 / 0.85)"; // --accent: where one patch ends and the next begins
const PIXEL_LINE = "rgb(0 0 0 / 0.12)";

/**
 * handlers: {onImage(image), onSample(index)}. Returns {show({image, patchSize, sample, samples,
 * answer})}: samples is {count, stack (n C H W unpacked), labels, source} or null (a model of
 * other images); answer the model's label for the image ({label, p}, the answer panel's) or null.
 */
export function bindImageInput(node, handlers) {
  const canvas = el("canvas", {
    class: "img-editor",
    tabindex: "0",
    role: "application",
    "aria-label": "the image: press and drag to paint; arrow keys move the cursor, Space toggles a pixel",
    "aria-describedby": "img-help",
  });
  const spoken = el("span", { class: "img-spoken", "aria-live": "polite" });
  const caption = el("p", { class: "img-caption" });
  const said = el("p", { class: "img-answer", "aria-live": "polite" });
  const picker = el("div", { class: "img-picker" });
  const clear = el("button", { type: "button", class: "img-clear", onclick: () => commit(blankImage(image.shape)) }, "clear");
  node.replaceChildren(
    el("div", { class: "img-input" },
      el("div", { class: "img-editor-box" }, canvas, spoken),
      el("div", { class: "img-side" },
        caption,
        said,
        picker,
        el("p", { class: "hint", id: "img-help" },
          "Paint your own: press and drag on the image (start on ink to erase), or click it and use the arrow keys and Space. ",
          clear),
      )),
  );

  let image = null; // the image shown; while a stroke is drawn, the one being painted
  let patch = 1;
  let cursor = { row: 0, col: 0 };
  let stroke = null; // {value, last: {row, col}} while the pointer is down
  let page = null; // the first index of the thumbnails shown
  let focused = false;

  function draw() {
    const [, h, w] = image.shape;
    const cell = Math.max(1, Math.floor(EDITOR_PX / w));
    canvas.width = w * cell;
    canvas.height = h * cell;
    const context = canvas.getContext("2d");
    for (let r = 0; r < h; r += 1) {
      for (let c = 0; c < w; c += 1) {
        const [red, green, blue] = pixelColour(image, r, c);
        context.fillStyle = `rgb(${red} ${green} ${blue})`;
        context.fillRect(c * cell, r * cell, cell, cell);
      }
    }
    const line = (x0, y0, x1, y1, colour, width) => {
      context.strokeStyle = colour;
      context.lineWidth = width;
      context.beginPath();
      context.moveTo(x0, y0);
      context.lineTo(x1, y1);
      context.stroke();
    };
    for (let i = 1; i < Math.max(h, w); i += 1) {
      const boundary = i % patch === 0;
      if (!boundary && cell < GRID_MIN_CELL) continue;
      const [colour, width] = boundary ? [PATCH_LINE, 2] : [PIXEL_LINE, 1];
      if (i < w) line(i * cell, 0, i * cell, h * cell, colour, width);
      if (i < h) line(0, i * cell, w * cell, i * cell, colour, width);
    }
    if (focused) {
      context.strokeStyle = CURSOR;
      context.lineWidth = 3;
      context.strokeRect(cursor.col * cell + 1.5, cursor.row * cell + 1.5, cell - 3, cell - 3);
    }
    canvas.dataset.ready = "1";
  }

  const at = ({ row, col }) => image.values[row * image.shape[2] + col]; // channel 0
  function set({ row, col }, value) {
    const [c, h, w] = image.shape;
    for (let p = 0; p < c; p += 1) image.values[(p * h + row) * w + col] = value;
  }

  function commit(next) {
    image = next;
    draw();
    handlers.onImage(copyImage(image));
  }

  /** The pixel under a pointer event. */
  function cellOf(event) {
    const box = canvas.getBoundingClientRect();
    const [, h, w] = image.shape;
    const col = Math.min(w - 1, Math.max(0, Math.floor(((event.clientX - box.left) / box.width) * w)));
    const row = Math.min(h - 1, Math.max(0, Math.floor(((event.clientY - box.top) / box.height) * h)));
    return { row, col };
  }

  /** Every pixel on the way from ``from`` to ``to``: a fast drag skips none. */
  function paintLine(from, to, value) {
    const steps = Math.max(Math.abs(to.row - from.row), Math.abs(to.col - from.col), 1);
    for (let i = 0; i <= steps; i += 1) {
      set({ row: Math.round(from.row + ((to.row - from.row) * i) / steps), col: Math.round(from.col + ((to.col - from.col) * i) / steps) }, value);
    }
  }

  canvas.addEventListener("pointerdown", (event) => {
    if (!image || event.button > 0) return;
    event.preventDefault();
    canvas.focus({ preventScroll: true });
    canvas.setPointerCapture(event.pointerId);
    const here = cellOf(event);
    image = copyImage(image);
    stroke = { value: at(here) > 0.5 ? 0 : 1, last: here };
    set(here, stroke.value);
    cursor = here;
    draw();
  });
  canvas.addEventListener("pointermove", (event) => {
    if (!stroke) return;
    const here = cellOf(event);
    paintLine(stroke.last, here, stroke.value);
    stroke.last = here;
    cursor = here;
    draw();
  });
  const end = () => {
    if (!stroke) return;
    stroke = null;
    commit(image);
  };
  canvas.addEventListener("pointerup", end);
  canvas.addEventListener("pointercancel", end);

  const MOVES = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
  canvas.addEventListener("keydown", (event) => {
    if (!image) return;
    const [, h, w] = image.shape;
    if (MOVES[event.key]) {
      const [dr, dc] = MOVES[event.key];
      cursor = { row: Math.min(h - 1, Math.max(0, cursor.row + dr)), col: Math.min(w - 1, Math.max(0, cursor.col + dc)) };
      draw();
    } else if (event.key === " " || event.key === "Enter") {
      const next = copyImage(image);
      image = next;
      set(cursor, at(cursor) > 0.5 ? 0 : 1);
      commit(next);
    } else {
      return;
    }
    event.preventDefault();
    spoken.textContent = `row ${cursor.row}, column ${cursor.col}: ${at(cursor) > 0.5 ? "ink" : "blank"}`;
  });
  canvas.addEventListener("focus", () => { focused = true; if (image) draw(); });
  canvas.addEventListener("blur", () => { focused = false; if (image) draw(); });

  function thumbnails(samples, sample) {
    const first = page ?? Math.floor((sample ?? 0) / PAGE) * PAGE;
    page = first;
    const last = Math.min(samples.count, first + PAGE);
    const thumbs = [];
    for (let i = first; i < last; i += 1) {
      thumbs.push(el("button", {
        type: "button",
        class: "img-thumb",
        "aria-pressed": String(i === sample),
        title: `held-out image ${i}: a ${samples.labels[i]}`,
        dataset: { sample: i },
        onclick: () => handlers.onSample(i),
      }, imageCanvas(imageAt(samples.stack, i), THUMB_PX, { className: "img-canvas" })));
    }
    const turn = (to) => () => {
      page = to;
      picker.replaceChildren(...pickerParts(samples, sample));
    };
    return el("div", { class: "img-page" },
      el("div", { class: "img-thumbs", role: "group", "aria-label": "held-out images" }, thumbs),
      el("div", { class: "img-page-nav" },
        el("button", { type: "button", disabled: first === 0, onclick: turn(Math.max(0, first - PAGE)) }, `« ${PAGE} earlier`),
        el("span", { class: "img-page-range" }, `${first}–${last - 1} of ${samples.count}`),
        el("button", { type: "button", disabled: last >= samples.count, onclick: turn(first + PAGE) }, `${PAGE} later »`)));
  }

  function pickerParts(samples, sample) {
    const step = (delta) => () => handlers.onSample(((sample ?? -delta) + delta + samples.count) % samples.count);
    const number = el("input", {
      type: "number", min: "0", max: String(samples.count - 1), value: sample ?? "", class: "img-number",
      "aria-label": "held-out image number", placeholder: "#",
    });
    number.addEventListener("change", () => {
      const i = Number(number.value);
      if (Number.isInteger(i) && i >= 0 && i < samples.count) handlers.onSample(i);
    });
    return [
      el("div", { class: "img-nav" },
        el("button", { type: "button", class: "img-prev", onclick: step(-1), title: "the held-out image before" }, "◀ previous"),
        number,
        el("button", { type: "button", class: "img-next", onclick: step(1), title: "the next held-out image" }, "next ▶")),
      thumbnails(samples, sample),
      el("p", { class: "hint" }, `Held out: ${samples.source}; a model trained there never saw them.`),
    ];
  }

  return {
    /** Show ``image`` (not while a stroke is being painted: that one is newer). */
    show({ image: shown, patchSize, sample = null, samples = null, answer = null }) {
      patch = patchSize;
      said.replaceChildren(...(answer ? ["The model says ", el("strong", { class: "img-label", dataset: { label: answer.label } }, answer.label),
        ` (${percent(answer.p, 1)}); the answer panel has every label's probability.`] : []));
      if (!stroke) {
        image = copyImage(shown);
        const [, h, w] = image.shape;
        cursor = { row: Math.min(cursor.row, h - 1), col: Math.min(cursor.col, w - 1) };
        draw();
      }
      node.dataset.sample = sample ?? "";
      if (sample !== null && samples) {
        if (page !== null && (sample < page || sample >= page + PAGE)) page = null; // follow the pick
        caption.replaceChildren("Held-out image ", el("strong", {}, `#${sample}`), ` of ${samples.count}: a handwritten `, el("strong", { class: "img-label" }, samples.labels[sample]));
      } else {
        caption.replaceChildren(el("strong", {}, "Your drawing"), samples?.count ? ": pick a held-out image to start again from one" : "");
      }
      const none = el("p", { class: "hint", title: samples?.source ?? "" }, "No held-out images fit this model (they are 8 × 8 digits): paint your own.");
      picker.replaceChildren(...(samples?.count ? pickerParts(samples, sample) : [none]));
    },
  };
}
