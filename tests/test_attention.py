"""Attention invariants: masks, rows that sum to 1, both paths equal, GQA."""

import pytest
import torch

from glassformer.nn.attention import Attention
from glassformer.nn.masks import build_mask
from tests.conftest import tiny, tiny_model


def patterns(net, ids, mask=None):
    return net_trace(net, ids, mask, "blocks.*.attn.pattern")


def net_trace(net, ids, mask, pattern):
    store = {}
    with net.hooks({pattern: lambda x, name: store.__setitem__(name, x)}):
        out = net(ids, mask)
    return out, store


def test_pattern_rows_sum_to_one_and_causal_rows_never_look_ahead():
    net = tiny_model(positions="rope")
    _, store = patterns(net, torch.randint(0, 61, (2, 9)))
    for pattern in store.values():
        assert torch.allclose(pattern.sum(-1), torch.ones(2, 4, 9), atol=1e-6)
        assert torch.all(pattern.triu(diagonal=1) == 0)


def test_padded_keys_get_zero_weight_and_empty_rows_no_nan():
    net = tiny_model()
    ids = torch.randint(0, 61, (2, 6))
    mask = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])  # left padding in row 0
    logits, store = patterns(net, ids, mask)
    assert not torch.isnan(logits).any()
    for pattern in store.values():
        assert torch.all(pattern[0, :, :, :2] == 0)  # no query looks at padding
        assert torch.all(pattern[0, :, :2] == 0)  # padding queries see no key: zero rows
        assert torch.allclose(pattern[0, :, 2:].sum(-1), torch.ones(4, 4), atol=1e-6)


def test_encoder_padding_mask_is_bidirectional():
    net = tiny_model(family="encoder")
    ids = torch.randint(0, 61, (1, 5))
    _, store = patterns(net, ids, torch.tensor([[1, 1, 1, 0, 0]]))
    pattern = store["blocks.0.attn.pattern"][0]
    assert torch.all(pattern[:, :, 3:] == 0)
    assert torch.all(pattern[:, 0, 1:3] > 0)  # the first token sees later ones


def test_sliding_window_mask():
    mask = build_mask(t=5, s=5, causal=True, window=2).allowed[0, 0]
    expected = torch.tensor(
        [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 1, 0, 0], [0, 0, 1, 1, 0], [0, 0, 0, 1, 1]],
        dtype=torch.bool,
    )
    assert torch.equal(mask, expected)


@pytest.mark.parametrize("positions", ["learned", "sinusoidal", "rope", "alibi", "t5_relative", "none"])
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_fused_equals_explicit(positions, n_kv_heads):
    net = tiny_model(positions=positions, n_kv_heads=n_kv_heads, attn_window=None)
    ids = torch.randint(0, 61, (2, 10))
    mask = torch.tensor([[0, 0, 0] + [1] * 7, [1] * 10])
    for m in (None, mask):
        with net.attention_impl("fused"):
            fused = net(ids, m)
        with net.attention_impl("explicit"):
            explicit = net(ids, m)
        assert (fused - explicit).abs().max() <= 1e-5


def test_fused_path_is_taken_unless_scores_are_hooked(monkeypatch):
    net = tiny_model()
    calls = []
    original = Attention.explicit_attention
    monkeypatch.setattr(
        Attention, "explicit_attention", lambda self, *a: calls.append(1) or original(self, *a)
    )
    ids = torch.randint(0, 61, (1, 4))
    net(ids)
    assert calls == []
    with net.hooks({"blocks.0.attn.z": lambda x, n: None}):
        net(ids)  # z comes from the fused kernel too
    assert calls == []
    with net.hooks({"blocks.0.attn.pattern": lambda x, n: None}):
        net(ids)
    assert calls == [1]  # only the hooked layer takes the explicit path


def test_gqa_equals_mha_with_repeated_kv_heads():
    """A GQA layer is an MHA layer whose k/v projections repeat per group."""
    gqa = Attention(tiny(n_kv_heads=2), layer=0).eval()
    mha = Attention(tiny(), layer=0).eval()
    e, d = 8, 32
    with torch.no_grad():
        mha.o_proj.load_state_dict(gqa.o_proj.state_dict())
        w_q, w_k, w_v = gqa.qkv_proj.weight.split([4 * e, 2 * e, 2 * e])
        b_q, b_k, b_v = gqa.qkv_proj.bias.split([4 * e, 2 * e, 2 * e])
        mha.qkv_proj.weight.copy_(
            torch.cat(
                [w_q, *(w.view(2, e, d).repeat_interleave(2, dim=0).reshape(-1, d) for w in (w_k, w_v))]
            )
        )
        mha.qkv_proj.bias.copy_(
            torch.cat([b_q, *(b.view(2, e).repeat_interleave(2, dim=0).reshape(-1) for b in (b_k, b_v))])
        )
    x = torch.randn(2, 5, 32)
    mask = build_mask(t=5, s=5, causal=True)
    assert torch.allclose(gqa(x, mask), mha(x, mask), atol=1e-6)


def test_hook_can_replace_a_value():
    net = tiny_model()
    ids = torch.randint(0, 61, (1, 5))
    clean = net(ids)
    with net.hooks({"blocks.*.attn.out": lambda x, name: torch.zeros_like(x)}):
        ablated = net(ids)
    assert not torch.allclose(clean, ablated)
    with pytest.raises(ValueError, match="returned shape"):
        with net.hooks({"blocks.0.attn.out": lambda x, name: x[:, :1]}):
            net(ids)
