// Teaching mode's slide (issue 30, item 7): the room a projector's window leaves for the
// current step between the sticky header and the reveal bar, so that the step's words and its
// picture are in view together at 1280x720 as at 1920x1080. The page is zoomed in teaching mode
// (style.css), so a length here is in the body's CSS px: the window's height divided by the zoom.
// markRoom() writes the room into CSS variables (the card's height, the scroll padding that keeps
// a step scrolled into view off the header and the bar); mapRoom() sizes an opened step's map.

const MARGIN = 16; // px between the card and the header or the bar
const MAP_CHROME = 150; // px around a map's cells: the keys' labels, the colour bar, the card's padding
const MIN_CELLS = 80; // px: a map never shrinks below this, however small the window

/** Whether the page is in teaching mode. */
export function teaching() {
  return document.querySelector('.controls[data-locked="true"]') !== null;
}

function zoom() {
  return parseFloat(getComputedStyle(document.body).zoom) || 1;
}

/** The height a slide may take, in the body's CSS px. */
function room() {
  const header = document.querySelector(".top")?.offsetHeight ?? 0;
  const bar = document.getElementById("reveal")?.offsetHeight ?? 0;
  return window.innerHeight / zoom() - header - bar - 2 * MARGIN;
}

/** Teaching mode: --slide-room (a current opened step's height) and the page's scroll padding. */
export function markRoom() {
  if (!teaching()) return;
  const root = document.documentElement;
  const z = zoom();
  root.style.setProperty("--slide-room", `${Math.max(MIN_CELLS, room())}px`);
  root.style.setProperty("--slide-top", `${((document.querySelector(".top")?.offsetHeight ?? 0) + MARGIN / 2) * z}px`);
  root.style.setProperty("--slide-bottom", `${((document.getElementById("reveal")?.offsetHeight ?? 0) + MARGIN / 2) * z}px`);
}

/** The room for the cells of the map in ``detail`` (an opened step) when it is teaching mode's
 * current step: {maxWidth, maxHeight} in px; {} elsewhere. */
export function mapRoom(detail) {
  const card = detail.closest('.step[aria-current="step"]');
  if (!teaching() || !card) return {};
  // beside the words (the detail a part of the card's grid), or under them on a narrow window
  const beside = getComputedStyle(detail).display === "contents";
  const words = beside ? 0 : (detail.getBoundingClientRect().top - card.getBoundingClientRect().top) / zoom();
  return {
    maxHeight: Math.max(MIN_CELLS, room() - words - MAP_CHROME),
    maxWidth: Math.max(MIN_CELLS, card.clientWidth * 0.55 - 110),
  };
}

window.addEventListener("resize", markRoom);
