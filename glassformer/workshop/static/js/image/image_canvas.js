// An image (pixels.js) drawn on a canvas, one canvas pixel per image pixel, scaled up by CSS
// with `image-rendering: pixelated`. One channel is ink on paper (0 white, 1 black: the digits
// count ink); three channels are red, green and blue. Used by the image input, the patches
// as tokens and the attention over the patches.

import { el } from "../core/dom.js";

/** The [r, g, b] of pixel (row, col) of ``image``. */
export function pixelColour(image, row, col) {
  const [c, h, w] = image.shape;
  const at = (p) => image.values[(p * h + row) * w + col];
  if (c >= 3) return [0, 1, 2].map((p) => Math.round(255 * at(p)));
  const grey = Math.round(255 * (1 - at(0)));
  return [grey, grey, grey];
}

/** Rows ``top`` .. ``top + rows`` and columns ``left`` .. ``left + cols`` of ``image`` painted
 * onto ``canvas`` (its size set to that window, one canvas pixel each). */
export function paintImage(canvas, image, { top = 0, left = 0, rows = image.shape[1], cols = image.shape[2] } = {}) {
  canvas.width = cols;
  canvas.height = rows;
  const context = canvas.getContext("2d");
  const data = context.createImageData(cols, rows);
  for (let r = 0; r < rows; r += 1) {
    for (let c = 0; c < cols; c += 1) {
      const [red, green, blue] = pixelColour(image, top + r, left + c);
      data.data.set([red, green, blue, 255], (r * cols + c) * 4);
    }
  }
  context.putImageData(data, 0, 0);
  return canvas;
}

/** A canvas of ``image`` (or of one window of it) shown ``width`` px wide. */
export function imageCanvas(image, width, { className = "img-canvas", window = undefined, label = "" } = {}) {
  const canvas = el("canvas", { class: className, role: label ? "img" : null, "aria-label": label || null });
  paintImage(canvas, image, window);
  canvas.style.width = `${width}px`;
  canvas.style.height = `${Math.round((width * canvas.height) / canvas.width)}px`;
  return canvas;
}

/** Patch ``i`` (row by row from the top left, as embed.patches) of ``image`` cut into
 * ``size`` x ``size`` patches, shown ``width`` px wide. */
export function patchCanvas(image, i, size, width) {
  const across = Math.floor(image.shape[2] / size);
  const window = { top: Math.floor(i / across) * size, left: (i % across) * size, rows: size, cols: size };
  return imageCanvas(image, width, { className: "img-canvas img-patch", window });
}
