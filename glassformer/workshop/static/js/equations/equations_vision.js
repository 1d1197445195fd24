// A vision transformer's equations (glassformer/nn/patches.py; Dosovitskiy et al. 2021, eq. 1):
// the image cut into P x P patches, each flattened and multiplied by W_patch (a strided
// convolution), [CLS] put in front, a learned position vector added. The stage catalogue names
// these templates ("vit.embed.patches", ...) for a model whose config says vision. Read from the
// architecture summary (vision: channels, image_size, patch_size, patches; d_model,
// position_params.max_seq_len).

import { eq, num, real, sub, W } from "./equations_tex.js";

const sizes = (arch) => {
  const v = arch.vision;
  return { c: v.channels, h: v.image_size, p: v.patch_size, across: v.image_size / v.patch_size, n: v.patches, d: arch.d_model };
};
const patchList = (n) => `x_{\\mathrm{cls}};\\, p_1;\\, \\dots;\\, p_{${num(n)}}`;

/** The templates by name. */
export const VISION_EQUATIONS = {
  "vit.tokens": ({ arch }) => {
    const { c, h, p, n } = sizes(arch);
    return eq(
      `x \\in [0, 1]^{${num(c)} \\times ${num(h)} \\times ${num(h)}}, \\quad n = (H / P)^2 = (${num(h)} / ${num(p)})^2 = ${num(n)}, \\quad t = n + 1 = ${num(n + 1)}`,
      `${p} × ${p} patches, numbered row by row from the top left; [CLS] in front`,
    );
  },
  "vit.embed.patches": ({ arch, value }) => {
    const { c, p, across, d } = sizes(arch);
    const window = "x[:,\\, P r : P (r + 1),\\, P c : P (c + 1)]";
    const shape = real(num(d), `(${num(c)} \\cdot ${num(p)} \\cdot ${num(p)})`);
    return eq(
      `p_i = \\operatorname{flatten}(${window})\\, ${W("patch")}^{\\top} + b, \\quad i = ${num(across)}\\, r + c, \\quad ${W("patch")} \\in ${shape}`,
      [`a convolution with a ${p} × ${p} kernel and stride ${p}: its windows tile the image, and each of its ${d} kernels is a row of W`, sub("patch")],
      value,
    );
  },
  "vit.embed.tokens": ({ arch, value }) => {
    const { n, d } = sizes(arch);
    return eq(
      `z = [${patchList(n)}] \\in ${real(num(n + 1), num(d))}`,
      ["x", sub("cls"), ": a learned vector, the same for every image; the classifier reads its last state"],
      value,
    );
  },
  "vit.embed.positions": ({ arch, value }) => {
    const { n, d } = sizes(arch);
    return eq(
      `E_{\\mathrm{pos}}[0, \\dots, ${num(n)}] \\text{ learned}, \\quad E_{\\mathrm{pos}} \\in ${real(num(arch.position_params.max_seq_len ?? n + 1), num(d))}`,
      "row 0 for [CLS], row 1 + i for patch i: one vector per place in the grid",
      value,
    );
  },
  "vit.embed.out": ({ arch, value }) => eq(
    `z_0 = [${patchList(sizes(arch).n)}] + E_{\\mathrm{pos}}`,
    "the stream entering block 0",
    value,
  ),
};
