// Colour scales, chosen to read for colour-blind eyes: a single blue ramp for weights in
// [0, 1]; blue (negative) - white - orange (positive) for signed values.

const WHITE = [255, 255, 255];
const UNIT_STOPS = [WHITE, [107, 174, 214], [8, 48, 107]]; // 0, 0.5, 1
const NEGATIVE = [33, 102, 172];
const POSITIVE = [217, 95, 2];
export const NOT_FINITE = [200, 200, 200];

function mix(a, b, t) {
  return [0, 1, 2].map((i) => Math.round(a[i] + (b[i] - a[i]) * t));
}

/** A weight in [0, 1] -> [r, g, b]. */
export function unitColour(value) {
  if (!Number.isFinite(value)) return NOT_FINITE;
  const t = Math.min(1, Math.max(0, value));
  return t < 0.5 ? mix(UNIT_STOPS[0], UNIT_STOPS[1], t * 2) : mix(UNIT_STOPS[1], UNIT_STOPS[2], (t - 0.5) * 2);
}

/** A signed value against the largest magnitude shown (``extent`` > 0) -> [r, g, b]. */
export function divergingColour(value, extent) {
  if (!Number.isFinite(value)) return NOT_FINITE;
  const t = Math.min(1, Math.abs(value) / (extent || 1));
  return mix(WHITE, value < 0 ? NEGATIVE : POSITIVE, t);
}

export function css([r, g, b]) {
  return `rgb(${r} ${g} ${b})`;
}

/** A map's colour for each value: "unit" for weights in [0, 1], "diverging" for signed
 * values against the largest magnitude of the whole map (``extent``). */
export function colourScale(scale, extent) {
  return scale === "unit" ? unitColour : (value) => divergingColour(value, extent);
}
