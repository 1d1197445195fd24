// Teaching mode's step-by-step reveal (?lock=1): the walk shows its first step, and "Next
// step" (or the right-arrow key) shows the next one, "Previous" (left arrow) hides the last.
// It only hides what the walk already drew; main.js opens the block the reveal is in and
// shows the prediction once the last step is out.

import { el } from "./dom.js";

/**
 * bar: the element that holds the buttons and the counter. onChange(): called after a step
 * is shown or hidden. Returns {setStages(stages), apply(walk), lastShown(), done()}.
 */
export function createReveal(bar, onChange) {
  let ids = [];
  let groupOf = new Map();
  let shown = 1;
  const previous = el("button", { type: "button", class: "reveal-previous", onclick: () => step(-1) }, "← Previous");
  const next = el("button", { type: "button", class: "reveal-next", onclick: () => step(1) }, "Next step →");
  const counter = el("span", { class: "reveal-count", role: "status" });
  bar.replaceChildren(previous, counter, next);
  bar.hidden = false;

  function update() {
    counter.textContent = `step ${shown} of ${ids.length}`;
    previous.disabled = shown <= 1;
    next.disabled = shown >= ids.length;
  }

  function step(by) {
    if (!ids.length) return; // no walk yet
    const to = Math.min(Math.max(shown + by, 1), ids.length);
    if (to === shown) return;
    shown = to;
    update();
    onChange();
  }

  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey || event.shiftKey) return;
    if (event.target.closest?.("input, textarea, select, [contenteditable]")) return; // arrows move a radio or a caret
    if (event.key === "ArrowRight") step(1);
    else if (event.key === "ArrowLeft") step(-1);
    else return;
    event.preventDefault();
  });

  return {
    /** The walk's steps ({id, group}), in order; a new walk starts again at its first step. */
    setStages(stages) {
      const stageIds = stages.map((s) => s.id);
      if (stageIds.join("\n") !== ids.join("\n")) shown = 1;
      ids = stageIds;
      groupOf = new Map(stages.map((s) => [s.id, s.group]));
      shown = Math.min(shown, ids.length);
      update();
    },
    /** Hide every step of the drawn walk past the reveal, and the blocks and boxes left empty. */
    apply(walk) {
      const out = new Set(ids.slice(0, shown));
      const reached = new Set([...out].map((id) => groupOf.get(id)));
      for (const step of walk.querySelectorAll(".step")) step.hidden = !out.has(step.dataset.stage);
      for (const line of walk.querySelectorAll(".block-line")) line.hidden = !reached.has(line.dataset.group);
      for (const group of walk.querySelectorAll(".group")) group.hidden = !group.querySelector(".step:not([hidden])");
      for (const stack of walk.querySelectorAll(".stack")) {
        stack.hidden = !stack.querySelector(".group:not([hidden]), .block-line:not([hidden])");
      }
    },
    /** The id of the last step shown. */
    lastShown() {
      return ids[shown - 1] ?? "";
    },
    /** Whether every step is out. */
    done() {
      return shown >= ids.length;
    },
  };
}
