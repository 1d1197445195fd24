"""Mixtures of experts: the layer against a token-by-token reference, the router's losses
against Hugging Face's, and Mixtral and Qwen2-MoE checkpoints at parity with HF."""

from __future__ import annotations

import warnings

import pytest
import torch

import glassformer as gf
from glassformer.config import ModelConfig
from glassformer.generate import GenerationSettings, generate_ids
from glassformer.models import build
from glassformer.nn.moe import MoEFeedForward, collected_router_logits, router_losses

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

VOCAB = 96
SMALL = dict(
    vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2
)


def _config(**fields) -> ModelConfig:
    base = dict(vocab_size=VOCAB, d_model=32, n_layers=2, n_heads=4, activation="swiglu", n_experts=4)
    return ModelConfig(**{**base, **fields})


def _reference(moe: MoEFeedForward, x: torch.Tensor, config: ModelConfig) -> torch.Tensor:
    """The mixture token by token: score, pick k, weigh, sum (and the gated shared expert)."""
    out = torch.zeros_like(x)
    for b in range(x.shape[0]):
        for t in range(x.shape[1]):
            token = x[b, t]
            logits = moe.router.weight @ token  # n
            probs = logits.softmax(-1) if config.router == "softmax" else logits.sigmoid()
            weights, chosen = probs.topk(config.experts_per_token)
            if config.normalize_expert_weights:
                weights = weights / weights.sum()
            for w, e in zip(weights, chosen.tolist(), strict=True):
                out[b, t] += w * moe.experts[e](token[None])[0]
            if moe.shared_expert is not None:
                gate = torch.sigmoid(moe.shared_expert_gate.weight @ token)
                out[b, t] += gate * moe.shared_expert(token[None])[0]
    return out


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"router": "sigmoid", "normalize_expert_weights": False},
        {"experts_per_token": 1, "shared_expert_d_ff": 24, "expert_d_ff": 16},
        {"n_experts": 8, "experts_per_token": 3, "activation": "gelu", "ffn_bias": True},
    ],
)
def test_mixture_equals_the_token_by_token_reference(fields):
    torch.manual_seed(0)
    config = _config(**fields)
    moe = MoEFeedForward(config)
    for p in moe.parameters():  # biases start at zero: make every parameter matter
        torch.nn.init.normal_(p, 0.0, 0.3)
    x = torch.randn(2, 5, 32)
    with torch.no_grad():
        assert torch.allclose(moe(x), _reference(moe, x, config), atol=1e-5)


def test_mixture_hook_points_show_the_routing():
    torch.manual_seed(0)
    lm = gf.LanguageModel(build(_config(shared_expert_d_ff=16)))
    trace = lm.trace(torch.randint(0, VOCAB, (1, 6)), "blocks.1.ffn.*")
    n, k = 4, 2
    assert trace["blocks.1.ffn.router_logits"].shape == (1, 6, n)
    assert torch.allclose(trace["blocks.1.ffn.router_probs"].sum(-1), torch.ones(1, 6))
    chosen, weights = trace["blocks.1.ffn.experts"], trace["blocks.1.ffn.expert_weights"]
    assert chosen.shape == weights.shape == (1, 6, k) and chosen.dtype == torch.long
    assert torch.allclose(weights.sum(-1), torch.ones(1, 6))  # renormalized top-k
    expert_out = trace["blocks.1.ffn.expert_out"]  # 1 k t d
    assert expert_out.shape == (1, k, 6, 32)
    mixed = (weights.transpose(1, 2)[..., None] * expert_out).sum(1) + trace["blocks.1.ffn.shared_out"]
    assert torch.allclose(mixed, trace["blocks.1.ffn.out"], atol=1e-6)


def test_load_balancing_loss_is_hugging_face_s_over_k():
    """HF sums over the k choices, so an even load scores k there and 1 here."""
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

    torch.manual_seed(0)
    logits = [torch.randn(3, 10, 8) for _ in range(2)]
    ours = router_losses(logits, k=2)
    for layer in logits:  # HF pools all layers' tokens first; ours is the mean of each layer's loss
        theirs = load_balancing_loss_func((layer.reshape(-1, 8),), 8, top_k=2)
        assert torch.allclose(router_losses([layer], k=2).aux * 2, theirs, atol=1e-6)
    assert torch.allclose(ours.load.sum(-1), torch.ones(2))
    expected_z = torch.stack([torch.logsumexp(x, -1).square().mean() for x in logits]).mean()
    assert torch.allclose(ours.z, expected_z)


def test_even_routing_scores_one_and_one_expert_scores_n():
    n = 4
    even = torch.zeros(1, n, n)
    even[0, torch.arange(n), torch.arange(n)] = 5.0  # token i prefers expert i
    assert router_losses([even], k=1).aux.item() == pytest.approx(1.0, abs=1e-3)
    collapsed = torch.zeros(1, n, n)
    collapsed[..., 0] = 50.0  # every token sends everything to expert 0
    assert router_losses([collapsed], k=1).aux.item() == pytest.approx(n, abs=1e-3)
    # capacity c t k / n per expert: an even load drops nothing, a collapsed one all but c / n
    assert router_losses([even], k=1).over_capacity().item() == pytest.approx(0.0)
    losses = router_losses([collapsed], k=1)
    assert losses.over_capacity().item() == pytest.approx(1 - 1.25 / n)  # capacity factor 1.25
    assert losses.over_capacity(2.0).item() == pytest.approx(1 - 2.0 / n)


def test_router_losses_reach_the_router_through_the_hooks():
    torch.manual_seed(0)
    net = build(_config())
    with collected_router_logits(net.hook_points) as found:
        net(torch.randint(0, VOCAB, (2, 8)))
    assert len(found) == 2
    losses = router_losses(found, k=2)
    losses.aux.backward()
    assert net.stack.blocks[0].ffn.router.weight.grad.abs().sum() > 0


# -- Hugging Face checkpoints --------------------------------------------------------------------


def _mixtral(window: int | None = None):
    config = transformers.MixtralConfig(
        **SMALL, intermediate_size=24, num_local_experts=4, num_experts_per_tok=2, sliding_window=window
    )
    model = transformers.MixtralForCausalLM(config)
    model.config._attn_implementation = "eager"
    return model


def _qwen2_moe():
    config = transformers.Qwen2MoeConfig(
        **SMALL,
        intermediate_size=40,
        moe_intermediate_size=24,
        shared_expert_intermediate_size=40,
        num_experts=6,
        num_experts_per_tok=2,
        norm_topk_prob=False,
        tie_word_embeddings=False,
    )
    model = transformers.Qwen2MoeForCausalLM(config)
    with torch.no_grad():  # the q/k/v biases start at 0: make them matter
        for name, param in model.named_parameters():
            if name.endswith("_proj.bias"):
                param.normal_(0.0, 0.3)
    return model


BUILDERS = {"mixtral": _mixtral, "mixtral-window": lambda: _mixtral(window=4), "qwen2-moe": _qwen2_moe}


@pytest.fixture(scope="module")
def models():
    out = {}
    for name, builder in BUILDERS.items():
        torch.manual_seed(0)
        hf = builder().eval()
        with torch.no_grad():  # a router at init scores every expert alike: spread it out
            for key, param in hf.named_parameters():
                if key.endswith("gate.weight") and param.dim() == 2:
                    param.normal_(0.0, 0.5)
        out[name] = (hf, gf.from_hf(hf))
    return out


@pytest.mark.parametrize("name", list(BUILDERS))
def test_logits_match_hf(models, name):
    hf, lm = models[name]
    torch.manual_seed(1)
    ids = torch.randint(3, VOCAB - 1, (2, 13))
    with torch.no_grad():
        theirs = hf(input_ids=ids).logits
    diff = (theirs - lm.logits(ids)).abs().max().item()
    print(f"{name}: max abs logit difference {diff:.2e}")
    assert diff <= 1e-4


@pytest.mark.parametrize("name", list(BUILDERS))
def test_greedy_32_tokens_match_hf_and_the_cache(models, name):
    hf, lm = models[name]
    torch.manual_seed(2)
    ids = torch.randint(3, VOCAB - 1, (1, 9))
    with torch.no_grad():
        theirs = hf.generate(
            input_ids=ids, max_new_tokens=32, min_new_tokens=32, do_sample=False, pad_token_id=0
        )[:, 9:].tolist()
    settings = GenerationSettings(max_new_tokens=32, min_new_tokens=32, greedy=True)
    assert generate_ids(lm.net, ids, settings) == theirs
    uncached = ids  # the same 32 tokens, each from a full forward pass without a cache
    for _ in range(32):
        uncached = torch.cat([uncached, lm.logits(uncached)[:, -1:].argmax(-1)], dim=1)
    assert uncached[:, 9:].tolist() == theirs


@pytest.mark.parametrize("name", ["mixtral", "qwen2-moe"])
def test_save_hf_is_loaded_by_hf_with_the_same_logits(models, name, tmp_path):
    hf, lm = models[name]
    written = lm.save_hf(tmp_path / name)
    assert written.model_type == hf.config.model_type
    again = transformers.AutoModelForCausalLM.from_pretrained(written.directory).eval()
    ids = torch.randint(3, VOCAB - 1, (1, 11))
    with torch.no_grad():
        assert torch.allclose(again(input_ids=ids).logits, lm.logits(ids), atol=1e-5)


def test_dense_layers_among_sparse_ones_are_refused():
    from glassformer.formats.hf import convert_hf

    hf = transformers.Qwen2MoeConfig(**SMALL, num_experts=4, mlp_only_layers=[1]).to_dict()
    with pytest.raises(ValueError, match="every layer must be a mixture"):
        convert_hf(hf, {})


# -- training ----------------------------------------------------------------------------------


def test_a_mixture_trains_with_its_router_losses_and_logs_each_expert_s_load(tmp_path):
    import json

    from glassformer.train import checkpoint
    from glassformer.train.settings import apply_overrides, load_preset
    from tests.test_trainer import TINY_CORPUS, make_trainer

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS)
    overrides = [f'data.corpus="{corpus}"', "model.n_layers=2", "model.d_model=32", "model.n_heads=2"]
    overrides += ["model.expert_d_ff=32", "train.steps=30", "train.eval_interval=10", "train.eval_batches=2"]
    overrides += ["train.tensorboard=false", "train.batch_size=4", "train.context=16", "train.lr=3e-3"]
    overrides += ["train.warmup_steps=2", "train.sample_tokens=8"]
    run = apply_overrides(load_preset("moe-shakespeare"), overrides)
    trainer = make_trainer(run, tmp_path)
    before = trainer.evaluate().loss
    router = trainer.net.stack.blocks[0].ffn.router.weight.detach().clone()
    last = trainer.fit()
    assert last["val_loss"] < before - 0.5
    assert not torch.equal(router, trainer.net.stack.blocks[0].ffn.router.weight)
    rows = [json.loads(line) for line in (tmp_path / "run" / "progress.jsonl").read_text().splitlines()]
    load = torch.tensor(rows[-1]["expert_load"])  # layers n
    assert load.shape == (2, 8) and torch.allclose(load.sum(-1), torch.ones(2), atol=1e-3)
    assert rows[-1]["router_aux"] >= 1.0 - 1e-3  # 1 only when perfectly balanced
    assert len(rows[-1]["expert_overflow"]) == 2 and all(0 <= x < 1 for x in rows[-1]["expert_overflow"])
    net, _ = checkpoint.load_model(tmp_path / "run")
    assert net.config.n_experts == 8 and net.config.experts_per_token == 2


def test_the_film_records_each_layer_s_expert_load():
    from glassformer.inspect.film import record_frame

    torch.manual_seed(0)
    net = build(_config(n_experts=6, experts_per_token=2))
    frame = record_frame(net, torch.randint(0, VOCAB, (1, 10)))
    chosen, load = torch.tensor(frame["experts"]["chosen"]), torch.tensor(frame["experts"]["load"])
    assert chosen.shape == (2, 10, 2) and load.shape == (2, 6)
    assert torch.allclose(load.sum(-1), torch.ones(2), atol=1e-3)
    assert torch.allclose(load[0], torch.bincount(chosen[0].flatten(), minlength=6) / 20, atol=1e-4)


# -- what a mixture costs ------------------------------------------------------------------------

COUNTED = {
    "mixtral-like": _config(n_experts=8, experts_per_token=2, expert_d_ff=48, ffn_bias=False),
    "qwen2-moe-like": _config(
        n_experts=6, expert_d_ff=24, shared_expert_d_ff=40, normalize_expert_weights=False
    ),
    "top-1 plain": _config(n_experts=4, experts_per_token=1, activation="gelu"),
}


@pytest.mark.parametrize("name", list(COUNTED))
def test_parameters_and_flops_count_the_active_experts(name):
    from torch.utils.flop_counter import FlopCounterMode

    from glassformer.inspect.costs import flops_per_token
    from glassformer.models.size import active_parameters, parameter_counts

    config = COUNTED[name]
    net = build(config).eval()
    assert sum(parameter_counts(config).values()) == sum(p.numel() for p in net.parameters())
    expert = sum(p.numel() for p in net.stack.blocks[0].ffn.experts[0].parameters())
    idle = config.n_layers * (config.n_experts - config.experts_per_token) * expert
    assert active_parameters(config) == sum(p.numel() for p in net.parameters()) - idle
    b, t = 2, 24
    counter = FlopCounterMode(display=False)
    with net.attention_impl("explicit"), counter, torch.no_grad():
        net(torch.randint(0, VOCAB, (b, t)))
    assert flops_per_token(config, t).forward == pytest.approx(counter.get_total_flops() / (b * t), rel=0.02)


@pytest.mark.parametrize("name", list(COUNTED))
def test_activation_bytes_match_the_saved_tensors(name):
    from glassformer.inspect.costs import activation_bytes
    from tests.test_count import ACTIVATION_TOLERANCE, saved_bytes

    config, b, t = COUNTED[name].replace(max_seq_len=64), 2, 32
    torch.manual_seed(0)
    net = build(config).train()
    measured = saved_bytes(net, torch.randint(0, config.vocab_size, (b, t)))
    assert activation_bytes(config, t, b) == pytest.approx(measured, rel=ACTIVATION_TOLERANCE)


def test_the_facade_gives_logits_and_router_losses_apart(models):
    hf, lm = models["mixtral"]
    ids = torch.randint(3, VOCAB - 1, (2, 9))
    with torch.no_grad():
        theirs = hf(input_ids=ids, output_router_logits=True)
    assert torch.allclose(lm.logits(ids), theirs.logits, atol=1e-4)
    from transformers.models.mixtral.modeling_mixtral import load_balancing_loss_func

    losses = lm.router_losses(ids)
    k, n = hf.config.num_experts_per_tok, hf.config.num_local_experts
    per_layer = [load_balancing_loss_func((layer,), n, top_k=k) for layer in theirs.router_logits]
    assert torch.allclose(losses.aux * k, torch.stack(per_layer).mean(), atol=1e-5)  # HF's, layer by layer
    assert losses.load.shape == (2, n)
    with pytest.raises(ValueError, match="needs a mixture of experts"):
        gf.LanguageModel(build(_config(n_experts=0))).router_losses(ids)
