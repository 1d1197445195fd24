// The training lab's page: choose a preset and the fields a learner would change, start,
// pause, resume, stop, continue; then follow the run (GET api/lab/events, server-sent
// events from its run directory, glassformer/workshop/lab/lab_routes.py): live charts, the
// samples, and the film of its checkpoints. The page reconnects to a run in progress, and
// follows a run started from the command line too. State lives in this module only.

import { el } from "../core/dom.js";
import { duration, number } from "../core/format.js";
import { runCharts } from "./lab_charts.js";
import { renderFilm } from "./lab_film.js";
import { timeLeft } from "./lab_pace.js";

const $ = (id) => document.getElementById(id);
const LAB_URL = "api/lab";

let overview = null; // {presets, fields, runs, state}
let following = ""; // the run whose events this page reads
let source = null; // its EventSource
let data = freshData();
let filmIndex = null; // the frame shown (null: the latest)
let filmCompared = null; // a second frame to compare it with (null: none)
let estimatesAsked = 0; // the preset estimates asked for: only the latest answer is shown
let estimateWaits = false; // refused while a run trains: asked again once the lab's run ends
let labWasBusy = false; // the lab's own run was training or paused at the last drawing

function freshData() {
  return { progress: [], metrics: [], film: [], state: null };
}

const BUSY = ["running", "paused", "training elsewhere", "paused elsewhere"];
let clearMessageWhen = null; // (status) -> true once the cause of the message shown has gone

/** Show ``text``; ``until(status)``, if given, clears it once the run's status says its cause is gone. */
function showMessage(text, until = null) {
  $("message").textContent = text;
  $("message").hidden = !text;
  clearMessageWhen = text ? until : null;
}

let startProblemAt = null; // the run's status when the problem beside Start was shown

/** Why the last Start (or Continue) did not go, beside the Start button: the server's refusal,
 * or the last line of the log of a run that failed as it began; "" clears it. It clears too
 * once the run's status is no longer ``at`` (a refusal because a run trained, when it ends). */
function showStartProblem(text, at = null) {
  $("start-problem").textContent = text;
  $("start-problem").hidden = !text;
  startProblemAt = text ? at : null;
}

/** The last line of a log that says something (a failed run's reason, as Python prints it). */
function lastLine(log) {
  return (log ?? "").split("\n").map((line) => line.trim()).filter(Boolean).at(-1) ?? "";
}

async function post(path, body = {}) {
  const response = await fetch(`${LAB_URL}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error);
  return answer;
}

// the form ------------------------------------------------------------------------------
function drawForm() {
  const form = $("lab-form");
  const preset = el("select", { id: "preset", "aria-label": "preset", onchange: () => fillFields() },
    overview.presets.map((p) => el("option", { value: p.name, title: p.summary }, p.name)));
  preset.value = overview.default ?? overview.presets[0].name;
  const fields = Object.entries(overview.fields).map(([name, spec]) => {
    const input = spec.kind === "str"
      ? el("select", { name, "aria-label": name }, spec.allowed.map((v) => el("option", { value: v }, v)))
      : el("input", { name, type: "number", step: spec.kind === "int" ? "1" : "any", min: String(spec.range[0]), max: String(spec.range[1]), "aria-label": name });
    return el("label", { class: "field" }, el("span", { class: "field-name" }, name.split(".").pop().replace("_", " ")), input);
  });
  form.replaceChildren(
    el("label", { class: "field" }, el("span", { class: "field-name" }, "preset"), preset),
    el("p", { id: "preset-summary", class: "hint" }),
    el("p", { id: "preset-estimate", class: "hint" }),
    ...fields,
  );
  form.addEventListener("change", (event) => {
    showStartProblem(""); // the form changed: the refusal was about the fields before
    if (event.target.name in overview.fields) showEstimate();
  });
  fillFields();
}

function fillFields() {
  const chosen = overview.presets.find((p) => p.name === $("preset").value);
  $("preset-summary").textContent = chosen.summary;
  for (const [name, value] of Object.entries(chosen.fields)) {
    const input = $("lab-form").elements[name];
    if (!input) continue;
    input.value = value ?? "";
    input.disabled = chosen.fixed.includes(name);
    input.title = input.disabled ? `fixed: ${chosen.name} fine-tunes ${chosen.pretrained}, whose architecture it keeps` : "";
  }
  showEstimate();
}

/** How long the preset with the fields chosen trains on this machine: the server times a few
 * of its model's own steps on first asking (glassformer/train/pace.py), "measuring…" until
 * then; an answer to an older choice is dropped. */
async function showEstimate() {
  const asked = ++estimatesAsked;
  estimateWaits = false;
  drawEstimate("measuring…");
  let answer;
  try {
    answer = await post("/estimate", { preset: $("preset").value, fields: changedFields() });
  } catch (error) {
    answer = { error: error.message }; // e.g. "these settings make no model: …", before Start
  }
  if (asked !== estimatesAsked) return;
  estimateWaits = answer.seconds === null && !answer.error;
  if (answer.error) drawEstimate(answer.error);
  else if (answer.seconds === null) drawEstimate(`time on this machine: ${answer.reason}`);
  else {
    const how = `measured here: ${answer.steps} steps × ${number(1000 * answer.step_s, 3)} ms and ` +
      `${answer.evaluations} evaluations × ${number(answer.evaluation_s, 3)} s; ` +
      "starting the process and preparing the data come on top";
    drawEstimate(`about ${duration(answer.seconds)} on this machine`, answer.seconds, how);
  }
}

function drawEstimate(text, seconds = null, how = "") {
  const line = $("preset-estimate");
  line.textContent = text;
  line.title = how;
  if (seconds === null) delete line.dataset.seconds;
  else line.dataset.seconds = String(seconds);
}

/** The fields that differ from the preset's own values (only those are sent). */
function changedFields() {
  const chosen = overview.presets.find((p) => p.name === $("preset").value);
  const out = {};
  for (const [name, spec] of Object.entries(overview.fields)) {
    const raw = $("lab-form").elements[name].value;
    if (raw === "") continue;
    const value = spec.kind === "str" ? raw : Number(raw);
    if (value !== chosen.fields[name]) out[name] = value;
  }
  return out;
}

function drawRuns() {
  const select = $("run");
  const names = overview.runs.map((r) => r.name);
  if (following && !names.includes(following)) names.unshift(following);
  const damaged = Object.fromEntries(overview.runs.map((r) => [r.name, r.damaged])); // why its model cannot be read
  const option = (n) => el("option", { value: n, title: damaged[n] }, damaged[n] ? `${n} (damaged)` : n);
  select.replaceChildren(el("option", { value: "" }, "—"), ...names.map(option));
  select.value = following;
  const other = $("other-run");
  const chosen = other.value;
  const others = names.filter((n) => n !== following);
  other.replaceChildren(el("option", { value: "" }, "—"), ...others.map((n) => el("option", { value: n }, n)));
  other.value = others.includes(chosen) ? chosen : "";
  $("compare-runs").disabled = !following || !other.value;
}

// following a run -------------------------------------------------------------------------
function follow(run) {
  if (run === following && source) return;
  source?.close();
  following = run;
  data = freshData();
  filmIndex = null;
  filmCompared = null;
  drawRuns();
  drawAll();
  if (!run) return;
  source = new EventSource(`${LAB_URL}/events?run=${encodeURIComponent(run)}`);
  source.addEventListener("open", () => { data = freshData(); }); // the server sends the whole run again
  for (const kind of ["progress", "metrics", "film"]) {
    source.addEventListener(kind, (event) => {
      data[kind].push(...JSON.parse(event.data));
      drawAll();
    });
  }
  source.addEventListener("reset", (event) => {
    data[JSON.parse(event.data)] = [];
    drawAll();
  });
  source.addEventListener("problem", (event) => { // a line that is no record; the stream goes on
    const { file, line, reason } = JSON.parse(event.data);
    showMessage(`${file ?? "the run"}${line ? ` line ${line}` : ""} ${reason}`);
  });
  source.addEventListener("state", (event) => {
    data.state = JSON.parse(event.data);
    if (data.state.run === overview.state?.run) overview.state = data.state; // the lab's own run: its state now
    drawAll();
  });
}

function drawAll() {
  const { progress, metrics, film, state } = data;
  const steps = progress.at(-1)?.steps ?? metrics.at(-1)?.step ?? 1;
  const marker = film.length ? film[Math.min(filmIndex ?? film.length - 1, film.length - 1)].step : null;
  $("charts").replaceChildren(...runCharts(progress, metrics, { steps, marker }));
  $("charts").dataset.points = String(progress.length);
  const last = progress.at(-1);
  if (last) {
    const pace = timeLeft(progress, metrics, state?.status);
    $("eta").textContent = `step ${last.step} of ${last.steps} · loss ${number(last.loss, 3)} · ${number(last.tokens_per_s, 3)} tokens/s${pace}`;
  } else {
    $("eta").textContent = following ? "waiting for the first step…" : "Choose a run to follow, or start one.";
  }
  const sampled = metrics.filter((m) => m.sample).at(-1);
  $("sample").textContent = sampled ? `step ${sampled.step}: ${sampled.sample}` : "";
  renderFilm($("film"), film, filmIndex, (index, compared) => {
    filmIndex = index;
    filmCompared = compared;
    drawAll();
  }, filmCompared);
  $("log").textContent = state?.log ?? "";
  const status = state?.status ?? "idle";
  document.body.dataset.state = status;
  if (clearMessageWhen?.(status)) showMessage("");
  $("status").textContent = following ? `${following}: ${status}` : "";
  if (startProblemAt !== null && status !== startProblemAt) showStartProblem("");
  if (status === "failed" && state.run === overview.state?.run && state.run === following) {
    showStartProblem(`${following} failed: ${lastLine(state.log) || "see its log"}`, status); // not only in the log
  }
  const own = state && overview.state && state.run === following && state.pid;
  $("pause").disabled = !(own && status === "running");
  $("resume").disabled = !(own && status === "paused");
  $("stop").disabled = !(own && (status === "running" || status === "paused"));
  $("continue").disabled = !following || BUSY.includes(status);
  $("start").disabled = BUSY.includes(status) || BUSY.includes(overview.state?.status); // one run at a time
  const labBusy = BUSY.includes(overview.state?.status);
  if (estimateWaits && labWasBusy && !labBusy) showEstimate();
  labWasBusy = labBusy;
  $("open").disabled = !following || !progress.length;
}

// the buttons ----------------------------------------------------------------------------
async function act(path, body) {
  const starts = path === "/start" || path === "/continue"; // their refusals show beside Start
  try {
    const state = await post(path, body);
    showMessage("");
    if (starts) showStartProblem("");
    overview.state = state;
    if (state.run) follow(state.run);
    data.state = state;
    drawAll();
  } catch (error) {
    const at = data.state?.status ?? "idle";
    if (starts) showStartProblem(error.message, at); // e.g. fewer steps than the warm-up's: nothing was touched
    else showMessage(error.message, (status) => status !== at); // e.g. "nothing to stop"
  }
}

$("start").addEventListener("click", () => act("/start", { preset: $("preset").value, fields: changedFields() }));
$("pause").addEventListener("click", () => act("/pause"));
$("resume").addEventListener("click", () => act("/resume"));
$("stop").addEventListener("click", () => act("/stop"));
$("continue").addEventListener("click", () => act("/continue", { run: following }));
$("run").addEventListener("change", () => follow($("run").value));
/** Load ``runs`` as models of the workshop and go to its page: the first walked, the
 * second (if any) in the compare view, both on the film's probe. */
async function openInWorkshop(runs) {
  try {
    const [model, compare] = await Promise.all(runs.map(async (run) => (await post("/open", { run })).model));
    const query = { model };
    if (compare) Object.assign(query, { compare, level: "intermediate" }); // beginners see no compare view
    const probe = data.film[0];
    if (probe) query.text = probe.text ?? probe.tokens.join(""); // the probe, as text the models read
    window.location.href = `./?${new URLSearchParams(query)}`;
  } catch (error) {
    showMessage(error.message);
  }
}

$("open").addEventListener("click", () => openInWorkshop([following]));
$("other-run").addEventListener("change", () => { $("compare-runs").disabled = !following || !$("other-run").value; });
$("compare-runs").addEventListener("click", () => openInWorkshop([following, $("other-run").value]));

async function start() {
  try {
    overview = await (await fetch(LAB_URL)).json();
  } catch (error) {
    showMessage(`the workshop server did not answer (${error.message})`);
    return;
  }
  drawForm();
  const wanted = new URLSearchParams(window.location.search).get("run");
  const active = overview.runs.find((r) => r.active)?.name;
  follow(wanted || overview.state.run || active || "");
  drawRuns();
  drawAll();
}

start();
