// Arrays as they travel (glassformer/viz/html.py `encode_weights` / `encode_float32`,
// glassformer/workshop/walk/arrays.py): base64 blocks {dtype, shape, compression?, scale?, data},
// never JSON lists of floats. The one decoder of the workshop and of the notebook views.
//   uint8    attention weights on the absolute scale, q = round(255 w) (value = q * scale)
//   float32  little-endian values
// A "deflate" block (zlib, as Python's zlib.compress writes) is inflated first, by the
// browser's DecompressionStream: `inflateBlock` is async, `decodeBlock` takes the rest.

/** The bytes of a base64 string. */
export function base64Bytes(b64) {
  if (typeof Uint8Array.fromBase64 === "function") return Uint8Array.fromBase64(b64);
  const text = atob(b64);
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i += 1) out[i] = text.charCodeAt(i);
  return out;
}

function checked(values, block) {
  const size = block.shape.reduce((a, b) => a * b, 1);
  if (values.length !== size) {
    throw new Error(`${block.dtype} block of shape [${block.shape}] holds ${values.length} values, expected ${size}`);
  }
  return values;
}

/** The typed array of ``raw`` bytes: a Uint8Array or a Float32Array, checked against the shape. */
function typed(raw, block) {
  if (block.dtype === "uint8") return checked(raw, block);
  if (block.dtype !== "float32") throw new Error(`unknown dtype ${block.dtype}`);
  const aligned = raw.byteOffset % 4 ? raw.slice() : raw;
  return checked(new Float32Array(aligned.buffer, aligned.byteOffset, Math.floor(aligned.byteLength / 4)), block);
}

/** An uncompressed block's typed array. */
export function decodeBlock(block) {
  if (block.compression) throw new Error(`a ${block.compression} block is decoded by inflateBlock`);
  return typed(base64Bytes(block.data), block);
}

/** Any block's typed array, inflating a deflate block first (a Promise). */
export async function inflateBlock(block) {
  if (!block.compression) return decodeBlock(block);
  if (block.compression !== "deflate") throw new Error(`unknown compression ${block.compression}`);
  const stream = new Blob([base64Bytes(block.data)]).stream().pipeThrough(new DecompressionStream("deflate"));
  return typed(new Uint8Array(await new Response(stream).arrayBuffer()), block);
}
