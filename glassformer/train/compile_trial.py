"""``train.compile = "auto"``: compile the model's forward only where it measures faster, on the
run's own steps.

``torch.compile`` costs time first (tracing, then C++ for each fused kernel: tens of seconds on
a laptop CPU) and pays back only if every later step is faster by enough. On the CPUs measured
it often is not: the shakespeare-char preset compiled ran 0.90-1.07x eager in float32 on a
2-core AMD EPYC (``benchmarks/train_speed.py``). So "auto" decides here, with this run's steps:

1. the first `WARMUP` steps run eager and are not timed (allocators, oneDNN's kernel choices),
   the next `MEASURED` are: t_eager, their median;
2. a run too short to repay a compile stays eager without trying: when even a `HOPED` gain,
   ``HOPED * t_eager * steps left``, stays under `COMPILE_GUESS_S` (a run of under about ten
   minutes on the CPUs measured);
3. otherwise the model is compiled in place (`nn.Module.compile`); its first step compiles
   (timed apart), the next `MEASURED` give t_compiled;
4. the faster is kept: a compiled model that is not at least `MIN_SPEEDUP` faster goes back to
   eager (the compile's time is spent either way; what is left is the steps).

Each decision is one line of the run's log, with its numbers. On several processes (torchrun)
each rank would time its own steps and might choose otherwise, so "auto" stays eager there.
"""

from __future__ import annotations

import statistics

from torch import nn

WARMUP = 3  # steps before any timing
MEASURED = 5  # steps timed for each of eager and compiled
HOPED = 0.1  # the gain a compile is tried for: 10% of a step
COMPILE_GUESS_S = 60.0  # what a compile may cost, to decide whether it is worth trying
MIN_SPEEDUP = 1.05  # compiled must beat eager by 5% to be kept (within noise is no gain)


class CompileTrial:
    """Times a run's steps and compiles its model only where that is faster (the module docstring).
    ``after_step(seconds, steps_left)`` is called after each training step; it returns a line for
    the log when it has decided something, else None. ``done`` once the choice is final."""

    def __init__(self, net: nn.Module, requested: bool | str, processes: int = 1) -> None:
        self.net = net
        self.done = requested != "auto" or processes > 1
        self.compiled = False
        self.eager_times: list[float] = []
        self.compiled_times: list[float] = []
        self.compile_seconds = 0.0
        self._seen = 0

    def after_step(self, seconds: float, steps_left: int) -> str | None:
        if self.done:
            return None
        self._seen += 1
        if not self.compiled:
            if self._seen <= WARMUP:
                return None
            self.eager_times.append(seconds)
            return self._try_compiling(steps_left) if len(self.eager_times) == MEASURED else None
        if self.compile_seconds == 0.0:  # the compiled model's first step: the compile
            self.compile_seconds = seconds
            return None
        self.compiled_times.append(seconds)
        return self._keep_the_faster() if len(self.compiled_times) == MEASURED else None

    def _try_compiling(self, steps_left: int) -> str | None:
        eager = statistics.median(self.eager_times)
        if HOPED * eager * steps_left < COMPILE_GUESS_S:
            self.done = True
            return (
                f"train.compile: auto -> eager ({steps_left} steps of {eager * 1e3:.0f} ms are left: a "
                f"{HOPED:.0%} gain would not repay a compile of about {COMPILE_GUESS_S:.0f} s)"
            )
        self.net.compile()
        self.compiled = True
        return f"train.compile: auto -> trying it (eager {eager * 1e3:.1f} ms a step); the next step compiles"

    def _keep_the_faster(self) -> str:
        self.done = True
        eager, compiled = statistics.median(self.eager_times), statistics.median(self.compiled_times)
        ratio = eager / compiled
        times = f"compiled {compiled * 1e3:.1f} ms vs eager {eager * 1e3:.1f} ms a step"
        spent = f"the compile took {self.compile_seconds:.1f} s"
        if ratio >= MIN_SPEEDUP:
            return f"train.compile: auto -> compiled ({ratio:.2f}x faster here: {times}; {spent})"
        self.net._compiled_call_impl = None  # nn.Module.compile's own attribute: back to eager
        self.compiled = False
        return f"train.compile: auto -> eager (compiled {ratio:.2f}x eager here: {times}; {spent})"
