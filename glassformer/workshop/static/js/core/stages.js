// The walk's stages, in sections and parts. Each stage says where it sits (architecture.py
// parses its name, the page parses none): {id, group, stack: "" | "encoder" | "decoder",
// layer: number | null, kind: "attn.q" whatever its block, cross: bool, ...}.
// The page knows no model by name: the stacks, blocks and parts come from the payload.

import { characterTokens } from "./format.js";

/** The stages cut into sections, in order:
 * [{stack, kind: "input" | "embed" | "block" | "final" | "output", group, layer, stages}]
 * A stack's own group ("embed", "encoder", "decoder") before its blocks is its embedding;
 * after them (the final norm) it is the stack's end. */
export function sections(stages) {
  const out = [];
  const seenBlocks = new Set();
  for (const stage of stages) {
    const last = out[out.length - 1];
    if (last && last.group === stage.group) {
      last.stages.push(stage);
      continue;
    }
    const { stack, layer } = stage;
    let kind;
    if (stage.group === "input") kind = "input";
    else if (stage.group === "output") kind = "output";
    else if (layer !== null) kind = "block";
    else kind = seenBlocks.has(stack) ? "final" : "embed";
    if (kind === "block") seenBlocks.add(stack);
    out.push({ stack: kind === "input" || kind === "output" ? "" : stack, kind, group: stage.group, layer, stages: [stage] });
  }
  return out;
}

/** The tokens along one axis letter of a stage's shape, each spelled by the characters it
 * makes (⟨E4 BB⟩ ⟨8A⟩ as 今₁ 今₂). Queries (t) are the stream the
 * stage belongs to (an encoder-decoder's decoder input on the decoder side and for the
 * logits); keys (s) of cross-attention are the encoder's tokens; a vision model's patches (n)
 * are its tokens after [CLS]. */
export function axisTokens(stage, letter, payload) {
  if (letter === "n" && stage.kind === "embed.patches") return payload.tokens.slice(1); // a ViT's patches, no [CLS]
  const { stack, cross } = stage;
  const decoderSide = payload.decoder_tokens && (stack === "decoder" || stage.kind === "logits");
  if (letter === "s" && cross) return labelled(payload.tokens, payload.characters);
  if (letter === "t" || letter === "s") {
    return decoderSide ? labelled(payload.decoder_tokens, payload.decoder_characters) : labelled(payload.tokens, payload.characters);
  }
  return null;
}

const LABELLED = new WeakMap(); // a payload's tokens -> as its axes label them, made once

/** An axis's tokens spelled by the characters they make (format.characterTokens). */
function labelled(tokens, characters) {
  if (!tokens) return tokens;
  if (!LABELLED.has(tokens)) LABELLED.set(tokens, characterTokens(tokens, characters ?? []));
  return LABELLED.get(tokens);
}

/** The attention patterns of a walk, by part: [{key, label, layers: [{layer, stage}]}],
 * e.g. one part for a decoder; encoder, decoder and cross-attention for T5. */
export function attentionParts(stages) {
  const parts = new Map();
  for (const stage of stages) {
    if (!stage.trace || stage.kind !== "attn.pattern") continue;
    const { stack, layer, cross } = stage;
    const key = `${stack}:${cross ? "cross" : "self"}`;
    if (!parts.has(key)) {
      const label = cross
        ? "cross-attention: the decoder reads the encoder"
        : stack ? `${stack} self-attention` : "self-attention";
      parts.set(key, { key, label, stack, cross, layers: [] });
    }
    parts.get(key).layers.push({ layer, stage });
  }
  return [...parts.values()];
}
