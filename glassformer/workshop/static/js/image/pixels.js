// An image as the page holds it: {shape: [C, H, W], values: Float32Array of C·H·W numbers in
// [0, 1]}, the layout the library reads (pixel_values b C H W). How it travels:
//   to the server   rows of numbers, H x W for one channel, else C x H x W (images.py)
//   in the URL      one character per pixel, "0".."g" for k / 16 (the digits' steps, and
//                   0 and 1 of a drawing): ?pixels=000g4... ; an image that is not in those
//                   steps, or too large for a link, stays out of the URL

const LEVELS = 16; // the URL's steps: k / 16, k = 0..16 (scikit-learn's digits count 0..16)
const DIGITS = "0123456789abcdefg";
const MAX_CODE = 4096; // characters: a link longer than this is not shared

/** An image of ``shape`` with every pixel 0. */
export function blankImage(shape) {
  return { shape: [...shape], values: new Float32Array(shape.reduce((n, s) => n * s, 1)) };
}

/** A copy that can be changed without touching ``image``. */
export function copyImage(image) {
  return { shape: [...image.shape], values: Float32Array.from(image.values) };
}

/** The image's URL code, or "" when it is too large or not in sixteenths. */
export function imageCode(image) {
  if (image.values.length > MAX_CODE) return "";
  let code = "";
  for (const value of image.values) {
    const k = Math.round(value * LEVELS);
    if (Math.abs(k / LEVELS - value) > 1e-6) return "";
    code += DIGITS[k];
  }
  return code;
}

/** The image a URL code names for a model reading ``shape`` images; null when it does not fit. */
export function imageFromCode(code, shape) {
  const image = blankImage(shape);
  if (!code || code.length !== image.values.length) return null;
  for (let i = 0; i < code.length; i += 1) {
    const k = DIGITS.indexOf(code[i].toLowerCase());
    if (k < 0) return null;
    image.values[i] = k / LEVELS;
  }
  return image;
}

/** The image as the request's rows of numbers: H x W for one channel, else C x H x W. */
export function imageRows(image) {
  const [c, h, w] = image.shape;
  const plane = (p) => Array.from({ length: h }, (_, r) => Array.from(image.values.subarray((p * h + r) * w, (p * h + r + 1) * w)));
  return c === 1 ? plane(0) : Array.from({ length: c }, (_, p) => plane(p));
}

/** The image at ``index`` of a stack n C H W ({shape, values}: an unpacked array). */
export function imageAt(stack, index) {
  const [, ...shape] = stack.shape;
  const size = shape.reduce((n, s) => n * s, 1);
  return { shape, values: stack.values.slice(index * size, (index + 1) * size) };
}
