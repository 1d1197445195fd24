// Numbers and token spellings as the page prints them.

// Whitespace made visible, so a token " the" reads as "␣the" and "\n" is not blank.
const VISIBLE = [
  [/ /g, "\u2423"], // ␣
  [/\n/g, "\u21b5"], // ↵
  [/\t/g, "\u21e5"], // ⇥
  [/\r/g, "\u240d"], // ␍
];

export function tokenText(text) {
  if (text === "") return "\u2205"; // ∅ an empty spelling
  // a run of bytes, ⟨F0 9F⟩, keeps its plain spaces: they separate bytes, they are no text
  return text.split(/(\u27e8[^\u27e9]*\u27e9)/).map((part, i) => (i % 2 ? part : visible(part))).join("");
}

function visible(text) {
  let shown = text;
  for (const [pattern, mark] of VISIBLE) shown = shown.replace(pattern, mark);
  return shown;
}

const BYTE_RUN = /\u27e8[^\u27e9]*\u27e9/g; // ⟨E4 BB⟩: bytes that make no whole character
const SUBSCRIPTS = "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089"; // ₀ … ₉

/** ``tokens`` as an axis labels them: a token of a character group (``characters``: the
 * payload's runs of tokens whose bytes together make characters, made once by the server's
 * `tokenizers/readable.character_groups`, which the chips are grouped by too) spells the
 * group's characters in place of its bytes, with its part when the group spans several tokens:
 * ⟨E4 BB⟩ ⟨8A⟩ -> 今₁ 今₂. Other tokens are returned as they are; ``bytes`` keeps the spelling. */
export function characterTokens(tokens, characters = []) {
  if (!tokens || !characters.length) return tokens;
  const shown = tokens.slice();
  for (const { first, last, text } of characters) {
    for (let i = first; i <= Math.min(last, tokens.length - 1); i += 1) {
      const part = last > first ? [...String(i - first + 1)].map((d) => SUBSCRIPTS[d]).join("") : "";
      let placed = false; // a token's runs of the group's bytes become its characters once
      const label = tokens[i].text.replace(BYTE_RUN, () => (placed ? "" : ((placed = true), text + part)));
      shown[i] = { ...tokens[i], text: label, bytes: tokens[i].text };
    }
  }
  return shown;
}

/** A token in quotes for sentences and hover text: 'Paris'. */
export function quoted(text) {
  return `\u2018${tokenText(text)}\u2019`;
}

/** A value with ``digits`` significant digits, exponent only when tiny or huge. */
export function number(value, digits = 4) {
  if (value === null || value === undefined) return "";
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "\u221e";
  if (value === -Infinity) return "\u2212\u221e";
  if (value === 0) return "0";
  const magnitude = Math.abs(value);
  if (magnitude >= 1e5 || magnitude < 1e-3) return value.toExponential(digits - 1).replace(/-/g, "\u2212");
  return Number(value.toPrecision(digits)).toString().replace(/-/g, "\u2212");
}

/** A probability as a percentage with ``decimals`` places: 0.7725 -> "77.25%". */
export function percent(p, decimals = 1) {
  return `${(100 * p).toFixed(decimals)}%`;
}

/** 134515008 -> "135M". */
export function count(n) {
  if (n >= 1e9) return `${(n / 1e9).toPrecision(3)}B`;
  if (n >= 1e6) return `${(n / 1e6).toPrecision(3)}M`;
  if (n >= 1e3) return `${(n / 1e3).toPrecision(3)}k`;
  return String(n);
}

/** [9, 5, 64] -> "[9, 5, 64]". */
export function shape(sizes) {
  return `[${sizes.join(", ")}]`;
}

/** A time as a person says it: 8.4 -> "8 s", 677 -> "11 min", 5400 -> "1.5 h". */
export function duration(seconds) {
  if (seconds < 59.5) return `${Math.max(1, Math.round(seconds))} s`;
  if (seconds < 5400) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}
