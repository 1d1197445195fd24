// The page's two lines of news: a message (an error, a notice) above the walk, and the
// status of the walk asked for (body[data-state]: loading, ready, error). A walk that takes
// more than a second counts its seconds and, in a class's queue, how many requests go first
// (GET api/queue: the server's fair queue, the teacher's first, students in turn).

const SLOW_WALK_MS = 1000; // past this, the status counts the seconds a walk has taken
const TICK_MS = 250;
const QUEUE_EVERY_MS = 1000; // how often a slow walk asks how many requests are ahead of it
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
  let ahead = 0;
  let asked = 0;
  const timer = setInterval(() => {
    const ms = performance.now() - started;
    if (ms < SLOW_WALK_MS) return;
    if (ms - asked >= QUEUE_EVERY_MS) {
      asked = ms;
      queueAhead().then((n) => { if (ticking === timer) ahead = n; });
    }
    const queue = ahead > 0 ? ` · ${ahead} request${ahead === 1 ? "" : "s"} ahead of yours` : "";
    status.textContent = `${text} ${Math.floor(ms / 1000)} s${queue}`;
  }, TICK_MS);
  ticking = timer;
}

/** How many requests go before this page's next turn of the model (0 when it cannot tell). */
async function queueAhead() {
  try {
    const response = await fetch("api/queue");
    return response.ok ? (await response.json()).ahead : 0;
  } catch {
    return 0;
  }
}
