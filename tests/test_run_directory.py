"""Reading a run directory's model (`glassformer.formats.run_directory.read_run`); the layer
rule that formats never import train is checked by tests/test_layers.py."""

from __future__ import annotations

import pytest
import torch

from glassformer.formats.run_directory import WEIGHTS, read_run
from glassformer.tokenizers.char import CharTokenizer
from glassformer.train.checkpoint import save_checkpoint
from tests.conftest import tiny_model


def test_read_run_gives_the_saved_network_in_the_asked_dtype(tmp_path):
    net = tiny_model()
    tokenizer = CharTokenizer.from_text("abc d")
    save_checkpoint(tmp_path, net, tokenizer, {}, {"step": 3})
    stored = (tmp_path / WEIGHTS).read_bytes()
    loaded, loaded_tokenizer = read_run(tmp_path)
    ids = torch.tensor([[1, 2, 3, 4]])
    assert not loaded.training and torch.equal(loaded(ids), net(ids))
    assert loaded.lm_head.weight is loaded.stack.embed.token.weight  # stored once, tied again
    assert loaded_tokenizer.encode("dab") == tokenizer.encode("dab")
    half, _ = read_run(tmp_path, torch.bfloat16)
    assert {p.dtype for p in half.parameters()} == {torch.bfloat16}
    for (name, a), b in zip(net.state_dict().items(), half.state_dict().values(), strict=True):
        assert torch.equal(a.to(torch.bfloat16), b), name
    assert (tmp_path / WEIGHTS).read_bytes() == stored  # reading never writes


def test_a_run_without_a_tokenizer_and_a_damaged_one(tmp_path):
    save_checkpoint(tmp_path, tiny_model(n_layers=1), None, {}, {"step": 0})
    assert read_run(tmp_path)[1] is None
    weights = (tmp_path / WEIGHTS).read_bytes()
    (tmp_path / WEIGHTS).write_bytes(weights[:-100])
    with pytest.raises(ValueError, match="model.safetensors is damaged.*copy the run again"):
        read_run(tmp_path)
