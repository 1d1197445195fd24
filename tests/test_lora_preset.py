"""The smollm2-lora preset's machinery on a tiny Llama-style base: LoRA's adapters added by the
trainer, trained alone, checkpointed and resumed; the run directory read as the merged model, its
adapter/ in PEFT's files; the workshop's compare of base and run. SmolLM2 itself is never loaded:
``glassformer.loading.load`` gives the tiny base for the name ``tiny-base``."""

from __future__ import annotations

import pytest
import torch

import glassformer as gf
from glassformer.formats.run_directory import ADAPTER
from glassformer.tokenizers.char import CharTokenizer
from glassformer.train import checkpoint
from glassformer.train.runs import prepare
from glassformer.train.settings import RunConfig, apply_overrides, load_preset
from glassformer.train.trainer import Trainer
from glassformer.workshop.server import create_app
from tests.conftest import workshop_client
from tests.test_trainer import TINY_CORPUS, interrupt_after

BASE = "tiny-base"
TEXT = "the quick brown fox jumps over the lazy dog."


def tiny_base() -> gf.LanguageModel:
    """The same small Llama-style model at every call (RoPE, RMSNorm, SwiGLU, GQA, no biases)."""
    tokenizer = CharTokenizer.from_text(TINY_CORPUS)
    config = gf.ModelConfig(
        vocab_size=tokenizer.vocab_size,
        d_model=32,
        n_layers=2,
        n_heads=4,
        n_kv_heads=2,
        d_ff=48,
        max_seq_len=64,
        positions="rope",
        norm="rmsnorm",
        activation="swiglu",
        qkv_bias=False,
        out_bias=False,
        ffn_bias=False,
        tie_embeddings=True,
    )
    torch.manual_seed(0)
    return gf.LanguageModel(gf.build(config).eval(), tokenizer)


@pytest.fixture(autouse=True)
def _tiny_base(monkeypatch):
    real = gf.loading.load

    def load(name, *args, **kwargs):
        return tiny_base() if name == BASE else real(name, *args, **kwargs)

    monkeypatch.setattr(gf.loading, "load", load)


def lora_run(tmp_path, steps: int = 6, **train) -> RunConfig:
    """The smollm2-lora preset on the tiny base and a tiny corpus written under ``tmp_path``."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS)
    settings = {
        "init_from": f'"{BASE}"',
        "steps": steps,
        "eval_interval": 3,
        "checkpoint_interval": 3,
        "eval_batches": 2,
        "batch_size": 4,
        "context": 16,
        "warmup_steps": 1,
        "sample_tokens": 4,
        "tensorboard": "false",
        "lr": 1e-2,
        "dtype": '"float32"',  # "auto" would time bf16 against float32 first
        **train,
    }
    overrides = [f'data.corpus="{corpus}"', *(f"train.{k}={v}" for k, v in settings.items())]
    return apply_overrides(load_preset("smollm2-lora"), overrides)


def make_trainer(run: RunConfig, tmp_path, out: str = "run") -> Trainer:
    prepared = prepare(run, tmp_path / "data", log=lambda _: None)
    return prepared.trainer(run, tmp_path / out, sample=prepared.sample, log=lambda _: None)


def adapters(net) -> dict[str, torch.Tensor]:
    return {name: p.detach().clone() for name, p in net.named_parameters() if ".adapters." in name}


def test_the_preset_validates_and_bad_lora_settings_are_refused():
    run = load_preset("smollm2-lora")
    s = run.train
    assert (s.init_from, s.lora_rank, s.lora_alpha, s.lora_targets) == (
        "smollm2-135m-instruct",
        8,
        16,
        ("q", "v"),
    )
    assert run.data.tokenizer == "pretrained" and run.data.objective == "lm" and not run.model
    assert RunConfig.from_dict(run.to_dict(), name=run.name) == run  # JSON's lists read back as tuples
    refused = {
        '["q", "wq"]': "'wq', which is not a LoRA target; valid targets: q, k, v, qkv, o, gate, up, down",
        "[]": "non-empty list",
        '"q"': "non-empty list",
        '["q", "q"]': "names a target twice",
        '["qkv", "v"]': "'qkv' already holds",
    }
    for value, message in refused.items():
        with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
            apply_overrides(run, [f"train.lora_targets={value}"])
    for assignment, message in {
        "train.lora_rank=-1": "lora_rank=-1 must be a whole number >= 0",
        "train.lora_rank=2.5": "lora_rank=2.5 must be a whole number",
        "train.lora_rank=true": "lora_rank=True must be a whole number",
        "train.lora_alpha=0": "lora_alpha=0 must be a positive number",
        "train.init_from=scratch": "adapts a pretrained model: set train.init_from",
        "model.n_layers=2": "keeps its own architecture",
    }.items():
        with pytest.raises(ValueError, match=message):
            prepare(apply_overrides(run, [assignment.replace("scratch", '"scratch"')]))


def test_only_the_adapters_train_and_the_run_reads_as_the_merged_model(tmp_path):
    trainer = make_trainer(lora_run(tmp_path), tmp_path)
    trainable = {name for name, p in trainer.net.named_parameters() if p.requires_grad}
    assert trainable and all(".adapters." in name for name in trainable)
    base = tiny_base().net
    before = adapters(trainer.net)
    trainer.fit()
    after = adapters(trainer.net)
    assert all(not torch.equal(before[name], after[name]) for name in after)  # every A and B moved
    for name, weight in base.state_dict().items():  # every pretrained weight stayed as it was
        assert torch.equal(trainer.net.state_dict()[name], weight), name

    run_dir = tmp_path / "run"
    state = checkpoint.load_trainer_state(run_dir)  # weights_only: the adapters are plain tensors
    assert state["step"] == 6 and set(state["adapters"]) == set(after)
    merged = gf.load(run_dir, fast_paths=False)  # model.safetensors: the base's names, adapters folded in
    adapted = gf.load_adapter(tiny_base(), run_dir / ADAPTER)  # PEFT's files on the base
    ids = [merged.tokenizer.encode(TEXT)]
    torch.testing.assert_close(merged.logits(ids), adapted.logits(ids), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(merged.logits(ids), tiny_base().logits(ids), atol=1e-3)


def test_a_resumed_lora_run_reproduces_the_uninterrupted_one(tmp_path):
    full = make_trainer(lora_run(tmp_path), tmp_path, "full")
    full.fit()
    first = make_trainer(lora_run(tmp_path), tmp_path, "split")
    interrupt_after(first, 4)
    with pytest.raises(KeyboardInterrupt):
        first.fit()  # Ctrl-C during step 5: the checkpoint holds step 4
    second = make_trainer(lora_run(tmp_path), tmp_path, "split")
    second.fit(resume=True)
    reference, resumed = (
        [line["val_loss"] for line in checkpoint.read_metrics(tmp_path / name / "metrics.jsonl")]
        for name in ("full", "split")
    )
    assert resumed == reference
    for name, tensor in adapters(full.net).items():
        assert torch.equal(adapters(second.net)[name], tensor), name


def test_a_checkpoint_of_other_adapters_is_refused_on_resume(tmp_path):
    make_trainer(lora_run(tmp_path, steps=3), tmp_path).fit()
    other = make_trainer(lora_run(tmp_path, steps=3, lora_targets='["q", "o"]'), tmp_path)
    with pytest.raises(ValueError, match="do not match this run's"):
        other.fit(resume=True)


def test_the_workshop_opens_the_run_beside_its_base_and_compares_them(tmp_path):
    make_trainer(lora_run(tmp_path, steps=3), tmp_path, "runs/smollm2-lora").fit()
    client = workshop_client(create_app({BASE: tiny_base()}, runs_root=tmp_path / "runs"))
    opened = client.post("/api/lab/open", json={"run": "smollm2-lora"})
    assert opened.status_code == 200, opened.text
    name = opened.json()["model"]
    listed = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    assert listed[name]["fine_tuned_from"] == BASE
    change = client.post("/api/attention_change", json={"model": name, "base": BASE, "text": TEXT})
    assert change.status_code == 200, change.text
    shift = change.json()["shift"]
    assert len(shift) == 2 and len(shift[0]) == 4 and max(max(row) for row in shift) > 0  # q moved
