// The page's two lines of news: a message (an error, a notice) above the walk, and the
// status of the walk asked for (body[data-state]: loading, ready, error).

const SLOW_WALK_MS = 1000; // past this, the status counts the seconds a walk has taken
const TICK_MS = 250;
const message = document.getElementById("message");
const status = document.getElementById("status");
let ticking = null; // the timer that counts them

export function showMessage(text) {
  message.textContent = text;
  message.hidden = !text;
}

/** Whether a message is shown now. */
export function messageShown() {
  return !message.hidden;
}

export function setStatus(state, text) {
  document.body.dataset.state = state;
  status.textContent = text;
  clearInterval(ticking);
  ticking = null;
  if (state !== "loading") return;
  const started = performance.now(); // a long input's pass takes seconds: say it is under way
  ticking = setInterval(() => {
    const ms = performance.now() - started;
    if (ms >= SLOW_WALK_MS) status.textContent = `${text} ${Math.floor(ms / 1000)} s`;
  }, TICK_MS);
}
