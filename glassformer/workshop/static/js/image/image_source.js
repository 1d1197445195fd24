// A vision model's image, the input of its pass: a held-out one (sample=) or a drawing
// (pixels=), chosen as the settings say; the image panel that picks one or paints one.

import { fetchSamples } from "../core/api.js";
import { unpack } from "../core/arrays.js";
import { bindImageInput } from "./image_input.js";
import { blankImage, imageAt, imageCode, imageFromCode } from "./pixels.js";
import { state } from "../core/state.js";

const PAINT_MS = 250; // a drawing is walked once the painting has rested this long
const samplesByModel = new Map(); // model -> Promise of its held-out images, fetched once

/** The image shape [C, H, W] of a model that reads images; null for one that reads text. */
export function imageShape(models, name) {
  const vision = models.find((m) => m.name === name)?.architecture.vision;
  return vision ? [vision.channels, vision.image_size, vision.image_size] : null;
}

/** A vision model's held-out images ({count, stack: n C H W, labels, source}), asked once. */
function loadSamples(name) {
  if (!samplesByModel.has(name)) {
    const request = fetchSamples(name).then((answer) => ({ ...answer, stack: answer.images ? unpack(answer.images) : null }));
    request.catch(() => samplesByModel.delete(name));
    samplesByModel.set(name, request);
  }
  return samplesByModel.get(name);
}

/** The image the settings name: a held-out one, a drawing from the link, the drawing on the
 * page (too large for a link), or, when none is named, the first held-out image. Returns the
 * store's patch: {samples, image, sample}. */
export async function chooseImage(shape) {
  const { model, sample, pixels, image } = state.get();
  const samples = await loadSamples(model);
  const fits = (candidate) => candidate && candidate.shape.join() === shape.join();
  if (sample !== null) {
    const known = samples.count && sample < samples.count;
    return { samples, sample, image: known ? imageAt(samples.stack, sample) : blankImage(shape) }; // the server names a bad one
  }
  if (pixels) return { samples, sample, image: imageFromCode(pixels, shape) ?? blankImage(shape) };
  if (fits(image)) return { samples, sample, image };
  return { samples, sample: samples.count ? 0 : null, image: samples.count ? imageAt(samples.stack, 0) : blankImage(shape) };
}

/** The image panel in ``node``: a drawing is walked once the painting rests, its code in the
 * link (when it fits there); a held-out image at once. ``run()`` asks for the walk. */
export function bindImageSource(node, run) {
  let painting = null; // the timer of a walk asked for a drawing
  return bindImageInput(node, {
    onImage: (drawn) => {
      state.update({ image: drawn, sample: null, pixels: imageCode(drawn) });
      clearTimeout(painting);
      painting = setTimeout(() => run(), PAINT_MS);
    },
    onSample: (index) => {
      state.update({ sample: index, pixels: "" });
      run();
    },
  });
}
