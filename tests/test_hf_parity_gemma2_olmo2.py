"""Gemma 2, Gemma 3 (text) and OLMo 2 at parity with Hugging Face transformers, and the parts
they are made of against hand-written formulas.

Each tiny HF model is built offline from its config with everything that sets the family
apart made to matter: a 4-key sliding window over 12-token inputs, soft-caps the scores and
logits really reach (attention 5, logits 3, weights scaled up so that they do), norm weights
away from their start so that Gemma's (1 + w) counts, Gemma 3's own RoPE base and linear
scaling. It is saved with ``save_pretrained``, read back with ``gf.from_hf(directory)`` and
compared: fp32 logits within 1e-4, greedy tokens equal to ``generate``'s, cached = uncached.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import glassformer as gf
from glassformer.config import llama_style
from glassformer.generate import GenerationSettings, generate_ids
from glassformer.nn.kv_cache import KVCache
from glassformer.nn.softcap import soft_cap
from tests.test_hf_parity import SMALL, VOCAB

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

WINDOW, ATTN_CAP, LOGIT_CAP = 4, 5.0, 3.0
TOKENS = 12  # longer than the window


def _loud(model, norm_centre: float):
    """Weights large enough that the soft-caps bite, norms away from their start."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.normal_(norm_centre, 0.3)
            elif name.endswith(("q_proj.weight", "k_proj.weight")):
                param.mul_(12.0)  # scores beyond the attention cap
            elif name.endswith("embed_tokens.weight") or name == "lm_head.weight":
                param.mul_(12.0)  # logits beyond the logit cap, not all at it
    return model


def _gemma2():
    """Gemma 2: sandwich norms, a window on layers 0 and 2, soft-capped scores and logits."""
    config = transformers.Gemma2Config(
        **{**SMALL, "num_hidden_layers": 4},
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=128,
        sliding_window=WINDOW,
        attn_logit_softcapping=ATTN_CAP,
        final_logit_softcapping=LOGIT_CAP,
        query_pre_attn_scalar=16,  # attn_scale 1/4, not 1/sqrt(8)
        rope_theta=500.0,
    )
    return transformers.Gemma2ForCausalLM(config)


def _gemma3():
    """Gemma 3 (text): q/k-norm per head, windowed layers 0, 1, 3, 4 with their own RoPE base,
    global layers 2 and 5 with linear RoPE scaling; logits soft-capped, untied head."""
    config = transformers.Gemma3TextConfig(
        **{**SMALL, "num_hidden_layers": 6},
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=128,
        sliding_window=WINDOW,
        layer_types=["sliding_attention" if (i + 1) % 3 else "full_attention" for i in range(6)],
        final_logit_softcapping=LOGIT_CAP,
        query_pre_attn_scalar=12,
        rope_theta=1000.0,
        rope_local_base_freq=30.0,
        rope_scaling={"rope_type": "linear", "factor": 2.0},
        tie_word_embeddings=False,
    )
    return transformers.Gemma3ForCausalLM(config)


def _olmo2():
    """OLMo 2: norms on each sublayer's output, q/k-norm over the whole projection, GQA."""
    config = transformers.Olmo2Config(
        **SMALL, num_key_value_heads=2, max_position_embeddings=128, rope_theta=500.0, pad_token_id=0
    )
    return transformers.Olmo2ForCausalLM(config)


BUILDERS = {"gemma2": (_gemma2, 0.0), "gemma3": (_gemma3, 0.0), "olmo2": (_olmo2, 1.0)}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """name -> (HF model, our LanguageModel read from its save_pretrained directory)."""
    out = {}
    for name, (builder, norm_centre) in BUILDERS.items():
        torch.manual_seed(0)
        hf = _loud(builder(), norm_centre).eval()
        hf.config._attn_implementation = "eager"  # HF's reference path for windows and soft-caps
        directory = tmp_path_factory.mktemp(name)
        hf.save_pretrained(directory)
        out[name] = (hf, gf.from_hf(directory))
    return out


def _ids(seed: int, rows: int = 2, tokens: int = TOKENS) -> torch.Tensor:
    torch.manual_seed(seed)
    return torch.randint(3, VOCAB - 1, (rows, tokens))


def test_configs_read_as_the_family_is():
    """What each config.json becomes (no weights needed)."""
    from glassformer.formats.hf_gemma2 import config_from_hf as gemma
    from glassformer.formats.hf_olmo2 import config_from_hf as olmo

    config = gemma(_gemma2().config.to_dict(), set())
    assert (config.norm_placement, config.attn_window, config.global_every) == ("sandwich", WINDOW, 2)
    assert (config.attn_softcap, config.logit_softcap, config.attn_scale) == (ATTN_CAP, LOGIT_CAP, 0.25)
    assert [config.layer_window(i) for i in range(4)] == [WINDOW, None, WINDOW, None]
    assert config.embed_scale and config.tie_embeddings and not config.qk_norm
    config = gemma(_gemma3().config.to_dict(), set())
    assert (config.qk_norm, config.qk_norm_scope, config.global_every) == (True, "head", 3)
    assert (config.rope_local_base, config.rope_base, config.rope_scaling) == (30.0, 1000.0, "linear")
    assert config.attn_softcap is None and config.logit_softcap == LOGIT_CAP
    config = olmo(_olmo2().config.to_dict(), set())
    assert (config.norm_placement, config.qk_norm, config.qk_norm_scope) == ("output", True, "all")
    assert config.activation == "swiglu" and not config.tie_embeddings and config.norm_eps == 1e-5


@pytest.mark.parametrize("name", list(BUILDERS))
def test_logits_match_hf(models, name):
    hf, lm = models[name]
    ids = _ids(1)
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0  # right padding in row 1
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=mask).logits
    ours = lm.logits(ids, attention_mask=mask)
    real = (slice(None), slice(0, TOKENS - 3))  # padded positions are don't-care
    diff = (theirs[real] - ours[real]).abs().max().item()
    print(f"{name}: max abs logit difference {diff:.2e}")
    assert diff <= 1e-4


@pytest.mark.parametrize("name", ["gemma2", "gemma3"])
def test_the_soft_caps_and_the_window_matter(models, name):
    """The test models are ones where a missing cap or window would show: the raw logits (and
    Gemma 2's scores) go past their caps, and a windowed layer hides keys a global one sees."""
    _, lm = models[name]
    trace = lm.trace(_ids(1)[:1], ["logits_raw", "logits", "blocks.0.attn.*", "blocks.2.attn.pattern"])
    assert trace["logits_raw"].abs().max() > LOGIT_CAP > trace["logits"].abs().max()
    if name == "gemma2":
        assert (
            trace["blocks.0.attn.scores"].abs().max() > ATTN_CAP > trace["blocks.0.attn.capped"].abs().max()
        )
    visible = (trace["blocks.0.attn.pattern"][0, 0] > 0).sum(-1)  # t: keys each query reads
    assert visible.max() == WINDOW
    if name == "gemma3":  # layer 2 is global
        assert (trace["blocks.2.attn.pattern"][0, 0] > 0).sum(-1).max() == TOKENS


@pytest.mark.parametrize("name", list(BUILDERS))
def test_greedy_24_tokens_match_hf_generate(models, name):
    """A batch of two prompts, the second left-padded: 24 greedy tokens each, as HF's."""
    hf, lm = models[name]
    ids = _ids(2, rows=2, tokens=9)
    mask = torch.ones_like(ids)
    mask[1, :4], ids[1, :4] = 0, 0  # row 1 is a 5-token prompt
    with torch.no_grad():
        out = hf.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=24,
            min_new_tokens=24,
            do_sample=False,
            pad_token_id=0,
        )
    theirs = out[:, ids.shape[1] :].tolist()
    settings = GenerationSettings(max_new_tokens=24, min_new_tokens=24, greedy=True)
    assert generate_ids(lm.net, ids, settings, attention_mask=mask) == theirs


@pytest.mark.parametrize("name", list(BUILDERS))
def test_cached_equals_uncached(models, name):
    """Token by token over a KV cache (which keeps every key; the masks hide the old ones from
    the windowed layers) the logits are the whole sequence's; a left-padded batch generates
    the same with and without the cache."""
    _, lm = models[name]
    net = lm.net
    ids = _ids(3, rows=1, tokens=TOKENS + 4)
    whole = net(ids)  # 1 t v
    cache = KVCache.for_model(net.config, 1, ids.shape[1])
    steps = [net(ids[:, :5], cache=cache)]
    steps += [net(ids[:, i : i + 1], cache=cache) for i in range(5, ids.shape[1])]
    assert (torch.cat(steps, dim=1) - whole).abs().max() <= 1e-5
    prompts = [_ids(4, rows=1, tokens=9)[0].tolist(), _ids(5, rows=1, tokens=5)[0].tolist()]
    settings = GenerationSettings(max_new_tokens=12, min_new_tokens=12, greedy=True)
    cached = generate_ids(net, prompts, settings)
    assert cached == generate_ids(net, prompts, settings, use_cache=False)
    assert cached == [generate_ids(net, [p], settings)[0] for p in prompts]  # padding changes nothing


@pytest.mark.parametrize("name", list(BUILDERS))
def test_the_explicit_and_fused_paths_agree(models, name):
    """Soft-capped layers always take the explicit path (the fused kernel cannot cap); the
    others choose, and every choice gives the same logits, traced or not."""
    _, lm = models[name]
    net, ids = lm.net, _ids(6)
    mask = torch.ones_like(ids)
    mask[0, :3] = 0  # left padding in row 0
    with torch.no_grad(), net.attention_impl("explicit"):
        explicit = net(ids, mask)
    with torch.no_grad(), net.attention_impl("fused"):
        fused = net(ids, mask)
    assert (explicit - fused)[:, 3:].abs().max() <= 1e-5
    with torch.no_grad():
        untraced = net(ids)
    traced = lm.trace(ids, ["blocks.*.attn.pattern", "logits"])["logits"]
    assert torch.equal(traced, untraced)


# the parts, against the formulas ---------------------------------------------------------------
def _tiny(**fields):
    torch.manual_seed(0)
    config = llama_style(
        **{"vocab_size": 40, "d_model": 16, "n_layers": 1, "n_heads": 4, "n_kv_heads": 2, **fields}
    )
    net = gf.build(config).eval()
    with torch.no_grad():
        for name, param in net.named_parameters():
            if "norm" in name:
                param.normal_(1.0, 0.3)
    return net


def _rms(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def test_sandwich_and_output_norms_are_their_equations():
    """sandwich: x + N2(f(N1(x))); output: x + N(f(x)), each sublayer; a final norm after both."""
    x = torch.randn(2, 5, 16)
    for placement in ("sandwich", "output"):
        net = _tiny(norm_placement=placement)
        block = net.stack.blocks[0]
        eps = net.config.norm_eps

        def attention(y, block=block):
            return block.attn(y)

        if placement == "sandwich":
            h = x + _rms(attention(_rms(x, block.attn_norm.weight, eps)), block.attn_post_norm.weight, eps)
            expected = h + _rms(
                block.ffn(_rms(h, block.ffn_norm.weight, eps)), block.ffn_post_norm.weight, eps
            )
        else:
            h = x + _rms(attention(x), block.attn_post_norm.weight, eps)
            expected = h + _rms(block.ffn(h), block.ffn_post_norm.weight, eps)
        with torch.no_grad():
            assert torch.allclose(block(x), expected, atol=1e-6), placement
        assert isinstance(net.stack.final_norm, torch.nn.Module) and hasattr(net.stack.final_norm, "weight")
        assert (block.attn_norm is None) == (placement == "output")
        names = [n for n in net.hook_points if n.startswith("blocks.0.")]
        assert names.index("blocks.0.attn.out") < names.index("blocks.0.attn.post_norm")
        assert names.index("blocks.0.attn.post_norm") < names.index("blocks.0.resid_mid")
        assert names.index("blocks.0.ffn.out") < names.index("blocks.0.ffn.post_norm")
        assert names.index("blocks.0.ffn.post_norm") < names.index("blocks.0.resid_post")


def test_soft_capped_attention_is_its_equation():
    """softmax(cap tanh((QK^T / sqrt(e)) / cap), masked) V, with the cap traced as its own step
    between the scores and the pattern; "fused" falls back to it."""
    net = _tiny(attn_softcap=0.5)
    attn = net.stack.blocks[0].attn
    lm = gf.LanguageModel(net)
    ids = torch.randint(0, 40, (1, 6))
    trace = lm.trace(ids, ["blocks.0.attn.*", "logits"])
    q, k, v = trace["blocks.0.attn.q"], trace["blocks.0.attn.k"], trace["blocks.0.attn.v"]
    k, v = k.repeat_interleave(2, dim=1), v.repeat_interleave(2, dim=1)
    scores = q @ k.transpose(-1, -2) / 2.0  # d_head 4
    capped = 0.5 * torch.tanh(scores / 0.5)
    assert torch.allclose(trace["blocks.0.attn.scores"], scores, atol=1e-6)
    assert torch.allclose(trace["blocks.0.attn.capped"], capped, atol=1e-6)
    causal = torch.ones(6, 6, dtype=torch.bool).tril()
    pattern = torch.softmax(capped.masked_fill(~causal, float("-inf")), dim=-1)
    assert torch.allclose(trace["blocks.0.attn.pattern"], pattern, atol=1e-6)
    assert torch.allclose(trace["blocks.0.attn.z"], pattern @ v, atol=1e-6)
    names = list(net.hook_points)
    assert names.index("blocks.0.attn.scores") + 1 == names.index("blocks.0.attn.capped")
    assert names.index("blocks.0.attn.capped") + 1 == names.index("blocks.0.attn.pattern")
    with net.attention_impl("fused"):
        fused = net(ids)
    assert torch.allclose(fused, trace["logits"], atol=1e-6) and attn.softcap == 0.5


def test_soft_capped_logits_are_their_equation():
    net = _tiny(logit_softcap=2.0)
    lm = gf.LanguageModel(net)
    trace = lm.trace(torch.randint(0, 40, (1, 6)), ["final_norm", "logits_raw", "logits"])
    raw = trace["final_norm"] @ net.lm_head.weight.T
    assert torch.allclose(trace["logits_raw"], raw, atol=1e-5)
    assert torch.allclose(trace["logits"], 2.0 * torch.tanh(raw / 2.0), atol=1e-6)
    assert torch.allclose(net.unembed(trace["final_norm"]), trace["logits"], atol=1e-6)  # the lens too
    assert list(net.hook_points)[-2:] == ["logits_raw", "logits"]
    assert "logits_raw" not in _tiny().hook_points  # only a capped model has the step
    assert torch.equal(soft_cap(torch.tensor([0.0]), 2.0), torch.tensor([0.0]))


def test_qk_norm_over_all_heads_is_one_norm_per_projection():
    """OLMo 2: RMSNorm over the h e query features and the g e key features, before the heads."""
    net = _tiny(qk_norm=True, qk_norm_scope="all")
    attn = net.stack.blocks[0].attn
    assert attn.q_norm.weight.shape == (16,) and attn.k_norm.weight.shape == (8,)  # h e, g e
    x = torch.randn(1, 5, 16)
    q, k, _ = attn.qkv_proj(x).split((16, 8, 8), dim=-1)
    eps = net.config.norm_eps
    q = _rms(q, attn.q_norm.weight, eps).view(1, 5, 4, 4).transpose(1, 2)
    k = _rms(k, attn.k_norm.weight, eps).view(1, 5, 2, 4).transpose(1, 2)
    ours_q, ours_k, _ = attn._self_projections(x, None)
    assert torch.allclose(ours_q, q, atol=1e-6) and torch.allclose(ours_k, k, atol=1e-6)
    head = _tiny(qk_norm=True).stack.blocks[0].attn
    assert head.q_norm.weight.shape == (4,) and head.k_norm.weight.shape == (4,)  # per head: e


def test_each_layer_gets_its_window_and_its_rotation():
    """One mask per distinct window and one rotation per base, made once per pass: layer i's
    scores are hidden beyond its own window, and windowed layers turn by rope_local_base."""
    net = _tiny(n_layers=4, attn_window=2, global_every=2, rope_local_base=50.0)
    assert net.stack.windows == [2, None, 2, None]
    assert net.stack.rotary_local.base == 50.0 and net.stack.rotary.base == net.config.rope_base
    trace = gf.LanguageModel(net).trace(torch.randint(0, 40, (1, 7)), ["blocks.*.attn.pattern"])
    for i, window in enumerate(net.stack.windows):
        visible = (trace[f"blocks.{i}.attn.pattern"][0, 0] > 0).sum(-1)
        assert visible.tolist() == [min(j + 1, window or 7) for j in range(7)], i


def test_what_hugging_face_cannot_be_read_as_is_refused():
    from glassformer.formats.hf_gemma2 import config_from_hf as gemma

    hf = _gemma2().config.to_dict()
    with pytest.raises(ValueError, match=r"global attention in layers \[1, 2\].*every k-th layer"):
        gemma(
            {
                **hf,
                "layer_types": ["sliding_attention", "full_attention", "full_attention", "sliding_attention"],
            },
            set(),
        )
    with pytest.raises(ValueError, match="RoPE type 'yarn' is not supported"):
        gemma({**hf, "rope_parameters": {"rope_type": "yarn", "factor": 4.0}}, set())
    with pytest.raises(ValueError, match="rope_type = 'default' in rope_parameters and 'yarn' in the older"):
        gemma({**hf, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}, set())
    gemma3 = _gemma3().config.to_dict()
    with pytest.raises(ValueError, match="use_bidirectional_attention=True"):
        gemma({**gemma3, "use_bidirectional_attention": True}, set())
    # transformers' Gemma 3 never applies attn_logit_softcapping: neither do we
    assert gemma({**gemma3, "attn_logit_softcapping": 50.0}, set()).attn_softcap is None
    # a config.json from before layer_types: Gemma 3's sliding_window_pattern
    old = {k: v for k, v in gemma3.items() if k != "layer_types"}
    assert gemma({**old, "sliding_window_pattern": 3}, set()).global_every == 3


# OLMo 2 is written too --------------------------------------------------------------------------
def test_olmo2_hf_to_ours_to_hf_is_the_same_model(models, tmp_path):
    """HF's OLMo 2 -> ours -> save_hf -> HF's from_pretrained: every tensor, every logit equal."""
    hf, lm = models["olmo2"]
    done = lm.save_hf(tmp_path / "export")
    assert (done.model_type, done.architecture) == ("olmo2", "Olmo2ForCausalLM")
    back, info = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path / "export", output_loading_info=True
    )
    assert type(back) is type(hf) and not any(info.values()), info
    ours, theirs = hf.state_dict(), back.state_dict()
    assert sorted(ours) == sorted(theirs) and all(torch.equal(ours[k], theirs[k]) for k in ours)
    back.eval().config._attn_implementation = "eager"  # as the fixture's: the same kernels
    ids = _ids(7)
    with torch.no_grad():
        assert torch.equal(hf(input_ids=ids).logits, back(input_ids=ids).logits)


def test_an_olmo2_built_here_loads_in_hf_with_our_logits(tmp_path):
    torch.manual_seed(0)
    config = llama_style(
        vocab_size=VOCAB,
        d_model=32,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        d_ff=48,
        norm_placement="output",
        qk_norm=True,
        qk_norm_scope="all",
        norm_eps=1e-5,
        rope_scaling="linear",
        rope_scaling_factor=2.0,
        tie_embeddings=False,
    )
    net = gf.build(config).eval()
    with torch.no_grad():  # norms start at 1: make them matter
        for name, param in net.named_parameters():
            if "norm" in name:
                param.normal_(1.0, 0.3)
    gf.LanguageModel(net).save_hf(tmp_path / "out")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    ids = _ids(8)
    with torch.no_grad():
        diff = (hf(input_ids=ids).logits - net(ids)).abs().max().item()
    assert diff <= 1e-5
    assert gf.load(tmp_path / "out").config == config
    sandwich = config.replace(norm_placement="sandwich", qk_norm_scope="head")  # Gemma's: not OLMo 2's
    with pytest.raises(ValueError, match="no Hugging Face family holds this decoder model exactly"):
        gf.LanguageModel(gf.build(sandwich)).save_hf(tmp_path / "refused")
