"""Training on several processes (`glassformer.train.distributed`): two CPU processes over gloo.

The invariant: one run's settings give one loss curve, whatever the number of processes
(float32; equal up to the order of the reductions), and a distributed run's directory is a
run directory like any other (one set of logs, loadable weights, resumable on any number of
processes, after any rank was killed)."""

from __future__ import annotations

import faulthandler
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch
import torch.multiprocessing as mp

from glassformer.train import checkpoint, distributed
from glassformer.train.runs import prepare
from tests.test_trainer import make_trainer, tiny_overrides, tiny_run

STEPS = 20
JOB_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _rank(rank, world, port, run, tmp_path, name, resume, signal_at):
    """One rank, as torchrun would start it (its environment), in a spawned process."""
    os.environ |= {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    os.environ |= {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank)}
    torch.set_num_threads(1)
    faulthandler.dump_traceback_later(JOB_TIMEOUT_S - 5, exit=True)  # a hang shows where it waits
    with distributed.process_group(timeout_s=60):
        _fit(rank, run, tmp_path, name, resume, signal_at)  # the trainer is gone before the group


def _fit(rank, run, tmp_path, name, resume, signal_at):
    """``signal_at``: (rank, step, signal) sent to that rank as it begins that step."""
    trainer = make_trainer(run, tmp_path, name)
    if signal_at is not None and rank == signal_at[0]:
        step = trainer.train_step

        def train_step():
            if trainer.step == signal_at[1]:
                os.kill(os.getpid(), signal_at[2])  # mid-run: kill -9, or Ctrl-C
            return step()

        trainer.train_step = train_step
    trainer.fit(resume=resume)


def train(tmp_path, run, name, world, resume=False, signal_at=None):
    """Train ``run`` into ``tmp_path/name`` on ``world`` processes; its progress and metrics lines."""
    if world == 1:
        make_trainer(run, tmp_path, name).fit(resume=resume)
    else:
        args = (world, free_port(), run, tmp_path, name, resume, signal_at)
        job = mp.start_processes(_rank, args=args, nprocs=world, join=False, start_method="spawn")
        deadline = time.monotonic() + JOB_TIMEOUT_S
        while not job.join(timeout=1):  # raises ProcessExitedException when a rank fails
            if time.monotonic() > deadline:
                for process in job.processes:
                    process.kill()
                pytest.fail(f"{world} ranks training {name} still running after {JOB_TIMEOUT_S} s: a hang")
    lines = lambda file: [json.loads(x) for x in (tmp_path / name / file).read_text().splitlines()]  # noqa: E731
    return lines("progress.jsonl"), lines("metrics.jsonl")


def small_run(tmp_path, **train):
    run = tiny_run(tmp_path, steps=STEPS, dtype="float32", lr=3e-3, **train)
    prepare(run, tmp_path / "data", log=lambda _: None)  # the corpus and its token files, once
    return run


@pytest.mark.parametrize(("parallel", "grad_accum"), [("ddp", 1), ("fsdp", 1), ("ddp", 2)])
def test_two_processes_train_as_one(tmp_path, parallel, grad_accum):
    """Gradient accumulation composes: each micro-batch is cut between the ranks."""
    run = small_run(tmp_path, parallel=parallel, grad_accum=grad_accum)
    one_progress, one_metrics = train(tmp_path, run, "one", 1)
    two_progress, two_metrics = train(tmp_path, run, "two", 2)
    assert [p["step"] for p in two_progress] == list(range(1, STEPS + 1))  # each step once
    assert [m["step"] for m in two_metrics] == [m["step"] for m in one_metrics]  # each evaluation once
    assert {line["world_size"] for line in two_progress + two_metrics} == {2}
    assert {line["world_size"] for line in one_progress + one_metrics} == {1}
    for a, b in zip(one_progress, two_progress, strict=True):
        assert b["loss"] == pytest.approx(a["loss"], abs=2e-4), a["step"]
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-3), a["step"]
    for a, b in zip(one_metrics, two_metrics, strict=True):
        assert b["val_loss"] == pytest.approx(a["val_loss"], abs=2e-4), a["step"]
    # the consolidated weights: what gf.load and `glassformer generate` read
    one, _ = checkpoint.load_model(tmp_path / "one")
    two, tokenizer = checkpoint.load_model(tmp_path / "two")
    for (name, p), q in zip(one.state_dict().items(), two.state_dict().values(), strict=True):
        torch.testing.assert_close(q, p, atol=1e-4, rtol=1e-3, msg=name)
    assert tokenizer.decode(tokenizer.encode("the fox")) == "the fox"
    assert (tmp_path / "two" / "distributed").is_dir() and not (tmp_path / "one" / "distributed").exists()


def test_a_killed_rank_resumes_on_two_processes_or_one(tmp_path):
    run = small_run(tmp_path)  # checkpoints every 4 steps
    _, reference = train(tmp_path, run, "reference", 1)
    with pytest.raises(mp.ProcessExitedException):  # rank 1 killed at step 10: the job stops
        train(tmp_path, run, "killed", 2, signal_at=(1, 10, signal.SIGKILL))
    state = checkpoint.load_trainer_state(tmp_path / "killed")
    assert state["step"] == 8 and state["distributed"]["world_size"] == 2
    shutil.copytree(tmp_path / "killed", tmp_path / "on-one")
    for name, world in (("killed", 2), ("on-one", 1)):  # resume on 2 processes, and 2 -> 1
        _, resumed = train(tmp_path, run, name, world, resume=True)
        assert [m["step"] for m in resumed] == [m["step"] for m in reference]
        assert [m["world_size"] for m in resumed] == [2, 2] + [world] * (len(resumed) - 2)
        for a, b in zip(reference, resumed, strict=True):
            assert b["val_loss"] == pytest.approx(a["val_loss"], abs=2e-4), (name, a["step"])


@pytest.mark.parametrize("rank", [0, 1])
def test_ctrl_c_on_one_rank_stops_both_at_one_step_with_a_checkpoint(tmp_path, rank):
    """SIGINT to any rank (torchrun passes Ctrl-C to all; the lab signals rank 0): the ranks
    agree after the step under way, save together, and the run resumes from that step."""
    run = small_run(tmp_path)  # checkpoints every 4 steps
    _, reference = train(tmp_path, run, "reference", 1)
    # (torch.multiprocessing's ranks end quietly on KeyboardInterrupt, as after a parent's Ctrl-C)
    progress, _ = train(tmp_path, run, "stopped", 2, signal_at=(rank, 9, signal.SIGINT))
    assert progress[-1]["step"] == 10
    state = checkpoint.load_trainer_state(tmp_path / "stopped")
    assert state["step"] == 10  # the step under way at the signal ended; not the last interval (8)
    _, resumed = train(tmp_path, run, "stopped", 2, resume=True)
    for a, b in zip(reference, resumed, strict=True):
        assert b["val_loss"] == pytest.approx(a["val_loss"], abs=2e-4), a["step"]


def test_what_a_ctrl_c_unwinds_is_freed_before_the_group_goes(monkeypatch):
    """A KeyboardInterrupt's traceback keeps a trainer (and its DDP reducer) alive in the frames
    it passed through; the group is destroyed only after they are freed, or the reducer's own
    teardown can hang the rank's exit (a Ctrl-C test hung so, once in seven full runs)."""
    import gc
    import weakref

    class Trainer:  # in a reference cycle, as a trainer and its reducer are: only gc frees it
        def __init__(self):
            self.me = self

    alive_at_destroy = []
    monkeypatch.setattr(distributed, "launched", lambda: True)
    monkeypatch.setattr(distributed.dist, "init_process_group", lambda *args, **kwargs: None)
    monkeypatch.setattr(
        distributed.dist, "destroy_process_group", lambda: alive_at_destroy.append(ref() is not None)
    )

    def fit():
        trainer = Trainer()
        nonlocal ref
        ref = weakref.ref(trainer)
        raise KeyboardInterrupt  # StopRequest's, at a step boundary

    ref = None
    gc.disable()  # only the collection the group makes may free it
    try:
        with pytest.raises(KeyboardInterrupt), distributed.process_group():
            fit()
    finally:
        gc.enable()
    assert alive_at_destroy == [False]


def test_torchrun_writes_one_run_directory(tmp_path):
    """The command under torchrun: rank 0 alone locks, logs and lists the run; gf.load reads it."""
    small_run(tmp_path)  # the corpus and its token files, under tmp_path / "data"
    overrides = tiny_overrides(tmp_path, steps=8, dtype="float32", threads=1)
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    command = [*torchrun, "-m", "glassformer", "train", "--preset", "shakespeare-char"]
    command += ["--out", str(tmp_path / "cli"), "--data-dir", str(tmp_path / "data")]
    command += [f"--set={o}" for o in overrides]
    env = os.environ | {"OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, [line for line in done.stderr.splitlines() if "error" in line][:3]
    assert done.stdout.count("done:") == 1  # rank 0 alone speaks
    metrics = checkpoint.read_metrics(tmp_path / "cli" / "metrics.jsonl")
    assert [(m["step"], m["world_size"]) for m in metrics] == [(4, 2), (8, 2)]
    assert not (tmp_path / "cli" / "trainer.lock").exists()  # released
    from glassformer.loading import load
    from glassformer.train.run_list import list_runs

    [summary] = [s for s in list_runs(tmp_path) if s.name == "cli"]
    assert (summary.step, summary.checkpoint_step, summary.problem) == (8, 8, None)
    assert isinstance(load(tmp_path / "cli").generate("the", max_new_tokens=3), str)
