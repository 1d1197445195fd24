"""Training parts: weight-decay groups, lr schedules, metrics, run directories."""

from __future__ import annotations

import json
import math
import os
import random

import numpy as np
import pytest
import torch
from safetensors import safe_open

import glassformer.atomic
from glassformer.tokenizers.char import CharTokenizer
from glassformer.train import checkpoint
from glassformer.train import metrics as M
from glassformer.train.optim import make_optimizer, parameter_groups
from glassformer.train.run_list import list_runs
from glassformer.train.schedules import lr_at, lr_multiplier, make_scheduler, transformer_peak_lr
from tests.conftest import tiny, tiny_model

BERT_LIKE = dict(
    family="encoder",
    type_vocab_size=2,
    embed_norm=True,
    pooler=True,
    norm_placement="post",
    activation="gelu",
)
T5_LIKE = dict(
    family="encoder_decoder",
    positions="t5_relative",
    norm="rmsnorm",
    qkv_bias=False,
    out_bias=False,
    ffn_bias=False,
    decoder_start_token_id=0,
)


def names(group):
    return set(group["param_names"])


# weight-decay groups ------------------------------------------------------------------
def test_decay_only_linear_matrices_in_a_tied_decoder():
    net = tiny_model()
    decay, no_decay = parameter_groups(net, weight_decay=0.1)
    assert decay["weight_decay"] == 0.1 and no_decay["weight_decay"] == 0.0
    expected = {
        f"stack.blocks.{i}.{m}.weight"
        for i in range(2)
        for m in ("attn.qkv_proj", "attn.o_proj", "ffn.up_proj", "ffn.down_proj")
    }
    assert names(decay) == expected
    assert {
        "stack.embed.token.weight",
        "stack.embed.position.weight",
        "stack.final_norm.weight",
        "stack.blocks.0.attn.qkv_proj.bias",
    } <= names(no_decay)
    assert "lm_head.weight" not in names(decay) | names(no_decay)  # tied: counted once, as the embedding
    # every trainable parameter appears exactly once
    grouped = [id(p) for g in (decay, no_decay) for p in g["params"]]
    assert len(grouped) == len(set(grouped)) == len(list(net.parameters()))
    decay, _ = parameter_groups(net, 0.1, decay_embeddings=True)
    assert names(decay) == expected | {"stack.embed.token.weight"}  # position table still spared


def test_untied_head_decays_and_frozen_parameters_are_left_out():
    net = tiny_model(tie_embeddings=False)
    net.stack.final_norm.weight.requires_grad_(False)
    decay, no_decay = parameter_groups(net, 0.1)
    assert "lm_head.weight" in names(decay) and "stack.embed.token.weight" in names(no_decay)
    assert "stack.final_norm.weight" not in names(decay) | names(no_decay)


def test_decay_groups_of_a_bert_like_encoder_and_t5():
    decay, no_decay = parameter_groups(tiny_model(**BERT_LIKE), 0.01)
    assert {"pooler.weight", "mlm_head.dense.weight", "stack.blocks.1.ffn.down_proj.weight"} <= names(decay)
    for spared in (
        "stack.embed.token_type.weight",
        "stack.embed.norm.weight",
        "mlm_head.decoder.bias",
        "mlm_head.norm.weight",
    ):
        assert spared in names(no_decay)
    assert all(n.endswith(".weight") and "norm" not in n and "embed" not in n for n in names(decay))
    assert "mlm_head.decoder.weight" not in names(decay) | names(no_decay)  # tied to stack.embed.token
    decay, no_decay = parameter_groups(tiny_model(**T5_LIKE), 0.1)
    assert {"shared.weight", "encoder.relative_bias.weight", "decoder.relative_bias.weight"} <= names(
        no_decay
    )
    assert {
        "decoder.blocks.0.cross_attn.q_proj.weight",
        "decoder.blocks.0.cross_attn.kv_proj.weight",
    } <= names(decay)


def test_adamw_decays_only_the_decay_group():
    net = tiny_model()
    opt = make_optimizer(net, "adamw", lr=0.1, weight_decay=0.5)
    before = {n: p.detach().clone() for n, p in net.named_parameters()}
    for p in net.parameters():
        p.grad = torch.zeros_like(p)  # Adam's update is 0: only decoupled decay moves weights
    opt.step()
    decayed = set(opt.param_groups[0]["param_names"])
    for name, p in net.named_parameters():
        factor = 1 - 0.1 * 0.5 if name in decayed else 1.0
        torch.testing.assert_close(p.detach(), before[name] * factor)
    assert opt.param_groups[0]["betas"] == (0.9, 0.95)


def test_optimizer_errors_and_sgd():
    net = tiny_model()
    sgd = make_optimizer(net, "sgd", lr=0.1, momentum=0.8, weight_decay=0.0)
    assert isinstance(sgd, torch.optim.SGD) and sgd.param_groups[0]["momentum"] == 0.8
    with pytest.raises(ValueError, match="unknown optimizer 'adam'.*adamw, sgd"):
        make_optimizer(net, "adam", lr=1e-3)
    with pytest.raises(ValueError, match="lr=0 must be a positive"):
        make_optimizer(net, lr=0)
    with pytest.raises(ValueError, match="weight_decay=-1"):
        make_optimizer(net, lr=1e-3, weight_decay=-1)
    with pytest.raises(ValueError, match="betas"):
        make_optimizer(net, lr=1e-3, betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="momentum"):
        make_optimizer(net, "sgd", lr=1e-3, momentum=1.5)


# schedules ---------------------------------------------------------------------------
def test_schedule_values_at_key_steps():
    cos = lambda s: lr_at(s, "cosine", 1e-3, warmup_steps=10, total_steps=110, min_lr_ratio=0.1)
    lin = lambda s: lr_at(s, "linear", 1e-3, warmup_steps=10, total_steps=110, min_lr_ratio=0.0)
    const = lambda s: lr_at(s, "constant", 1e-3, warmup_steps=4)
    expected = [
        (cos(0), 1e-4),  # (0 + 1) / 10 of the peak: warmup never starts at 0
        (cos(4), 5e-4),
        (cos(9), 1e-3),  # warmup ends at the peak
        (cos(10), 1e-3),  # decay starts at p = 0
        (cos(35), 1e-3 * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi / 4)))),
        (cos(60), 1e-3 * 0.55),  # half way: cos = 0
        (cos(110), 1e-4),  # the floor min_lr_ratio * peak ...
        (cos(1000), 1e-4),  # ... kept after total_steps
        (lin(0), 1e-4),
        (lin(35), 0.75e-3),
        (lin(110), 0.0),
        (const(0), 0.25e-3),
        (const(3), 1e-3),
        (const(10_000), 1e-3),
    ]
    for got, want in expected:
        assert got == pytest.approx(want, rel=1e-12, abs=1e-15)


def test_inverse_sqrt_is_the_original_transformer_schedule():
    def paper(step_num):  # Vaswani et al. 2017, eq. 3
        return 512**-0.5 * min(step_num**-0.5, step_num * 4000**-1.5)

    for step in (0, 1, 999, 3998, 3999, 4000, 15_999, 100_000):
        assert lr_at(step, "inverse_sqrt", None, warmup_steps=4000, d_model=512) == pytest.approx(
            paper(step + 1)
        )
    assert lr_multiplier(3999, "inverse_sqrt", warmup_steps=4000) == pytest.approx(1.0)  # peak = base_lr
    assert transformer_peak_lr(512, 4000) == pytest.approx(paper(4000))
    assert lr_at(15_999, "inverse_sqrt", 2e-3, warmup_steps=4000) == pytest.approx(1e-3)  # sqrt(4000/16000)


@pytest.mark.parametrize("schedule", ["constant", "cosine", "linear", "inverse_sqrt"])
def test_schedules_rise_during_warmup_then_never_rise(schedule):
    m = [lr_multiplier(s, schedule, warmup_steps=20, total_steps=200, min_lr_ratio=0.1) for s in range(260)]
    assert 0 < m[0] < m[1]
    assert all(a < b for a, b in zip(m[:20], m[1:20], strict=False))
    assert max(m) == pytest.approx(1.0) and m[19] == pytest.approx(1.0)
    assert all(b <= a + 1e-15 for a, b in zip(m[19:], m[20:], strict=False))
    assert min(m) > 0


def test_schedule_errors():
    with pytest.raises(ValueError, match="unknown schedule 'cosin'"):
        lr_at(0, "cosin", 1e-3, 0, 10)
    with pytest.raises(ValueError, match="total_steps must be an integer larger than warmup_steps"):
        lr_at(0, "cosine", 1e-3, warmup_steps=10, total_steps=10)
    with pytest.raises(ValueError, match="min_lr_ratio"):
        lr_at(0, "linear", 1e-3, 0, 10, min_lr_ratio=1.5)
    with pytest.raises(ValueError, match="base_lr=None"):
        lr_at(0, "cosine", None, 0, 10, d_model=64)
    with pytest.raises(ValueError, match="warmup_steps >= 1"):
        lr_at(0, "inverse_sqrt", 1e-3, warmup_steps=0)
    with pytest.raises(ValueError, match="step=-1"):
        lr_at(-1, "constant", 1e-3)


def test_scheduler_follows_lr_at_and_resumes_from_its_state_dict():
    def fresh():
        opt = make_optimizer(tiny_model(n_layers=1), lr=1e-3)
        return opt, make_scheduler(opt, "cosine", warmup_steps=3, total_steps=12, d_model=32)

    opt, sched = fresh()
    seen = []
    for _ in range(6):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([lr_at(s, "cosine", 1e-3, 3, 12) for s in range(6)])
    assert all(g["lr"] == opt.param_groups[0]["lr"] for g in opt.param_groups)
    opt2, sched2 = fresh()
    # both, as a resume does: LambdaLR.load_state_dict restores counters, not the groups' lr
    opt2.load_state_dict(opt.state_dict())
    sched2.load_state_dict(sched.state_dict())
    for step in range(6, 14):
        assert opt2.param_groups[0]["lr"] == pytest.approx(lr_at(step, "cosine", 1e-3, 3, 12))
        opt2.step()
        sched2.step()


# metrics -----------------------------------------------------------------------------
def test_cross_entropy_against_hand_computation():
    logits = torch.randn(2, 3, 5)
    labels = torch.tensor([[1, 4, -100], [0, -100, 2]])
    logp = torch.log_softmax(logits, dim=-1)
    scored = [(0, 0), (0, 1), (1, 0), (1, 2)]
    nll = [-logp[b, t, labels[b, t]] for b, t in scored]
    torch.testing.assert_close(M.cross_entropy(logits, labels), sum(nll) / 4)
    eps = 0.1
    smooth = [(1 - eps) * nll_i - eps * logp[b, t].mean() for nll_i, (b, t) in zip(nll, scored, strict=True)]
    torch.testing.assert_close(M.cross_entropy(logits, labels, label_smoothing=eps), sum(smooth) / 4)
    uniform = torch.zeros(1, 4, 7)
    assert M.perplexity(M.cross_entropy(uniform, torch.tensor([[0, 1, 2, 3]]))) == pytest.approx(7.0)
    with pytest.raises(ValueError, match="do not match"):
        M.cross_entropy(logits, labels[:, :2])
    with pytest.raises(ValueError, match="label_smoothing"):
        M.cross_entropy(logits, labels, label_smoothing=1.0)


def test_accuracy_perplexity_and_bits_per_character():
    logits = torch.tensor([[[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 0.0, 3.0], [3.0, 0.0, 0.0]]])
    assert M.token_accuracy(logits, torch.tensor([[0, 1, 0, -100]])) == pytest.approx(2 / 3)
    assert math.isnan(M.token_accuracy(logits, torch.full((1, 4), -100)))
    assert M.perplexity(torch.tensor(0.0)) == 1.0 and M.perplexity(1e6) == math.inf
    # 2 nats/token, 100 tokens over 400 characters: 0.5 nats/char = 0.5 / ln 2 bits/char
    assert M.bits_per_character(2.0, 100, 400) == pytest.approx(0.5 / math.log(2))


def test_expected_calibration_error_of_a_hand_computed_example():
    probs = torch.tensor([[0.95, 0.05], [0.05, 0.95], [0.62, 0.38], [0.35, 0.65], [0.5, 0.5]])
    labels = torch.tensor([0, 0, 0, 1, -100])  # right, wrong, right, right, not scored
    # bin (0.9, 1]: acc 1/2, conf 0.95; bin (0.6, 0.7]: acc 1, conf (0.62 + 0.65) / 2 = 0.635
    expected = 2 / 4 * abs(0.5 - 0.95) + 2 / 4 * abs(1.0 - 0.635)
    assert M.expected_calibration_error(probs.log(), labels, n_bins=10) == pytest.approx(expected)
    bins = M.calibration_bins(probs.log(), labels, n_bins=10)
    assert bins["count"] == [0, 0, 0, 0, 0, 0, 2, 0, 0, 2]
    assert bins["accuracy"][9] == 0.5 and math.isnan(bins["accuracy"][0])


def test_ece_is_near_zero_when_calibrated_and_equals_confidence_when_always_wrong():
    g = torch.Generator().manual_seed(0)
    confidence = 0.5 + 0.5 * torch.rand(20_000, generator=g, dtype=torch.float64)
    correct = torch.rand(20_000, generator=g, dtype=torch.float64) < confidence
    logits = torch.stack([confidence.log(), (1 - confidence).log()], dim=-1)  # class 0 with p = confidence
    labels = torch.where(correct, 0, 1)
    assert M.expected_calibration_error(logits, labels) < 0.02
    assert M.expected_calibration_error(logits, torch.ones_like(labels)) == pytest.approx(
        confidence[confidence > 0.5].mean().item(), abs=1e-9
    )


def test_attention_entropy_per_head():
    pattern = torch.zeros(2, 3, 4, 4)  # b h t s
    pattern[:, 0, :, 1] = 1.0  # head 0 always looks at one key: 0 nats
    pattern[:, 1] = 0.25  # head 1 spreads over 4 keys: log 4
    causal = torch.tril(torch.ones(4, 4))
    pattern[:, 2] = causal / causal.sum(-1, keepdim=True)  # head 2: query i spreads over i + 1 keys
    pattern[1, 2, 3] = 0.0  # a fully masked query row: left out of the mean
    expected_2 = (2 * (0 + math.log(2) + math.log(3)) + math.log(4)) / 7
    torch.testing.assert_close(M.attention_entropy(pattern), torch.tensor([0.0, math.log(4), expected_2]))
    assert math.isnan(M.attention_entropy(torch.zeros(1, 1, 2, 2))[0])
    with pytest.raises(ValueError, match="batch, heads, queries, keys"):
        M.attention_entropy(torch.zeros(3, 4, 4))


# run directories ---------------------------------------------------------------------
def _batch(net, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, net.config.vocab_size, (2, 6), generator=g)
    if net.config.family == "encoder_decoder":
        return (ids, ids[:, :4])
    return (ids,)


def _train(net, opt, steps, seed=0):
    for i in range(steps):
        net.train()
        logits = net(*_batch(net, seed + i))
        labels = torch.randint(
            0, net.config.vocab_size, logits.shape[:2], generator=torch.Generator().manual_seed(i)
        )
        M.cross_entropy(logits, labels).backward()
        opt.step()
        opt.zero_grad()


def _save(run_dir, net, opt=None, step=0, tok=None):
    state = {"step": step, "rng": checkpoint.capture_rng(), "data": {"seed": 3, "step": step}}
    if opt is not None:
        state["optimizer"] = opt.state_dict()
    checkpoint.save_checkpoint(run_dir, net, tok, {"name": "tiny", "train": {"lr": 1e-3}}, state)


def _snapshot(folder):
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.mark.parametrize("overrides", [{}, BERT_LIKE, T5_LIKE], ids=["decoder", "encoder", "encoder_decoder"])
def test_round_trip_keeps_logits_ties_and_optimizer_state(tmp_path, overrides):
    net = tiny_model(**overrides)
    opt = make_optimizer(net, lr=1e-2)
    _train(net, opt, steps=2)
    tok = CharTokenizer.from_text("abcdefg hij")
    _save(tmp_path, net, opt, step=2, tok=tok)
    before = _snapshot(tmp_path)
    loaded, loaded_tok = checkpoint.load_model(tmp_path)
    state = checkpoint.load_trainer_state(tmp_path)
    assert _snapshot(tmp_path) == before  # loading never writes
    assert not loaded.training and loaded_tok.encode("bad hij") == tok.encode("bad hij")
    net.eval()
    with torch.no_grad():
        assert torch.equal(net(*_batch(net, 9)), loaded(*_batch(net, 9)))
    with safe_open(str(tmp_path / "model.safetensors"), "pt") as f:
        stored = set(f.keys())
    assert "lm_head.weight" not in stored and "mlm_head.decoder.weight" not in stored  # tied: stored once
    if overrides.get("family") == "encoder_decoder":
        assert loaded.lm_head.weight is loaded.shared.weight
    elif overrides.get("family") == "encoder":
        assert loaded.mlm_head.decoder.weight is loaded.stack.embed.token.weight
    else:
        assert loaded.lm_head.weight is loaded.stack.embed.token.weight
    # the restored optimizer continues exactly like the original
    opt2 = make_optimizer(loaded, lr=1e-2)
    opt2.load_state_dict(state["optimizer"])
    for (k, a), b in zip(opt.state_dict()["state"].items(), opt2.state_dict()["state"].values(), strict=True):
        assert all(torch.equal(a[key], b[key]) for key in a), k
    _train(net, opt, steps=1, seed=5)
    _train(loaded, opt2, steps=1, seed=5)
    for (name, a), b in zip(net.state_dict().items(), loaded.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_rng_restore_reproduces_draws_through_a_checkpoint(tmp_path):
    net = tiny_model(n_layers=1)
    random.gauss(0, 1)  # leaves a cached gaussian in Python's state
    np.random.standard_normal()  # and in numpy's
    _save(tmp_path, net, step=0)
    checkpoint.load_model(tmp_path)  # building the model must not consume the caller's random numbers
    draws = torch.rand(3), np.random.rand(3), np.random.standard_normal(), random.random(), random.gauss(0, 1)
    checkpoint.restore_rng(checkpoint.load_trainer_state(tmp_path)["rng"])
    again = torch.rand(3), np.random.rand(3), np.random.standard_normal(), random.random(), random.gauss(0, 1)
    assert torch.equal(draws[0], again[0]) and np.array_equal(draws[1], again[1])
    assert draws[2:] == again[2:]
    with pytest.raises(ValueError, match="lacks numpy"):
        checkpoint.restore_rng({"torch": torch.get_rng_state(), "python": {}})


def test_a_crash_mid_write_leaves_the_old_files(tmp_path, monkeypatch):
    net = tiny_model(n_layers=1)
    _save(tmp_path, net, step=1)
    before = {n: b for n, (b, _) in _snapshot(tmp_path).items()}
    with torch.no_grad():
        net.stack.embed.token.weight.add_(1.0)

    def crash(src, dst):
        raise OSError("simulated power cut during rename")

    monkeypatch.setattr(glassformer.atomic.os, "replace", crash)
    with pytest.raises(OSError, match="power cut"):
        _save(tmp_path, net, step=2)
    assert {n: b for n, (b, _) in _snapshot(tmp_path).items()} == before  # old files, no temporaries
    monkeypatch.undo()
    # a crash between files: new weights (step 2), old trainer state (step 1)
    real_replace = os.replace

    def crash_on_state(src, dst):
        if str(dst).endswith("trainer_state.pt"):
            raise OSError("simulated crash before the trainer state")
        real_replace(src, dst)

    monkeypatch.setattr(glassformer.atomic.os, "replace", crash_on_state)
    with pytest.raises(OSError):
        _save(tmp_path, net, step=2)
    with pytest.raises(ValueError, match="model.safetensors is from step 2 but trainer_state.pt from step 1"):
        checkpoint.load_trainer_state(tmp_path)


def test_damaged_or_missing_files_give_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        checkpoint.load_model(tmp_path / "nope")
    net = tiny_model(n_layers=1)
    with pytest.raises(TypeError, match=r"trainer_state\['data'\]\['order'\] is a numpy.ndarray"):
        checkpoint.save_checkpoint(tmp_path, net, None, {}, {"step": 0, "data": {"order": np.arange(3)}})
    assert list(tmp_path.iterdir()) == []  # checked before anything was written
    with pytest.raises(ValueError, match="integer 'step'"):
        checkpoint.save_checkpoint(tmp_path, net, None, {}, {"optimizer": {}})
    _save(tmp_path, net)
    weights = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(weights[: len(weights) // 2])
    with pytest.raises(ValueError, match=r"model.safetensors is damaged.*copy the run again"):
        checkpoint.load_model(tmp_path)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors is missing"):
        checkpoint.load_model(tmp_path)
    state = (tmp_path / "trainer_state.pt").read_bytes()
    (tmp_path / "trainer_state.pt").write_bytes(state[:-20])
    with pytest.raises(ValueError, match="trainer_state.pt is damaged"):
        checkpoint.load_trainer_state(tmp_path)
    torch.save({"step": 0, "order": np.arange(3)}, tmp_path / "trainer_state.pt")  # a foreign pickle
    with pytest.raises(ValueError, match="objects other than tensors.*numpy"):
        checkpoint.load_trainer_state(tmp_path)
    (tmp_path / "config.json").write_text('{"d_model": 32,')
    with pytest.raises(ValueError, match=r"config.json is not valid JSON"):
        checkpoint.load_model(tmp_path)


def test_weights_that_do_not_fit_the_config_are_named(tmp_path):
    _save(tmp_path, tiny_model(n_layers=1))
    tiny(n_layers=1, d_ff=64).to_json(tmp_path / "config.json")
    with pytest.raises(
        ValueError, match=r"stack.blocks.0.ffn.up_proj.weight has shape \(48, 32\), config says \(64, 32\)"
    ):
        checkpoint.load_model(tmp_path)


def test_metrics_log_survives_a_truncated_last_line(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = checkpoint.MetricsLog(path)
    for step, loss in ((10, 3.0), (20, 2.5), (30, 2.7)):
        log.append({"step": step, "val_loss": torch.tensor(loss), "sample": "a\nb"})
    with open(path, "a") as handle:
        handle.write('{"step": 40, "val_lo')  # the process died mid-line
    assert [r["step"] for r in checkpoint.read_metrics(path)] == [10, 20, 30]
    assert checkpoint.read_metrics(path)[0] == {"step": 10, "val_loss": 3.0, "sample": "a\nb"}
    checkpoint.MetricsLog(path).append({"step": 40, "val_loss": 2.0})  # a resumed run goes on
    assert [r["step"] for r in checkpoint.read_metrics(path)] == [10, 20, 30, 40]
    log.truncate_after(20)
    assert [r["step"] for r in log.read()] == [10, 20]
    path.write_text('{"step": 1}\n{"step": oops}\n{"step": 3}\n')
    with pytest.raises(ValueError, match="line 2 is not valid JSON"):
        checkpoint.read_metrics(path)
    with pytest.raises(TypeError, match="metrics values"):
        log.append({"step": 1, "net": object()})


def test_list_runs(tmp_path):
    net = tiny_model(n_layers=1)
    _save(tmp_path / "b-run", net, step=7)
    log = checkpoint.MetricsLog(tmp_path / "b-run" / "metrics.jsonl")
    for step, loss in ((5, 2.0), (7, 2.4)):
        log.append({"step": step, "val_loss": loss})
    (tmp_path / "a-run").mkdir()
    (tmp_path / "a-run" / "train_config.json").write_text(json.dumps({"preset": "shakespeare-char"}))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "train_config.json").write_text("{")
    (tmp_path / "not-a-run").mkdir()
    before = _snapshot(tmp_path / "b-run")
    runs = list_runs(tmp_path)
    assert _snapshot(tmp_path / "b-run") == before
    assert [r.name for r in runs] == ["a-run", "b-run", "broken"]
    a, b, broken = runs
    assert (a.preset, a.step, a.best_val_loss, a.checkpoint_step) == ("shakespeare-char", None, None, None)
    assert (b.preset, b.step, b.best_val_loss, b.checkpoint_step, b.problem) == ("tiny", 7, 2.0, 7, None)
    assert "not valid JSON" in broken.problem
    with pytest.raises(FileNotFoundError, match="not a directory"):
        list_runs(tmp_path / "missing")
