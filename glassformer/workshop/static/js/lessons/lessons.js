// The lessons' page: the list of lessons, one lesson's text with its equations typeset by
// KaTeX, its code, and — when the learner runs it — what each code cell printed on this
// machine (POST api/lessons/N/run: a fresh kernel runs the whole lesson). A walk link
// opens the forward pass at that step; a code link shows the function's source beside the
// text (GET api/source). The lesson shown is in the URL: ?lesson=N.

import { el } from "../core/dom.js";
import { tex } from "../core/tex.js";

const $ = (id) => document.getElementById(id);
const API = "api/lessons";

async function getJson(url, options = {}) {
  const response = await fetch(url, options);
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error);
  return answer;
}

function showMessage(text) {
  $("message").textContent = text;
  $("message").hidden = !text;
}

/** Every .math element typeset in place (its text is the TeX markdown-it kept). */
function typeset(root) {
  for (const node of root.querySelectorAll(".math")) {
    const display = node.classList.contains("block");
    node.replaceWith(tex(node.textContent.trim(), { display }));
  }
}

async function showSource(name) {
  try {
    const code = await getJson(`api/source?${new URLSearchParams({ name })}`);
    $("code-title").textContent = name.split(".").slice(-2).join(".");
    $("code-where").textContent = `${code.file}, line ${code.line}`;
    $("code-source").textContent = code.source;
    $("code-panel").hidden = false;
    $("code-panel").dataset.name = name;
    $("code-panel").scrollIntoView({ block: "nearest" }); // a narrow window has it below the lesson
  } catch (error) {
    showMessage(error.message);
  }
}

/** A lesson's Markdown cell as elements: the one markup the page parses from a string. It is
 * the server's rendering (lesson_pages.py) of the package's own lesson files, with raw HTML
 * off, so every text in it (a link's model name included) came escaped by markdown-it; what
 * a lesson's code prints is never in it (showOutputs sets that as text). DOMParser runs no
 * script and loads nothing while it parses. */
function lessonMarkup(html) {
  return new DOMParser().parseFromString(html, "text/html").body.childNodes;
}

function markdownCell(cell) {
  const node = el("div", { class: "lesson-text" }, ...lessonMarkup(cell.html));
  typeset(node);
  for (const link of node.querySelectorAll("a.code-link")) {
    link.addEventListener("click", (event) => {
      event.preventDefault();
      showSource(link.dataset.code);
    });
  }
  for (const link of node.querySelectorAll("a.link-missing")) link.addEventListener("click", (event) => event.preventDefault());
  return node;
}

function codeCell(cell, index) {
  return el("div", { class: "lesson-code", dataset: { cell: index } },
    el("pre", {}, el("code", {}, cell.source)),
    el("div", { class: "lesson-output" }));
}

function showOutputs(article, outputs) {
  article.querySelectorAll(".lesson-code").forEach((node, i) => {
    const shown = outputs[i];
    const out = node.querySelector(".lesson-output");
    out.replaceChildren(
      shown.text ? el("pre", { class: "output-text" }, shown.text) : "",
      ...shown.images.map((png) => el("img", { class: "output-image", src: `data:image/png;base64,${png}`, alt: "a figure the cell drew" })));
  });
}

async function runLesson(article, number, button) {
  button.disabled = true;
  article.dataset.run = "running";
  const note = article.querySelector(".run-note");
  note.textContent = "running the whole lesson in a fresh Python kernel…";
  try {
    const answer = await getJson(`${API}/${number}/run`, { method: "POST", headers: { "content-type": "application/json" }, body: "{}" });
    showOutputs(article, answer.outputs);
    note.textContent = `ran in ${answer.seconds.toFixed(1)} s on this machine: every number below comes from that run, every assert held.`;
    article.dataset.run = "done";
  } catch (error) {
    note.textContent = error.message;
    article.dataset.run = "failed";
  } finally {
    button.disabled = false;
  }
}

async function openLesson(number) {
  const article = $("lesson");
  document.body.dataset.state = "loading";
  try {
    const lesson = await getJson(`${API}/${number}`);
    const run = el("button", { type: "button", class: "run", id: "run-lesson" }, "Run this lesson");
    let codeIndex = 0;
    article.replaceChildren(
      el("div", { class: "lesson-run" }, run, el("span", { class: "run-note hint" }, "The code below has not run yet: run it to see its numbers.")),
      ...lesson.cells.map((cell) => (cell.kind === "code" ? codeCell(cell, codeIndex++) : markdownCell(cell))));
    run.addEventListener("click", () => runLesson(article, lesson.number, run));
    article.dataset.lesson = lesson.number;
    article.dataset.run = "none";
    for (const item of document.querySelectorAll("#lesson-list a")) item.classList.toggle("current", item.dataset.number === String(lesson.number));
    document.title = `${lesson.number}. ${lesson.title} — Glassformer lessons`;
    document.body.dataset.state = "ready";
    showMessage("");
  } catch (error) {
    showMessage(error.message);
    document.body.dataset.state = "error";
  }
}

async function start() {
  let list;
  try {
    list = await getJson(API);
  } catch (error) {
    showMessage(`the workshop server did not answer (${error.message})`);
    return;
  }
  $("lesson-list").replaceChildren(...list.map((item) => el("li", {},
    el("a", { href: `?lesson=${item.number}`, dataset: { number: item.number }, title: item.summary }, `${item.number}. ${item.title}`))));
  const wanted = new URLSearchParams(window.location.search).get("lesson");
  if (wanted) await openLesson(wanted);
  else document.body.dataset.state = "ready";
}

start();
