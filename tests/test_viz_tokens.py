"""Token labels are checked in one place (`glassformer.viz.data.check_tokens`): a figure
and an HTML view given the same bad tokens fail with the same error."""

from __future__ import annotations

import pytest
import torch

from glassformer.viz import HeadView, ModelView, NeuronView, TokenView, figures

T = 4
PATTERNS = torch.full((2, T, T), 1 / T)  # h t s: the heads of one layer
GOOD = ["The", " cat", " sat", " on"]
BAD_TOKENS = {
    "one string": "The cat sat on",
    "too few": GOOD[:3],
    "too many": [*GOOD, " the"],
    "not a list": 4,
}


def error_of(build) -> tuple[type, str]:
    with pytest.raises((TypeError, ValueError)) as raised:  # the tests compare type and message
        build()
    return type(raised.value), str(raised.value)


@pytest.mark.parametrize("tokens", BAD_TOKENS.values(), ids=BAD_TOKENS.keys())
def test_query_tokens_fail_alike_in_figures_and_html_views(tokens):
    figure = error_of(lambda: figures.attention_grid(PATTERNS, tokens))
    assert figure[0] is ValueError
    assert error_of(lambda: HeadView(PATTERNS, tokens)) == figure
    assert error_of(lambda: ModelView(PATTERNS, tokens)) == figure
    q = k = torch.randn(T, 8)  # t e, s e
    assert error_of(lambda: NeuronView(q, k, torch.zeros(T, T), PATTERNS[0], tokens)) == figure


@pytest.mark.parametrize("tokens", BAD_TOKENS.values(), ids=BAD_TOKENS.keys())
def test_key_tokens_fail_alike_in_figures_and_html_views(tokens):
    cross = torch.full((2, 3, T), 1 / T)  # h t s: 3 queries over 4 keys
    queries = GOOD[:3]
    figure = error_of(lambda: figures.attention_grid(cross, queries, key_tokens=tokens))
    assert figure[0] is ValueError
    assert error_of(lambda: figures.attention_heatmap(cross[0], queries, key_tokens=tokens)) == figure
    assert error_of(lambda: HeadView(cross, queries, tokens)) == figure
    assert error_of(lambda: ModelView(cross, queries, tokens)) == figure


@pytest.mark.parametrize("tokens", BAD_TOKENS.values(), ids=BAD_TOKENS.keys())
def test_per_token_scores_fail_alike_as_bars_and_as_a_token_view(tokens):
    scores = [0.5, -1.0, 0.25, 2.0]
    bars = error_of(lambda: figures.attribution_bars(tokens, scores))
    assert bars[0] is ValueError
    assert error_of(lambda: TokenView(tokens, scores)) == bars


def test_the_message_says_what_to_pass():
    _, message = error_of(lambda: HeadView(PATTERNS, GOOD[:3]))
    assert message == "3 tokens for 4 query positions: pass one label per position (trace.tokens)"
    _, message = error_of(lambda: HeadView(PATTERNS, "The cat sat on"))
    assert message == "tokens must be a list of token strings (trace.tokens), not one string"
