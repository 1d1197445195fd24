// A student's page in a class: it follows the teacher (the teacher's model, text, level,
// step, opened step and zoom, as the class's events say) until the student explores on their
// own; "Back to the teacher" lands on the teacher's current step again. A student who joins
// late gets the current state on connecting, so lands where the class is. When the teacher
// asks the class's poll, a card under the bar takes the student's guess (poll.js).

import { el } from "../core/dom.js";
import { classEvents } from "./class_api.js";
import { studentPoll } from "./poll.js";

/** ``bar``: the element the class's line goes in. ``show(state)``: draw the teacher's state
 * (async: it may ask for a walk); ``explore(on)``: give the page to the student, or take it
 * back for the teacher. */
export function followClass(bar, { show, explore }) {
  let latest = null; // the teacher's last state
  let following = true;
  let source = null;
  let showing = Promise.resolve(); // one state drawn at a time, the newest only
  const words = el("span", { class: "class-words", role: "status" });
  const button = el("button", { type: "button", class: "class-switch", onclick: () => setFollowing(!following) });
  bar.replaceChildren(words, button);
  bar.hidden = false;
  const poll = studentPoll(bar); // the class's poll: a card under the bar when the teacher asks

  function draw() {
    document.body.dataset.class = following ? "following" : "exploring";
    words.textContent = following ? "Following the teacher" : "Exploring on your own";
    button.textContent = following ? "Explore on my own" : "Back to the teacher";
  }

  function follow(state) {
    showing = showing.then(() => (following && state === latest ? show(state) : null)).catch(() => {});
  }

  function connect() {
    source?.close();
    source = classEvents(following, {
      class: (state) => {
        latest = state;
        if (following) follow(state);
      },
      poll: (news) => poll.update(news),
      end: ended,
    });
  }

  function setFollowing(on) {
    following = on;
    draw();
    explore(!on);
    connect(); // counted anew, as following or not; the current state comes first
  }

  function ended() {
    following = false;
    document.body.dataset.class = "ended";
    words.textContent = "The class has ended: the page is yours";
    button.hidden = true;
    explore(true);
  }

  draw();
  explore(false);
  connect();
}
