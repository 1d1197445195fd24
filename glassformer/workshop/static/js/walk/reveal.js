// Teaching mode's step-by-step reveal (?lock=1): the walk shows its first step, and the
// presenter moves through it: → / Space / Page Down next, ← / Page Up back, Home / End the
// first and last step, a number key the first step of that block (at the beginner level, the
// tour's stop that holds it: block 0's first stop, or the "other blocks" stop; a block the
// model does not have is said in the bar, as text), or the "jump to" list
// (the embeddings, each block, the output). The current step is marked aria-current="step"
// and scrolled into view. It only hides what the walk already drew; walk_panels.js opens the block
// the reveal is in and keeps every other panel back until its step is out.
// A part's name and a block's number come from its first step (its stack, layer and kind:
// architecture.py parses the names, the page none); a tour's "other blocks" stop from its blocks.

import { el } from "../core/dom.js";

const NEXT_KEYS = ["ArrowRight", " ", "PageDown"];
const BACK_KEYS = ["ArrowLeft", "PageUp"];

/**
 * bar: the element that holds the buttons and the counter. onChange(): called after a step
 * is shown or hidden. Returns {setStages(stages), apply(walk), goTo(id), show(count), count(), setDriven(on), lastShown(),
 * lastStep(), done(), reached(test)}.
 */
export function createReveal(bar, onChange) {
  let ids = [];
  let steps = []; // {id, group, ...}: a walk's stages, or a tour's stops
  let groupOf = new Map();
  let shown = 1;
  let marked = ""; // the step last marked current (scrolled to once, not at every redraw)
  let driven = true; // false while a class's student follows the teacher: the teacher's keys move it
  const previous = el("button", { type: "button", class: "reveal-previous", onclick: () => go(shown - 1) }, "← Previous");
  const next = el("button", { type: "button", class: "reveal-next", onclick: () => go(shown + 1) }, "Next step →");
  const counter = el("span", { class: "reveal-count", role: "status" });
  const jump = el("select", { class: "reveal-jump", "aria-label": "jump to", onchange: () => jumpTo(jump.value) });
  const note = el("span", { class: "reveal-note", role: "status" }); // why a number key did nothing
  bar.replaceChildren(previous, counter, next, el("label", { class: "reveal-jump-label" }, "jump to ", jump), note);
  bar.hidden = false;

  /** The walk's parts in order: [{first: index of its first step, part, stack, layer}] (partOf). */
  function parts() {
    const seen = new Map();
    steps.forEach((step, i) => {
      if (!seen.has(step.group)) seen.set(step.group, { first: i, ...partOf(step) });
    });
    return [...seen.values()];
  }

  function update() {
    counter.textContent = `step ${shown} of ${ids.length}`;
    previous.disabled = !driven || shown <= 1;
    next.disabled = !driven || shown >= ids.length;
    jump.disabled = !driven;
    const options = parts().map((part) => el("option", { value: String(part.first) }, label(part)));
    jump.replaceChildren(el("option", { value: "" }, "—"), ...options);
    jump.value = "";
  }

  /** Show steps 1..to (clamped). */
  function go(to) {
    if (!ids.length) return; // no walk yet
    to = Math.min(Math.max(to, 1), ids.length);
    note.textContent = ""; // a key that moves (or stays on its step) answers the last one's note
    if (to === shown) return;
    shown = to;
    update();
    onChange();
  }

  function jumpTo(first) {
    if (first !== "") go(Number(first) + 1);
  }

  /** The first step of block ``n`` (of the input stack: an encoder-decoder's encoder); in a
   * tour, the "other blocks" stop that stands for it. No such block: says so in the bar. */
  function jumpToBlock(n) {
    if (!ids.length) return; // no walk yet
    const all = parts();
    const stack = all.find(({ part }) => part === "block" || part === "others")?.stack;
    const part = all.find(({ part: kind, layer }) => kind === "block" && layer === n) ??
      all.find(({ part: kind, blocks }) => kind === "others" && blocks.some((b) => b.layer === n));
    if (part) {
      go(part.first + 1);
      return;
    }
    const layers = new Set(all.filter((p) => p.stack === stack)
      .flatMap((p) => (p.part === "block" ? [p.layer] : (p.blocks ?? []).map((b) => b.layer))));
    const count = layers.size;
    note.textContent = count
      ? `no block ${n}: this model has ${count} block${count === 1 ? "" : "s"} (keys 0 to ${count - 1})`
      : `no block ${n}: this model has no blocks`;
  }

  document.addEventListener("keydown", (event) => {
    if (!driven || event.altKey || event.ctrlKey || event.metaKey) return;
    const target = event.target;
    if (target.closest?.("input, textarea, select, [contenteditable]")) return; // keys there are the field's
    if (event.key === " " && target.closest?.("button, summary, a")) return; // Space presses what has focus
    if (NEXT_KEYS.includes(event.key) && !event.shiftKey) go(shown + 1);
    else if (BACK_KEYS.includes(event.key) || (event.key === " " && event.shiftKey)) go(shown - 1);
    else if (event.key === "Home") go(1);
    else if (event.key === "End") go(ids.length);
    else if (/^[0-9]$/.test(event.key)) jumpToBlock(Number(event.key));
    else return;
    event.preventDefault();
  });

  return {
    /** The walk's steps ({id, group}), in order; a new walk starts again at its first step. */
    setStages(stages) {
      const stageIds = stages.map((s) => s.id);
      if (stageIds.join("\n") !== ids.join("\n")) shown = 1;
      ids = stageIds;
      steps = stages;
      groupOf = new Map(stages.map((s) => [s.id, s.group]));
      shown = Math.min(shown, ids.length);
      update();
    },
    /** Hide every step of the drawn walk past the reveal, and the blocks and boxes left empty;
     * mark the current step and bring it into view when it changed. */
    apply(walk) {
      const out = new Set(ids.slice(0, shown));
      const reached = new Set([...out].map((id) => groupOf.get(id)));
      for (const step of walk.querySelectorAll(".step")) {
        step.hidden = !out.has(step.dataset.stage);
        if (step.dataset.stage === ids[shown - 1]) step.setAttribute("aria-current", "step");
        else step.removeAttribute("aria-current");
      }
      for (const line of walk.querySelectorAll(".block-line")) line.hidden = !reached.has(line.dataset.group);
      for (const group of walk.querySelectorAll(".group")) group.hidden = !group.querySelector(".step:not([hidden])");
      for (const stack of walk.querySelectorAll(".stack")) {
        stack.hidden = !stack.querySelector(".group:not([hidden]), .block-line:not([hidden])");
      }
      const current = walk.querySelector('.step[aria-current="step"]');
      if (current && ids[shown - 1] !== marked) current.scrollIntoView({ block: "center" });
      marked = ids[shown - 1];
    },
    /** Show the steps up to ``id`` (a shared link's opened step); false if the walk has none. */
    goTo(id) {
      const index = ids.indexOf(id);
      if (index < 0) return false;
      go(index + 1);
      return true;
    },
    /** Show steps 1..count (a class's student following the teacher's step). */
    show(count) {
      go(count);
    },
    /** How many steps are shown. */
    count() {
      return shown;
    },
    /** Whether this page's own keys and buttons move the reveal (not while following a teacher). */
    setDriven(on) {
      driven = on;
      update();
    },
    /** The id of the last step shown. */
    lastShown() {
      return ids[shown - 1] ?? "";
    },
    /** The last step shown: a stage, or a tour's stop (its kind "others" holds its blocks). */
    lastStep() {
      return steps[shown - 1] ?? null;
    },
    /** Whether every step is out. */
    done() {
      return shown >= ids.length;
    },
    /** Whether a step ``test(step)`` holds for is out already (a stage or a tour's stop). */
    reached(test) {
      return steps.slice(0, shown).some(test);
    },
  };
}

const PART_NAMES = { input: "the tokens", embed: "embeddings", others: "the other blocks", final: "final norm", output: "the output" };

/** Which part of the walk a step is in: {part: "input" | "embed" | "block" | "others" | "final"
 * | "output", stack, layer, blocks (an "others" stop's)}. A tour's stop holds its stage; its own stops (the other blocks,
 * the sampling) hold none. */
function partOf(step) {
  if (step.kind === "others") return { part: "others", stack: step.blocks[0].stack, layer: null, blocks: step.blocks };
  const stage = step.stage ?? step;
  if (stage.group === "input" || stage.group === "output") return { part: stage.group, stack: "", layer: null };
  if (stage.layer !== null) return { part: "block", stack: stage.stack, layer: stage.layer };
  return { part: stage.kind === "final_norm" ? "final" : "embed", stack: stage.stack, layer: null };
}

/** A part's name in the jump list: "embeddings", "block 3", "decoder block 0", "the output". */
function label({ part, stack, layer }) {
  const prefix = stack ? `${stack} ` : "";
  return part === "block" ? `${prefix}block ${layer}` : `${prefix}${PART_NAMES[part]}`;
}
