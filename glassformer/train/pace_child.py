"""A run's pace measured in a child process with limits, never in the caller's.

`glassformer.train.pace.measure` trains a few steps of the run's model. Done inside the
workshop's server, a large model the size check allowed held the server for minutes and left
it gigabytes larger. Here it runs as ``python -m glassformer.train.pace_child``: the run's
settings go in on stdin as JSON, the pace comes back on stdout as JSON, and the child has at
most ``seconds`` of wall-clock time and ``memory_bytes`` of address space (``RLIMIT_AS``),
past which it is killed or fails to allocate; either way the caller gets a ValueError that
says which, and its own memory is untouched.

    pace = measure_in_child(run, seconds=120, memory_bytes=8 << 30)
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

from glassformer.train.pace import Pace, measure
from glassformer.train.settings import RunConfig

ADDRESS_SPACE_SLACK = 3 << 30  # what the interpreter, torch's libraries and thread stacks map, unused


def measure_in_child(run: RunConfig, seconds: float, memory_bytes: int) -> Pace:
    """`measure` ``run`` in a child process limited to ``seconds`` and ``memory_bytes``
    (plus `ADDRESS_SPACE_SLACK` of mapped, unused address space)."""
    limit = memory_bytes + ADDRESS_SPACE_SLACK
    environment = {**os.environ, "TQDM_DISABLE": "1", "PYTHONUNBUFFERED": "1"}
    try:
        child = subprocess.run(
            [sys.executable, "-m", "glassformer.train.pace_child", str(limit)],
            input=json.dumps(run.to_dict()),
            capture_output=True,
            text=True,
            timeout=seconds,
            env=environment,
        )
    except subprocess.TimeoutExpired:
        raise ValueError(
            f"timing this run took longer than {seconds:g} s on this machine: its steps are too slow "
            "to train here (make the model or the batch smaller)"
        ) from None
    if child.returncode != 0:
        lines = [line for line in child.stderr.splitlines() if line.strip()]
        last = lines[-1] if lines else f"exit status {child.returncode}"
        if "MemoryError" in child.stderr or "alloc" in child.stderr.lower():
            last = f"it needs more than {memory_bytes / 2**30:.1f} GiB of memory ({last})"
        raise ValueError(f"this run could not be timed: {last}")
    measured = json.loads(child.stdout)
    return Pace(float(measured["step_s"]), float(measured["evaluation_s"]))


def main() -> int:
    """The child: its address space limited first (argv[1], bytes), then the run timed."""
    limit = int(sys.argv[1])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    run = RunConfig.from_dict(json.loads(sys.stdin.read()))
    pace = measure(run)
    print(json.dumps({"step_s": pace.step_s, "evaluation_s": pace.evaluation_s}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
