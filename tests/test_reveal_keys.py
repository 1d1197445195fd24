"""Teaching mode's number keys at every level (issue 30, item 7): at the beginner level the walk
is the tour, whose blocks past 0 are one "other blocks" stop, so a digit goes to the stop that
holds its block; a block the model does not have is said in the reveal bar, as text. Chromium,
on a tiny two-block character model."""

from __future__ import annotations

import pytest

from glassformer.workshop.server import create_app
from tests.test_workshop_page import TEXT, Workshop, char_lm
from tests.workshop_server import serving


@pytest.fixture
def workshop(browser, tmp_path):
    with serving(create_app({"tiny": char_lm()})) as url:
        opened = Workshop(browser, url, tmp_path)
        yield opened
        opened.close()


def test_a_digit_goes_to_the_tours_stop_of_its_block_or_says_there_is_none(workshop):
    workshop.open(model="tiny", text=TEXT, lock="1", level="beginner")
    page = workshop.page
    plan = page.locator(".step").evaluate_all("steps => steps.map(s => s.dataset.stage)")  # hidden ones too
    current = page.locator('.step[aria-current="step"]')
    count, note = page.locator(".reveal-count"), page.locator('.reveal-note[role="status"]')
    assert "tour.others" in plan and not any(s.startswith("blocks.1.") for s in plan)
    page.keyboard.press("1")  # block 1 is one of "the other blocks"
    assert current.get_attribute("data-stage") == "tour.others"
    assert count.inner_text() == f"step {plan.index('tour.others') + 1} of {len(plan)}"
    assert note.inner_text() == ""
    page.keyboard.press("7")  # two blocks: nothing moves, and the bar says why
    assert note.inner_text() == "no block 7: this model has 2 blocks (keys 0 to 1)"
    assert note.is_visible() and note.evaluate("e => e.children.length") == 0  # text, not markup
    assert current.get_attribute("data-stage") == "tour.others"
    page.keyboard.press("0")  # block 0's first stop; the note is answered
    first_of_block_0 = next(i for i, s in enumerate(plan) if s.startswith("blocks.0."))
    assert current.get_attribute("data-stage") == plan[first_of_block_0]
    assert note.inner_text() == ""


def test_a_digit_goes_to_its_blocks_first_step_in_the_full_walk(workshop):
    workshop.open(model="tiny", text=TEXT, lock="1", level="intermediate")
    page = workshop.page
    current = page.locator('.step[aria-current="step"]')
    page.keyboard.press("1")
    assert current.get_attribute("data-stage").startswith("blocks.1.")
    page.keyboard.press("2")
    assert page.inner_text(".reveal-note") == "no block 2: this model has 2 blocks (keys 0 to 1)"
    assert current.get_attribute("data-stage").startswith("blocks.1.")
