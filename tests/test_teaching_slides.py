"""Teaching mode as slides (issue 30, item 7), in Chromium on a tiny character model: at a
projector's 1280x720 and 1920x1080 every text of the walk and the reveal bar is at least
20 px, and the current step (its words, and when opened its picture: the attention map) is
in the window together, not under the reveal bar; a phone (390 px) has no horizontal
overflow in any level, with teaching mode and without, and the bar's buttons all in view."""

from __future__ import annotations

import pytest

from glassformer.workshop.server import create_app
from tests.screenshots import keep_screenshot
from tests.test_workshop_page import TEXT, char_lm
from tests.workshop_server import log_in, serving, wait_until

ATTENTION = "blocks.0.attn.pattern"
SLIDES = [(1280, 720), (1920, 1080)]
PHONE = 390

# Every visible text node's element in the walk panel and the reveal bar: its font size in CSS
# px as the window shows it (the computed size times any zoom on the way up). A formula's text
# counts at the formula's size (KaTeX's sub- and superscripts are smaller by design).
TEXT_SIZES = r"""() => {
  const parts = [document.querySelector("#walk").closest(".panel"), document.querySelector("#reveal")];
  const out = [];
  for (const part of parts) {
    const walker = document.createTreeWalker(part, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      // a formula counts at its own size: its sub- and superscripts are smaller by design
      const element = node.parentElement.closest(".katex") ?? node.parentElement;
      if (!node.textContent.replace(/[\u200b\s]/g, "")) continue;
      if (!element.checkVisibility({ visibilityProperty: true })) continue;
      if (element.closest("select") && !element.matches("select")) continue; // a closed list's options
      const box = element.getBoundingClientRect();
      if (!box.width || !box.height) continue;
      let zoom = 1;
      for (let e = element; e; e = e.parentElement) zoom *= parseFloat(getComputedStyle(e).zoom) || 1;
      const size = parseFloat(getComputedStyle(element).fontSize);
      out.push({ text: node.textContent.trim().slice(0, 40), size: Math.round(size * zoom * 10) / 10,
                 tag: element.tagName.toLowerCase(), cls: element.className.baseVal ?? element.className });
    }
  }
  return out;
}"""

# The current step's card, its picture and the reveal bar, in the window's CSS px.
BOXES = """() => {
  const box = (e) => { if (!e) return null; const r = e.getBoundingClientRect();
    return { top: r.top, left: r.left, bottom: r.bottom, right: r.right }; };
  const card = document.querySelector('.step[aria-current="step"]');
  const picture = card?.querySelector(".detail .hm-canvas, .detail .ac-overview-canvas");
  return { card: box(card), picture: box(picture), bar: box(document.querySelector("#reveal")),
           window: { width: innerWidth, height: innerHeight } };
}"""


@pytest.fixture(scope="module")
def url():
    with serving(create_app({"tiny": char_lm()})) as base:
        yield base


def open_page(browser, url: str, width: int, height: int, **query):
    page = browser.new_page(viewport={"width": width, "height": height})
    log_in(page, url)
    link = "&".join(f"{key}={value}" for key, value in {"model": "tiny", "text": TEXT, **query}.items())
    page.goto(f"{url}?{link}")
    page.wait_for_selector('body[data-walks="1"][data-state="ready"]', state="attached")
    return page


def shot(page, tmp_path, name: str) -> None:
    path = tmp_path / f"teaching_{name}.png"
    page.screenshot(path=str(path))
    assert path.stat().st_size > 1000
    keep_screenshot(path)


def inside(inner: dict, outer: dict) -> bool:
    return (
        inner["top"] >= outer["top"] - 0.5
        and inner["left"] >= outer["left"] - 0.5
        and inner["bottom"] <= outer["bottom"] + 0.5
        and inner["right"] <= outer["right"] + 0.5
    )


@pytest.mark.parametrize("size", SLIDES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("level", ["intermediate", "advanced"])
def test_the_opened_attention_step_is_a_slide(browser, url, tmp_path, size, level):
    width, height = size
    page = open_page(browser, url, width, height, lock=1, level=level, stage=ATTENTION)
    try:
        current = "document.querySelector('.step[aria-current=\"step\"]')?.dataset.stage"
        wait_until(page, f'{current} === "{ATTENTION}"')
        page.wait_for_selector('.step[aria-current="step"] .detail[data-ready="1"]', state="attached")
        page.wait_for_timeout(300)  # the smooth scroll to the current step ends
        sizes = page.evaluate(TEXT_SIZES)
        boxes = page.evaluate(BOXES)
        shot(page, tmp_path, f"{level}_{width}x{height}")
        print(level, size, "min font", min(s["size"] for s in sizes), boxes)
        small = [s for s in sizes if s["size"] < 20]
        assert not small, f"texts under 20 px: {small[:10]}"
        screen = {"top": 0, "left": 0, "bottom": boxes["window"]["height"], "right": boxes["window"]["width"]}
        above_bar = {**screen, "bottom": boxes["bar"]["top"]}
        assert boxes["picture"], "the opened step shows its attention map"
        for part in ("card", "picture"):
            assert inside(boxes[part], above_bar), f"the {part} {boxes[part]} is not above {above_bar}"
        assert inside(boxes["bar"], screen)
    finally:
        page.close()


@pytest.mark.parametrize("level", ["beginner", "intermediate", "advanced"])
@pytest.mark.parametrize("lock", [True, False], ids=["teaching", "free"])
def test_a_phone_has_no_horizontal_overflow(browser, url, tmp_path, level, lock):
    page = open_page(browser, url, PHONE, 844, level=level, **({"lock": 1} if lock else {}))
    try:
        wide = page.evaluate("document.documentElement.scrollWidth")
        print(level, lock, "scrollWidth", wide)
        shot(page, tmp_path, f"phone_{level}_{'teaching' if lock else 'free'}")
        assert wide <= PHONE, f"the page is {wide} px wide in a {PHONE} px window"
        if lock:
            for button in page.locator("#reveal button").all():
                box = button.bounding_box()
                inside_phone = box and box["x"] >= 0 and box["x"] + box["width"] <= PHONE
                assert inside_phone, f"{button.inner_text()} is cut off"
    finally:
        page.close()
