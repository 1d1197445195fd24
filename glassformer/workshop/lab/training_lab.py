"""The training lab: one training run at a time, in its own process, followed from the page.

`Lab.start(preset, fields)` starts ``python -m glassformer train --preset P --out runs/P-lab
--set ...`` with the server's interpreter, in a session of its own (a Ctrl-C meant for the
server does not reach it), into a fresh directory (``P-lab``, else ``P-lab-2``, ...:
`fresh_run`): a start never deletes or changes another run. The run is a normal run directory, so the CLI can
``eval``, ``generate`` and ``--resume`` it. Pause and resume stop and continue the process
(SIGSTOP / SIGCONT: nothing is lost, it just waits); stop sends SIGINT, and the trainer
saves a checkpoint before it exits, so killing a run loses nothing beyond its last
checkpoint; "continue" starts ``train --resume`` on a stopped run. Only fields a learner
would change are accepted (`lab_fields.FIELDS`), each checked before any file is touched, with the
model they make (its size: `glassformer.models.size`) and its schedule (the trainer's own check,
`glassformer.train.schedules.check_schedule`): a start the trainer would refuse is a 400.

The lab supervises by the run directories' locks, not by its memory: a trainer holds its
run's ``trainer.lock`` while it lives (`glassformer.train.run_lock`). A new lab (the server
restarted, even after kill -9) adopts a trainer it finds holding a lock, whether a previous
server or the command line started it, and pauses, resumes or stops it by pid
(`trainer_process.TrainerProcess`); a trainer left paused is shown paused, never lost. No
run starts or continues while any trainer holds a directory under the runs root. When the
server stops, the trainer this lab started is asked to stop (it saves its checkpoint on its
own time; if it is still running, the next server adopts it); an adopted one is left as it
is, for the next server to adopt again: a server stops only what it started.

What the page shows comes from the run directory, not the process (`followed_file`): so the
page follows a run started from the command line too, and reconnects to one in progress. A
damaged run is listed with the reason (`run_directory.damage`); a run's files are read without
blocking, within their sizes (`glassformer.formats.bounded_read`), so any number of them is fine.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from glassformer.formats.bounded_read import read_tail
from glassformer.formats.run_directory import FILM, LOCK, METRICS, PROGRESS, TRAIN_CONFIG, Damages
from glassformer.inspect.costs import training_bytes
from glassformer.models.size import MEMORY_SHARE, ModelTooLarge, check_size, physical_memory
from glassformer.train.pace import Pace, estimate_seconds, evaluations
from glassformer.train.pace_child import measure_in_child
from glassformer.train.run_lock import Holder, holder
from glassformer.train.schedules import check_schedule
from glassformer.train.settings import (
    RunConfig,
    apply_overrides,
    load_preset,
    preset_names,
    preset_summary,
)
from glassformer.workshop.lab.fresh_run import fresh_run
from glassformer.workshop.lab.lab_fields import (
    FIELDS,
    PROCESSES,
    fixed_fields,
    max_processes,
    overrides,
    preset_default,
    pretrained_model,
    split_processes,
)
from glassformer.workshop.lab.trainer_process import TrainerProcess

DEFAULT_PRESET = "induction"  # the form's first choice: trains in about a minute here, and shows a head form
STOP_WAIT_S = 30.0  # stop: how long the trainer has to save its checkpoint before it is killed
SHUTDOWN_WAIT_S = 1.5  # the server stopping: how long it waits for the trainer (then leaves it)
LOG_TAIL_BYTES = 65_536  # the end of a run's log the page shows (its last lines)
PACE_SECONDS = 120.0  # the most that timing a preset's steps may take (`pace_child`)


def training_memory(run) -> int:
    """Bytes a training step of ``run`` holds: weights, gradients, optimizer state, activations
    (`glassformer.inspect.costs.training_bytes`; a vocabulary of 256, as `check_size` counts)."""
    config = run.model_config(vocab_size=256)
    return training_bytes(config, run.train.context, run.train.batch_size, run.train.optimizer)


def check_training_memory(run) -> None:
    """`ModelTooLarge` when training ``run`` would take more than `MEMORY_SHARE` of this
    machine's memory (counting what a step holds, not the weights alone)."""
    memory, needed = physical_memory(), training_memory(run)
    if memory is not None and needed > MEMORY_SHARE * memory:
        raise ModelTooLarge(
            f"training these settings holds about {needed / 2**30:,.1f} GiB (weights, gradients, "
            f"optimizer state and activations), more than half of this machine's {memory / 2**30:,.0f} "
            "GiB: make the model, the batch or the context smaller"
        )


class Lab:
    """The lab's one training process, and the runs under ``runs_root`` it can follow."""

    def __init__(self, runs_root: str | Path) -> None:
        self.runs_root = Path(runs_root)
        self.trainer: TrainerProcess | None = None
        self.run: str | None = None
        self._adopting = threading.Lock()  # routes read the state while an action runs
        self._measuring = threading.Lock()  # one pace measured at a time (`estimate`)
        self._paces: dict[tuple[str, str], Pace] = {}  # (preset, its model table) -> its pace here
        self._damages = Damages()  # each run's `damage`, read again when its files change
        self.adopt()  # a trainer a previous server (or the command line) left running

    # what the form offers -------------------------------------------------------------------
    def presets(self) -> list[dict[str, Any]]:
        """Each preset with the lab's fields and their values in it; a preset that fine-tunes a
        pretrained model (``init_from``) has that model's architecture: its model fields are
        fixed (listed, their values null)."""
        out = []
        for name in preset_names():
            config = load_preset(name).to_dict()
            pretrained = pretrained_model(config)
            fixed = fixed_fields(pretrained)
            values = {}
            for field in FIELDS:
                table, key = field.split(".")
                values[field] = (
                    None if field in fixed else config.get(table, {}).get(key, preset_default(table, key))
                )
            out.append(
                {
                    "name": name,
                    "summary": preset_summary(name),
                    "fields": {**values, PROCESSES: 1},
                    "pretrained": pretrained,
                    "fixed": fixed,
                }
            )
        return out

    def fields(self) -> dict[str, dict[str, Any]]:
        """The fields the form may change: their kind and allowed values or range."""
        fields = {
            field: {"kind": kind.__name__, "allowed" if kind is str else "range": list(limits)}
            for field, (kind, limits) in FIELDS.items()
        }
        return {**fields, PROCESSES: {"kind": "int", "range": [1, max_processes()]}}

    def estimate(self, preset: str, fields: dict[str, Any]) -> dict[str, Any]:
        """About how long ``preset`` with ``fields`` changed trains on this machine:
        {seconds, step_s, evaluation_s, steps, evaluations}, or {seconds: None, reason}.

        The pace of a model shape is measured once, by a few of its own optimizer steps and an
        evaluation (`glassformer.train.pace`), and kept for the server's life; the steps and
        the evaluation interval only multiply it. It is not measured while a run trains: the
        two would slow each other, and the slow pace would be kept."""
        fields, _ = split_processes(fields)  # the pace of one process (several share the cores)
        run = self._run_config(preset, fields)
        shape = (preset, json.dumps(run.model, sort_keys=True))
        with self._measuring:
            pace = self._paces.get(shape)
            if pace is None:
                self.adopt()
                if self._own_alive():
                    return {"seconds": None, "reason": "measured once no run is training"}
                try:  # in a child process, within its time and memory: never inside the server
                    pace = measure_in_child(run, PACE_SECONDS, training_memory(run))
                except ValueError as error:  # too slow, too large, or a model that is not installed
                    raise ValueError(f"{preset} cannot be timed here: {error}") from None
                self._paces[shape] = pace
        return {
            "seconds": estimate_seconds(run, pace),
            "step_s": pace.step_s,
            "evaluation_s": pace.evaluation_s,
            "steps": run.train.steps,
            "evaluations": evaluations(run),
        }

    # the process -----------------------------------------------------------------------------
    def start(self, preset: str, fields: dict[str, Any]) -> dict[str, Any]:
        """Start ``preset`` with ``fields`` changed, in a fresh ``runs/<preset>-lab[-n]``
        (`fresh_run`), once every check has passed; with ``fields["processes"]`` > 1, on that
        many processes under torchrun (each a slice of every batch: `glassformer.train.distributed`)."""
        fields, processes = split_processes(fields)
        run = self._run_config(preset, fields)  # checked here: a bad mix is a message, not a failed process
        if run.train.batch_size < processes:
            raise ValueError(
                f"train.batch_size={run.train.batch_size} cannot be cut between {processes} processes "
                "(each needs a row of every batch): start fewer processes"
            )
        self._refuse_if_busy()
        self.run = fresh_run(self.runs_root, preset)  # never a directory that holds a run
        command = ["train", "--preset", preset, "--out", str(self.runs_root / self.run)]
        for assignment in overrides(fields):
            command += ["--set", assignment]
        self._launch(command, processes)
        return self.state()

    def resume_run(self, run: str) -> dict[str, Any]:
        """Continue a stopped run from its last checkpoint (``train --resume``)."""
        directory = self.run_dir(run)
        self._refuse_if_busy()
        self.run = run
        self._launch(["train", "--preset", run, "--out", str(directory), "--resume"])
        return self.state()

    def pause(self) -> dict[str, Any]:
        self._live("pause").pause()
        return self.state()

    def resume(self) -> dict[str, Any]:
        self._live("resume").resume()
        return self.state()

    def stop(self) -> dict[str, Any]:
        """Ctrl-C for the run: it saves a checkpoint and exits (waited for; killed after
        `STOP_WAIT_S`). A paused run is continued first, so that it can."""
        self._live("stop").stop(STOP_WAIT_S)
        return self.state()

    def shutdown(self) -> None:
        """The server stops: ask the run this lab started to stop, and return within ~2 s. The
        trainer saves its checkpoint on its own time; if it is still at it when the next
        server starts, that one adopts it. An adopted run (a previous server's, the command
        line's) is not this server's to stop: it goes on as it was."""
        trainer = self.trainer
        if trainer is not None and trainer.alive() and not trainer.is_adopted:
            trainer.interrupt()
            trainer.wait(SHUTDOWN_WAIT_S)

    def state(self) -> dict[str, Any]:
        """{run, status: idle | running | paused | stopped | done | failed, pid, log, adopted};
        ``adopted``: the trainer was not started by this lab (a previous server's, or the
        command line's)."""
        trainer = self.trainer
        if trainer is None:
            return {"run": self.run, "status": "idle", "pid": None, "log": "", "adopted": False}
        return {
            "run": self.run,
            "status": trainer.status(),
            "pid": trainer.pid,
            "log": self._log_tail(trainer),
            "adopted": trainer.is_adopted,
        }

    def state_of(self, run: str) -> dict[str, Any]:
        """The state of ``run``: the lab's own run's `state`; for another, whether a trainer
        holds it now ("training elsewhere", "paused elsewhere") or not ("not training")."""
        if run != self.run:
            self.adopt()  # a trainer that started since: the lab's run from now on
        if run == self.run:
            return self.state()
        held = holder(self.runs_root / run)
        if held is None:
            return {"run": run, "status": "not training", "pid": None, "log": "", "adopted": False}
        status = "paused elsewhere" if held.stopped else "training elsewhere"
        return {"run": run, "status": status, "pid": held.pid, "log": "", "adopted": False}

    def adopt(self) -> None:
        """Take over the first trainer holding a run's lock under the runs root, unless this
        lab's own trainer is still alive (one at a time)."""
        with self._adopting:
            if self.trainer is not None and self.trainer.alive():
                return
            for folder, held in self._held():
                if held.pid is not None:
                    self.trainer, self.run = TrainerProcess.adopted(held, folder), folder.name
                    return

    # the runs ---------------------------------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        """Every run directory under the runs root, newest first: {name, active (a trainer
        holds it now), paused, pid, changed, damaged (why its model cannot be read, when it
        cannot)}. Adopts a trainer found running (`adopt`)."""
        self.adopt()
        found = []
        for folder in self._folders():
            held = holder(folder)  # None for a lock no trainer made (a FIFO, a link out of the run)
            progress = folder / PROGRESS
            try:
                changed = progress.stat().st_mtime
            except OSError:
                changed = 0.0
            run = {"name": folder.name, "active": held is not None, "changed": changed}
            run |= {"paused": held is not None and held.stopped, "pid": None if held is None else held.pid}
            being_written = held is not None or (folder.name == self.run and self._own_alive())
            problem = None if being_written else self._damages(folder)
            if problem is not None:
                run["damaged"] = problem
            found.append(run)
        return sorted(found, key=lambda r: -r["changed"])

    def run_dir(self, name: str) -> Path:
        """The directory of the run ``name`` under the runs root (never a path from outside);
        the lab's own run even before its first files are written."""
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
            raise ValueError(f"run must be the name of a run under {self.runs_root}/, got {name!r}")
        directory = self.runs_root / name
        if name != self.run and not (directory / TRAIN_CONFIG).exists():
            raise ValueError(f"no run {name!r} under {self.runs_root}/")
        return directory

    # inside -------------------------------------------------------------------------------------
    def _run_config(self, preset: str, fields: dict[str, Any]) -> RunConfig:
        """``preset`` with ``fields`` changed, checked as a whole: each field, the fields a
        fine-tuning preset fixes, and the model they make (valid, and not too large here)."""
        if preset not in preset_names():
            raise ValueError(f"no preset {preset!r}; presets: {', '.join(preset_names())}")
        pretrained = pretrained_model(load_preset(preset).to_dict())
        fixed = [field for field in fields if field in fixed_fields(pretrained)]
        if fixed:
            raise ValueError(
                f"{preset} fine-tunes {pretrained}, so its architecture is {pretrained}'s: "
                f"{', '.join(fixed)} cannot change (the training fields can)"
            )
        assignments = overrides(fields)
        try:
            run = apply_overrides(load_preset(preset), assignments)
            check_size(run.model_config(vocab_size=256))  # as `build` will, before any process starts
            check_training_memory(run)
        except ModelTooLarge:
            raise  # its message says what to do
        except (TypeError, ValueError) as error:
            raise ValueError(f"these settings make no model: {error}") from None
        t = run.train
        try:  # the trainer's own check (`make_scheduler`), made here before any file is touched
            check_schedule(t.schedule, t.warmup_steps, t.steps, t.min_lr_ratio)
        except ValueError as error:
            why = f"(total_steps is train.steps; {preset} warms up for {t.warmup_steps} steps)"
            raise ValueError(f"{preset} cannot train with train.steps={t.steps}: {error} {why}") from None
        return run

    def _launch(self, arguments: list[str], processes: int = 1) -> None:
        """``glassformer <arguments>`` as this lab's child; several processes: torchrun's agent,
        which starts the ranks (and passes them the lab's Ctrl-C)."""
        self.runs_root.mkdir(parents=True, exist_ok=True)
        log = open(self.runs_root / f".{self.run}.log", "wb")  # noqa: SIM115 (the child writes it)
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1"}
        launcher = []
        if processes > 1:
            launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}"]
        child = subprocess.Popen(
            [sys.executable, *launcher, "-m", "glassformer", *arguments],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # the server's Ctrl-C is not the run's
            env=environment,
        )
        log.close()
        with self._adopting:
            self.trainer = TrainerProcess.launched(child, self.runs_root / self.run)

    def _log_tail(self, trainer: TrainerProcess, lines: int = 12) -> str:
        """The end of the run's log: the output of a trainer a lab started (an adopted one's
        only when the log is its own, written since it started)."""
        path = self.runs_root / f".{self.run}.log"
        try:
            started = trainer.started_at()  # to the second: /proc/stat's boot time is
            if trainer.is_adopted and (started is None or path.stat().st_mtime < started - 2):
                return ""  # an older run's
            text = read_tail(path, LOG_TAIL_BYTES).decode("utf-8", errors="replace")  # never blocks
        except (OSError, ValueError):
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _own_alive(self) -> bool:
        return self.trainer is not None and self.trainer.alive()

    def _live(self, action: str) -> TrainerProcess:
        """The trainer to act on: the lab's own, or one it adopts now."""
        self.adopt()
        if not self._own_alive():
            raise ValueError(f"no run is training now: nothing to {action}")
        return self.trainer

    def _folders(self) -> list[Path]:
        """The run directories under the runs root (a trainer's lock marks one from its start)."""
        try:
            folders = list(self.runs_root.iterdir())
        except OSError:  # no runs root yet, or one that cannot be listed: no runs to follow
            return []
        return [f for f in folders if f.is_dir() and ((f / TRAIN_CONFIG).exists() or (f / LOCK).exists())]

    def _held(self) -> list[tuple[Path, Holder]]:
        """The run directories a trainer holds now, with who holds them."""
        return [(folder, held) for folder in self._folders() if (held := holder(folder)) is not None]

    def _refuse_if_busy(self) -> None:
        self.adopt()
        if self._own_alive():
            how = self.trainer.status()
            elsewhere = f" (started elsewhere: process {self.trainer.pid})" if self.trainer.is_adopted else ""
            raise ValueError(
                f"{self.run} is {'paused' if how == 'paused' else 'training'} now{elsewhere}; stop it first "
                "(one run at a time: 2 cores)"
            )
        held = self._held()  # left: trainers that have not said who they are yet
        if held:
            raise ValueError(f"{held[0][0].name} is training now (a trainer is starting); one run at a time")


RUN_FILES_FOLLOWED = {"progress": PROGRESS, "metrics": METRICS, "film": FILM}
