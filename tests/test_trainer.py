"""The trainer end to end on tiny runs: learning, metrics, checkpoints, exact resume, CLI."""

import json

import pytest
import torch

from glassformer import cli
from glassformer.train import checkpoint
from glassformer.train.denormals import flushing_denormals
from glassformer.train.runs import prepare
from glassformer.train.settings import RunConfig, apply_overrides, load_preset, preset_names
from glassformer.train.trainer import Trainer

TINY_CORPUS = "".join(f"line {i}: the quick brown fox jumps over the lazy dog.\n" for i in range(400))


def tiny_run(tmp_path, steps=12, **train):
    return apply_overrides(load_preset("shakespeare-char"), tiny_overrides(tmp_path, steps, **train))


def tiny_overrides(tmp_path, steps=12, **train) -> list[str]:
    """shakespeare-char made tiny, on a tiny corpus written under ``tmp_path``: --set assignments."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS)
    return [
        f'data.corpus="{corpus}"',
        "model.n_layers=1",
        "model.d_model=32",
        "model.n_heads=2",
        f"train.steps={steps}",
        "train.eval_interval=4",
        "train.eval_batches=2",
        "train.checkpoint_interval=4",
        "train.sample_tokens=8",
        "train.tensorboard=false",
        "train.batch_size=4",
        "train.context=16",
        "train.warmup_steps=2",
        *(f"train.{k}={v}" for k, v in train.items()),
    ]


def make_trainer(run, tmp_path, name="run"):
    prepared = prepare(run, tmp_path / "data", log=lambda _: None)
    return Trainer(
        run,
        prepared.net,
        prepared.tokenizer,
        prepared.train_batches,
        prepared.val_batches,
        tmp_path / name,
        sample=prepared.sample,
        log=lambda _: None,
    )


def test_training_lowers_the_loss_and_logs_metrics(tmp_path):
    run = tiny_run(tmp_path, steps=40, lr=3e-3)
    trainer = make_trainer(run, tmp_path)
    before = trainer.evaluate().loss
    last = trainer.fit()
    assert last["val_loss"] < before - 0.5
    lines = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert [line["step"] for line in lines] == [4 * i for i in range(1, 11)]
    for key in (
        "step",
        "train_loss",
        "val_loss",
        "tokens_per_s",
        "val_accuracy",
        "val_ece",
        "val_ppl",
        "sample",
    ):
        assert key in lines[-1]
    net, tokenizer = checkpoint.load_model(tmp_path / "run")
    assert tokenizer.decode(tokenizer.encode("the fox")) == "the fox"


def test_resumed_run_reproduces_the_uninterrupted_losses(tmp_path):
    full = make_trainer(tiny_run(tmp_path, steps=12), tmp_path, "full")
    full.fit()
    reference = [line["val_loss"] for line in checkpoint.read_metrics(tmp_path / "full" / "metrics.jsonl")]

    first = make_trainer(tiny_run(tmp_path, steps=12), tmp_path, "split")
    interrupt_after(first, 7)
    with pytest.raises(KeyboardInterrupt):
        first.fit()  # Ctrl-C during step 8: the checkpoint holds step 7
    second = make_trainer(tiny_run(tmp_path, steps=12), tmp_path, "split")
    second.fit(resume=True)
    resumed = [line["val_loss"] for line in checkpoint.read_metrics(tmp_path / "split" / "metrics.jsonl")]
    assert resumed == reference
    a, _ = checkpoint.load_model(tmp_path / "full")
    b, _ = checkpoint.load_model(tmp_path / "split")
    for (name, p), q in zip(a.state_dict().items(), b.state_dict().values(), strict=True):
        assert torch.equal(p, q), name


def interrupt_after(trainer, steps):
    """Make the trainer raise KeyboardInterrupt (Ctrl-C) once ``steps`` steps are done."""
    original = trainer.train_step

    def step():
        if trainer.step == steps:
            raise KeyboardInterrupt
        return original()

    trainer.train_step = step


def test_ctrl_c_saves_a_checkpoint(tmp_path):
    trainer = make_trainer(tiny_run(tmp_path, steps=12), tmp_path)
    interrupt_after(trainer, 5)
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    assert checkpoint.load_trainer_state(tmp_path / "run")["step"] == 5


def test_fit_flushes_denormals_while_it_runs_and_restores_the_setting(tmp_path):
    if not torch.set_flush_denormal(False):
        pytest.skip("this CPU cannot flush denormals")
    trainer = make_trainer(tiny_run(tmp_path, steps=4), tmp_path)
    seen = []
    original = trainer.train_step
    trainer.train_step = lambda: (seen.append(flushing_denormals()), original())[1]
    trainer.fit()
    assert seen == [True] * 4 and not flushing_denormals()
    interrupted = make_trainer(tiny_run(tmp_path, steps=4), tmp_path, "interrupted")
    interrupt_after(interrupted, 2)
    with pytest.raises(KeyboardInterrupt):
        interrupted.fit()
    assert not flushing_denormals()


def test_presets_load_and_overrides_are_checked():
    assert {
        "shakespeare-char",
        "shakespeare-bpe",
        "bert-mlm-shakespeare",
        "reverse-seq2seq",
        "induction",
    } <= set(preset_names())
    run = apply_overrides(load_preset("shakespeare-char"), ["train.steps=7", "model.n_layers=6"])
    assert run.train.steps == 7 and run.model["n_layers"] == 6
    assert RunConfig.from_dict(run.to_dict()) == run
    with pytest.raises(ValueError, match="unknown preset 'shakespeare'"):
        load_preset("shakespeare")
    with pytest.raises(ValueError, match="unknown train field"):
        apply_overrides(run, ["train.stepz=3"])
    with pytest.raises(ValueError, match="unknown model field"):
        apply_overrides(run, ["model.layers=3"])
    with pytest.raises(ValueError, match="TABLE.FIELD=VALUE"):
        apply_overrides(run, ["steps=3"])


@pytest.mark.parametrize("preset", ["reverse-seq2seq", "induction", "bert-mlm-shakespeare"])
def test_every_objective_trains_a_few_steps(tmp_path, preset):
    overrides = [
        "train.steps=3",
        "train.eval_interval=3",
        "train.eval_batches=1",
        "train.tensorboard=false",
        "train.warmup_steps=1",
        "train.batch_size=4",
    ]
    if preset == "bert-mlm-shakespeare":
        corpus = tmp_path / "corpus.txt"
        corpus.write_text(TINY_CORPUS)
        overrides += [f'data.corpus="{corpus}"', "train.context=32", "model.n_layers=1"]
    run = apply_overrides(load_preset(preset), overrides)
    last = make_trainer(run, tmp_path).fit()
    assert last["step"] == 3 and last["val_loss"] > 0


def test_cli_train_generate_eval_runs(tmp_path, capsys, monkeypatch):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TINY_CORPUS)
    out = tmp_path / "runs" / "tiny"
    args = [
        "train",
        "--preset",
        "shakespeare-char",
        "--out",
        str(out),
        "--data-dir",
        str(tmp_path / "data"),
        "--set",
        f'data.corpus="{corpus}"',
        "--set",
        "train.steps=4",
        "--set",
        "train.eval_interval=2",
        "--set",
        "model.n_layers=1",
        "--set",
        "train.tensorboard=false",
        "--set",
        "train.sample_tokens=4",
        "--set",
        "train.warmup_steps=1",
    ]
    assert cli.main(args) == 0
    assert "done:" in capsys.readouterr().out
    assert cli.main(args) == 2  # the run exists: refuse to overwrite it
    assert "--resume" in capsys.readouterr().err
    (out / "notes.txt").write_text("mine")
    assert cli.main([*args, "--overwrite"]) == 2  # not only a run's files: refuse, delete nothing
    assert "notes.txt" in capsys.readouterr().err and (out / "model.safetensors").exists()
    (out / "notes.txt").unlink()
    assert cli.main([*args, "--set", "train.tensorboard=true", "--overwrite"]) == 0  # a new run
    assert "done:" in capsys.readouterr().out and (out / "tensorboard").is_dir()
    assert cli.main([*args, "--overwrite"]) == 0  # tensorboard/ is the run's own folder
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    failing = [*args, "--set", "train.schedule=cosine", "--set", "train.warmup_steps=10", "--overwrite"]
    assert cli.main(failing) == 2  # a schedule the trainer refuses: said first, the old run kept
    assert "warmup_steps=10" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert cli.main(["generate", str(out), "the", "--max-new-tokens", "5", "--temperature", "0"]) == 0
    assert capsys.readouterr().out.startswith("the")
    assert cli.main(["generate", str(out), "the ~~~ é"]) == 2
    assert "is not in this tokenizer" in capsys.readouterr().err
    assert cli.main(["eval", str(out), "--data-dir", str(tmp_path / "data")]) == 0
    assert "val_loss" in capsys.readouterr().out
    assert cli.main(["runs", "--root", str(tmp_path / "runs")]) == 0
    assert "tiny" in capsys.readouterr().out
    assert cli.main(["generate", str(tmp_path / "missing"), "x"]) == 2
    assert "neither a registry name" in capsys.readouterr().err
    assert cli.main(["train", "--preset", "nope"]) == 2
    assert "unknown preset 'nope'" in capsys.readouterr().err
