// The one payload reader of the notebook views: a view's JSON (format in glassformer/viz/html.py)
// checked, its token axes named and its attention layers decoded on demand, so that the head,
// model and neuron views do not each unpack the same fields.

import { inflateBlock } from "./blocks.js";

export const FORMAT = "glassformer-view";
export const VERSION = 1;

/**
 * The reading of a view's payload for the view ``kind`` ("head", "model", "neuron", "token"):
 *   p                 the payload itself (title, heads, layers, settings, blocks)
 *   queries, keys     the query tokens and the key tokens (the queries again in self-attention)
 *   t, s              their counts
 *   weights(layer)    a Promise of that layer's uint8 attention (h t s), inflated once
 * Throws on a payload of another format, a newer version or another view.
 */
export function readPayload(payload, kind) {
  if (payload.format !== FORMAT || payload.version > VERSION) {
    throw new Error(`payload ${payload.format} v${payload.version} is newer than this library (v${VERSION})`);
  }
  if (payload.view !== kind) throw new Error(`no renderer for the ${payload.view} view`);
  const queries = payload.query_tokens || payload.tokens || [];
  const keys = payload.key_tokens || queries;
  const layers = new Map(); // layer index -> Promise of its weights
  const weights = (layer) => {
    if (!layers.has(layer)) layers.set(layer, inflateBlock(payload.layers[layer].attention));
    return layers.get(layer);
  };
  return { p: payload, queries, keys, t: queries.length, s: keys.length, weights };
}
