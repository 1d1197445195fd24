"""A long input's attention in Chromium: past 128 tokens an opened attention step is drawn as
an overview of the whole map and a detail window on it (static/js/views/attention_canvas.js),
never an element per entry.

The server holds one tiny Llama-style model that reads characters, with room for 320 of
them; the `Workshop` tab comes from `tests.test_workshop_page`. The detail window's values
are checked against `lm.trace` to the precision the page prints.
"""

from __future__ import annotations

import re

import pytest

from glassformer.workshop.server import create_app
from tests.test_workshop_page import SHOWN_WEIGHT, WEIGHT_STEP, Workshop, char_lm, shown_token
from tests.workshop_server import serving

N_TOKENS = 300  # characters: one token each
MAX_SEQ_LEN = 320
LONG_TEXT = ("the cat sat on the mat and the dog sat on the log, said the old man. " * 5)[:N_TOKENS]
STAGE = "blocks.0.attn.pattern"
WINDOW = 40  # entries along each axis of the detail window (attention_canvas.js)
MOST_ELEMENTS = 5000  # the opened step's DOM, whatever the input's length


@pytest.fixture(scope="module")
def models():
    lm = char_lm(positions="rope", n_kv_heads=2, norm="rmsnorm", activation="swiglu", max_seq_len=MAX_SEQ_LEN)
    return {"tiny": lm}


@pytest.fixture(scope="module")
def server(models):
    with serving(create_app(models)) as url:
        yield url


def window(workshop: Workshop) -> tuple[int, int]:
    """The detail window's first query and first key."""
    view = workshop.page.locator(".attention-canvas")
    return int(view.get_attribute("data-row0")), int(view.get_attribute("data-col0"))


def shown_weight(text: str) -> float:
    return float(re.search(r"weight ([0-9.]+)$", text).group(1))


def test_a_long_inputs_attention_is_an_overview_and_a_detail_window(workshop, models):
    lm = models["tiny"]
    assert len(lm.tokenizer.encode(LONG_TEXT)) == N_TOKENS
    workshop.open(model="tiny", text=LONG_TEXT, level="advanced", stage=STAGE)
    page = workshop.page
    page.wait_for_selector(f'.detail[data-stage="{STAGE}"][data-ready="1"] .attention-canvas')
    page.wait_for_selector('.qk-view[data-ready="1"]', state="attached")
    weights = lm.trace(LONG_TEXT, [STAGE])[STAGE][0, 0]  # t s: head 0
    detail = page.locator(".detail")
    assert detail.locator(".hm-canvas").count() == 0  # no full-size heatmap
    assert detail.evaluate("d => d.querySelectorAll('*').length") < MOST_ELEMENTS

    # the overview: the whole map pooled to at most 180 pixels a side, painted
    overview = detail.locator(".ac-overview-canvas")
    assert overview.get_attribute("aria-label").startswith(f"Overview of the whole map, {N_TOKENS} queries")
    assert int(overview.get_attribute("width")) <= 180
    pixels = "c => Array.from(c.getContext('2d').getImageData(0, 0, c.width, c.height).data)"
    rgba = overview.evaluate(pixels)
    assert min(v for i, v in enumerate(rgba) if i % 4 < 3) < 200  # coloured, not blank

    # the window starts at the last queries and keys, each labelled with its token
    row0, col0 = window(workshop)
    assert (row0, col0) == (N_TOKENS - WINDOW, N_TOKENS - WINDOW)
    row_labels = detail.locator(".ac-detail .hm-rows .hm-label")
    assert row_labels.count() == WINDOW and detail.locator(".ac-detail .hm-cols .hm-label").count() == WINDOW
    assert row_labels.first.inner_text() == shown_token(LONG_TEXT[row0])

    # a click on the overview centres the window there
    overview.evaluate("c => c.scrollIntoView({block: 'center'})")
    box = overview.bounding_box()
    overview.click(position={"x": 0.25 * box["width"], "y": 0.5 * box["height"]})
    row0, col0 = window(workshop)
    assert abs(row0 - (N_TOKENS // 2 - WINDOW // 2)) <= 1 and abs(col0 - (N_TOKENS // 4 - WINDOW // 2)) <= 1
    assert row_labels.first.inner_text() == shown_token(LONG_TEXT[row0])
    page.keyboard.press("ArrowDown")  # the overview has the focus: the arrow keys move the window
    assert window(workshop) == (row0 + 8, col0)
    row0 += 8

    # hovering the detail window reads the traced weight of the entry under the pointer
    canvas = detail.locator(".ac-detail-canvas")
    cell = canvas.bounding_box()["width"] / WINDOW
    query, key = row0 + 20, col0 + 5
    canvas.hover(position={"x": (key - col0 + 0.5) * cell, "y": (query - row0 + 0.5) * cell})
    tip = detail.locator(".hm-tip")
    tip.wait_for(state="visible")
    assert (tip.get_attribute("data-row"), tip.get_attribute("data-col")) == (str(query), str(key))
    assert f"query \u2018{shown_token(LONG_TEXT[query])}\u2019 ({query})" in tip.inner_text()
    assert abs(shown_weight(tip.inner_text()) - float(weights[query, key])) <= WEIGHT_STEP + SHOWN_WEIGHT

    # the keyboard reaches the detail window: a cursor reads each entry; Enter picks its query
    canvas.focus()
    page.keyboard.press("ArrowRight")  # the first press shows the cursor on the window's first entry
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    readout = detail.locator(".ac-readout").inner_text()
    assert f"({row0 + 1}) \u2192 key \u2018{shown_token(LONG_TEXT[col0 + 1])}\u2019 ({col0 + 1})" in readout
    assert abs(shown_weight(readout) - float(weights[row0 + 1, col0 + 1])) <= WEIGHT_STEP + SHOWN_WEIGHT
    page.keyboard.press("Enter")
    page.wait_for_selector(f'.qk-view[data-ready="1"][data-query="{row0 + 1}"]', state="attached")
    canvas.click(position={"x": cell / 2, "y": (query - row0 + 0.5) * cell})  # a click picks a query too
    page.wait_for_selector(f'.qk-view[data-ready="1"][data-query="{query}"]', state="attached")

    workshop.part_shot(".detail .detail-body", "long_attention")


def test_a_long_inputs_lines_become_a_map(workshop, models):
    """A beginner's "which words look at which" would draw thousands of lines past 128
    tokens: it draws the head-averaged weights as the same overview and detail window."""
    lm = models["tiny"]
    workshop.open(model="tiny", text=LONG_TEXT, level="beginner", layer=1)
    page = workshop.page
    page.wait_for_selector('#lines[data-ready="1"][data-layer="1"] .attention-canvas', state="attached")
    lines = page.locator("#lines")
    assert lines.locator("line").count() == 0 and "Too many tokens for lines" in lines.inner_text()
    mean = lm.trace(LONG_TEXT, ["blocks.1.attn.pattern"])["blocks.1.attn.pattern"][0].mean(dim=0)  # t s
    canvas = lines.locator(".ac-detail-canvas")
    canvas.evaluate("c => c.scrollIntoView({block: 'center'})")
    cell = canvas.bounding_box()["width"] / WINDOW
    row0, col0 = N_TOKENS - WINDOW, N_TOKENS - WINDOW
    canvas.hover(position={"x": 2.5 * cell, "y": 30.5 * cell})
    tip = lines.locator(".hm-tip")
    tip.wait_for(state="visible")
    query, key = row0 + 30, col0 + 2
    assert (tip.get_attribute("data-row"), tip.get_attribute("data-col")) == (str(query), str(key))
    assert abs(float(tip.get_attribute("data-value")) - float(mean[query, key])) <= WEIGHT_STEP
    assert tip.inner_text().startswith(f"\u2018{shown_token(LONG_TEXT[query])}\u2019 looks at")
    page.mouse.move(0, 0)
    workshop.shot("long_lines", full_page=False)
