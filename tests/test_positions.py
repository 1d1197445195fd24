"""Position encodings: the properties the course states, and the reference formulas."""

import math

import pytest
import torch

from glassformer.nn.positions import (
    AlibiBias,
    RotaryEmbedding,
    alibi_slopes,
    sinusoidal_table,
    t5_relative_bucket,
)
from tests.conftest import tiny


def test_sinusoidal_matches_paper_formula():
    d = 16
    table = sinusoidal_table(torch.arange(50), d)
    for pos in (0, 7, 49):
        for i in range(d // 2):
            angle = pos / 10000 ** (2 * i / d)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_sinusoidal_halved_is_a_permutation_of_interleaved():
    a = sinusoidal_table(torch.arange(20), 8, "interleaved")
    b = sinusoidal_table(torch.arange(20), 8, "halved")
    assert torch.equal(b, torch.cat([a[:, 0::2], a[:, 1::2]], dim=-1))


def test_sinusoidal_dot_product_depends_only_on_distance():
    table = sinusoidal_table(torch.arange(200), 64)
    for k in (1, 5, 30):
        dots = (table[:-k] * table[k:]).sum(-1)  # PE(p) . PE(p + k) for every p
        assert torch.allclose(dots, dots[0].expand_as(dots), atol=1e-4)


@pytest.mark.parametrize("style", ["rotate_half", "interleaved"])
@pytest.mark.parametrize("scaling", ["none", "linear", "ntk"])
def test_rope_scores_depend_only_on_relative_position(style, scaling):
    config = tiny(positions="rope", rope_style=style, rope_scaling=scaling, rope_scaling_factor=2.0)
    rotary = RotaryEmbedding(config)
    q, k = torch.randn(1, 1, 1, config.d_head), torch.randn(1, 1, 1, config.d_head)

    def score(m: int, n: int) -> float:
        rot_m = rotary(torch.tensor([[m]]), torch.float32)
        rot_n = rotary(torch.tensor([[n]]), torch.float32)
        return (rot_m.apply(q) * rot_n.apply(k)).sum().item()

    for m, n in [(3, 1), (10, 8), (40, 38)]:
        assert score(m, n) == pytest.approx(score(2, 0), abs=1e-4)
    assert score(5, 0) != pytest.approx(score(2, 0), abs=1e-3)


def test_rope_preserves_norm_and_position_zero_is_identity():
    rotary = RotaryEmbedding(tiny(positions="rope"))
    x = torch.randn(2, 4, 5, 8)
    rotation = rotary(torch.arange(5).expand(2, 5), torch.float32)
    assert torch.allclose(rotation.apply(x).norm(dim=-1), x.norm(dim=-1), atol=1e-5)
    assert torch.allclose(rotation.apply(x)[:, :, 0], x[:, :, 0])


def test_rope_styles_agree_up_to_a_feature_permutation():
    e = 8
    half = RotaryEmbedding(tiny(positions="rope", rope_style="rotate_half"))
    inter = RotaryEmbedding(tiny(positions="rope", rope_style="interleaved"))
    pos = torch.arange(6)[None]
    x = torch.randn(1, 1, 6, e)
    perm = torch.tensor([0, 4, 1, 5, 2, 6, 3, 7])  # interleaved feature j = rotate_half feature perm[j]
    out_half = half(pos, torch.float32).apply(x)
    out_inter = inter(pos, torch.float32).apply(x[..., perm])
    assert torch.allclose(out_inter, out_half[..., perm], atol=1e-6)


def test_alibi_slopes_from_the_paper():
    assert alibi_slopes(8).tolist() == pytest.approx([2 ** -(i + 1) for i in range(8)])
    assert len(alibi_slopes(6)) == 6  # non-power-of-two head counts interleave
    bias = AlibiBias(8)(torch.arange(4)[None], torch.arange(4)[None])
    assert bias[0, 0, 3, 0].item() == pytest.approx(-0.5 * 3)
    assert torch.all(bias.diagonal(dim1=-2, dim2=-1) == 0)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_buckets_match_hf(bidirectional):
    from transformers.models.t5.modeling_t5 import T5Attention

    rel = torch.arange(-300, 300)
    ours = t5_relative_bucket(rel, bidirectional, 32, 128)
    theirs = T5Attention._relative_position_bucket(rel, bidirectional, 32, 128)
    assert torch.equal(ours, theirs)
    if not bidirectional:
        assert torch.all(ours[rel > 0] == 0)  # the future shares one bucket: it is masked anyway
