"""Steering the workshop in a real browser: the generation timeline, the head interventions
beyond ablation (scale, patch from a second prompt) and the compare view, each checked
against the library on the same input. The models, server and `Workshop` helper are
`tests.test_workshop_page`'s."""

from __future__ import annotations

import pytest
import torch

from glassformer.inspect.interventions import head_patch_hook, head_scale_hook
from glassformer.inspect.logit_lens import logit_lens, unembed
from glassformer.nn.kv_cache import KVCache
from tests.test_workshop_page import (  # noqa: F401 (fixtures)
    BROWSER_400,
    TEXT,
    Workshop,
    models,
    server,
)

PATCH_TEXT = "the dog ran on the rug"  # as many characters (tokens) as TEXT


def chip_ids(opened: Workshop) -> list[int]:
    return opened.page.locator("#tokens .chip").evaluate_all("cs => cs.map(c => Number(c.dataset.id))")


def drawn_token(opened: Workshop) -> int:
    return int(opened.page.locator(".pred-token").get_attribute("data-id"))


def test_the_timeline_scrubs_to_each_step_s_forward_pass(workshop, models):  # noqa: F811
    page, lm = workshop.page, models["tiny"]
    workshop.open(model="tiny", text=TEXT, level="intermediate", temperature=0)
    prompt = lm.tokenizer.encode(TEXT)
    generated = lm.generate(prompt, max_new_tokens=6, temperature=0)
    page.fill("#generate .gen-count", "6")
    page.click("#generate .gen-start")
    page.wait_for_selector("#generate .tl-step", state="attached")
    assert page.locator(".tl-step").count() == 6
    per_token = KVCache.bytes_per_token(lm.config)
    detail = page.locator(".tl-detail")
    assert f"the prefill: all {len(prompt)} rows computed" in detail.inner_text()
    page.locator('.tl-step[data-step="3"]').click()  # a bar of the chart
    workshop.wait_walks(2)
    assert chip_ids(workshop) == prompt + generated[:3]  # the pass that chose token 3
    assert page.locator("#tokens .chip-generated").count() == 3
    assert drawn_token(workshop) == generated[3]
    rows = len(prompt) + 3
    assert f"{len(prompt) + 2} rows reused from the cache, 1 new" in detail.inner_text()
    assert f"read {rows} tokens" in detail.inner_text()
    assert f"{rows * per_token / 1e3:.3g} kB" in detail.inner_text()
    page.fill("#generate .tl-slider", "5")  # scrub with the slider
    workshop.wait_walks(3)
    assert chip_ids(workshop) == prompt + generated[:5]
    assert drawn_token(workshop) == generated[5]
    assert page.locator(".gen-token.gen-current").get_attribute("data-step") == "5"
    workshop.shot("timeline", full_page=False)
    workshop.close()


def test_token_by_token_feeds_the_drawn_token_back_in(workshop, models):  # noqa: F811
    page, lm = workshop.page, models["tiny"]
    workshop.open(model="tiny", text=TEXT, level="beginner", temperature=0)
    prompt = lm.tokenizer.encode(TEXT)
    generated = lm.generate(prompt, max_new_tokens=3, temperature=0)
    for step in (1, 2):
        page.click("#prediction .pred-take")
        workshop.wait_walks(1 + step)
        assert chip_ids(workshop) == prompt + generated[:step]
        assert drawn_token(workshop) == generated[step]
    page.click("#run")  # a new run starts from the text again
    workshop.wait_walks(4)
    assert chip_ids(workshop) == prompt
    workshop.close()


def test_scaling_a_head_from_the_panel_moves_the_prediction_as_the_library_does(workshop, models):  # noqa: F811
    page, lm = workshop.page, models["tiny"]
    workshop.open(model="tiny", text=TEXT, level="advanced", temperature=0)
    page.fill("#interventions .iv-layer", "1")
    page.fill("#interventions .iv-head", "2")
    page.select_option("#interventions .iv-mode", "scale")
    page.fill("#interventions .iv-factor", "-3")
    page.click("#interventions .iv-add")
    workshop.wait_walks(2)
    assert workshop.query()["intervene"] == "1.2.scale*-3"
    assert workshop.texts("#interventions .iv-item") == ["layer 1, head 2: × -3 restore"]
    with lm.net.hooks({"blocks.1.attn.z": head_scale_hook([2], -3.0)}):
        expected = lm.logits(TEXT)[0, -1]
    assert drawn_token(workshop) == int(expected.argmax())
    workshop.close()


def test_patching_a_head_from_a_second_prompt_is_the_library_s_patch(workshop, models):  # noqa: F811
    page, lm = workshop.page, models["tiny"]
    assert len(lm.tokenizer.encode(PATCH_TEXT)) == len(lm.tokenizer.encode(TEXT))
    workshop.open(
        model="tiny",
        text=TEXT,
        level="advanced",
        temperature=0,
        intervene="0.1.patch,1.3.patch",
        patch_text=PATCH_TEXT,
    )
    source = lm.trace(PATCH_TEXT, ["blocks.0.attn.z", "blocks.1.attn.z"])
    hooks = {
        f"blocks.{i}.attn.z": head_patch_hook([h], source[f"blocks.{i}.attn.z"]) for i, h in ((0, 1), (1, 3))
    }
    with lm.net.hooks(hooks):
        expected = lm.logits(TEXT)[0, -1]
    assert drawn_token(workshop) == int(expected.argmax())
    assert page.input_value("#interventions .iv-patch-text") == PATCH_TEXT
    # a second prompt of another length: the server's message, shown, and nothing else lost
    page.fill("#interventions .iv-patch-text", "a cat")
    page.fill("#interventions .iv-layer", "0")
    page.select_option("#interventions .iv-mode", "patch")
    page.click("#interventions .iv-add")
    page.wait_for_selector('body[data-state="error"]', state="attached")
    assert "the same token count" in page.locator("#message").inner_text()
    workshop.shot("patch", full_page=False)
    workshop.close(allowed_errors=(BROWSER_400,))


def shown_rows(opened: Workshop, side: int) -> list[tuple[str, int, float]]:
    rows = opened.page.locator(f'.cmp-side[data-side="{side}"] .cmp-row')
    read = "rs => rs.map(r => [r.dataset.layer, Number(r.dataset.rank), Number(r.dataset.entropy)])"
    return rows.evaluate_all(read)


def expected_rows(lm, text: str) -> list[tuple[str, int, float]]:
    """Each layer's name, the final choice's rank there, and the entropy (nats) of the
    layer's stream read through the model's head, computed here from the trace."""
    final = int(lm.logits(text)[0, -1].argmax())
    lens = logit_lens(lm, text, target=final)
    trace = lm.trace(text, lens.layers)
    out = []
    for layer, name in enumerate(lens.layers):
        with torch.no_grad():
            p = torch.softmax(unembed(lm.net, trace[name]).float()[0, -1], -1)
        out.append((name, int(lens.target_ranks[layer, -1]), float(-(p * p.log()).sum())))
    return out


def test_compare_shows_two_models_lens_layer_by_layer(workshop, models):  # noqa: F811
    page = workshop.page
    workshop.open(model="tiny", text=TEXT, level="intermediate", compare="seq2seq")
    page.wait_for_selector('#compare[data-state="ready"]', state="attached")
    assert page.locator("#compare .cmp-side h3").all_inner_texts() == ["tiny", "seq2seq"]
    for side, name in enumerate(("tiny", "seq2seq")):
        shown, expected = shown_rows(workshop, side), expected_rows(models[name], TEXT)
        assert [(layer, rank) for layer, rank, _ in shown] == [(layer, rank) for layer, rank, _ in expected]
        assert [e for *_, e in shown] == pytest.approx([e for *_, e in expected], abs=1e-4)
    assert page.locator("#compare .cmp-line").count() == 4  # two charts, a line per model
    # the model beside itself: what an intervention changed
    page.select_option("#compare .cmp-model", "tiny")
    second = '#compare[data-state="ready"] .cmp-side[data-model="tiny"][data-side="1"]'
    page.wait_for_selector(second, state="attached")
    assert workshop.query()["compare"] == "tiny"
    page.locator("#compare-panel").scroll_into_view_if_needed()
    workshop.shot("compare", full_page=False)
    workshop.close()


def test_two_explanations_side_by_side_are_the_library_s(workshop, models):  # noqa: F811
    from glassformer.workshop.reading.explanations import explain

    page, lm = workshop.page, models["tiny"]
    workshop.open(model="tiny", text=TEXT, level="intermediate")
    page.select_option("#explain .xp-method >> nth=0", "ig")
    page.select_option("#explain .xp-method >> nth=1", "gxi")
    page.click("#explain .xp-go")
    page.wait_for_selector('#explain[data-state="ready"]', state="attached")
    rows = page.locator("#explain .xp-row")
    assert rows.count() == 2
    for i, method in enumerate(("ig", "gxi")):
        expected = explain(lm, TEXT, method)
        shown = rows.nth(i).locator(".xp-token").evaluate_all("ts => ts.map(t => t.dataset.score)")
        assert len(shown) == len(expected["tokens"]) == len(TEXT)
        assert [float(v) for v in shown] == pytest.approx(expected["scores"], rel=1e-5, abs=1e-7)
    workshop.shot("explain", full_page=False)
    workshop.close()
