"""Training precision: float32, bf16 or fp16 autocast, and ``"auto"``, which measures.

bf16 autocast halves the bytes of every matrix product, but whether it is *faster* depends on
the chip: a CPU with bf16 instructions (``avx512_bf16``, ``amx_bf16``; Arm's ``bf16``) runs
the products natively, one without them converts and runs them in float32, slower than
float32 itself (the ``shakespeare-char`` preset in bf16 was 2.6x slower on an Intel Xeon
without AVX512-BF16 than in float32, and faster on the AMD EPYC where it was tuned). So
``train.dtype = "auto"`` decides on this machine, in two steps:

1. capability: a GPU that reports bf16 support, or a CPU whose ``/proc/cpuinfo`` flags name
   bf16 instructions (with ``torch.backends.cpu.get_cpu_capability()`` shown beside them);
2. a one-off micro-benchmark: the matrix products of one training step at the model's shapes
   (tokens x d_model times the q/k/v, output, FFN and LM-head matrices), forward and backward,
   in float32 and under bf16 autocast.

bf16 is chosen only when both agree (capable, and at least `MIN_SPEEDUP` faster). The
measurement is cached per machine in ``precision.json`` under the data home
(`glassformer.data_home.default_data_dir`), keyed by the processor's name, the torch version
and the shapes, so it runs once. The reason is kept in words for the run's log, e.g.
``dtype: auto -> float32 (bf16 autocast 1.8x slower here: 3.1 ms vs 1.7 ms; CPU ...)``.

fp16 autocast (``"float16"``) needs loss scaling: fp16's smallest normal number is 6e-5, so
small gradients underflow to zero. `torch.amp.GradScaler` multiplies the loss by a large
scale before backward, divides the gradients back before the optimizer step, skips a step
whose gradients overflowed and lowers the scale then; its state is part of a checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from glassformer.atomic import write_text_atomic
from glassformer.config import ModelConfig
from glassformer.data_home import default_data_dir

DTYPES = ("auto", "float32", "bfloat16", "float16")
AUTOCAST = {"bfloat16": torch.bfloat16, "float16": torch.float16}
MIN_SPEEDUP = 1.1  # bf16 must beat float32 by 10%: a tie is not worth bf16's rounding
BF16_FLAGS = ("avx512_bf16", "amx_bf16", "bf16")  # x86 AVX512-BF16 and AMX; Arm's BF16 extension
KERNEL_FLAGS = (  # the instruction sets torch's CPU kernels choose between: part of a measurement's key
    *BF16_FLAGS,
    *("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_fp16", "amx_tile", "amx_int8"),
    *("asimd", "sve", "sve2", "i8mm"),
)
CACHE_FILE = "precision.json"
MAX_TOKENS = 512  # the benchmark's rows: enough to time the products, few enough to take seconds


@dataclass(frozen=True)
class Precision:
    """The dtype a run trains in, and why. ``requested`` is the setting ("auto", ...),
    ``chosen`` what runs ("float32", "bfloat16" or "float16")."""

    requested: str
    chosen: str
    reason: str
    device_type: str = "cpu"

    def autocast(self) -> contextlib.AbstractContextManager:
        """``torch.autocast`` in the chosen dtype, or nothing for float32."""
        if self.chosen not in AUTOCAST:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=AUTOCAST[self.chosen])

    def scaler(self) -> torch.amp.GradScaler:
        """A gradient scaler, enabled only for fp16 (with bf16 or float32 it passes through)."""
        return torch.amp.GradScaler(self.device_type, enabled=self.chosen == "float16")

    def describe(self) -> str:
        """One line for the log: ``dtype: auto -> float32 (why)``."""
        return f"dtype: {self.requested} -> {self.chosen} ({self.reason})"


def choose(requested: str, config: ModelConfig, device: torch.device, tokens: int) -> Precision:
    """The precision of a run asking for ``requested`` on ``device``, with ``tokens`` tokens in a
    micro-batch (batch size x context): a fixed dtype is checked, ``"auto"`` decided here."""
    if requested not in DTYPES:
        raise ValueError(f"train.dtype={requested!r}; allowed values: {', '.join(DTYPES)}")
    device = torch.device(device)
    if requested == "float16" and device.type == "mps":
        raise ValueError(
            "train.dtype='float16' needs a gradient scaler, which this torch does not offer on MPS; "
            "use 'float32' or 'bfloat16'"
        )
    if requested != "auto":
        return Precision(requested, requested, "as set", device.type)
    if device.type == "mps":
        return Precision("auto", "float32", "MPS: bf16 autocast is not measured there", "mps")
    capable, capability = bf16_capability(device)
    timing = measured_speedup(config, device, tokens)
    where = f"{capability}; {timing['machine']}"
    ratio = timing["float32_ms"] / timing["bfloat16_ms"]
    times = f"{timing['bfloat16_ms']:.2f} ms vs {timing['float32_ms']:.2f} ms float32"
    if ratio >= 1:
        measured = f"bf16 autocast {ratio:.2f}x faster here: {times}"
    else:
        measured = f"bf16 autocast {1 / ratio:.2f}x slower here: {times}"
    chosen = "bfloat16" if capable and ratio >= MIN_SPEEDUP else "float32"
    if capable and chosen == "float32" and ratio >= 1:
        measured += f" (under the {MIN_SPEEDUP}x bf16 must win by)"
    return Precision("auto", chosen, f"{measured}; {where}", device.type)


def bf16_capability(device: torch.device) -> tuple[bool, str]:
    """(whether ``device`` has bf16 arithmetic, the evidence in words)."""
    device = torch.device(device)
    if device.type == "cuda":
        supported = torch.cuda.is_bf16_supported()
        name = torch.cuda.get_device_name(device)
        return supported, f"{name} {'supports' if supported else 'lacks'} bf16"
    flags = sorted(set(BF16_FLAGS) & cpu_flags())
    capability = torch.backends.cpu.get_cpu_capability()
    if flags:
        return True, f"CPU flags {', '.join(flags)}, torch kernels {capability}"
    return False, f"no bf16 instructions in the CPU flags, torch kernels {capability}"


def cpu_flags() -> set[str]:
    """The instruction-set flags of /proc/cpuinfo (x86 ``flags``, Arm ``Features``); empty elsewhere."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def machine_name(device: torch.device) -> str:
    """The processor's model name (``CPU AMD EPYC 7B13``), or the GPU's."""
    device = torch.device(device)
    if device.type == "cuda":
        return f"GPU {torch.cuda.get_device_name(device)}"
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.startswith("model name"):
                return "CPU " + line.partition(":")[2].strip()
    except OSError:
        pass
    return "CPU " + (platform.processor() or platform.machine() or "unknown")


def machine_key(device: torch.device) -> str:
    """What a measurement on ``device`` depends on: its name and, for a CPU, the instruction sets
    torch's kernels use and the threads they run on. One name can be two machines: "AMD EPYC"
    is a Zen 3 (AVX2, where bf16 is 2.9-40x slower) and a Zen 4 (AVX512-BF16, 2.4x faster)."""
    device = torch.device(device)
    if device.type != "cpu":
        return machine_name(device)
    flags = " ".join(sorted(set(KERNEL_FLAGS) & cpu_flags())) or "no vector flags read"
    return f"{machine_name(device)} [{flags}] {torch.get_num_threads()} threads"


def measured_speedup(config: ModelConfig, device: torch.device, tokens: int) -> dict[str, Any]:
    """``{"float32_ms", "bfloat16_ms", "machine"}``: one training step's matrix products at this
    model's shapes, timed once per machine, torch version and shape (cached in precision.json)."""
    device = torch.device(device)
    shapes = benchmark_shapes(config, tokens)
    machine = machine_name(device)
    key = f"{machine_key(device)} | torch {torch.__version__} | {'x'.join(map(str, shapes))}"
    path = default_data_dir() / CACHE_FILE
    cache = _read_cache(path)
    if key not in cache:
        fp32_ms, bf16_ms = time_products(shapes, device)
        cache[key] = {"float32_ms": fp32_ms, "bfloat16_ms": bf16_ms, "measured": time.strftime("%F %T")}
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(cache, indent=1, sort_keys=True))
    return {**cache[key], "machine": machine}


def benchmark_shapes(config: ModelConfig, tokens: int) -> tuple[int, int, int, int]:
    """(rows, d_model, d_ff, vocab) of the micro-benchmark; rows capped at `MAX_TOKENS`."""
    vocab = config.vocab_size if config.has_lm_head else config.d_model
    return min(tokens, MAX_TOKENS), config.d_model, config.d_ff, vocab


def time_products(
    shapes: tuple[int, int, int, int], device: torch.device, budget_s: float = 1.0
) -> tuple[float, float]:
    """(float32 ms, bf16 autocast ms): the fastest of 3 to 30 rounds (within ``budget_s``) of
    x @ W for W in (d x 3d, d x d, d x f, f x d, d x v), forward and backward. The two alternate
    round by round, so a burst of load from elsewhere hits both alike, after one warm-up each
    (oneDNN picks and caches its kernels); the fastest round is the one least disturbed."""
    n, d, f, v = shapes
    generator = torch.Generator().manual_seed(0)
    weights = [
        (torch.randn(rows, cols, generator=generator) / rows**0.5).to(device).requires_grad_()
        for rows, cols in ((d, 3 * d), (d, d), (d, f), (f, d), (d, v))
    ]
    x = torch.randn(n, d, generator=generator).to(device).requires_grad_()  # n d: the stream
    h = torch.randn(n, f, generator=generator).to(device).requires_grad_()  # n f: the FFN's hidden

    def step(dtype: torch.dtype | None) -> float:
        _sync(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext():
            outs = [(h if i == 3 else x) @ w for i, w in enumerate(weights)]
            total = sum(out.float().sum() for out in outs)
        total.backward()
        _sync(device)
        return (time.perf_counter() - start) * 1000

    step(None), step(torch.bfloat16)
    fp32: list[float] = []
    bf16: list[float] = []
    while len(fp32) < 3 or (len(fp32) < 30 and sum(fp32) + sum(bf16) < budget_s * 1000):
        fp32.append(step(None))
        bf16.append(step(torch.bfloat16))
    return round(min(fp32), 4), round(min(bf16), 4)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _read_cache(path: Path) -> dict[str, Any]:
    """The cached measurements; a missing or unreadable file is an empty cache (measured again)."""
    try:
        cache = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return cache if isinstance(cache, dict) else {}
