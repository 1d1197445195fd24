// Equations typeset by KaTeX, vendored under static/vendor/katex (scripts/vendor_katex.sh):
//   tex("x^2", {display: false})      -> a <span> holding the typeset equation
//   texHtml("x^2", {display: false})  -> the same as an HTML string (for `el(..., {html})`)
// A formula KaTeX cannot read is a bug in the page, never something to hide: it shows as
// a red `.katex-error` with its source, and goes to the console, where the tests look.

import katex from "../vendor/katex/katex.mjs";

// \htmlClass{num}{0.3536} marks a number taken from this input (styled, and read by the
// tests); nothing else that needs `trust` is allowed.
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

/** `tex` as an HTML string, for code that builds its markup as text. */
export function texHtml(latex, options = {}) {
  return tex(latex, options).outerHTML;
}
