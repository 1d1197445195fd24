// The teacher's class panel: the students' link and its QR code (large, for a projector), how
// many students are connected and how many follow, the shared work's cache; a new students'
// link (the old one stops working) and the end of the class; the class's poll (poll.js). The teacher's page publishes
// what it shows (model, text, level, the reveal's step, the opened step, the zoom) with POST
// api/class, and the students' pages follow it.

import { el } from "../core/dom.js";
import { count } from "../core/format.js";
import { classEvents, fetchClass, postClass } from "./class_api.js";
import { teacherPoll } from "./poll.js";

const PUBLISH_DELAY_MS = 120; // a burst of key presses is one change
const STATS_EVERY_MS = 5000; // how often the cache's figures are read again

/** ``panel``: the class panel's element; ``initial``: GET api/class; ``current()``: what the
 * teacher's page shows, as the class's keys. Returns {publish()}: call it when that changes. */
export function teachClass(panel, initial, current) {
  const link = el("input", { class: "class-link", readonly: true, value: initial.links?.students ?? "", "aria-label": "the students' link" });
  const copied = el("span", { class: "class-copied", role: "status" });
  const copy = el("button", { type: "button", onclick: () => copyLink(link, copied) }, "Copy");
  const qr = el("img", { class: "class-qr", alt: "QR code of the students' link", src: qrSource() });
  const people = el("p", { class: "class-people", role: "status" });
  const work = el("p", { class: "class-work" });
  const problem = el("p", { class: "class-problem error", role: "alert" });
  const renew = el("button", { type: "button", onclick: () => newLink() }, "New students' link");
  const end = el("button", { type: "button", onclick: () => endClass() }, "End the class");
  const poll = teacherPoll(); // "what comes next?": the class guesses, the model answers
  panel.querySelector(".class-body").replaceChildren(
    el("p", { class: "hint" }, "Students open this link (or scan the code): their pages follow yours as you teach."),
    el("p", { class: "class-link-row" }, link, copy, copied),
    poll.node, qr, people, work, el("p", { class: "class-actions" }, renew, end), problem,
  );
  panel.hidden = false;
  showPeople(initial.students);
  showWork(initial.work);

  let published = JSON.stringify(pick(initial));
  let timer = 0;
  const events = classEvents(false, { presence: showPeople, poll: () => poll.update(), end: ended });
  const stats = setInterval(refresh, STATS_EVERY_MS);

  function showPeople(students) {
    if (!students) return;
    people.textContent = `${count(students.connected)} student${students.connected === 1 ? "" : "s"} connected, ${count(students.following)} following`;
    people.dataset.connected = students.connected;
    people.dataset.following = students.following;
  }

  function showWork(stats) {
    if (!stats) return;
    const asked = stats.hits + stats.misses;
    const rate = asked ? ` (${Math.round((100 * stats.hits) / asked)}% shared)` : "";
    work.textContent = `Computed once for the class: ${count(stats.hits)} answers served from ${count(stats.misses)} computations${rate}, ` +
      `${(stats.bytes / 2 ** 20).toFixed(1)} of ${(stats.limit_bytes / 2 ** 20).toFixed(0)} MB kept; ${count(stats.queued)} waiting.`;
  }

  async function refresh() {
    try {
      const state = await fetchClass();
      if (!state) return ended();
      showPeople(state.students);
      showWork(state.work);
    } catch {
      // the next refresh tries again
    }
  }

  async function newLink() {
    try {
      link.value = (await postClass("/students")).students;
      qr.src = qrSource();
      copied.textContent = "a new link: the old one no longer opens the class";
    } catch (error) {
      problem.textContent = error.message;
    }
  }

  async function endClass() {
    try {
      await postClass("/end");
    } catch (error) {
      problem.textContent = error.message;
    }
  }

  function ended() {
    clearInterval(stats);
    clearTimeout(timer);
    events.close();
    panel.querySelector(".class-body").replaceChildren(el("p", {}, "The class has ended; students' links no longer open it."));
  }

  function send() {
    const now = JSON.stringify(current());
    if (now === published) return;
    published = now;
    postClass("", JSON.parse(now)).then(() => { problem.textContent = ""; }, (error) => { problem.textContent = error.message; });
  }

  return {
    publish() {
      clearTimeout(timer);
      timer = setTimeout(send, PUBLISH_DELAY_MS);
    },
  };
}

/** The class's keys this page publishes, from a state the server sent. */
function pick(state) {
  return { model: state.model, text: state.text, level: state.level, step: state.step, stage: state.stage ?? null, zoom: state.zoom ?? "" };
}

/** The QR code's address, fresh each time (a new link makes a new code). */
function qrSource() {
  return `api/class/qr.svg?at=${Date.now()}`;
}

async function copyLink(input, note) {
  try {
    await navigator.clipboard.writeText(input.value);
    note.textContent = "copied";
  } catch {
    input.select(); // no clipboard here: selected, for the keyboard's copy
    note.textContent = "selected: copy it with the keyboard";
  }
}
