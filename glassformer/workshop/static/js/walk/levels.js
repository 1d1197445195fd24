// What each step says at each level. The words come with the step (the stage catalogue,
// glassformer/workshop/walk/stage_catalogue.py, sends them in the payload):
//   beginner      stage.plain, a plain name, and stage.words, a plain sentence
//   intermediate  the equation with this input's numbers in it (equations.js `equation`, by
//                 the template stage.equation names, typeset by KaTeX)
//   advanced      + stage.code, where the library computes it (file, line, function)
// A context `ctx` carries what the equations need: {stage, value, arch, cross, sizes},
// sizes being the shape letters read off the value (t, s, h, g, e, d, f, v).

import { el } from "../core/dom.js";

export { equation, texNumber } from "../equations/equations.js";

/** A beginner's name for a step ("cross-attention: " in front of a cross-attention step). */
export function plainTitle(stage, cross = false) {
  return cross ? `cross-attention: ${stage.plain}` : stage.plain;
}

/** Where the library computes something: `file:line · Class.function`, as code elements. */
export function codeLine(code) {
  return code ? [el("code", {}, `${code.file}:${code.line}`), " · ", el("code", {}, code.name)] : null;
}

/** The shape letters of a stage zipped with its sizes: {h: 9, t: 5, e: 64}. */
export function letterSizes(stage, payload) {
  const letters = stage.shape.split(" ");
  const sizes = {};
  const shape = stage.value?.shape ?? (stage.id === "tokens" ? [payload.tokens.length] : null);
  if (shape) letters.forEach((letter, i) => { sizes[letter] = shape[i]; });
  return sizes;
}
