// A class on this server, if one runs (glassformer workshop --class): the teacher's page
// gets the class panel and publishes what it shows (teacher.js); a student's page follows the
// teacher until the student explores on their own (follow.js). A student's page follows in
// teaching mode (lock=1: the walk revealed step by step), so it opens again with it if the
// link had none. Without a class (404) the page is as it always was.

import { fetchClass } from "./class_api.js";
import { followClass } from "./follow.js";
import { teachClass } from "./teacher.js";

/** hooks: {locked, relock(), current(), onChange(fn), show(state), explore(on)}: what the page
 * shows as the class's keys, a subscription to its changes, and drawing the teacher's state. */
export async function startClass(hooks) {
  let initial;
  try {
    initial = await fetchClass();
  } catch {
    return; // the class could not be read: the page works on its own
  }
  if (!initial) return;
  if (initial.role === "teacher") {
    const teaching = teachClass(document.getElementById("class-panel"), initial, hooks.current);
    hooks.onChange(() => teaching.publish());
    return;
  }
  if (!hooks.locked) {
    hooks.relock(); // followed in teaching mode: the page opens again with lock=1
    return;
  }
  followClass(document.getElementById("class-bar"), { show: hooks.show, explore: hooks.explore });
}
