// How long a run has left, read from the run itself: its progress lines (one per step, with
// the wall time it was written) and its metrics lines (one per evaluation). The trainer
// writes step k's line, evaluates if k is an evaluation step, then trains step k + 1: so the
// gap after an evaluation step holds an evaluation and a step, every other gap one step.
//
//     left = steps left × (a step) + evaluations left × (an evaluation)
//
// Each is the median of what the run has shown, so a pause (one long gap), the first steps'
// warm-up or a busy moment of the machine does not throw the estimate.

import { duration } from "../core/format.js";

const RECENT_STEPS = 50; // a step's time is read from these: the run's pace now, not its start's
const LEAST_GAPS = 5; // steps seen before a pace is told

/** The seconds `progress` ([{step, steps, time}]) has left, with its evaluations (`metrics`:
 * [{step}]); null before there is a pace to tell. */
export function secondsLeft(progress, metrics) {
  const last = progress.at(-1);
  const evaluated = new Set(metrics.map((m) => m.step));
  const steps = gaps(progress.slice(-RECENT_STEPS - 1), (step) => !evaluated.has(step));
  if (!last || steps.length < LEAST_GAPS) return null;
  const step = median(steps);
  const evaluations = gaps(progress, (step) => evaluated.has(step));
  const evaluation = evaluations.length ? Math.max(0, median(evaluations) - step) : 0; // none seen yet: 0
  return (last.steps - last.step) * step + evaluationsLeft(last, metrics) * evaluation;
}

/** The seconds between consecutive progress lines whose first step passes `counted` (a line
 * that does not follow its step, as after a resume, starts again). */
function gaps(progress, counted) {
  const out = [];
  for (let i = 1; i < progress.length; i++) {
    const [before, after] = [progress[i - 1], progress[i]];
    if (after.step === before.step + 1 && counted(before.step)) out.push(after.time - before.time);
  }
  return out;
}

/** The evaluations still to come after `last` step: one every interval (the distance between
 * the run's evaluations, or its first one's step) and one after the final step. */
function evaluationsLeft(last, metrics) {
  const interval = metrics.length > 1 ? metrics.at(-1).step - metrics.at(-2).step : metrics[0]?.step;
  if (!interval) return 0;
  const atIntervals = Math.floor(last.steps / interval) - Math.floor(last.step / interval);
  const final = last.steps % interval && last.step < last.steps ? 1 : 0;
  return atIntervals + final;
}

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** " · about 40 s to go" while the run trains, from its own pace; "" before there is a pace to tell. */
export function timeLeft(progress, metrics, status) {
  const left = status === "running" ? secondsLeft(progress, metrics) : null;
  return left === null ? "" : ` · about ${duration(left)} to go`;
}
