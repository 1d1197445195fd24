// One colour scale per quantity, for the workshop and the notebook views alike, chosen to read
// for colour-blind eyes:
//   weights in [0, 1] (attention)   a single blue ramp from white      unitColour
//   signed values                   blue (negative) - white - orange    divergingColour
//   heads                           Tableau 10, then the golden angle   headColours
// A colour is [r, g, b]; `css` writes it for a style.

const WHITE = [255, 255, 255];
const UNIT_STOPS = [WHITE, [107, 174, 214], [8, 48, 107]]; // 0, 0.5, 1
const NEGATIVE = [33, 102, 172];
const POSITIVE = [217, 95, 2];
export const NOT_FINITE = [200, 200, 200];
export const MASKED = [228, 230, 233]; // cells a causal mask hides
// Tableau 10 (as d3's category10): distinct hues for up to 10 heads
const CATEGORY10 = [
  [31, 119, 180], [255, 127, 14], [44, 160, 44], [214, 39, 40], [148, 103, 189],
  [140, 86, 75], [227, 119, 194], [127, 127, 127], [188, 189, 34], [23, 190, 207],
];

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

/** A map's colour for each value: "unit" for weights in [0, 1], "diverging" for signed
 * values against the largest magnitude of the whole map (``extent``). */
export function colourScale(scale, extent) {
  return scale === "unit" ? unitColour : (value) => divergingColour(value, extent);
}

function hsl(h, s, l) {
  const k = (n) => (n + h / 30) % 12;
  const a = s * Math.min(l, 1 - l);
  const f = (n) => l - a * Math.max(-1, Math.min(k(n) - 3, 9 - k(n), 1));
  return [Math.round(255 * f(0)), Math.round(255 * f(8)), Math.round(255 * f(4))];
}

/** ``n`` distinct colours, one per head: Tableau 10, then steps round the wheel by the golden angle. */
export function headColours(n) {
  if (n <= CATEGORY10.length) return CATEGORY10.slice(0, n);
  return Array.from({ length: n }, (_, h) => hsl((h * 137.508) % 360, 0.65, 0.45));
}

/** [r, g, b] (and an alpha) as CSS. */
export function css([r, g, b], alpha) {
  return alpha === undefined ? `rgb(${r} ${g} ${b})` : `rgb(${r} ${g} ${b} / ${alpha})`;
}

/** Dark text on light colours, white on dark ones (relative luminance, sRGB approximated). */
export function textOn([r, g, b]) {
  return 0.2126 * r + 0.7152 * g + 0.0722 * b < 140 ? "#fff" : "#1f2328";
}
