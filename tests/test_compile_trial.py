"""train.compile = "auto" (glassformer.train.compile_trial): compiled only where the run's own
steps measure it faster, else eager, each decision said with its numbers."""

import pytest
import torch

from glassformer.train import compile_trial
from glassformer.train.compile_trial import MEASURED, WARMUP, CompileTrial
from glassformer.train.settings import TrainConfig
from tests.test_trainer import make_trainer, tiny_run


def steps(trial: CompileTrial, seconds: list[float], steps_left: int) -> list[str]:
    """The log lines ``trial`` gives after steps of ``seconds`` each."""
    return [line for s in seconds if (line := trial.after_step(s, steps_left))]


def test_a_short_run_stays_eager_without_compiling():
    net = torch.nn.Linear(4, 4)
    trial = CompileTrial(net, "auto")
    lines = steps(trial, [0.05] * (WARMUP + MEASURED), steps_left=1000)  # 50 s left: 10% is 5 s
    assert trial.done and not trial.compiled and net._compiled_call_impl is None
    assert lines == [
        "train.compile: auto -> eager (1000 steps of 50 ms are left: a 10% gain would not repay a "
        "compile of about 60 s)"
    ]


@pytest.mark.parametrize(("compiled_s", "kept"), [(0.8, True), (0.99, False), (1.3, False)])
def test_a_long_run_tries_it_and_keeps_the_faster(compiled_s, kept):
    net = torch.nn.Linear(4, 4)
    trial = CompileTrial(net, "auto")
    lines = steps(trial, [1.0] * (WARMUP + MEASURED), steps_left=5000)  # 10% of 5000 s: worth trying
    assert lines == ["train.compile: auto -> trying it (eager 1000.0 ms a step); the next step compiles"]
    assert trial.compiled and net._compiled_call_impl is not None and not trial.done
    lines = steps(trial, [42.0] + [compiled_s] * MEASURED, steps_left=4990)  # the compile, then steps
    assert trial.done and trial.compiled == kept
    assert (net._compiled_call_impl is not None) == kept  # a slower compiled model is eager again
    chosen = "compiled" if kept else "eager"
    assert lines[0].startswith(f"train.compile: auto -> {chosen} (") and "the compile took 42.0 s" in lines[0]
    assert trial.after_step(0.1, 4000) is None  # decided once
    x = torch.randn(2, 4)
    if not kept:
        torch.testing.assert_close(net(x), x @ net.weight.t() + net.bias)  # eager again, and the same


def test_set_values_and_several_processes_are_left_alone():
    for requested, processes in ((True, 1), (False, 1), ("auto", 2)):
        net = torch.nn.Linear(4, 4)
        trial = CompileTrial(net, requested, processes)
        assert steps(trial, [5.0] * 20, steps_left=10**6) == [] and trial.done and not trial.compiled


def test_train_compile_takes_true_false_and_auto_only():
    assert TrainConfig().compile == "auto" and TrainConfig(compile=True).compile is True
    for bad in ("yes", 1, "true", None):
        with pytest.raises(ValueError, match='allowed values: true, false, "auto"'):
            TrainConfig(compile=bad)


def test_a_run_s_log_says_what_auto_chose(tmp_path):
    said = []
    trainer = make_trainer(tiny_run(tmp_path, steps=WARMUP + MEASURED + 1, dtype="float32"), tmp_path)
    trainer.log = said.append
    trainer.fit()
    assert [line for line in said if line.startswith("train.compile")] == [
        line for line in said if "auto -> eager" in line
    ]
    assert len([line for line in said if "auto -> eager" in line]) == 1
    assert compile_trial.COMPILE_GUESS_S > 0 and trainer.net._compiled_call_impl is None
