// A vision model's tokens: [CLS], then the image's patches row by row, each drawn as the
// patch it is (payload.image, images.image_payload). The tokens panel of a text model shows
// chips of text (tokens.js); this one shows what the model reads in their place. A chip's
// border takes the token's colour (tokens.js tokenColour), as in the other views.

import { unpack } from "../core/arrays.js";
import { el } from "../core/dom.js";
import { imageCanvas, patchCanvas } from "./image_canvas.js";
import { tokenColour } from "../panels/tokens.js";

const PATCH_PX = { beginner: 40, intermediate: 34, advanced: 34 };
const IMAGE_PX = 136;

/** A vision model's tokens as the page shows them: their labels ("patch 1,2") are names, not
 * text, so their spaces are not made visible (format.js tokenText marks a text's spaces). */
export function namedTokens(tokens) {
  return tokens.map((token) => ({ ...token, text: token.text.replace(/ /g, "\u00a0") }));
}

/** The image of a walk ({shape, values}: C H W). */
export function walkImage(payload) {
  return unpack(payload.image.pixels);
}

/** The image with its patch grid drawn over it (the cut the model makes). */
export function cutImage(payload, width = IMAGE_PX) {
  const image = walkImage(payload);
  const [rows, cols] = payload.image.grid;
  const cells = [];
  for (let r = 0; r < rows; r += 1) {
    for (let c = 0; c < cols; c += 1) {
      const style = { left: `${(100 * c) / cols}%`, top: `${(100 * r) / rows}%`, width: `${100 / cols}%`, height: `${100 / rows}%` };
      cells.push(el("span", { class: "img-cut-cell", style }));
    }
  }
  return el("span", { class: "img-cut", style: { width: `${width}px` } },
    imageCanvas(image, width, { label: `the image, cut into ${rows} x ${cols} patches` }), cells);
}

/** The [CLS] token: no patch, a learned vector. */
function clsChip() {
  const title = "token 0: [CLS], a learned vector; the classifier reads its last state";
  return el("span", { class: "chip patch-chip patch-cls", title, dataset: { position: 0 }, style: { borderColor: tokenColour(0) } },
    el("span", { class: "patch-cls-box" }, "[CLS]"), el("span", { class: "chip-id" }, "0"));
}

/** The tokens panel of a vision model: the image cut into patches, and the tokens it makes. */
export function renderPatchTokens(container, payload, level) {
  const image = walkImage(payload);
  const { patch_size: size, grid, patches } = payload.image;
  const n = payload.tokens.length;
  const intro = level === "beginner"
    ? `The model reads this image as ${n} tokens: [CLS], then the ${patches.length} patches of ${size} × ${size} pixels, row by row. Each patch is a token, as a word is in a text.`
    : `t = ${n} tokens: [CLS] + n = ${grid[0]} × ${grid[1]} = ${patches.length} patches of P × P = ${size} × ${size} pixels, row by row (embed.patches).`;
  const chips = patches.map((label, i) => el("span", {
    class: "chip patch-chip",
    title: `token ${i + 1}: ${label} (row ${Math.floor(i / grid[1])}, column ${i % grid[1]})`,
    dataset: { position: i + 1, patch: i },
    style: { borderColor: tokenColour(i + 1) },
  }, patchCanvas(image, i, size, PATCH_PX[level]), el("span", { class: "chip-id" }, label.replace("patch ", ""))));
  container.replaceChildren(
    el("p", { class: "hint" }, intro),
    el("div", { class: "patch-tokens" }, cutImage(payload),
      el("div", { class: "chips patch-chips" }, clsChip(), chips)),
  );
}
