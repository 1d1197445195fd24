"""Learning-rate schedules as multipliers of the base (peak) learning rate.

Every schedule here returns a multiplier ``m(step)`` and the learning rate is
``lr(step) = base_lr * m(step)``. ``step`` counts optimizer updates already taken, so
``step = 0`` is the first update (the convention of ``torch.optim.lr_scheduler.LambdaLR``,
which calls ``m(0)`` at construction and ``m(k)`` after the k-th ``scheduler.step()``).

Warmup, shared by all schedules, rises linearly and never starts at zero (an update with
lr = 0 would be wasted)::

    m(step) = (step + 1) / warmup_steps            for step < warmup_steps

so the last warmup step reaches 1 and ``base_lr`` is always the peak. After warmup, with
``r = min_lr_ratio`` and ``p = (step - warmup_steps) / (total_steps - warmup_steps)``
clipped to [0, 1]:

- ``constant``:     m = 1
- ``cosine``:       m = r + (1 - r) * (1 + cos(pi * p)) / 2     (Loshchilov & Hutter 2017)
- ``linear``:       m = r + (1 - r) * (1 - p)                  (BERT; r = 0 reproduces it)
- ``inverse_sqrt``: m = min(s^-0.5, s * w^-1.5) * w^0.5,  s = step + 1, w = warmup_steps

``inverse_sqrt`` is the original Transformer's schedule (Vaswani et al. 2017, eq. 3)::

    lrate = d_model^-0.5 * min(step_num^-0.5, step_num * warmup^-1.5)

**Choice made here:** it is expressed as a multiplier normalized to 1 at the end of
warmup, so ``base_lr`` is its peak like every other schedule. The paper's absolute
``lrate`` is recovered with ``base_lr = (d_model * warmup)^-0.5`` (`transformer_peak_lr`);
`lr_at` does that for you when you pass ``base_lr=None`` and ``d_model``.

>>> [round(lr_at(s, "cosine", 1e-3, warmup_steps=2, total_steps=6), 6) for s in range(7)]
[0.0005, 0.001, 0.001, 0.000868, 0.00055, 0.000232, 0.0001]
"""

from __future__ import annotations

import functools
import math

import torch

SCHEDULES = ("constant", "cosine", "linear", "inverse_sqrt")
DECAYING = ("cosine", "linear")  # need total_steps


def lr_multiplier(
    step: int,
    schedule: str,
    warmup_steps: int = 0,
    total_steps: int | None = None,
    min_lr_ratio: float = 0.1,
) -> float:
    """The multiplier ``m(step)`` of the base learning rate (equations in the module doc)."""
    check_schedule(schedule, warmup_steps, total_steps, min_lr_ratio)
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ValueError(f"step={step!r} must be an integer >= 0 (0 is the first optimizer update)")
    if schedule == "inverse_sqrt":
        s, w = step + 1, max(warmup_steps, 1)
        return min(s**-0.5, s * w**-1.5) * w**0.5
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant":
        return 1.0
    progress = min(max((step - warmup_steps) / (total_steps - warmup_steps), 0.0), 1.0)
    if schedule == "cosine":
        return min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * progress))
    return min_lr_ratio + (1.0 - min_lr_ratio) * (1.0 - progress)  # linear


def transformer_peak_lr(d_model: int, warmup_steps: int) -> float:
    """The peak of the original Transformer's schedule, ``(d_model * warmup)^-0.5``.

    >>> round(transformer_peak_lr(512, 4000), 7)  # the paper's base model
    0.0006988
    """
    if d_model < 1 or warmup_steps < 1:
        raise ValueError(f"d_model={d_model} and warmup_steps={warmup_steps} must both be >= 1")
    return (d_model * warmup_steps) ** -0.5


def lr_at(
    step: int,
    schedule: str,
    base_lr: float | None,
    warmup_steps: int = 0,
    total_steps: int | None = None,
    min_lr_ratio: float = 0.1,
    d_model: int | None = None,
) -> float:
    """The learning rate ``base_lr * m(step)`` at optimizer step ``step``.

    ``base_lr=None`` is only for ``inverse_sqrt`` with ``d_model`` given: it then uses the
    paper's peak `transformer_peak_lr` (d_model, warmup_steps), reproducing its ``lrate``.
    """
    if base_lr is None:
        if schedule != "inverse_sqrt" or d_model is None:
            raise ValueError(
                "base_lr=None is only meaningful for schedule='inverse_sqrt' with d_model given "
                "(the paper's lrate); otherwise pass the peak learning rate, e.g. base_lr=3e-4"
            )
        base_lr = transformer_peak_lr(d_model, warmup_steps)
    if not base_lr > 0:
        raise ValueError(f"base_lr={base_lr!r} must be positive")
    return base_lr * lr_multiplier(step, schedule, warmup_steps, total_steps, min_lr_ratio)


def make_scheduler(
    optimizer: torch.optim.Optimizer,
    schedule: str,
    warmup_steps: int = 0,
    total_steps: int | None = None,
    min_lr_ratio: float = 0.1,
    d_model: int | None = None,
) -> torch.optim.lr_scheduler.LambdaLR:
    """A ``LambdaLR`` that scales each param group's lr by `lr_multiplier`.

    The optimizer's ``lr`` is the peak. Call ``scheduler.step()`` once after each
    ``optimizer.step()``. ``scheduler.state_dict()`` holds only counters (the step and
    the last lr), so a resumed run follows the schedule given here: extending
    ``total_steps`` on resume stretches the decay from that point on.

    ``d_model`` is accepted so one call fits every schedule; it does not change the
    multiplier (to train with the paper's absolute lrate, give the optimizer
    ``lr=transformer_peak_lr(d_model, warmup_steps)``).
    """
    check_schedule(schedule, warmup_steps, total_steps, min_lr_ratio)
    if d_model is not None and d_model < 1:
        raise ValueError(f"d_model={d_model} must be a positive integer")
    # A partial, not a lambda or a callable object: LambdaLR saves a callable object's
    # __dict__ and would overwrite the schedule given here with the checkpoint's on resume.
    multiplier = functools.partial(
        lr_multiplier,
        schedule=schedule,
        warmup_steps=warmup_steps,
        total_steps=total_steps,
        min_lr_ratio=min_lr_ratio,
    )
    return torch.optim.lr_scheduler.LambdaLR(optimizer, multiplier)


def check_schedule(schedule: str, warmup_steps: int, total_steps: int | None, min_lr_ratio: float) -> None:
    """Raise a ValueError naming the argument if a schedule's settings are invalid."""
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of: {', '.join(SCHEDULES)}")
    if isinstance(warmup_steps, bool) or not isinstance(warmup_steps, int) or warmup_steps < 0:
        raise ValueError(f"warmup_steps={warmup_steps!r} must be an integer >= 0")
    if schedule == "inverse_sqrt" and warmup_steps < 1:
        raise ValueError("schedule='inverse_sqrt' needs warmup_steps >= 1 (the paper used 4000)")
    if schedule in DECAYING:
        if total_steps is None or total_steps <= warmup_steps:
            raise ValueError(
                f"schedule={schedule!r} decays from warmup_steps={warmup_steps} to total_steps="
                f"{total_steps!r}: total_steps must be an integer larger than warmup_steps"
            )
        if not 0.0 <= min_lr_ratio <= 1.0:
            raise ValueError(f"min_lr_ratio={min_lr_ratio!r} must lie in [0, 1] (fraction of the peak lr)")
