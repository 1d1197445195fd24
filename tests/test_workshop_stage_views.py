"""The views under an opened step, in Chromium: one query's q · k sums (the neuron view,
static/js/views/query_key.js) and an FFN's most active neurons (static/js/views/ffn_neurons.js).

The server, its tiny models and the `Workshop` tab come from `tests.test_workshop_page`.
Every number the page prints is checked against `lm.trace` to the precision it prints:
the q · k × scale the page recomputes from q and k equals the traced scores (RoPE is in
the traced q and k; query head h reads kv head h // (h / g)), and the listed neurons are
`torch.topk` of the traced activation.
"""

from __future__ import annotations

import torch

from tests import test_workshop_page as page_tests
from tests.test_workshop_page import (
    LONG_TEXT,
    SHOWN_WEIGHT,
    TEXT,
    Workshop,
    shown_token,
)

# The page tests' fixtures: a server holding their tiny models (the tab: conftest's workshop).
models, server = page_tests.models, page_tests.server

SIGNIFICANT = 5e-4  # the page prints 4 significant digits: half a unit of the 4th, relative
FLOAT32 = 1e-5  # the page sums q ⊙ k in its own order
TOP = 10  # neurons per list (ffn_neurons.js)
MAX_KEYS = 48  # keys one query's table shows at most (query_key.js)


def printed(text: str) -> float:
    """A number as the page prints it (format.js `number`: a minus sign, maybe an exponent)."""
    return float(text.replace("\u2212", "-"))


def close_to(shown: float, expected: float) -> bool:
    return abs(shown - expected) <= SIGNIFICANT * abs(expected) + FLOAT32


def open_stage(workshop: Workshop, stage: str, view: str, **query) -> None:
    workshop.open(level="advanced", stage=stage, **query)
    workshop.page.wait_for_selector(f'.detail[data-stage="{stage}"][data-ready="1"] .hm-canvas')
    workshop.page.wait_for_selector(f'{view}[data-ready="1"]', state="attached")


def click_row(workshop: Workshop, row: int, rows: int) -> None:
    """Click the middle of row ``row`` of the opened step's heatmap."""
    canvas = workshop.page.locator(".detail .hm-canvas")
    canvas.evaluate("c => c.scrollIntoView({block: 'center'})")
    box = canvas.bounding_box()
    canvas.click(position={"x": box["width"] / 2, "y": (row + 0.5) * box["height"] / rows})


def traced_attention(lm, layer: str, text: str, **trace_options) -> dict[str, torch.Tensor]:
    names = [f"{layer}.{part}" for part in ("q", "k", "scores", "pattern")]
    trace = lm.trace(text, names, **trace_options)
    return {name.rsplit(".", 1)[1]: trace[name][0].float() for name in names}  # h t e, g s e, h t s, h t s


def assert_query_key_shown(
    workshop: Workshop, lm, traced, head: int, query: int, bias: bool, causal: bool, queries: str = TEXT
):
    """Each key's row: q·k and q·k × scale from the traced q and k, the traced score (with
    bias = score − q·k × scale), and the pattern's weight, as the page prints them."""
    page = workshop.page
    view = page.locator(f'.qk-view[data-ready="1"][data-head="{head}"][data-query="{query}"]')
    view.wait_for(state="attached")
    heads, kv_heads = traced["q"].shape[0], traced["k"].shape[0]
    kv_head = head // (heads // kv_heads)
    assert view.get_attribute("data-kv-head") == str(kv_head)
    q = traced["q"][head, query]  # e
    dots = traced["k"][kv_head] @ q  # s
    scale = lm.config.attn_scale if lm.config.attn_scale is not None else lm.config.d_head**-0.5
    scores, weights = traced["scores"][head, query], traced["pattern"][head, query]  # s, s
    assert torch.allclose(dots * scale, scores, atol=FLOAT32) == (not bias)  # a bias shows in the scores
    rows = view.locator(".qk-row")
    assert rows.count() == len(scores)
    assert view.locator("canvas.qk-q").get_attribute("width") == str(lm.config.d_head)
    for j in range(rows.count()):
        row = rows.nth(j)
        assert row.get_attribute("data-key") == str(j)
        assert close_to(printed(row.locator(".qk-dot").inner_text()), float(dots[j]))
        assert close_to(printed(row.locator(".qk-scaled").inner_text()), float(dots[j] * scale))
        assert abs(float(row.get_attribute("data-score")) - float(scores[j])) <= FLOAT32
        if bias:
            assert close_to(printed(row.locator(".qk-score").inner_text()), float(scores[j]))
            assert close_to(printed(row.locator(".qk-bias").inner_text()), float(scores[j] - dots[j] * scale))
        else:
            assert row.locator(".qk-bias").count() == 0
            assert close_to(printed(row.locator(".qk-scaled").inner_text()), float(scores[j]))
        weight = row.locator(".qk-weight").inner_text()
        if causal and j > query:
            assert weight == "masked" and float(weights[j]) == 0
        else:
            assert abs(float(weight) - float(weights[j])) <= SHOWN_WEIGHT * (1 + 1e-4)  # exact, rounded
    assert view.locator(".qk-query-token").inner_text() == f"\u2018{shown_token(queries[query])}\u2019"


def test_query_key_view_recomputes_the_traced_scores(workshop, models):
    lm, layer = models["tiny"], "blocks.1.attn"  # RoPE, 4 heads reading 2 kv heads
    open_stage(workshop, f"{layer}.scores", ".qk-view", model="tiny", text=TEXT)
    page = workshop.page
    traced = traced_attention(lm, layer, TEXT)
    last = len(TEXT) - 1
    assert_query_key_shown(workshop, lm, traced, head=0, query=last, bias=False, causal=True)  # the default

    head, query = 2, 9  # head 2 reads kv head 1 (2 // 2), not kv head 0 (2 % 2)
    page.click(f'.head-button[data-head="{head}"]')
    click_row(workshop, query, len(TEXT))
    assert_query_key_shown(workshop, lm, traced, head, query, bias=False, causal=True)
    workshop.part_shot(".detail", "query_key")

    page.select_option(".qk-query", "4")  # the select picks a query too; the pattern step keeps it
    assert_query_key_shown(workshop, lm, traced, head, 4, bias=False, causal=True)
    page.click(f'[data-stage="{layer}.pattern"] > .step-head')
    page.wait_for_selector(f'.detail[data-stage="{layer}.pattern"][data-ready="1"][data-head="{head}"]')
    click_row(workshop, 4, len(TEXT))
    assert_query_key_shown(workshop, lm, traced, head, 4, bias=False, causal=True)


def test_query_key_view_shows_the_t5_bias_apart(workshop, models):
    lm, layer = models["seq2seq"], "encoder.blocks.0.attn"  # T5 relative bias, bidirectional
    open_stage(workshop, f"{layer}.pattern", ".qk-view", model="seq2seq", text=TEXT)
    traced = traced_attention(lm, layer, TEXT)
    head, query = 1, 3
    workshop.page.click(f'.head-button[data-head="{head}"]')
    workshop.page.select_option(".qk-query", str(query))
    assert_query_key_shown(workshop, lm, traced, head, query, bias=True, causal=False)
    assert "bias = score" in workshop.page.locator(".qk-check").inner_text()
    workshop.part_shot(".detail", "query_key_bias")

    layer = "decoder.blocks.0.cross_attn"  # no bias: the decoder's start token reads the encoder
    workshop.page.click('.block-line[data-group="decoder.blocks.0"]')
    workshop.page.click(f'[data-stage="{layer}.scores"] > .step-head')
    workshop.page.wait_for_selector(f'.detail[data-stage="{layer}.scores"][data-ready="1"]')
    traced = traced_attention(lm, layer, TEXT)
    start = "".join(lm.inputs.labels(lm.inputs.decoder_ids(None)))
    assert_query_key_shown(workshop, lm, traced, head, 0, bias=False, causal=False, queries=start)


def test_a_long_input_shows_the_keys_with_the_largest_weights(workshop, models):
    lm, layer = models["tiny"], "blocks.0.attn"
    open_stage(workshop, f"{layer}.pattern", ".qk-view", model="tiny", text=LONG_TEXT)
    weights = traced_attention(lm, layer, LONG_TEXT)["pattern"][0, -1]  # s: head 0, the last query
    rows = workshop.page.locator(".qk-view .qk-row")
    keys = [int(k) for k in rows.evaluate_all("rows => rows.map(r => r.dataset.key)")]
    assert len(keys) == MAX_KEYS < len(LONG_TEXT) and keys == sorted(keys)
    hidden = torch.ones(len(LONG_TEXT), dtype=torch.bool)
    hidden[keys] = False
    assert float(weights[keys].min()) >= float(weights[hidden].max())  # the table's weights are exact
    assert f"of {len(LONG_TEXT)}" in workshop.page.locator(".qk-view .qk-clipped").inner_text()


def test_ffn_view_lists_the_most_active_neurons(workshop, models):
    lm, name = models["tiny"], "blocks.0.ffn.act"  # SwiGLU: silu(x W_gate) * x W_up, t f
    open_stage(workshop, name, ".ffn-view", model="tiny", text=TEXT)
    page = workshop.page
    act = lm.trace(TEXT, [name])[name][0].float()  # t f
    view = page.locator(".ffn-view")
    assert view.get_attribute("data-token") == str(len(TEXT) - 1)  # the last token first

    token = 6
    click_row(workshop, token, len(TEXT))
    page.wait_for_selector(f'.ffn-view[data-ready="1"][data-token="{token}"]', state="attached")
    expected = torch.topk(act[token], TOP)
    listed = view.locator('.ffn-top[data-kind="token"] .ffn-neuron')
    assert [int(n) for n in listed.evaluate_all("rows => rows.map(r => r.dataset.neuron)")] == (
        expected.indices.tolist()
    )
    for i, value in enumerate(expected.values.tolist()):
        assert close_to(printed(listed.nth(i).locator(".ffn-value").inner_text()), value)
    mean = torch.topk(act.abs().mean(dim=0), TOP)
    by_mean = view.locator('.ffn-top[data-kind="mean"] .ffn-neuron')
    assert [int(n) for n in by_mean.evaluate_all("rows => rows.map(r => r.dataset.neuron)")] == (
        mean.indices.tolist()
    )
    assert close_to(printed(by_mean.first.locator(".ffn-value").inner_text()), float(mean.values[0]))

    neuron = int(expected.indices[2])  # a neuron clicked: its value at every token
    listed.nth(2).click()
    profile = page.locator(f'.ffn-profile[data-neuron="{neuron}"]')
    profile.wait_for()
    columns = profile.locator(".ffn-col")
    values = [float(v) for v in columns.evaluate_all("cols => cols.map(c => c.dataset.value)")]
    assert torch.allclose(torch.tensor(values), act[:, neuron], atol=1e-6)
    workshop.part_shot(".detail", "ffn_neurons")

    columns.nth(2).click()  # a token clicked in the profile: the lists follow, the neuron stays
    page.wait_for_selector('.ffn-view[data-ready="1"][data-token="2"]', state="attached")
    assert view.get_attribute("data-neuron") == str(neuron)
    first = view.locator('.ffn-top[data-kind="token"] .ffn-neuron').first
    assert first.get_attribute("data-neuron") == str(int(act[2].argmax()))
