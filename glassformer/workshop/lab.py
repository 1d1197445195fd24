"""The training lab: one training run at a time, in its own process, followed from the page.

`Lab.start(preset, fields)` starts ``python -m glassformer train --preset P --out runs/P-lab
--overwrite --set ...`` with the server's interpreter, in a session of its own (a Ctrl-C
meant for the server does not reach it). The run is a normal run directory, so the CLI can
``eval``, ``generate`` and ``--resume`` it. Pause and resume stop and continue the process
(SIGSTOP / SIGCONT: nothing is lost, it just waits); stop sends SIGINT, and the trainer
saves a checkpoint before it exits, so killing a run loses nothing beyond its last
checkpoint; "continue" starts ``train --resume`` on a stopped run. Only fields a learner
would change are accepted (`FIELDS`), each checked here before any process starts.

What the page shows comes from the run directory, not the process (`RunFiles`): so the page
follows a run started from the command line too, and reconnects to one in progress.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats.run_directory import FILM, METRICS, PROGRESS, TRAIN_CONFIG
from glassformer.train.settings import TrainConfig, apply_overrides, load_preset, preset_names

# field -> (kind, allowed values or (least, most)): what the lab's form may change
FIELDS: dict[str, tuple[type, Any]] = {
    "model.n_layers": (int, (1, 12)),
    "model.n_heads": (int, (1, 16)),
    "model.d_model": (int, (8, 512)),
    "model.positions": (str, ("learned", "sinusoidal", "rope", "alibi")),
    "model.norm": (str, ("layernorm", "rmsnorm")),
    "model.norm_placement": (str, ("pre", "post")),
    "model.activation": (str, ("relu", "gelu", "swiglu", "geglu")),
    "train.lr": (float, (1e-6, 1.0)),
    "train.steps": (int, (1, 100_000)),
    "train.eval_interval": (int, (1, 10_000)),
}
LAB_SUFFIX = "-lab"
ACTIVE_S = 10.0  # a run whose progress grew this recently is taken as training now
STOP_WAIT_S = 30.0


class Lab:
    """The lab's one training process, and the runs under ``runs_root`` it can follow."""

    def __init__(self, runs_root: str | Path) -> None:
        self.runs_root = Path(runs_root)
        self.process: subprocess.Popen | None = None
        self.run: str | None = None
        self.paused = False

    # what the form offers -------------------------------------------------------------------
    def presets(self) -> list[dict[str, Any]]:
        """Each preset with the lab's fields and their values in it; a preset that fine-tunes a
        pretrained model (``init_from``) has that model's architecture: its model fields are
        fixed (listed, their values null)."""
        out = []
        for name in preset_names():
            config = load_preset(name).to_dict()
            pretrained = _pretrained(config)
            fixed = _fixed_fields(pretrained)
            values = {}
            for field in FIELDS:
                table, key = field.split(".")
                values[field] = (
                    None if field in fixed else config.get(table, {}).get(key, _default(table, key))
                )
            out.append({"name": name, "fields": values, "pretrained": pretrained, "fixed": fixed})
        return out

    def fields(self) -> dict[str, dict[str, Any]]:
        """The fields the form may change: their kind and allowed values or range."""
        return {
            field: {"kind": kind.__name__, "allowed" if kind is str else "range": list(limits)}
            for field, (kind, limits) in FIELDS.items()
        }

    # the process -----------------------------------------------------------------------------
    def start(self, preset: str, fields: dict[str, Any]) -> dict[str, Any]:
        """Start ``preset`` with ``fields`` changed, in ``runs/<preset>-lab`` (replaced)."""
        if preset not in preset_names():
            raise ValueError(f"no preset {preset!r}; presets: {', '.join(preset_names())}")
        pretrained = _pretrained(load_preset(preset).to_dict())
        fixed = [field for field in fields if field in _fixed_fields(pretrained)]
        if fixed:
            raise ValueError(
                f"{preset} fine-tunes {pretrained}, so its architecture is {pretrained}'s: "
                f"{', '.join(fixed)} cannot change (the training fields can)"
            )
        overrides = [f"{field}={_checked(field, value)}" for field, value in fields.items()]
        try:  # the whole config checked here, so a bad mix is a message, not a failed process
            apply_overrides(load_preset(preset), overrides).model_config(vocab_size=256)
        except (TypeError, ValueError) as error:
            raise ValueError(f"these settings make no model: {error}") from None
        self._refuse_if_busy()
        self.run = f"{preset}{LAB_SUFFIX}"
        command = ["train", "--preset", preset, "--out", str(self.runs_root / self.run), "--overwrite"]
        for assignment in overrides:
            command += ["--set", assignment]
        self._launch(command)
        return self.state()

    def resume_run(self, run: str) -> dict[str, Any]:
        """Continue a stopped run from its last checkpoint (``train --resume``)."""
        directory = self.run_dir(run)
        self._refuse_if_busy()
        self.run = run
        self._launch(["train", "--preset", run, "--out", str(directory), "--resume"])
        return self.state()

    def pause(self) -> dict[str, Any]:
        self._signal(signal.SIGSTOP, "pause")
        self.paused = True
        return self.state()

    def resume(self) -> dict[str, Any]:
        self._signal(signal.SIGCONT, "resume")
        self.paused = False
        return self.state()

    def stop(self) -> dict[str, Any]:
        """Ctrl-C for the run: it saves a checkpoint and exits (waited for)."""
        process = self._running("stop")
        if self.paused:
            process.send_signal(signal.SIGCONT)
            self.paused = False
        process.send_signal(signal.SIGINT)
        try:
            process.wait(STOP_WAIT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        return self.state()

    def shutdown(self) -> None:
        """Stop a run still going when the server stops (it keeps its last checkpoint)."""
        if self.process is not None and self.process.poll() is None:
            self.stop()

    def state(self) -> dict[str, Any]:
        """{run, status: idle | running | paused | stopped | done | failed, pid, log}."""
        if self.process is None:
            return {"run": self.run, "status": "idle", "pid": None, "log": ""}
        code = self.process.poll()
        if code is None:
            status = "paused" if self.paused else "running"
        else:
            status = {0: "done", 130: "stopped"}.get(code, "failed")
        return {"run": self.run, "status": status, "pid": self.process.pid, "log": self._log_tail()}

    # the runs ---------------------------------------------------------------------------------
    def runs(self) -> list[dict[str, Any]]:
        """Every run directory under the runs root, newest first, with whether it trains now."""
        if not self.runs_root.is_dir():
            return []
        found = []
        for folder in self.runs_root.iterdir():
            if (folder / TRAIN_CONFIG).exists():
                progress = folder / PROGRESS
                changed = progress.stat().st_mtime if progress.exists() else 0.0
                active = time.time() - changed < ACTIVE_S
                found.append({"name": folder.name, "active": active, "changed": changed})
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
    def _launch(self, arguments: list[str]) -> None:
        self.runs_root.mkdir(parents=True, exist_ok=True)
        log = open(self.runs_root / f".{self.run}.log", "wb")  # noqa: SIM115 (the child writes it)
        environment = {**os.environ, "PYTHONUNBUFFERED": "1", "TQDM_DISABLE": "1"}
        self.process = subprocess.Popen(
            [sys.executable, "-m", "glassformer", *arguments],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # the server's Ctrl-C is not the run's
            env=environment,
        )
        log.close()
        self.paused = False

    def _log_tail(self, lines: int = 12) -> str:
        path = self.runs_root / f".{self.run}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])

    def _running(self, action: str) -> subprocess.Popen:
        if self.process is None or self.process.poll() is not None:
            raise ValueError(f"no run is training now: nothing to {action}")
        return self.process

    def _signal(self, which: signal.Signals, action: str) -> None:
        self._running(action).send_signal(which)

    def _refuse_if_busy(self) -> None:
        if self.process is not None and self.process.poll() is None:
            raise ValueError(f"{self.run} is training now; stop it first (one run at a time: 2 cores)")
        busy = [r["name"] for r in self.runs() if r["active"] and r["name"] != self.run]  # ours has ended
        if busy:
            raise ValueError(f"{busy[0]} is training now (started elsewhere); one run at a time")


def _pretrained(preset: dict[str, Any]) -> str | None:
    """The model a preset fine-tunes (``train.init_from``), or None for one trained from scratch."""
    init_from = preset.get("train", {}).get("init_from", "scratch")
    return None if init_from == "scratch" else init_from


def _fixed_fields(pretrained: str | None) -> list[str]:
    """The lab's model fields, when a preset starts from a ``pretrained`` model (else none)."""
    return [field for field in FIELDS if field.startswith("model.")] if pretrained else []


def _default(table: str, key: str) -> Any:
    """What a preset that does not set ``table.key`` gets: the ModelConfig / TrainConfig default."""
    kind = ModelConfig if table == "model" else TrainConfig
    field = kind.__dataclass_fields__.get(key)
    return None if field is None or field.default is dataclasses.MISSING else field.default


def _checked(field: str, value: Any) -> str:
    """``value`` for ``field`` as a --set literal, or a ValueError saying what is allowed."""
    if field not in FIELDS:
        raise ValueError(f"the lab does not change {field!r}; it changes: {', '.join(FIELDS)}")
    kind, limits = FIELDS[field]
    if kind is str:
        if value not in limits:
            raise ValueError(f"{field} must be one of {', '.join(limits)}, got {value!r}")
        return json.dumps(value)
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or (kind is int and value != int(value))
    ):
        raise ValueError(f"{field} must be {'an integer' if kind is int else 'a number'}, got {value!r}")
    least, most = limits
    if not least <= value <= most:
        raise ValueError(f"{field} must be from {least:g} to {most:g}, got {value!r}")
    return repr(kind(value))


def tail(path: Path, offset: int) -> tuple[list[dict[str, Any]], int]:
    """The complete JSON lines of ``path`` after byte ``offset``, and the new offset (a line
    still being written waits for the next call)."""
    if not path.exists():
        return [], offset
    with open(path, "rb") as handle:
        handle.seek(offset)
        data = handle.read()
    end = data.rfind(b"\n") + 1
    records = []
    for line in data[:end].splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records, offset + end


RUN_FILES_FOLLOWED = {"progress": PROGRESS, "metrics": METRICS, "film": FILM}
