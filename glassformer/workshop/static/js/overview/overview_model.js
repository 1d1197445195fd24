// The overview's first zoom, the whole model: tokens (or an image's patches) → each stack's
// embedding → its blocks × N → its final norm → the output, one column per stack (an
// encoder-decoder's side by side). Drawn from the payload's stages, cut into sections
// (stages.js: each stage's stack, layer and kind), and the architecture summary; this pass's
// numbers in the boxes once the teaching reveal has reached them.

import { el } from "../core/dom.js";
import { characterTokens, number, tokenText } from "../core/format.js";
import { cutImage } from "../image/patch_tokens.js";
import { sections } from "../core/stages.js";
import { arrow, box, lastTokenStrip, meanNorm, miniMap, NORM_NAMES } from "./overview_box.js";
import { attentionWords, blockFlow, ffnWords } from "./overview_block_flow.js";
import { outputBoxes } from "./overview_output.js";

const STACK_TITLES = { "": "", encoder: "Encoder", decoder: "Decoder" };
const SHOWN_TOKENS = 12;

/** The residual stream's mean ‖x‖ after each block: one bar per block, each a way in. */
function blockBars(blocks, onZoom, revealed) {
  const lasts = blocks.map((b) => b.stages[b.stages.length - 1]);
  const norms = lasts.map(meanNorm);
  const largest = Math.max(...norms.filter((n) => n !== null), 0) || 1;
  return el("span", { class: "ov-bars", role: "group", "aria-label": "open one block" },
    blocks.map((b, i) => {
      const n = norms[i];
      const shown = n !== null && revealed(lasts[i].id);
      return el("button", {
        type: "button",
        class: "ov-bar",
        title: `block ${b.layer}${shown ? `: mean ‖x‖ ${number(n, 3)} after it` : ""}`,
        "aria-label": `open block ${b.layer}`,
        onclick: (event) => { event.stopPropagation(); onZoom(b.group); },
        style: { height: `${shown ? Math.max(3, Math.round((28 * n) / largest)) : 3}px` },
      });
    }));
}

function embeddingBox(embed, view) {
  const arch = view.payload.architecture;
  const stream = embed.stages.find((s) => s.kind === "embed.out");
  const positions = embed.stages.some((s) => s.kind === "embed.positions");
  const v = arch.vision; // a ViT: W_patch, a P × P convolution with stride P, then [CLS]
  const table = v
    ? `W_patch: ${v.channels * v.patch_size ** 2} → ${arch.d_model} (a ${v.patch_size} × ${v.patch_size} convolution, stride ${v.patch_size}) + [CLS]`
    : `E: ${arch.vocab_size.toLocaleString("en")} × ${arch.d_model}`;
  return box({
    kind: "embed",
    title: v ? "Patch embedding" : "Embedding",
    detail: table + (positions ? ` + ${arch.positions} positions` : ""),
    summary: lastTokenStrip(stream, arch.d_model),
    pending: !view.revealed(stream.id),
    onClick: () => view.onOpenStage(stream.id),
    label: "the embedding: open its step in the walk",
  });
}

function blocksBox(blocks, view) {
  const { payload, onZoom, revealed } = view;
  const arch = payload.architecture;
  const first = blocks[0];
  const hasCross = first.stages.some((s) => s.cross);
  const pattern = first.stages.find((s) => s.kind === "attn.pattern" && !s.cross);
  const words = [attentionWords(arch, false), hasCross ? `cross-attention: ${attentionWords(arch, true)}` : "", `feed-forward ${ffnWords(arch)}`];
  return box({
    kind: "block",
    title: `Block × ${blocks.length}`,
    detail: words.filter(Boolean).join(" · "),
    summary: el("span", { class: "ov-block-summary" }, blockFlow(arch, hasCross), pattern && revealed(pattern.id) ? miniMap(pattern) : null,
      blockBars(blocks, onZoom, revealed), el("span", { class: "ov-detail" }, "the stream's size after each block: click a bar to open that block")),
    onClick: () => onZoom(first.group),
    label: `the ${blocks.length} blocks: open block ${first.layer}`,
  });
}

function stackColumn(stack, view) {
  const { payload, revealed } = view;
  const arch = payload.architecture;
  const parts = sections(payload.stages).filter((s) => s.stack === stack);
  const embed = parts.find((s) => s.kind === "embed");
  const blocks = parts.filter((s) => s.kind === "block");
  const final = parts.find((s) => s.kind === "final");
  const out = [];
  if (embed) out.push(embeddingBox(embed, view), arrow());
  if (blocks.length) out.push(blocksBox(blocks, view), arrow());
  if (final) {
    const stage = final.stages[0];
    out.push(box({
      kind: "norm",
      title: `Final ${NORM_NAMES[arch.norm]}`,
      summary: lastTokenStrip(stage, arch.d_model),
      pending: !revealed(stage.id),
      onClick: () => view.onOpenStage(stage.id),
    }));
  }
  const title = STACK_TITLES[stack] ? el("h3", { class: "ov-stack-title" }, STACK_TITLES[stack]) : null;
  return el("div", { class: "ov-stack", dataset: { stack } }, title, out);
}

/** A vision model's input: the image cut into its patches, [CLS] in front. */
function imageBox(payload, pending) {
  const [rows, cols] = payload.image.grid;
  const detail = `[CLS] + ${rows} × ${cols} patches = ${payload.tokens.length} tokens`;
  return box({ kind: "tokens", title: "Image → patches", detail, summary: cutImage(payload, 96), pending });
}

function tokensBox(tokens, characters, pending) {
  const shown = characterTokens(tokens, characters ?? []).slice(0, SHOWN_TOKENS).map((t) => tokenText(t.text)).join(" ");
  const more = tokens.length > SHOWN_TOKENS ? " …" : "";
  return box({
    kind: "tokens", title: "Tokens", detail: `${tokens.length} token${tokens.length === 1 ? "" : "s"}`,
    summary: el("span", { class: "ov-tokens" }, shown + more), pending,
  });
}

/** The whole model: one column, or an encoder's and a decoder's side by side. */
export function modelView(view) {
  const { payload, revealed } = view;
  const stacks = [...new Set(sections(payload.stages).map((s) => s.stack).filter((s) => s !== ""))];
  const tokensPending = !revealed("tokens");
  if (!stacks.length) { // one stack: a single column
    const column = stackColumn("", view);
    column.prepend(payload.image ? imageBox(payload, tokensPending) : tokensBox(payload.tokens, payload.characters, tokensPending), arrow());
    column.append(arrow(), ...outputBoxes(view));
    return el("div", { class: "ov-model" }, column);
  }
  const [encoder, decoder] = stacks.map((s) => stackColumn(s, view));
  const under = (column, node) => column.querySelector(".ov-stack-title").after(node, arrow()); // under its title
  under(encoder, tokensBox(payload.tokens, payload.characters, tokensPending));
  under(decoder, tokensBox(payload.decoder_tokens ?? [], payload.decoder_characters, tokensPending));
  decoder.append(arrow(), ...outputBoxes(view));
  return el("div", { class: "ov-model ov-two" }, encoder,
    el("span", { class: "ov-cross", "aria-hidden": "true" }, "the encoder's output feeds every decoder block's cross-attention →"), decoder);
}
