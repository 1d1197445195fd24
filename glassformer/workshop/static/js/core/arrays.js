// Typed arrays from the server (glassformer/workshop/walk/arrays.py):
//   {"dtype": "float32", "shape": [t, d], "data": "<base64>"}
//   {"dtype": "uint8", "shape": [h, t, s], "scale": 1/255, "data": "<base64>"}  value = byte * scale
// Never JSON lists of floats: a base64 string decodes straight into a typed array.

import { decodeBlock } from "../../viz/blocks.js";

function product(shape) {
  return shape.reduce((n, size) => n * size, 1);
}

/** The raw array: a Float32Array (little-endian, as the server writes and every browser
 * reads) or a Uint8Array with its scale (the decoder the notebook views share, viz/blocks.js). */
export function decode(packed) {
  const data = decodeBlock(packed);
  return { dtype: packed.dtype, shape: packed.shape, data, scale: packed.dtype === "uint8" ? packed.scale ?? 1 : 1 };
}

/** Every value as a Float32Array (bytes times their scale), with its shape. */
export function unpack(packed) {
  const array = decode(packed);
  if (array.dtype === "float32") return { shape: array.shape, values: array.data };
  const values = new Float32Array(array.data.length);
  for (let i = 0; i < values.length; i += 1) values[i] = array.data[i] * array.scale;
  return { shape: array.shape, values };
}

/** The sub-array at ``index`` along the first axis: head h of an h t s array is t s. */
export function slice(array, index) {
  const [, ...rest] = array.shape;
  const size = product(rest);
  return { shape: rest, values: array.values.subarray(index * size, (index + 1) * size) };
}

/** The mean over the first axis: the head-averaged pattern of h t s is t s. */
export function meanFirst(array) {
  const [n, ...rest] = array.shape;
  const size = product(rest);
  const mean = new Float32Array(size);
  for (let i = 0; i < n; i += 1) {
    const part = array.values.subarray(i * size, (i + 1) * size);
    for (let j = 0; j < size; j += 1) mean[j] += part[j] / n;
  }
  return { shape: rest, values: mean };
}

/** The leading ``count`` columns of a rows x cols array (the first 64 features of t d). */
export function leadingColumns(array, count) {
  const [rows, cols] = array.shape;
  const kept = Math.min(cols, count);
  if (kept === cols) return array;
  const values = new Float32Array(rows * kept);
  for (let r = 0; r < rows; r += 1) values.set(array.values.subarray(r * cols, r * cols + kept), r * kept);
  return { shape: [rows, kept], values };
}

export function range(values) {
  let min = Infinity;
  let max = -Infinity;
  for (const v of values) {
    if (!Number.isFinite(v)) continue;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  return { min, max };
}

/** A rows x cols array shrunk ``factor`` times along each axis: each cell of the result is
 * the entry of largest magnitude in its factor x factor block, so one sharp attention weight
 * stays visible where a mean would fade it (an infinity counts as largest; NaN only fills
 * a block of nothing else). */
export function poolLargest(array, factor) {
  if (factor <= 1) return array;
  const [rows, cols] = array.shape;
  const pooledRows = Math.ceil(rows / factor);
  const pooledCols = Math.ceil(cols / factor);
  const pooled = new Float32Array(pooledRows * pooledCols).fill(NaN);
  for (let r = 0; r < rows; r += 1) {
    const start = Math.floor(r / factor) * pooledCols;
    for (let c = 0; c < cols; c += 1) {
      const value = array.values[r * cols + c];
      const at = start + Math.floor(c / factor);
      if (Number.isNaN(pooled[at]) || Math.abs(value) > Math.abs(pooled[at])) pooled[at] = value;
    }
  }
  return { shape: [pooledRows, pooledCols], values: pooled };
}
