// Equations typeset by KaTeX, vendored under static/vendor/katex (scripts/vendor_katex.sh):
//   tex("x^2", {display: false})  -> a <span> holding the typeset equation (a DOM node, never
//                                    an HTML string: the page sets no markup from data)
//   texText("a_b {c}")            -> "\text{a\_b \{c\}}": any string from a model, a run or
//                                    a request, made one piece of text inside a formula
// A formula is the page's own LaTeX; a string from data enters it only through `texText`, so it
// can call no command (\htmlClass, \href, \def) and close no group. A formula KaTeX cannot
// read is a bug in the page, never something to hide: it shows as a red `.katex-error` with its
// source (as text), and goes to the console, where the tests look.

import katex from "../../vendor/katex/katex.mjs";

// \htmlClass{num}{0.3536} marks a number taken from this input (styled, and read by the
// tests); nothing else that needs `trust` is allowed (no \href, \url, \htmlData, \includegraphics).
const TRUSTED = new Set(["\\htmlClass"]);

const OPTIONS = {
  throwOnError: true,
  // The page writes every formula: anything non-standard is a mistake, except \htmlClass.
  strict: (code) => (code === "htmlExtension" ? "ignore" : "error"),
  trust: (context) => TRUSTED.has(context.command),
  output: "htmlAndMathml", // MathML for screen readers, HTML for the eye
};

function failed(latex, error) {
  console.error(`KaTeX could not typeset ${JSON.stringify(latex)}: ${error.message}`);
  const node = document.createElement("span");
  node.className = "katex-error";
  node.title = error.message;
  node.textContent = latex;
  return node;
}

/** The typeset equation in a <span class="tex">, or a visible error in its place. */
export function tex(latex, { display = false } = {}) {
  const node = document.createElement("span");
  node.className = display ? "tex tex-display" : "tex";
  try {
    katex.render(latex, node, { ...OPTIONS, displayMode: display });
  } catch (error) {
    node.replaceChildren(failed(latex, error));
  }
  return node;
}

// Each of LaTeX's special characters as text-mode LaTeX that prints it (KaTeX defines each).
const TEXT_ESCAPES = {
  "\\": "\\textbackslash{}",
  "{": "\\{",
  "}": "\\}",
  $: "\\$",
  "&": "\\&",
  "#": "\\#",
  "%": "\\%",
  _: "\\_",
  "^": "\\textasciicircum{}",
  "~": "\\textasciitilde{}",
  // not special, but joined into ligatures ("--" an en dash, "``" a double quote): kept apart
  // (KaTeX still prints ` and ' as the typographic quotes ‘ ’, as LaTeX does)
  "-": "-{}",
  "`": "`{}",
  "'": "'{}",
};
const TEXT_SPECIAL = /[\\{}$&#%_^~`'-]/g;

/** Any string as LaTeX that prints exactly it, upright: a label, a token, a name from data.
 * texText("<b>x_1</b>") -> "\text{<b>x\_1</b>}" (KaTeX draws "<" as text; nothing is markup). */
export function texText(text) {
  return `\\text{${String(text).replace(TEXT_SPECIAL, (c) => TEXT_ESCAPES[c])}}`;
}
