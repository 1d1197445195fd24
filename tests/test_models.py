"""The trace contract on every family, traced == untraced, bad input, KV cache == no cache."""

import pytest
import torch

import glassformer as gf
from glassformer.nn.kv_cache import KVCache
from tests.conftest import POSITIONS, tiny, tiny_model

# name -> shape letters, from the trace contract in docs/architecture.md.
CONTRACT = {
    "embed.tokens": "btd",
    "embed.out": "btd",
    "blocks.{i}.attn.in": "btd",
    "blocks.{i}.attn.q": "bhte",
    "blocks.{i}.attn.k": "bgse",
    "blocks.{i}.attn.v": "bgse",
    "blocks.{i}.attn.scores": "bhts",
    "blocks.{i}.attn.pattern": "bhts",
    "blocks.{i}.attn.z": "bhte",
    "blocks.{i}.attn.out": "btd",
    "blocks.{i}.resid_mid": "btd",
    "blocks.{i}.ffn.in": "btd",
    "blocks.{i}.ffn.hidden": "btf",
    "blocks.{i}.ffn.act": "btf",
    "blocks.{i}.ffn.out": "btd",
    "blocks.{i}.resid_post": "btd",
    "final_norm": "btd",
}


def expected_shapes(config, prefix, t, s=None):
    sizes = dict(
        b=2,
        t=t,
        s=s or t,
        h=config.n_heads,
        g=config.n_kv_heads,
        d=config.d_model,
        e=config.d_head,
        f=config.d_ff,
        v=config.vocab_size,
    )
    shapes = {}
    for name, letters in CONTRACT.items():
        for i in range(config.n_layers):
            shapes[prefix + name.format(i=i)] = tuple(sizes[c] for c in letters)
    return shapes


@pytest.mark.parametrize("family", ["decoder", "encoder"])
@pytest.mark.parametrize("positions", ["learned", "rope"])
def test_trace_contract_single_stack(family, positions):
    config = tiny(family=family, positions=positions, n_kv_heads=2, activation="swiglu")
    lm = gf.LanguageModel(gf.build(config).eval())
    trace = lm.trace(torch.randint(0, 61, (2, 7)))
    shapes = expected_shapes(config, "", 7)
    shapes["logits"] = (2, 7, 61)
    if positions == "learned":
        shapes["embed.positions"] = (2, 7, 32)
    assert trace.shapes() == shapes


def test_trace_contract_encoder_decoder():
    config = tiny(family="encoder_decoder", positions="t5_relative", n_kv_heads=1)
    lm = gf.LanguageModel(gf.build(config).eval())
    trace = lm.trace(torch.randint(0, 61, (2, 7)), decoder_input=torch.randint(0, 61, (2, 3)))
    shapes = expected_shapes(config, "encoder.", 7)
    shapes.update(expected_shapes(config, "decoder.", 3))
    for i in range(config.n_layers):
        cross = expected_shapes(config, "decoder.", 3, s=7)
        for part in ("in", "q", "k", "v", "scores", "pattern", "z", "out"):
            shapes[f"decoder.blocks.{i}.cross_attn.{part}"] = cross[f"decoder.blocks.{i}.attn.{part}"]
        shapes[f"decoder.blocks.{i}.resid_cross"] = (2, 3, 32)
    shapes["logits"] = (2, 3, 61)
    assert trace.shapes() == shapes
    assert list(trace)[0] == "encoder.embed.tokens" and list(trace)[-1] == "logits"


def test_trace_selects_only_requested_names_and_globs():
    lm = gf.LanguageModel(tiny_model())
    trace = lm.trace([1, 2, 3], names=["blocks.*.attn.pattern", "logits"])
    assert list(trace) == ["blocks.0.attn.pattern", "blocks.1.attn.pattern", "logits"]
    assert trace.stack("blocks.*.attn.pattern").shape == (2, 1, 4, 3, 3)
    with pytest.raises(KeyError, match="no activation named 'blocks.0.atn.q'"):
        lm.trace([1, 2], names=["blocks.0.atn.q"])


@pytest.mark.parametrize("family", ["decoder", "encoder", "encoder_decoder"])
def test_traced_equals_untraced(family):
    lm = gf.LanguageModel(tiny_model(family=family, positions="alibi", decoder_start_token_id=0))
    ids = torch.randint(0, 61, (2, 6))
    plain = lm.logits(ids)
    traced = lm.trace(ids).output
    assert torch.equal(plain, traced)  # tracing (patterns included) never changes the result


def test_bad_input_gives_clear_errors():
    net = tiny_model(max_seq_len=8)
    with pytest.raises(ValueError, match="token id 61 in input_ids is out of range for vocab_size=61"):
        net(torch.tensor([[1, 61]]))
    with pytest.raises(ValueError, match="token id -1"):
        net(torch.tensor([[-1, 2]]))
    with pytest.raises(TypeError, match="integer token ids"):
        net(torch.ones(1, 3))
    with pytest.raises(ValueError, match=r"shape \(batch, seq_len\), got shape \(3,\)"):
        net(torch.tensor([1, 2, 3]))
    with pytest.raises(ValueError, match="sequence of 9 tokens exceeds max_seq_len=8"):
        net(torch.zeros(1, 9, dtype=torch.long))
    rope = tiny_model(positions="rope", max_seq_len=8)
    assert rope(torch.zeros(1, 12, dtype=torch.long)).shape == (1, 12, 61)  # RoPE extrapolates
    lm = gf.LanguageModel(net)
    with pytest.raises(ValueError, match="has no tokenizer"):
        lm.logits("hello")
    with pytest.raises(ValueError, match="different lengths"):
        lm.logits([[1, 2], [3]])


def incremental_logits(net, ids, mask=None, chunks=(4, 1, 1, 2, 1)):
    """Feed ids in chunks through a KV cache; return the concatenated logits."""
    cache = KVCache.for_model(net.config, ids.shape[0], ids.shape[1])
    outs, start = [], 0
    for size in chunks:
        end = start + size
        step_mask = mask[:, :end] if mask is not None else None
        outs.append(net(ids[:, start:end], step_mask, cache=cache))
        start = end
    assert cache.length == ids.shape[1]
    return torch.cat(outs, dim=1)


@pytest.mark.parametrize("positions", POSITIONS)
@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
def test_cached_equals_uncached(positions, n_kv_heads):
    net = tiny_model(positions=positions, n_kv_heads=n_kv_heads)
    ids = torch.randint(0, 61, (2, 9))
    full = net(ids)
    assert (incremental_logits(net, ids) - full).abs().max() <= 1e-5


@pytest.mark.parametrize("positions", POSITIONS)
def test_cached_left_padded_batch_equals_each_prompt_alone(positions):
    net = tiny_model(positions=positions, n_kv_heads=2, attn_window=None)
    long, short = torch.randint(0, 61, (1, 9)), torch.randint(0, 61, (1, 6))
    ids = torch.cat([long, torch.cat([torch.zeros(1, 3, dtype=torch.long), short], 1)])
    mask = torch.tensor([[1] * 9, [0] * 3 + [1] * 6])
    batched = incremental_logits(net, ids, mask)
    assert (batched[0] - net(long)[0]).abs().max() <= 1e-5
    assert (batched[1, 3:] - net(short)[0]).abs().max() <= 1e-5


def test_sliding_window_cached_equals_uncached():
    net = tiny_model(positions="rope", attn_window=3)
    ids = torch.randint(0, 61, (1, 9))
    assert (incremental_logits(net, ids) - net(ids)).abs().max() <= 1e-5


@pytest.mark.parametrize("positions", ["t5_relative", "sinusoidal", "rope"])
def test_encoder_decoder_cache_keeps_cross_attention(positions):
    net = tiny_model(family="encoder_decoder", positions=positions, n_kv_heads=2)
    src, tgt = torch.randint(0, 61, (2, 7)), torch.randint(0, 61, (2, 5))
    src_mask = torch.tensor([[1] * 7, [1] * 5 + [0] * 2])
    memory = net.encode(src, src_mask)
    full = net.decode(tgt, memory, src_mask)
    cache = KVCache.for_model(net.config, 2, 5)
    steps = [net.decode(tgt[:, i : i + 1], memory, src_mask, cache=cache) for i in range(5)]
    assert all(kv is not None for kv in cache.cross)
    assert (torch.cat(steps, 1) - full).abs().max() <= 1e-5


def test_cache_is_preallocated_and_overflow_is_explained():
    net = tiny_model(n_kv_heads=1)
    cache = KVCache.for_model(net.config, 1, 4)
    assert cache.keys.shape == (2, 1, 1, 4, 8)  # layers b g max_len e: g=1 kv head stored
    storage = cache.keys.data_ptr()
    net(torch.tensor([[1, 2, 3]]), cache=cache)
    net(torch.tensor([[4]]), cache=cache)
    assert cache.keys.data_ptr() == storage
    with pytest.raises(ValueError, match="KV cache holds 4 tokens and 4 are used; 1 more do not fit"):
        net(torch.tensor([[5]]), cache=cache)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_bytes_per_token_is_what_the_cache_holds_per_token(dtype):
    config = tiny_model(family="encoder_decoder", n_kv_heads=2).config
    cache = KVCache.for_model(config, 1, 7, dtype)
    held = cache.keys.nbytes + cache.values.nbytes
    assert KVCache.bytes_per_token(config, dtype) * 7 == held


@pytest.mark.parametrize("placement", ["pre", "post"])
@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu_tanh", "silu", "swiglu", "geglu"])
def test_every_block_variant_runs_and_trains(placement, activation):
    config = tiny(norm_placement=placement, activation=activation, norm="rmsnorm", resid_dropout=0.1)
    net = gf.build(config).train()
    ids = torch.randint(0, 61, (2, 8))
    loss = torch.nn.functional.cross_entropy(net(ids)[:, :-1].flatten(0, 1), ids[:, 1:].flatten())
    loss.backward()
    assert all(p.grad is not None for p in net.parameters())


def test_weight_tying_and_init():
    net = gf.build(tiny(n_layers=4))
    assert net.lm_head.weight is net.token_embedding.weight
    std = net.stack.blocks[0].attn.o_proj.weight.std().item()
    assert std == pytest.approx(0.02 / (2 * 4) ** 0.5, rel=0.2)  # residual projections scaled
    assert net.stack.blocks[0].attn.qkv_proj.weight.std().item() == pytest.approx(0.02, rel=0.2)
    untied = gf.build(tiny(tie_embeddings=False, init="xavier"))
    assert untied.lm_head.weight is not untied.token_embedding.weight


def test_xavier_initializes_each_matrix_of_a_fused_projection():
    """[W_Q; W_K; W_V] gets three Glorot bounds sqrt(6 / (fan_in + fan_out)), not one."""
    net = gf.build(tiny(init="xavier", n_kv_heads=1))  # d 32, h 4, g 1, e 8
    w_q, w_k, w_v = net.stack.blocks[0].attn.qkv_proj.weight.split([32, 8, 8])
    assert w_q.abs().max() <= (6 / (32 + 32)) ** 0.5 and w_q.abs().max() > 0.9 * (6 / 64) ** 0.5
    for w in (w_k, w_v):
        assert w.abs().max() <= (6 / (32 + 8)) ** 0.5 and w.abs().max() > (6 / 64) ** 0.5


def test_encoder_pooling():
    net = tiny_model(family="encoder", pooler=True)
    ids = torch.randint(0, 61, (2, 5))
    mask = torch.tensor([[1, 1, 1, 0, 0], [1] * 5])
    hidden = net.encode(ids, mask)
    mean = net.pool(hidden, mask, "mean")
    assert torch.allclose(mean[0], hidden[0, :3].mean(0), atol=1e-6)
    assert net.pool(hidden, mask, "pooler").shape == (2, 32)
    assert torch.equal(net.pool(hidden, mask, "cls"), hidden[:, 0])


@pytest.mark.parametrize("family", ["decoder", "encoder", "encoder_decoder"])
def test_build_without_initialization_keeps_ties_and_buffers(family):
    """Loaders build without random init; the structure must be the same as a normal build."""
    config = tiny(family=family, positions="rope", decoder_start_token_id=0)
    fast, normal = gf.build(config, initialize=False), gf.build(config)
    head = fast.mlm_head.decoder if family == "encoder" else fast.lm_head
    table = fast.token_embedding
    assert head.weight is table.weight
    fast.load_state_dict(normal.state_dict())
    rotary = [m for m in fast.modules() if hasattr(m, "inv_freq")]
    assert rotary and all(torch.isfinite(m.inv_freq).all() for m in rotary)
    ids = torch.randint(0, 61, (1, 5))
    args = (ids, ids) if family == "encoder_decoder" else (ids,)
    assert torch.equal(fast.eval()(*args), normal.eval()(*args))


def test_trace_runs_without_dropout_and_keeps_the_mode():
    net = gf.build(tiny(resid_dropout=0.5, attn_dropout=0.5, embed_dropout=0.5)).train()
    lm = gf.LanguageModel(net)
    first, second = (lm.trace([1, 2, 3, 4], "logits")["logits"] for _ in range(2))
    assert torch.equal(first, second)  # no dropout noise in a trace
    assert net.training  # the model is left in the mode it had
