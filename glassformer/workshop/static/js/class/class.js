// A class on this server, if one runs (glassformer workshop --class): the teacher's page
// gets the class panel and publishes what it shows (teacher.js); a student's page follows the
// teacher until the student explores on their own (follow.js). A student's page opens on the
// class's model, text and level, in teaching mode (lock=1: the walk revealed step by step),
// so a student who joins late lands where the class is. Without a class the page is as it
// always was.

import { fetchClass } from "./class_api.js";
import { followClass } from "./follow.js";
import { teachClass } from "./teacher.js";

/** The class's state, or null (no class, or it could not be read: the page works on its own). */
export async function joinClass() {
  try {
    return await fetchClass();
  } catch {
    return null;
  }
}

/** What a student's page opens on: ``settings`` with the class's model, text and level. */
export function classSettings(settings, joined) {
  if (joined?.role !== "student") return settings;
  return { ...settings, model: joined.model, text: joined.text, level: joined.level, stage: "", zoom: "", lock: true };
}

/** Start the class's part of the page once its first walk is drawn. hooks: {current(),
 * onChange(fn), show(state), explore(on)}: what the page shows as the class's keys, a
 * subscription to its changes, drawing the teacher's state, handing the page to the student. */
export function startClass(joined, hooks) {
  if (joined.role === "teacher") {
    const teaching = teachClass(document.getElementById("class-panel"), joined, hooks.current);
    hooks.onChange(() => teaching.publish());
    teaching.publish(); // what this page opened on, if the class holds something else
    return;
  }
  followClass(document.getElementById("class-bar"), { show: hooks.show, explore: hooks.explore });
}
