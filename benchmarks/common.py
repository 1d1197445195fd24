"""Timing helpers shared by the benchmark scripts: warm up, repeat, take the median."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


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


def interleaved_times(fns: dict[str, Callable[[], object]], repeats: int = 7) -> dict[str, list[float]]:
    """Each function's wall times, run in turn (ABCABC...) after one warm-up each, so drift hits
    all alike."""
    for fn in fns.values():
        fn()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return times


def interleaved_medians(fns: dict[str, Callable[[], object]], repeats: int = 7) -> dict[str, float]:
    """Median times of several functions, run in turn (`interleaved_times`)."""
    return {name: statistics.median(ts) for name, ts in interleaved_times(fns, repeats).items()}


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
