"""A run's time told before it starts (`glassformer.train.pace`): every kind of preset is timed
on its own model without its data, the stand-in has the run's shapes, and the estimate is the
measured pace times the run's steps and evaluations."""

from __future__ import annotations

import pytest
import torch

from glassformer.train.pace import Pace, estimate_seconds, evaluations, measure, stand_in
from glassformer.train.settings import apply_overrides, load_preset

SMALL = ["train.batch_size=2", "train.context=16", "train.eval_batches=3"]
SMALL_MODEL = ["model.n_layers=1", "model.d_model=16", "model.n_heads=2"]


def small(preset: str, model: bool = True):
    """``preset`` made quick to time: a small batch and context, and a small model unless it
    fine-tunes a pretrained one (whose architecture is fixed)."""
    return apply_overrides(load_preset(preset), SMALL + (SMALL_MODEL if model else []))


@pytest.mark.parametrize(
    ("preset", "vocab_size", "labels"),
    [
        ("shakespeare-char", 65, (2, 16)),  # a character per token
        ("shakespeare-bpe", 4096, (2, 16)),  # the BPE the run would train
        ("bert-mlm-shakespeare", 65, (2, 16)),
        ("genre-scratch", 30522, (2,)),  # MiniLM's WordPiece; one label per passage
    ],
)
def test_a_run_whose_data_is_not_here_stands_in_with_its_shapes(preset, vocab_size, labels):
    prepared = stand_in(small(preset))
    batch = next(prepared.train_batches)
    assert prepared.net.config.vocab_size == vocab_size
    assert batch["input_ids"].shape == (2, 16) and batch["labels"].shape == labels
    assert len(prepared.val_batches) == 3  # eval_batches


def test_a_fine_tuning_run_times_the_pretrained_model():
    config = stand_in(small("genre-minilm", model=False)).net.config
    assert (config.n_layers, config.d_model, config.n_classes) == (6, 384, 3)  # all-MiniLM-L6-v2, 3 genres


def test_a_synthetic_task_is_its_real_run():
    prepared = stand_in(small("induction"))
    assert prepared.extra_eval is not None and prepared.sample is not None  # timed with its evaluation
    assert prepared.net.config.vocab_size == 30  # 26 letters and <pad> <bos> <sep> <eos>


@pytest.mark.parametrize("preset", ["induction", "reverse-seq2seq", "shakespeare-char", "genre-scratch"])
def test_every_kind_of_run_is_timed_and_leaves_the_random_state_as_it_was(preset):
    torch.manual_seed(7)
    expected = torch.rand(3)
    torch.manual_seed(7)
    pace = measure(small(preset))
    assert pace.step_s > 0 and pace.evaluation_s > 0
    assert torch.equal(torch.rand(3), expected)


def test_the_estimate_is_the_pace_times_the_steps_and_evaluations():
    run = apply_overrides(load_preset("induction"), ["train.steps=100", "train.eval_interval=30"])
    assert evaluations(run) == 4  # after steps 30, 60, 90 and the last, 100
    assert estimate_seconds(run, Pace(step_s=0.01, evaluation_s=0.5)) == pytest.approx(100 * 0.01 + 4 * 0.5)
    once, twice = (apply_overrides(run, [f"train.steps={steps}"]) for steps in (120, 240))
    pace = Pace(step_s=0.02, evaluation_s=0.3)
    assert estimate_seconds(twice, pace) == pytest.approx(2 * estimate_seconds(once, pace))
