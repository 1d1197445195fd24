"""The stage catalogue: one description per kind of step, applied to every model's own hook
points; code locations found with `inspect`, so they follow the code when it moves."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import glassformer as gf
from glassformer.config import llama_style
from glassformer.models.fine_tune import with_classifier
from glassformer.workshop.walk.architecture import stages
from glassformer.workshop.walk.stage_catalogue import CATALOGUE
from glassformer.workshop.walk.stage_words import Context

REPO = Path(__file__).resolve().parents[1]
STATIC = REPO / "glassformer" / "workshop" / "static" / "js"
SMALL = {"vocab_size": 32, "d_model": 16, "n_layers": 2, "n_heads": 2}
CONFIGS = {
    "gpt2": gf.ModelConfig(**SMALL),
    "llama": llama_style(**{**SMALL, "n_kv_heads": 1}, attn_window=3),
    "bert": gf.ModelConfig(family="encoder", norm_placement="post", **SMALL),
    "minilm": gf.ModelConfig(family="encoder", mlm_head=False, **SMALL),
    "t5": gf.ModelConfig(family="encoder_decoder", positions="t5_relative", **SMALL),
}


def nets():
    out = {name: gf.build(config) for name, config in CONFIGS.items()}
    out["classifier"] = with_classifier(gf.build(CONFIGS["bert"]), 2, pooling="mean")
    return out


@pytest.mark.parametrize(("name", "net"), list(nets().items()))
def test_every_hook_point_of_every_family_is_a_described_step(name, net):
    plan = stages(net)
    traced = [s["trace"] for s in plan if s["trace"]]
    assert traced == [p for p in net.hook_points if p in traced]  # the model's own order
    skipped = set(net.hook_points) - set(traced)
    assert skipped <= {"logits", "final_norm", "encoder.final_norm", "decoder.final_norm"}
    for stage in plan:
        assert stage["title"] and stage["plain"] and stage["words"] and stage["shape"], stage["id"]
        code = stage["code"]
        path = REPO / code["file"]
        assert path.exists(), code
        line = path.read_text().splitlines()[code["line"] - 1]
        assert f"def {code['name'].split('.')[-1]}(" in line or f"class {code['name']}" in line, (code, line)


def test_the_steps_are_worded_for_the_model():
    by_id = {s["id"]: s for s in stages(gf.build(CONFIGS["bert"]))}
    assert by_id["blocks.0.resid_mid"]["title"] == "residual add, then LayerNorm: LayerNorm(x + out)"
    assert "post-norm" in by_id["blocks.0.resid_mid"]["words"]
    llama = {s["id"]: s for s in stages(gf.build(CONFIGS["llama"]))}
    keys = llama["blocks.0.attn.k"]
    assert keys["title"] == "keys K (MQA; RoPE applied)" and keys["shape"] == "g s e"
    assert llama["blocks.0.attn.mask"]["title"] == "causal mask: no looking ahead, sliding window of 3"
    assert llama["blocks.0.attn.q"]["code"]["name"] == "Attention._self_projections"
    t5 = {s["id"]: s for s in stages(gf.build(CONFIGS["t5"]))}
    assert t5["decoder.blocks.0.cross_attn.q"]["code"]["name"] == "Attention.forward"  # keys from the encoder
    assert "decoder.blocks.0.cross_attn.mask" not in t5 and "encoder.blocks.0.attn.mask" not in t5
    minilm = [s["id"] for s in stages(gf.build(CONFIGS["minilm"]))]
    assert minilm[-2:] == ["sentence.pooled", "sentence.vector"] and "logits" not in minilm


def test_the_page_hard_codes_no_code_location():
    """The walk, the tour, the overview and the prediction read code locations from the
    payload: no script names a file of the library."""
    for script in STATIC.rglob("*.js"):
        assert not re.search(r"[\"'`]glassformer/", script.read_text()), script.name  # in a string


def test_the_catalogue_s_code_is_the_library_s():
    for kind, entry in CATALOGUE.items():
        target = inspect.unwrap(entry.code(Context(CONFIGS["gpt2"])))
        assert callable(target), kind
