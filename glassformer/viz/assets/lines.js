// Lines from each query token (a column on the left) to each key token (a column on the right),
// one line per attention weight: the notebooks' head view draws them on one canvas, the
// workshop's "which words look at which" as SVG lines. Both walk a pattern with `eachLine`;
// the canvas strokes its lines by opacity bucket (`strokeLines`), within a pixel budget
// (`budgetLevel`) so that hundreds of tokens still draw in a fraction of a second.

export const BUCKETS = 32; // opacity levels a canvas overview strokes, one Path2D each

/** Calls ``line(i, j, w)`` for every weight ``w >= lowest`` of the t x s pattern that starts at
 * ``offset`` in ``weights`` (0, or a head's start in h t s), row by row. */
export function eachLine(weights, t, s, lowest, line, offset = 0) {
  for (let i = 0; i < t; i += 1) {
    const base = offset + i * s;
    for (let j = 0; j < s; j += 1) {
      const w = weights[base + j];
      if (w >= lowest) line(i, j, w);
    }
  }
}

/**
 * The lowest uint8 weight level an overview draws: ``minimum``, or higher where the lines of
 * every level from ``minimum`` up would be longer in total than ``budget`` pixels, but never
 * above ``always`` (those weights always show). ``length[q]`` / ``count[q]``: the pixels and the
 * number of lines of level q (0..255). Returns {lowest, shown, all} (lines drawn, lines there).
 */
export function budgetLevel(length, count, minimum, budget, always) {
  let total = 0;
  let lowest = 256; // nothing yet; add weight levels from the strongest down
  while (lowest > minimum && total + length[lowest - 1] <= budget) {
    lowest -= 1;
    total += length[lowest];
  }
  lowest = Math.min(lowest, always);
  const sum = (from) => count.slice(from).reduce((a, b) => a + b, 0);
  return { lowest, shown: sum(lowest), all: sum(minimum) };
}

/** Strokes the lines of one t x s uint8 pattern (at ``offset`` in ``weights``) with levels
 * ``>= lowest`` from x = 0, y(i) to x = gap, y(j) in ``colour``: lines are gathered into
 * BUCKETS Path2D objects by opacity and each is stroked once, at its bucket's middle alpha. */
export function strokeLines(ctx, { weights, t, s, offset, lowest, gap, y, colour }) {
  const paths = Array.from({ length: BUCKETS }, () => null);
  const width = 256 / BUCKETS;
  eachLine(weights, t, s, lowest, (i, j, q) => {
    const b = Math.floor(q / width);
    const path = paths[b] || (paths[b] = new Path2D());
    path.moveTo(0, y(i));
    path.lineTo(gap, y(j));
  }, offset);
  ctx.strokeStyle = colour;
  paths.forEach((path, b) => {
    if (!path) return;
    ctx.globalAlpha = Math.min(1, (b * width + width / 2) / 255);
    ctx.stroke(path);
  });
}
