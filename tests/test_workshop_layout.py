"""The workshop's pages at a phone's, a tablet's, a laptop's and a projector's width: no panel
overlaps another and nothing is cut off at the right edge.

One server and one browser tab visit the forward pass (beginner and advanced, its walk drawn),
the training lab and a lesson (alone, and with the code it links to opened beside it) at 390,
800, 1280 and 1920 px. On each the page's top-level
boxes (the header, each panel not inside another, the lessons' list) are read with the page
scrolled to the top, and checked:

* no two overlap by more than `TOLERANCE_PX`;
* none reaches past the viewport's right edge, and none is wider inside than its box
  (`scrollWidth`): what does not fit must scroll inside a box of its own;
* no element inside a panel reaches past the viewport's right edge unless a box that scrolls
  sideways (overflow-x: auto or scroll) holds it;
* the document itself does not scroll sideways.

A screenshot of each page at each width is kept for review (`tests.screenshots`).

At a phone's 390 px no page scrolls sideways (`document.documentElement.scrollWidth <=
innerWidth`) at any zoom of the overview either: the block, one head and its query · key table
(once 305 px too wide), nor the beginner's tour of a 31-block model (its chart of the stream's
length, once 30 px too wide), nor a prompt in Chinese, Arabic, Hindi and emoji.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
import torch

import glassformer as gf
from glassformer.workshop.server import create_app
from tests.conftest import tiny
from tests.test_bpe import gpt2
from tests.test_workshop_page import TEXT, Workshop, char_lm
from tests.workshop_server import serving

WIDTHS = (390, 800, 1280, 1920)
HEIGHT = 900
TOLERANCE_PX = 1
TINY = {"positions": "rope", "n_kv_heads": 2, "norm": "rmsnorm", "activation": "swiglu"}  # as the page tests'
WALKED = 'body[data-walks="1"][data-state="ready"]'
LESSON = "lessons?lesson=3"  # attention from similarity: equations, code, links into the walk and the code
PAGES = {  # name -> (path and query, what says the page is drawn, what to click then, what it shows)
    "beginner": ("?" + urlencode({"model": "tiny", "text": TEXT}), WALKED, None, None),
    "advanced": ("?" + urlencode({"model": "tiny", "text": TEXT, "level": "advanced"}), WALKED, None, None),
    "lab": ("lab", "#preset-estimate[data-seconds]", None, None),
    "lesson": (LESSON, ".lesson-text .katex", None, None),
    "lesson_code": (LESSON, ".lesson-text .katex", "a.code-link >> nth=0", "#code-panel[data-name]"),
}

# In the page: the boxes of the top-level panels, and what sticks out of them or of the viewport.
MEASURE = """() => {
  const width = document.documentElement.clientWidth;
  const shown = (node) => node.getClientRects().length > 0 && getComputedStyle(node).visibility !== "hidden";
  const name = (node) => node.tagName.toLowerCase() + (node.id ? "#" + node.id : "")
    + [...node.classList].map((c) => "." + c).join("");
  const scrollsSideways = (node) => ["auto", "scroll"].includes(getComputedStyle(node).overflowX);
  const panels = [...document.querySelectorAll("header.top, .panel, nav.lessons-nav")]
    .filter((node) => shown(node) && !node.parentElement.closest(".panel"));
  const boxes = panels.map((node) => {
    const r = node.getBoundingClientRect();
    const top = r.top + window.scrollY;
    return { name: name(node), left: r.left, right: r.right, top, bottom: top + r.height,
             wider: node.scrollWidth - node.clientWidth };
  });
  const outside = [];
  for (const panel of panels) {
    const told = []; // the outermost element that sticks out stands for what it holds
    for (const node of panel.querySelectorAll("*")) {
      if (!shown(node) || node.ownerSVGElement) continue; // a picture's parts: its <svg> clips them
      if (told.some((outer) => outer.contains(node))) continue;
      const right = node.getBoundingClientRect().right;
      if (right <= width + 1) continue;
      let holder = node.parentElement;
      while (holder !== panel && !scrollsSideways(holder)) holder = holder.parentElement;
      if (holder !== panel || scrollsSideways(panel)) continue;
      told.push(node);
      outside.push(`${name(node)} in ${name(panel)} ends at ${Math.round(right)} px`);
    }
  }
  return { width, documentWider: document.documentElement.scrollWidth - width, boxes, outside };
}"""


PHONE = 390
DEEP = 31  # blocks: SmolLM2's 30 and the embedding are as many bars in the tour's chart
SCRIPTS = "今天天气很好 🌊🎉 مرحبا بالعالم नमस्ते दुनिया"  # read by GPT-2's byte-level BPE
QUERY_KEY = '#overview .qk-view[data-ready="1"]'
PHONE_PAGES = {  # name -> (the page's query, what says it is drawn)
    "beginner_deep": ({"model": "deep", "text": TEXT}, WALKED),
    "advanced_deep": ({"model": "deep", "text": TEXT, "level": "advanced"}, WALKED),
    "zoom_block": ({"model": "tiny", "text": TEXT, "zoom": "blocks.1"}, "#overview .ov-head canvas"),
    "zoom_head": ({"model": "tiny", "text": TEXT, "zoom": "blocks.1.attn:2"}, QUERY_KEY),
    "zoom_query_key": ({"model": "tiny", "text": TEXT, "zoom": "blocks.1.attn:2:2"}, QUERY_KEY),
    "scripts_query_key": ({"model": "bytes", "text": SCRIPTS, "zoom": "blocks.0.attn:1:4"}, QUERY_KEY),
}


@pytest.fixture(scope="module")
def workshop(browser, tmp_path_factory):
    runs = tmp_path_factory.mktemp("runs")
    torch.manual_seed(0)
    models = {
        "tiny": char_lm(**TINY),
        "deep": char_lm(**TINY, n_layers=DEEP),
        "bytes": gf.LanguageModel(gf.build(tiny(vocab_size=50_257, max_seq_len=128)).eval(), gpt2()),
    }
    with serving(create_app(models, runs_root=runs)) as url:
        opened = Workshop(browser, url, tmp_path_factory.mktemp("layout"))
        yield opened
        opened.close()


def overlaps(boxes: list[dict]) -> list[str]:
    """Each pair of boxes that share more than `TOLERANCE_PX` both across and down."""
    found = []
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            across = min(a["right"], b["right"]) - max(a["left"], b["left"])
            down = min(a["bottom"], b["bottom"]) - max(a["top"], b["top"])
            if across > TOLERANCE_PX and down > TOLERANCE_PX:
                found.append(f"{a['name']} and {b['name']} overlap by {across:.0f} x {down:.0f} px")
    return found


def cut_off(measured: dict) -> list[str]:
    """Each box past the viewport's right edge or wider inside than it is, each element inside a
    panel past that edge with nothing that scrolls to hold it, and the document if it scrolls."""
    width = measured["width"]
    found = [f"the document is {measured['documentWider']} px wider than the window"] * (
        measured["documentWider"] > TOLERANCE_PX
    )
    for box in measured["boxes"]:
        if box["right"] > width + TOLERANCE_PX or box["left"] < -TOLERANCE_PX:
            found.append(f"{box['name']} spans {box['left']:.0f}..{box['right']:.0f} px of {width}")
        if box["wider"] > TOLERANCE_PX:
            found.append(f"{box['name']} holds {box['wider']} px more than it shows")
    return found + measured["outside"]


@pytest.mark.parametrize("width", WIDTHS)
def test_no_panel_overlaps_another_or_is_cut_off(workshop, width):
    page = workshop.page
    page.set_viewport_size({"width": width, "height": HEIGHT})
    problems = []
    for name, (path, drawn, click, shown) in PAGES.items():
        page.goto(workshop.base + path)
        page.wait_for_selector(drawn, state="attached")
        if click:
            page.click(click)
            page.wait_for_selector(shown, state="visible")
        page.evaluate("window.scrollTo(0, 0)")
        measured = page.evaluate(MEASURE)
        assert len(measured["boxes"]) >= 2, (name, measured["boxes"])  # the header and a panel at least
        workshop.shot(f"layout_{name}_{width}")
        problems += [
            f"{name} at {width} px: {found}" for found in overlaps(measured["boxes"]) + cut_off(measured)
        ]
    assert problems == [], "\n".join(problems)


def test_a_phone_never_scrolls_sideways(workshop):
    """At 390 px the document is no wider than the window on every page and every zoom: what is
    wider (a map, the query · key table) scrolls inside its own box."""
    page = workshop.page
    page.set_viewport_size({"width": PHONE, "height": HEIGHT})
    visits = [(name, "?" + urlencode(query), drawn) for name, (query, drawn) in PHONE_PAGES.items()]
    visits += [(name, path, drawn) for name, (path, drawn, *_) in PAGES.items() if name in ("lab", "lesson")]
    wider = {}
    for name, path, drawn in visits:
        page.goto(workshop.base + path)
        page.wait_for_selector(drawn, state="attached")
        page.wait_for_selector(f"{WALKED}, #preset-estimate, .lesson-text", state="attached")
        measured = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        if measured[0] > measured[1]:
            wider[name] = measured
        workshop.shot(f"phone_{name}")
    assert wider == {}, f"pages wider than the phone ([scrollWidth, innerWidth]): {wider}"
