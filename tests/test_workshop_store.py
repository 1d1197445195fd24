"""The page as a store (state.js): one store, updates merged, each subscriber told once per
update that changes a key it reads; main.js's table of panels redraws only what a change
touches."""

from __future__ import annotations

import pytest

from tests.test_workshop_page import TEXT, char_lm

PANELS = ["walk", "overview", "tokens", "architecture", "prediction"]

STORE = """async () => {
  const { createStore } = await import("./static/js/core/state.js");
  const store = createStore({ a: 1, b: 2, c: 3 });
  const calls = [];
  store.subscribe(["a"], (values) => calls.push(["a", values.a]));
  store.subscribe(["a", "b"], (values) => calls.push(["ab", values.a, values.b]));
  store.update({ a: 5, b: 6 }); // each subscriber once
  store.update({ c: 9 }); // nobody reads c
  store.update({ a: 5 }); // unchanged: nobody is told
  return { calls, values: store.get() };
}"""

# each panel's first element marked; a panel drawn again replaces it, and loses the mark
MARK = """(ids) => {
  for (const id of ids) document.getElementById(id).firstElementChild.dataset.mark = "1";
}"""
MARKED = """(ids) => Object.fromEntries(ids.map((id) =>
  [id, document.getElementById(id).firstElementChild?.dataset.mark === "1"]))"""


@pytest.fixture(scope="module")
def models():
    return {"decoder": char_lm()}


@pytest.fixture(scope="module")
def app(models):
    from glassformer.workshop.server import create_app

    return create_app(models)


def test_the_store_merges_and_tells_each_subscriber_once(workshop):
    workshop.open(model="decoder", text=TEXT, level="intermediate")
    out = workshop.page.evaluate(STORE)
    assert out["calls"] == [["a", 5], ["ab", 5, 6]]
    assert out["values"] == {"a": 5, "b": 6, "c": 9}


def test_a_change_redraws_only_the_panels_that_read_it(workshop):
    page = workshop.page
    workshop.open(model="decoder", text=TEXT, level="intermediate")
    page.wait_for_selector('#lens[data-state="ready"]', state="attached")  # its lens redraws the walk
    page.evaluate(MARK, PANELS)  # a panel drawn again loses its mark
    page.locator("#overview .ov-bar").nth(1).click()  # the zoom: the overview alone
    assert workshop.query()["zoom"] == "blocks.1"
    drawn_again = [panel for panel, kept in page.evaluate(MARKED, PANELS).items() if not kept]
    assert drawn_again == ["overview"]
    page.evaluate(MARK, PANELS)
    page.click('[data-stage="blocks.0.attn.pattern"] > .step-head')  # a step opened: the walk alone
    assert workshop.query()["stage"] == "blocks.0.attn.pattern"
    drawn_again = [panel for panel, kept in page.evaluate(MARKED, PANELS).items() if not kept]
    assert drawn_again == ["walk"]
