"""A config too big for this machine is refused before a model is built (`glassformer.models.size`):
from the config alone, in well under a second, by `build` and so by every loader, and by the
lab before it starts a process; the limit can be raised."""

from __future__ import annotations

import json
import time

import pytest
import safetensors.torch
import torch

import glassformer as gf
from glassformer.config import ModelConfig
from glassformer.formats.run_directory import CONFIG, damage
from glassformer.models import ModelTooLarge, build
from glassformer.models.size import MAX_PARAMETERS_VARIABLE, check_size, physical_memory
from glassformer.train.checkpoint import save_checkpoint
from glassformer.workshop.lab.training_lab import Lab
from tests.conftest import tiny_model

HUGE = {"n_layers": 100_000_000}


def test_a_huge_config_is_refused_at_once_with_what_to_do():
    started = time.monotonic()
    with pytest.raises(ModelTooLarge) as refused:
        build(ModelConfig(**HUGE))
    assert time.monotonic() - started < 0.5
    message = str(refused.value)
    assert "19,827,200,065,792 parameters (100,000,000 layers" in message
    assert "GiB of float32 weights, more than half of this machine's" in message
    assert f"{MAX_PARAMETERS_VARIABLE}=19827200065792" in message


def test_the_limit_is_half_the_memory_and_can_be_set(monkeypatch):
    memory = physical_memory()
    fits = ModelConfig(vocab_size=100, d_model=32, n_layers=2, n_heads=4)
    assert check_size(fits) == 36_864 and 36_864 * 4 <= memory / 2
    with pytest.raises(ModelTooLarge, match="more than the 1,000 parameters allowed"):
        build(fits, max_parameters=1_000)
    monkeypatch.setenv(MAX_PARAMETERS_VARIABLE, "1_000")
    with pytest.raises(ModelTooLarge, match="more than the 1,000 parameters allowed"):
        build(fits)
    assert check_size(fits, max_parameters=40_000) == 36_864  # the keyword wins over the variable
    monkeypatch.setenv(MAX_PARAMETERS_VARIABLE, "lots")
    with pytest.raises(ValueError, match="must be a whole number of parameters"):
        build(fits)


def test_a_run_or_an_hf_directory_with_a_huge_config_is_refused_before_it_is_built(tmp_path):
    run = save_checkpoint(tmp_path / "run", tiny_model(n_layers=1), None, {"name": "tiny"}, {"step": 0})
    config = json.loads((run / CONFIG).read_text())
    (run / CONFIG).write_text(json.dumps(config | HUGE))
    hf = tmp_path / "hf"
    hf.mkdir()
    gpt2 = {"model_type": "gpt2", "vocab_size": 50, "n_embd": 32, "n_head": 4, "n_positions": 64}
    (hf / "config.json").write_text(json.dumps(gpt2 | {"n_layer": 100_000_000}))  # GPT-2's own names
    safetensors.torch.save_file({"wte.weight": torch.zeros(50, 32)}, hf / "model.safetensors")
    started = time.monotonic()
    for path in (run, hf):
        with pytest.raises(ModelTooLarge, match="100,000,000 layers"):
            gf.load(path)
    assert "100,000,000 layers" in damage(run)  # the lab lists it with the reason; the workshop skips it
    assert time.monotonic() - started < 1.0


def test_the_lab_checks_the_size_before_it_starts_a_process(tmp_path, monkeypatch):
    monkeypatch.setenv(MAX_PARAMETERS_VARIABLE, "1000")
    lab = Lab(tmp_path / "runs")
    with pytest.raises(ModelTooLarge, match="parameters allowed"):
        lab.start("induction", {"train.steps": 10})
    assert lab.trainer is None and not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"n_kv_heads": 1, "activation": "swiglu"},
        {"n_experts": 4, "experts_per_token": 4, "expert_d_ff": 24},
    ],
)
def test_a_block_s_matrix_weights_are_its_counted_parameters(fields):
    """The FLOP counts' weights (`block_matmul_weights`) are the parameter counts' matrices of
    one block, without biases or norms (every expert used: k = n)."""
    from glassformer.models.size import block_matmul_weights, parameter_counts

    config = gf.ModelConfig(
        vocab_size=50,
        d_model=32,
        n_layers=3,
        n_heads=4,
        qkv_bias=False,
        out_bias=False,
        ffn_bias=False,
        **fields,
    )
    counts = parameter_counts(config)
    per_block = sum(
        n for name, n in counts.items() if name.startswith(("attention", "ffn", "router", "experts"))
    )
    assert block_matmul_weights(config) * config.n_layers == per_block
