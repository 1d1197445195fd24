"""The key-map language (`glassformer.formats.key_map`): several checkpoint tensors stacked into
one parameter on import, cut apart again on export, every place filled exactly once.

The HF round trips (`test_hf_parity.py`, `test_hf_export.py`) prove real families load and
write; these tests prove the checks fail when a map or a checkpoint is wrong.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import glassformer as gf
from glassformer.formats import hf_llama
from glassformer.formats.hf import convert_hf
from glassformer.formats.key_map import Mapped, check_coverage, hf_state, stacked, stacked_kv, stacked_qkv

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

SHAPES = {"attn.qkv_proj.weight": (16, 4), "norm.weight": (4,)}


def _llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=40,
        hidden_size=32,
        intermediate_size=48,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    return transformers.LlamaForCausalLM(config).eval()


def test_stacked_rows_follow_heads_and_kv_heads():
    config = gf.ModelConfig(vocab_size=40, d_model=32, n_layers=1, n_heads=4, n_kv_heads=2, qkv_bias=False)
    q, k, v = stacked_qkv("attn", "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", config)
    assert [(m.theirs, m.rows) for m in (q, k, v)] == [
        ("self_attn.q_proj.weight", (0, 32)),  # h e
        ("self_attn.k_proj.weight", (32, 48)),  # g e
        ("self_attn.v_proj.weight", (48, 64)),  # g e
    ]
    cross = stacked_kv("cross_attn", "q", "k", "v", config)
    assert [(m.ours, m.rows) for m in cross] == [
        ("cross_attn.q_proj.weight", None),
        ("cross_attn.kv_proj.weight", (0, 16)),
        ("cross_attn.kv_proj.weight", (16, 32)),
    ]


QKV = "attn.qkv_proj.weight"
NORM = Mapped("norm.weight", "n")
BROKEN = {  # a key map for SHAPES -> what check_coverage says
    "a gap at the end": (
        stacked(QKV, [("q", 8), ("k", 4)]),
        r"fills rows 0:12 of 'attn.qkv_proj.weight', which has 16",
    ),
    "a gap inside": (
        [*stacked(QKV, [("q", 8), ("k", 4)]), Mapped(QKV, "v", rows=(14, 16))],
        r"leaves them empty: rows 12:14 of 'attn.qkv_proj.weight'",
    ),
    "an overlap": (
        [*stacked(QKV, [("q", 8), ("k", 4), ("v", 4)]), Mapped(QKV, "x", rows=(6, 10))],
        r"fills them twice: rows 6:8 of 'attn.qkv_proj.weight'",
    ),
    "one tensor twice": (
        stacked(QKV, [("q", 8), ("q", 8)]),
        r"reads 'q' twice \('attn.qkv_proj.weight' rows 0:8 and",
    ),
    "a parameter left out": ([], r"left these parameters unfilled: attn.qkv_proj.weight"),
}


@pytest.mark.parametrize("name", list(BROKEN))
def test_coverage_catches_gaps_overlaps_and_leftovers(name):
    mapping, message = BROKEN[name]
    with pytest.raises(ValueError, match=message):
        check_coverage(SHAPES, [*mapping, NORM])
    check_coverage(SHAPES, [*stacked(QKV, [("q", 8), ("k", 4), ("v", 4)]), NORM])  # the right one


def test_a_wrong_block_is_named_with_its_rows():
    hf = _llama()
    state = dict(hf.state_dict())
    state["model.layers.0.self_attn.k_proj.weight"] = torch.zeros(24, 32)  # 3 kv heads, not 2
    with pytest.raises(
        ValueError,
        match=r"checkpoint 'model.layers.0.self_attn.k_proj.weight' gives \(24, 32\), "
        r"our 'stack.blocks.0.attn.qkv_proj.weight' rows 32:48 needs \(16, 32\)",
    ):
        convert_hf(hf.config.to_dict(), state)
    state = dict(hf.state_dict())
    del state["model.layers.0.self_attn.v_proj.weight"]
    with pytest.raises(KeyError, match="no tensor 'model.layers.0.self_attn.v_proj.weight'.*rows 48:64"):
        convert_hf(hf.config.to_dict(), state)


def test_import_stacks_and_export_cuts_back_exactly():
    hf = _llama()
    net = convert_hf(hf.config.to_dict(), dict(hf.state_dict()))
    theirs = hf.state_dict()
    layer = "model.layers.0.self_attn"
    qkv = torch.cat([theirs[f"{layer}.{n}_proj.weight"] for n in "qkv"])  # (h + 2g) e x d
    assert torch.equal(net.stack.blocks[0].attn.qkv_proj.weight, qkv)

    state = hf_state(net, hf_llama.key_map(net.config, set()))
    for n in "qkv":
        assert torch.equal(state[f"{layer}.{n}_proj.weight"], theirs[f"{layer}.{n}_proj.weight"])
    pointers = {t.untyped_storage().data_ptr() for t in state.values()}
    assert len(pointers) == len(state)  # no two tensors share memory: safetensors can store them


def test_cuts_of_one_fused_tensor_may_not_overlap():
    """Phi-3's gate_up_proj fills two of our parameters with disjoint row blocks; a key map
    whose cuts overlap (or that reads the tensor whole as well) is refused."""
    from glassformer.formats.key_map import Mapped, TheirRows, check_coverage

    shapes = {"gate": (4, 2), "up": (4, 2)}
    fused = "mlp.gate_up_proj.weight"
    check_coverage(shapes, [Mapped("gate", fused, TheirRows(0, 4)), Mapped("up", fused, TheirRows(4, 8))])
    with pytest.raises(ValueError, match="twice"):
        check_coverage(shapes, [Mapped("gate", fused, TheirRows(0, 4)), Mapped("up", fused, TheirRows(3, 7))])
    with pytest.raises(ValueError, match="twice"):
        check_coverage(shapes, [Mapped("gate", fused, TheirRows(0, 4)), Mapped("up", fused)])
