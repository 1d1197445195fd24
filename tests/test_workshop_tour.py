"""The beginner's tour says what every stop's numbers are, in the model's own sizes, read from its
config (`workshop/walk/model_words.stop_words`), never written for one model: SmolLM2's
576 -> 1,536 -> 576 and its 9 query heads sharing 3 key/value heads, MiniLM's 12 heads of 32.
The stop of "the other blocks" words its chart as the chart reads: a stream whose mean length
shrinks is said to shrink (MiniLM's shrinks, 8.62 to 7.46, and once read "the stream grows")."""

from __future__ import annotations

import re

import pytest
import torch

from glassformer.config import ModelConfig
from glassformer.workshop.server import create_app
from glassformer.workshop.walk.model_words import stop_words, tour_words
from tests.test_workshop_page import BROWSER_400, TEXT, char_lm
from tests.workshop_server import serving

# SmolLM2-135M's and all-MiniLM-L6-v2's sizes, as their checkpoints' configs give them
SMOLLM2 = ModelConfig(
    vocab_size=49_152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, d_ff=1536,
    positions="rope", norm="rmsnorm", activation="swiglu",
)  # fmt: skip
MINILM = ModelConfig(
    family="encoder", vocab_size=30_522, d_model=384, n_layers=6, n_heads=12, d_ff=1536,
    max_seq_len=512, norm_placement="post", activation="gelu", mlm_head=False,
)  # fmt: skip
LARGE = 100.0  # a post-norm encoder's embeddings scaled up: its first point of the chart is large,
# and every block ends in a norm, so the stream shrinks


def test_the_stops_state_smollm2_s_sizes():
    stops = stop_words(SMOLLM2)
    assert stops["ffn.out"].endswith("576 → 1,536 → 576.")
    assert "W_gate and W_up, two matrices of 576 × 1,536" in stops["ffn.hidden"]
    assert "each of the 1,536 gate numbers" in stops["ffn.act"]
    assert "into 9 queries of 64 numbers, one per head (9 × 64 = 576)" in stops["attn.q"]
    assert stops["attn.k"].startswith("W_K makes 3 keys of 64 numbers for each token (3 × 64 = 192)")
    assert "each key serves 3 of the 9 query heads (grouped-query attention, GQA)" in stops["attn.k"]
    assert "times 1/√64 = 0.125" in stops["attn.scores"]
    assert "9 × 64 = 576 numbers per token" in stops["attn.out"] and "W_O (576 × 576)" in stops["attn.out"]
    assert "each an id from 0 to 49,151 (this model knows 49,152)" in stops["tokens"]


def test_the_stops_state_minilm_s_sizes():
    stops = stop_words(MINILM)
    assert (
        stops["ffn.hidden"]
        == "W_up (384 × 1,536) stretches each token's 384 numbers to 1,536, 4 times as many."
    )
    assert stops["ffn.out"].endswith("384 → 1,536 → 384.")
    assert "12 keys of 32 numbers for each token (12 × 32 = 384): one key per head" in stops["attn.k"]
    assert "each of the 512 positions" in stops["embed.positions"]
    assert "post-norm" in tour_words(MINILM)["shrinks"]  # why a post-norm stream may shrink


@pytest.fixture(scope="module")
def models():
    encoder = char_lm(family="encoder", norm_placement="post", mlm_head=False)
    with torch.no_grad():
        encoder.net.stack.embed.token.weight.mul_(LARGE)
    return {
        "decoder": char_lm(
            d_model=24,
            n_heads=6,
            n_kv_heads=2,
            d_ff=72,
            positions="rope",
            norm="rmsnorm",
            activation="swiglu",
        ),
        "encoder": encoder,
        "seq2seq": char_lm(family="encoder_decoder", positions="t5_relative", decoder_start_token_id=0),
    }


@pytest.fixture(scope="module")
def server(models):
    with serving(create_app(models)) as url:
        yield url


def stop_texts(page) -> dict[str, str]:
    stops = page.locator("#walk .tour-stop")
    return dict(
        zip(stops.evaluate_all("ss => ss.map(s => s.dataset.stage)"), stops.all_inner_texts(), strict=True)
    )


@pytest.mark.parametrize("model", ["decoder", "encoder", "seq2seq"])
def test_every_stop_says_what_its_numbers_are(workshop, models, model):
    workshop.open(model=model, text=TEXT)
    stops = stop_texts(workshop.page)
    t = len(models[model].tokenizer.encode(TEXT))
    for stage, text in stops.items():
        words = text.split("\n", 1)[-1]  # its words, after its number and title
        assert re.search(r"\d", words), (stage, text)
    if model != "decoder":  # an encoder's tokens see every token
        assert not any(
            "tokens after it are 0" in stops[stage]
            for stage in stops
            if "encoder" in stage or model == "encoder"
        )
    if model == "decoder":  # this model's sizes, as the tour states them
        assert "24 → 72 → 24" in stops["blocks.0.ffn.out"]
        assert "into 6 queries of 4 numbers" in stops["blocks.0.attn.q"]
        assert "W_K makes 2 keys of 4 numbers" in stops["blocks.0.attn.k"]
        assert f"6 × {t} × {t} = {6 * t * t:,} scores" in stops["blocks.0.attn.scores"]
        assert f"Your text is {t} tokens" in stops["tokens"]
        assert "its weights on the tokens after it are 0" in stops["blocks.0.attn.pattern"]  # causal
        assert re.search(r"average length goes from [\d.]+ to [\d.]+", stops["blocks.0.resid_mid"])
    workshop.shot(f"tour_{model}")
    workshop.close(allowed_errors=(BROWSER_400,))  # a sentence encoder's default second sentence


def test_the_other_blocks_stop_words_its_chart_as_it_reads(workshop):
    for model in ("decoder", "encoder"):
        workshop.open(model=model, text=TEXT)
        stop = workshop.page.locator('#walk .tour-stop[data-kind="others"]')
        caption = stop.locator("figcaption").inner_text()
        first, last = (
            float(n.replace("\u2212", "-")) for n in re.findall(r"\(([\d.]+) → ([\d.]+)\)", caption)[0]
        )
        words = stop.locator(".step-explain").inner_text()
        assert "the other block does the same" in stop.inner_text()  # two blocks: one other, said so
        assert (
            "other 1 blocks" not in stop.inner_text() and "The other block does the same: it reads" in words
        )
        said = re.search(r"it (grows|shrinks|stays about the same),? from", words)
        expected = (
            "grows" if last > first * 1.02 else "shrinks" if last < first * 0.98 else "stays about the same"
        )
        assert said and said.group(1) == expected, (caption, words)
        if model == "encoder":  # its embeddings scaled up: the chart shrinks, and so do the words
            assert last < first and "shrinks" in words and "grows" not in words
        workshop.part_shot('#walk .tour-stop[data-kind="others"]', f"tour_others_{model}")
    workshop.close(allowed_errors=(BROWSER_400,))
