// A small helper to build DOM nodes: el("span", {class: "chip", title: "id 5"}, "text", child).
//
// The rule: no markup from data. Every string that comes from a model (labels, tokens,
// vocabulary pieces), a run (names, presets, metrics), a tokenizer, a lesson's output or a
// request (the prompt, URL parameters) reaches the page as TEXT: a child string here (a text
// node), an attribute value (setAttribute), `textContent`, or inside a formula through
// tex.js `texText`. Markup is made as elements (el, svg), never parsed from a string: there is
// no `html` option (it throws), and the page's code parses no string as HTML (innerHTML,
// outerHTML, insertAdjacentHTML, DOMParser) except in the one place that shows a lesson's own
// Markdown as the server rendered it (lessons.js `lessonMarkup`). Event handlers are functions
// (`onclick: fn`), never strings: the page's Content-Security-Policy allows no inline script.

export function el(tag, attributes = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "html" || name === "innerHTML") throw new Error(`el(${tag}): no markup from strings; pass text or nodes as children`);
    if (name === "dataset") Object.assign(node.dataset, value);
    else if (name === "style" && typeof value === "object") Object.assign(node.style, value);
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  append(node, children);
  return node;
}

function append(node, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.append(child instanceof Node ? child : String(child));
  }
}

export const SVG_NS = "http://www.w3.org/2000/svg";

export function svg(tag, attributes = {}, ...children) {
  const node = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === null || value === undefined) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}
