// The class's poll, "what comes next?" (glassformer/workshop/classroom/poll.py): the teacher
// asks, each student guesses the next token of the class's text, the teacher reveals the
// model's own. The teacher's part sits in the class panel: the class's guesses as bars (each
// group: the text guessed, how many, the model's token it maps to and its probability) beside
// the model's top tokens, with Close and Reveal. A student's part is a card under the class's
// bar: the question, a guess (Enter sends), then how many answered; on the reveal, the model's
// token, whether theirs mapped to it, and the class's counts beside the model's top tokens.
// Both redraw on the class's `poll` events ({open, answers, revealed}). Every guess and token
// is shown as text (el's children), never as markup.

import { el } from "../core/dom.js";
import { count, percent, quoted } from "../core/format.js";
import { fetchPoll, postClass } from "./class_api.js";

const MAX_GUESS = 40; // characters in a guess (request_types.PollGuess)

/** The teacher's poll: a section for the class panel. Returns {node, update()}: call update
 * on each `poll` event (it reads the poll: the guesses' counts are not in the event). */
export function teacherPoll() {
  const ask = el("button", { type: "button", class: "poll-ask", onclick: () => act("/poll") }, "Ask the class: what comes next?");
  const status = el("p", { class: "poll-status", role: "status" });
  const guesses = el("ol", { class: "poll-bars poll-guesses", "aria-label": "the class's guesses" });
  const model = el("ol", { class: "poll-bars poll-model", "aria-label": "the model's likeliest tokens" });
  const close = el("button", { type: "button", onclick: () => act("/poll/close") }, "Close");
  const reveal = el("button", { type: "button", class: "poll-reveal", onclick: () => act("/poll/reveal") }, "Reveal the model's token");
  const problem = el("p", { class: "poll-problem error-inline", role: "alert" });
  const columns = el("div", { class: "poll-columns", hidden: true },
    el("div", { class: "poll-column" }, el("h3", {}, "The class's guesses"), guesses),
    el("div", { class: "poll-column" }, el("h3", {}, "The model's top tokens"), model));
  const actions = el("p", { class: "poll-actions", hidden: true }, close, reveal);
  const node = el("section", { class: "poll poll-teacher", "aria-label": "the class's poll" }, ask, status, columns, actions, problem);

  async function act(path) {
    try {
      draw(await postClass(path));
      problem.textContent = "";
    } catch (error) {
      problem.textContent = error.message;
    }
  }

  function draw(poll) {
    if (!poll) return;
    node.dataset.open = poll.open;
    node.dataset.answers = poll.answers;
    node.dataset.revealed = poll.revealed ? poll.revealed.text : "";
    status.textContent = pollWords(poll);
    guesses.replaceChildren(...guessBars(poll.guesses, poll.revealed));
    if (!poll.guesses.length) guesses.append(el("li", { class: "hint" }, "no guesses yet"));
    model.replaceChildren(...modelBars(poll.model, poll.revealed));
    columns.hidden = false;
    actions.hidden = false;
    close.disabled = !poll.open;
    reveal.disabled = Boolean(poll.revealed);
    ask.textContent = poll.open ? "Ask again (a new poll)" : "Ask the class: what comes next?";
  }

  async function update() {
    try {
      draw(await fetchPoll());
    } catch (error) {
      problem.textContent = error.message;
    }
  }

  return { node, update }; // the stream tells of a poll already open on connecting: no read before

}

/** A student's poll: a card after ``bar`` (the class's line). Returns {update(news)}. */
export function studentPoll(bar) {
  const question = el("p", { class: "poll-question" });
  const input = el("input", { type: "text", class: "poll-input", maxlength: MAX_GUESS, "aria-label": "your guess: the next word", autocomplete: "off", enterkeyhint: "send" });
  const send = el("button", { type: "submit" }, "Send");
  const form = el("form", { class: "poll-form", onsubmit: (event) => { event.preventDefault(); guess(); } }, input, send);
  const status = el("p", { class: "poll-status", role: "status" });
  const result = el("div", { class: "poll-result" });
  const problem = el("p", { class: "poll-problem error-inline", role: "alert" });
  const card = el("section", { class: "poll poll-student", "aria-label": "the class's poll", hidden: true }, question, form, status, result, problem);
  bar.after(card);
  let seen = ""; // the poll's open/revealed state last drawn whole
  let last = null; // the poll last read

  async function guess() {
    const text = input.value;
    if (!text) return;
    try {
      draw(await postClass("/guess", { guess: text }));
      problem.textContent = "";
    } catch (error) {
      problem.textContent = error.message;
    }
  }

  function showStatus(poll) {
    const yours = poll.yours === null ? "no guess yet" : `your guess: \u201c${poll.yours}\u201d`;
    status.textContent = `${yours}, ${answers(poll.answers)} so far${poll.open ? "" : " (closed)"}`;
  }

  function draw(poll) {
    last = poll;
    card.hidden = !poll;
    if (!poll) return;
    card.dataset.open = poll.open;
    card.dataset.revealed = poll.revealed ? poll.revealed.text : "";
    question.replaceChildren("What comes next after \u201c", el("span", { class: "poll-text" }, poll.question), "\u201d?");
    form.hidden = !poll.open;
    showStatus(poll);
    result.replaceChildren();
    if (!poll.revealed) return;
    const token = poll.revealed;
    const verdict = poll.yours === null ? "You did not guess." : poll.matched ? "Your guess is the model's token!"
      : `Your guess reads as ${poll.yours_token ? quoted(poll.yours_token.text) : "no token of this model"}: not the model's.`;
    result.append(
      el("p", { class: "poll-answer" }, "The model picked ", el("strong", { class: "poll-token" }, quoted(token.text)), ` (p = ${percent(token.p)}). ${verdict}`),
      el("div", { class: "poll-columns" },
        el("div", { class: "poll-column" }, el("h3", {}, "The class's guesses"), el("ol", { class: "poll-bars poll-guesses" }, ...guessBars(poll.guesses, token))),
        el("div", { class: "poll-column" }, el("h3", {}, "The model's top tokens"), el("ol", { class: "poll-bars poll-model" }, ...modelBars(poll.model, token)))),
    );
  }

  async function read() {
    try {
      draw(await fetchPoll());
    } catch (error) {
      problem.textContent = error.message;
    }
  }

  return {
    update(news) {
      const state = JSON.stringify([news.open, news.revealed]);
      if (state !== seen) {
        seen = state;
        if (news.open) input.value = "";
        read(); // a new poll, its close or its reveal: the whole card anew
      } else if (last) {
        showStatus({ ...last, answers: news.answers });
      }
    },
  };
}

function answers(n) {
  return `${count(n)} answer${n === 1 ? "" : "s"}`;
}

function pollWords(poll) {
  if (poll.revealed) return `${answers(poll.answers)}. The model picked ${quoted(poll.revealed.text)} (p = ${percent(poll.revealed.p)}).`;
  return `What comes next after \u201c${poll.question}\u201d? ${answers(poll.answers)}${poll.open ? " so far" : ", closed"}.`;
}

/** The guesses' groups as bars, widths by count (the largest full). */
function guessBars(groups, revealed) {
  const most = Math.max(1, ...groups.map((g) => g.count));
  return groups.map((g) => {
    const hit = revealed && g.id === revealed.id;
    const token = g.id === null ? "no token" : `${quoted(g.token)} ${percent(g.p)}`;
    const title = g.id === null ? "this model's tokenizer cannot read it" : null;
    return el("li", { class: hit ? "poll-bar poll-hit" : "poll-bar", dataset: { count: g.count }, title },
      el("span", { class: "poll-label", title: g.text }, g.text),
      el("span", { class: "poll-track" }, el("span", { class: "poll-fill", style: { width: `${(100 * g.count) / most}%` } })),
      el("span", { class: "poll-figure" }, `${count(g.count)} \u2192 ${token}`));
  });
}

/** The model's top tokens as bars, widths by probability. */
function modelBars(tokens, revealed) {
  return tokens.map((t) => el("li", { class: revealed && t.id === revealed.id ? "poll-bar poll-hit" : "poll-bar" },
    el("span", { class: "poll-label" }, quoted(t.text)),
    el("span", { class: "poll-track" }, el("span", { class: "poll-fill", style: { width: `${100 * t.p}%` } })),
    el("span", { class: "poll-figure" }, percent(t.p))));
}
