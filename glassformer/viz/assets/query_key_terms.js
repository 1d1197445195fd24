// q · k term by term, as the notebooks' neuron view and the workshop's query · key view show
// it: the elementwise product q ⊙ k (one cell per feature; its cells sum to q · k), and the
// largest magnitude a colour scale of several vectors reaches.

/** q ⊙ k (a Float32Array, as the traced tensors) and its sum q · k, for two vectors of one length. */
export function queryKeyTerms(q, k) {
  const product = new Float32Array(q.length);
  let dot = 0;
  for (let c = 0; c < q.length; c += 1) {
    product[c] = q[c] * k[c];
    dot += product[c];
  }
  return { product, dot };
}

/** The largest |value| in any of ``arrays`` (typed arrays or lists), or 1 when all are 0: the
 * extent of a diverging colour scale shared by them. */
export function largestMagnitude(arrays) {
  let extent = 0;
  for (const values of arrays) for (const value of values) extent = Math.max(extent, Math.abs(value));
  return extent || 1;
}
