"""Timing helpers shared by the benchmark scripts: warm up, repeat, take the median."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

from glassformer.fast import interleaved_medians, interleaved_times  # the library's measured choices use them

__all__ = ["cpu_name", "interleaved_medians", "interleaved_times", "median_seconds"]


def median_seconds(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    """Median wall time of ``fn()`` over ``repeats`` runs after ``warmup`` runs."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def cpu_name() -> str:
    """The CPU's model name (from /proc/cpuinfo where there is one), for a benchmark's header."""
    import platform
    from pathlib import Path

    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"
