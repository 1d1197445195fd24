"""The workshop walks a Gemma 2-like, a Gemma 3-like and an OLMo 2-like model as they are: the
norms around each sublayer where the placement puts them, the soft-caps as steps with their
caps, each block's own window on its mask, q/k-norm where it happens; every stage opens and
holds the library's numbers."""

from __future__ import annotations

import pytest
import torch

import glassformer as gf
from glassformer.config import llama_style
from glassformer.tokenizers.char import CharTokenizer
from glassformer.workshop.server import create_app
from glassformer.workshop.walk.architecture import stages, summary
from glassformer.workshop.walk.arrays import unpack
from tests.conftest import workshop_client

ALPHABET = "abcdefghijklmnopqrstuvwxyz .,"
TEXT = "the cat sat on the mat."
SIZES = dict(
    vocab_size=len(ALPHABET), d_model=32, n_layers=4, n_heads=4, n_kv_heads=2, d_ff=48, max_seq_len=64
)
CONFIGS = {
    "gemma2": llama_style(
        **SIZES,
        norm_placement="sandwich",
        activation="geglu_tanh",
        embed_scale=True,
        attn_window=3,
        global_every=2,
        attn_softcap=5.0,
        logit_softcap=3.0,
        attn_scale=0.25,
    ),
    "gemma3": llama_style(
        **SIZES,
        norm_placement="sandwich",
        activation="geglu_tanh",
        qk_norm=True,
        attn_window=3,
        global_every=2,
        rope_local_base=100.0,
        rope_scaling="linear",
        rope_scaling_factor=2.0,
    ),
    "olmo2": llama_style(**SIZES, norm_placement="output", qk_norm=True, qk_norm_scope="all"),
}


@pytest.fixture(scope="module")
def models() -> dict[str, gf.LanguageModel]:
    out = {}
    for name, config in CONFIGS.items():
        torch.manual_seed(0)
        net = gf.build(config).eval()
        with torch.no_grad():  # scores past the cap, so the capped step differs from the scores
            for param_name, param in net.named_parameters():
                if param_name.endswith("qkv_proj.weight"):
                    param.mul_(6.0)
        out[name] = gf.LanguageModel(net, CharTokenizer(ALPHABET))
    return out


@pytest.fixture(scope="module")
def app(models):
    return create_app(models)


@pytest.fixture(scope="module")
def client(app):
    with workshop_client(app) as client:
        yield client


@pytest.mark.parametrize("name", list(CONFIGS))
def test_every_stage_walks_and_opens_with_the_library_s_numbers(client, models, name):
    lm = models[name]
    answer = client.post("/api/walk", json={"model": name, "text": TEXT})
    assert answer.status_code == 200, answer.text
    payload = answer.json()
    traced = [s["trace"] for s in payload["stages"] if s["trace"]]
    assert set(traced) == set(lm.net.hook_points)  # every hook point is a step, none skipped
    trace = lm.trace(TEXT)
    for stage in payload["stages"]:
        assert stage["title"] and stage["plain"] and stage["words"] and stage["shape"], stage["id"]
        if stage["trace"] is None:
            continue
        opened = client.post("/api/stage", json={"model": name, "text": TEXT, "name": stage["trace"]})
        assert opened.status_code == 200, (stage["id"], opened.text)
        got, expected = unpack(opened.json()["value"]), trace[stage["trace"]][0]
        tolerance = 1 / 510 if stage["trace"].endswith(".pattern") else 1e-5
        assert (got - expected).abs().max() <= tolerance, stage["id"]
        assert stage["value"]["shape"] == list(expected.shape), stage["id"]


def test_the_steps_are_the_gemma_2_block_s():
    """Sandwich: a norm before each sublayer and one after it; the soft-cap between the scores
    and the mask; layer 0 windowed, layer 1 global; the raw logits, then the capped ones."""
    plan = stages(gf.build(CONFIGS["gemma2"]))
    ids = [s["id"] for s in plan]
    block = [i.removeprefix("blocks.0.") for i in ids if i.startswith("blocks.0.")]
    assert block[block.index("attn.scores") :][:4] == [
        "attn.scores",
        "attn.capped",
        "attn.mask",
        "attn.pattern",
    ]
    assert block[block.index("attn.out") :][:3] == ["attn.out", "attn.post_norm", "resid_mid"]
    assert block[block.index("ffn.out") :] == ["ffn.out", "ffn.post_norm", "resid_post"]
    assert ids[-3:] == ["final_norm", "logits_raw", "logits"]
    by_id = {s["id"]: s for s in plan}
    assert by_id["blocks.0.attn.capped"]["title"] == "soft-cap: 5 * tanh(S / 5)"
    assert by_id["blocks.0.attn.mask"]["title"] == "causal mask: no looking ahead, sliding window of 3"
    assert by_id["blocks.1.attn.mask"]["title"] == "causal mask: no looking ahead"  # a global layer
    assert by_id["blocks.0.attn.in"]["title"] == "self-attention input (RMSNorm first)"
    assert by_id["blocks.0.attn.post_norm"]["title"].startswith("attention output, RMSNorm (the second norm")
    assert by_id["blocks.0.resid_mid"]["title"] == "residual add: x + RMSNorm(out)"
    assert by_id["logits"]["title"] == "logits, soft-capped: 3 * tanh(z / 3)"
    assert by_id["logits_raw"]["code"]["name"] == "TransformerModel.head_logits"
    arch = summary(CONFIGS["gemma2"])
    assert arch["placement"] == "sandwich" and arch["head"]["softcap"] == 3.0
    attention = arch["attention"]
    assert (attention["softcap"], attention["layer_windows"], attention["global_every"]) == (
        5.0,
        [3, None, 3, None],
        2,
    )


def test_the_steps_are_the_gemma_3_and_olmo_2_blocks():
    gemma3 = {s["id"]: s for s in stages(gf.build(CONFIGS["gemma3"]))}
    assert gemma3["blocks.0.attn.q"]["title"] == (
        "queries Q (RMSNorm per head, then RoPE (base 100, this windowed layer's own) applied)"
    )
    assert gemma3["blocks.1.attn.q"]["title"] == "queries Q (RMSNorm per head, then RoPE applied)"
    assert "blocks.0.attn.capped" not in gemma3 and "logits_raw" not in gemma3
    assert summary(CONFIGS["gemma3"])["position_params"]["local_base"] == 100.0
    olmo = {s["id"]: s for s in stages(gf.build(CONFIGS["olmo2"]))}
    assert olmo["blocks.0.attn.in"]["title"] == "self-attention input"  # no norm before attention
    assert olmo["blocks.0.ffn.in"]["plain"] == "into the feed-forward layer"
    assert olmo["blocks.0.attn.post_norm"]["title"] == "attention output, RMSNorm (before the add)"
    assert "OLMo 2" in olmo["blocks.0.ffn.post_norm"]["words"]
    assert olmo["blocks.0.attn.k"]["title"] == "keys K (GQA; RMSNorm over all heads, then RoPE applied)"
    assert "final_norm" in olmo  # the stack still ends in a norm
    assert summary(CONFIGS["olmo2"])["attention"]["qk_norm_scope"] == "all"


@pytest.mark.parametrize(
    ("name", "flow", "words"),
    [
        (
            "gemma2",
            ["RMSNorm", "attention", "RMSNorm", "+ x"],
            ["scores soft-capped at 5", "window of 3, every 2nd"],
        ),
        ("gemma3", ["RMSNorm", "attention", "RMSNorm", "+ x"], ["q/k RMSNorm per head", "window of 3"]),
        ("olmo2", ["attention", "RMSNorm", "+ x"], ["q/k RMSNorm over all heads"]),
    ],
)
def test_the_overview_draws_the_norms_where_they_are(workshop, name, flow, words):
    """The block's chips in the order the data flows, the placement's equation on hover; the
    block's box names q/k-norm, the soft-cap and the windows; the head its own soft-cap."""
    workshop.open(model=name, text=TEXT)
    page = workshop.page
    chips = page.locator("#overview .ov-block .ov-flow .ov-part").all_inner_texts()
    assert chips == flow + [c.replace("attention", "feed-forward") for c in flow]  # attention's, the FFN's
    block = page.locator("#overview .ov-block").first.inner_text()
    assert all(w in block for w in words), block
    head = page.locator('#overview .ov-box[data-kind="head"]').first.inner_text()
    assert ("soft-capped: 3 · tanh(z / 3)" in head) == (name == "gemma2")
    page.locator("#overview .ov-block").first.click()  # block 0: its own steps, the capped scores too
    steps = page.locator("#overview .ov-block-steps .ov-box .ov-title").all_inner_texts()
    assert ("keep every score in range" in steps) == (name == "gemma2")  # the beginner's title
    workshop.close()
