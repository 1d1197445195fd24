"""The tools of scale compute what the plain path computes: activation checkpointing (same
gradients, hooks still fire), ``torch.compile`` (same losses as eager), the device chosen."""

import pytest
import torch

from glassformer.train import device, scale
from glassformer.train.optim import make_optimizer
from tests.conftest import tiny_model
from tests.test_trainer import make_trainer, tiny_run


@pytest.mark.parametrize(
    "overrides",
    [{}, {"positions": "rope", "attn_dropout": 0.1, "resid_dropout": 0.1}, {"family": "encoder_decoder"}],
    ids=["learned", "rope-dropout", "encoder-decoder"],
)
def test_activation_checkpointing_gives_the_same_gradients(overrides):
    net = tiny_model(**overrides).train()
    ids = torch.randint(0, 61, (2, 12))
    if net.config.seq2seq:
        run = lambda: net(ids, ids)  # noqa: E731
    else:
        run = lambda: net(ids)  # noqa: E731

    def grads():
        torch.manual_seed(7)  # the same dropout masks in both runs
        net.zero_grad(set_to_none=True)
        logits = run()
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids.flatten()).backward()
        return {name: p.grad.clone() for name, p in net.named_parameters() if p.grad is not None}

    plain = grads()
    assert scale.set_activation_checkpointing(net) == (2 if net.config.seq2seq else 1)
    checkpointed = grads()
    assert plain.keys() == checkpointed.keys()
    for name, grad in plain.items():
        torch.testing.assert_close(checkpointed[name], grad, msg=name)


def test_activation_checkpointing_saves_less_and_keeps_the_hooks():
    net = tiny_model(n_layers=3).train()
    ids = torch.randint(0, 61, (2, 16))
    seen = {}
    with net.hooks({"blocks.1.attn.pattern": lambda x, name: seen.setdefault("plain", x.detach())}):
        plain_saved = saved_bytes(lambda: net(ids).sum())
    scale.set_activation_checkpointing(net)
    with net.hooks({"blocks.1.attn.pattern": lambda x, name: seen.setdefault("checkpointed", x.detach())}):
        checkpointed_saved = saved_bytes(lambda: net(ids).sum())
    torch.testing.assert_close(seen["checkpointed"], seen["plain"])
    assert checkpointed_saved < plain_saved / 2
    with torch.no_grad():  # evaluation and generation are untouched
        torch.testing.assert_close(net.eval()(ids), net(ids))


def saved_bytes(forward) -> int:
    """Bytes autograd keeps for backward during ``forward()`` (tests/test_count.py's method)."""
    total = 0

    def pack(t):
        nonlocal total
        total += t.numel() * t.element_size()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        forward()
    return total


def test_a_trainer_with_checkpointing_trains_as_the_plain_one(tmp_path):
    plain = make_trainer(tiny_run(tmp_path, steps=3, dtype="float32"), tmp_path, "plain")
    torch.manual_seed(0)
    checkpointed = make_trainer(
        tiny_run(tmp_path, steps=3, dtype="float32", checkpoint_activations="true"), tmp_path, "ckpt"
    )
    assert checkpointed.net.stack.checkpoint_activations and not plain.net.stack.checkpoint_activations
    checkpointed.net.load_state_dict(plain.net.state_dict())
    for _ in range(3):
        a, b = plain.train_step()[0], checkpointed.train_step()[0]
        assert a == pytest.approx(b, rel=1e-5)


@pytest.mark.slow
def test_compiled_training_gives_the_eager_losses(tmp_path):
    eager = make_trainer(tiny_run(tmp_path, steps=3, dtype="float32"), tmp_path, "eager")
    compiled_run = tiny_run(tmp_path, steps=3, dtype="float32", compile="true")
    compiled = make_trainer(compiled_run, tmp_path, "compiled")
    compiled.net.load_state_dict(eager.net.state_dict())
    assert any("torch.compile" in line for line in compiled.setup_lines)
    eager_losses = [eager.train_step()[0] for _ in range(3)]
    compiled_losses = [compiled.train_step()[0] for _ in range(3)]
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-4)
    assert compiled.evaluate().loss == pytest.approx(eager.evaluate().loss, rel=1e-4)


def test_the_device_is_chosen_and_named():
    expected = "cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"
    assert device.resolve("auto").type == expected
    assert device.describe("auto", torch.device("cpu")).startswith("device: auto -> cpu (")
    with pytest.raises(ValueError, match="allowed values: auto, cpu, cuda, mps"):
        device.resolve("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="sees no CUDA GPU.*train.device='auto'"):
            device.resolve("cuda")


def test_fused_adamw_is_asked_for_only_when_told():
    net = torch.nn.Linear(2, 2)
    assert not make_optimizer(net, lr=1e-3).defaults["fused"]
    if torch.cuda.is_available():
        assert make_optimizer(net.cuda(), lr=1e-3, fused=True).defaults["fused"]
