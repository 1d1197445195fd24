"""Every stage of every model family expands in a real browser: a decoder (RoPE, GQA,
SwiGLU), an encoder and an encoder-decoder with cross-attention. Each opened step draws its
whole tensor, the map as big as the traced tensor (rows: tokens; columns: tokens, or the
first features), and a stream step shows the logit lens at its layer, the library's rank.
The models, server and `Workshop` helper are `tests.test_workshop_page`'s."""

from __future__ import annotations

import pytest

from glassformer.inspect.logit_lens import logit_lens
from glassformer.workshop.walk.architecture import stages
from tests.test_workshop_page import TEXT, models, server  # noqa: F401 (fixtures)

FIRST_FEATURES = 64  # the page maps a feature axis's first 64 columns (stage_detail.js)


def expected_map(shape: list[int], trace_name: str) -> tuple[int, int]:
    """(rows, cols) of the map the page draws for a tensor of ``shape`` (no batch)."""
    rows, cols = shape[-2], shape[-1]
    per_token_columns = trace_name.endswith((".scores", ".pattern"))
    return rows, cols if per_token_columns else min(cols, FIRST_FEATURES)


@pytest.mark.parametrize("name", ["tiny", "encoder", pytest.param("seq2seq", marks=pytest.mark.slow)])
def test_every_stage_expands_with_its_whole_tensor(workshop, models, name):  # noqa: F811
    page, lm = workshop.page, models[name]
    workshop.open(model=name, text=TEXT, level="advanced")
    if name != "encoder":
        page.wait_for_selector('#lens[data-state="ready"]', state="attached")
    plan = [s for s in stages(lm.net) if s["trace"]]
    trace = lm.trace(TEXT, [s["trace"] for s in plan])
    lens = None if name == "encoder" else logit_lens(lm, TEXT, target=int(lm.logits(TEXT)[0, -1].argmax()))
    for stage in plan:
        line = page.locator(f'.block-line[data-group="{stage["group"]}"]')
        if line.count():
            line.click()  # open the stage's block
        page.click(f'[data-stage="{stage["id"]}"] > .step-head')
        detail = page.locator(f'.detail[data-stage="{stage["id"]}"][data-ready="1"]')
        detail.wait_for(state="attached")
        canvas = detail.locator(".hm-canvas").first
        shown = int(canvas.get_attribute("data-rows")), int(canvas.get_attribute("data-cols"))
        assert shown == expected_map(list(trace[stage["trace"]][0].shape), stage["trace"]), stage["id"]
        if lens is not None and stage["trace"] in lens.layers:
            layer = lens.layers.index(stage["trace"])
            here = detail.locator(".detail-lens")
            assert int(here.get_attribute("data-rank")) == int(lens.target_ranks[layer, -1]), stage["id"]
    workshop.close()
