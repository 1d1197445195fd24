// A class on this server (glassformer workshop --class; glassformer/workshop/classroom/):
// its state at GET api/class, {model, text, level, step, stage, zoom, panel, sampling,
// version, role, students: {connected, following}} (and for the teacher, links and work),
// and its changes as server-sent events at GET api/class/events: `class` (the state, with
// its version as the event's id, so a reconnecting page resumes), `presence` (the teacher's
// counts), `poll` (the class's poll changed: {open, answers, revealed}), `end`. The
// browser's EventSource reconnects by itself and sends Last-Event-ID.

import { ApiError } from "../core/api.js";

const CLASS_URL = "api/class";

/** The class's state, or null when no class runs here (404). */
export async function fetchClass() {
  const response = await fetch(CLASS_URL);
  if (response.status === 404) return null;
  const answer = await response.json().catch(() => null);
  if (!response.ok || !answer) throw new ApiError(answer?.error ?? `the class could not be read (${response.status})`, response.status);
  return answer;
}

/** The class's poll as this page may see it (classroom/poll.py), or null when none is open. */
export async function fetchPoll() {
  const response = await fetch(`${CLASS_URL}/poll`);
  if (response.status === 404) return null;
  const answer = await response.json().catch(() => null);
  if (!response.ok || !answer) throw new ApiError(answer?.error ?? `the poll could not be read (${response.status})`, response.status);
  return answer;
}

/** POST api/class{path} with ``body`` (the teacher's): the answer, or an ApiError. */
export async function postClass(path, body = {}) {
  const response = await fetch(`${CLASS_URL}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => null);
  if (!response.ok) throw new ApiError(answer?.error ?? `the server answered ${response.status}`, response.status);
  return answer;
}

/** Follow the class's events: handlers {class(state), presence(counts), poll(news), end()}; following:
 * whether this page counts as following the teacher. Returns the EventSource (close() it). */
export function classEvents(following, handlers) {
  const source = new EventSource(`${CLASS_URL}/events?following=${following ? 1 : 0}`);
  const read = (fn) => (event) => {
    let data;
    try {
      data = JSON.parse(event.data);
    } catch {
      return; // not JSON: nothing to show
    }
    fn(data);
  };
  if (handlers.class) source.addEventListener("class", read(handlers.class));
  if (handlers.presence) source.addEventListener("presence", read(handlers.presence));
  if (handlers.poll) source.addEventListener("poll", read(handlers.poll));
  source.addEventListener("end", () => {
    source.close();
    handlers.end?.();
  });
  return source;
}
