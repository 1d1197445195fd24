"""The training lab's form: the fields a learner may change in a preset, their kinds and
limits, and each value checked before it becomes a trainer's ``--set`` assignment.

A preset that fine-tunes a pretrained model (``train.init_from``) keeps that model's
architecture: its model fields are fixed.
"""

from __future__ import annotations

import dataclasses
import json
import os
from typing import Any

from glassformer.config import ModelConfig
from glassformer.config_checks import NORM_PLACEMENTS
from glassformer.train.settings import TrainConfig

# field -> (kind, allowed values or (least, most)): what the lab's form may change
FIELDS: dict[str, tuple[type, Any]] = {
    "model.n_layers": (int, (1, 12)),
    "model.n_heads": (int, (1, 16)),
    "model.d_model": (int, (8, 512)),
    "model.positions": (str, ("learned", "sinusoidal", "rope", "alibi")),
    "model.norm": (str, ("layernorm", "rmsnorm")),
    "model.norm_placement": (str, NORM_PLACEMENTS),  # pre, post, sandwich (Gemma 2), output (OLMo 2)
    "model.activation": (str, ("relu", "gelu", "swiglu", "geglu")),
    "model.n_experts": (int, (0, 16)),  # 0: one dense FFN; more: a mixture of experts
    "train.lr": (float, (1e-6, 1.0)),
    "train.steps": (int, (1, 100_000)),
    "train.eval_interval": (int, (1, 10_000)),
}


PROCESSES = "processes"  # not a --set field: how many processes train the run (torchrun)


def max_processes() -> int:
    """The most processes the lab starts: one per CPU core (each rank then runs one thread)."""
    return os.cpu_count() or 1


def split_processes(fields: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """(the ``--set`` fields, the number of processes, checked: 1 when not given)."""
    fields = dict(fields)
    value = fields.pop(PROCESSES, 1)
    most = max_processes()
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        raise ValueError(
            f"processes must be a whole number from 1 to {most} (this machine's cores), got {value!r}"
        )
    return fields, value


def pretrained_model(preset: dict[str, Any]) -> str | None:
    """The model a preset fine-tunes (``train.init_from``), or None for one trained from scratch."""
    init_from = preset.get("train", {}).get("init_from", "scratch")
    return None if init_from == "scratch" else init_from


def fixed_fields(pretrained: str | None) -> list[str]:
    """The lab's model fields, when a preset starts from a ``pretrained`` model (else none)."""
    return [field for field in FIELDS if field.startswith("model.")] if pretrained else []


def preset_default(table: str, key: str) -> Any:
    """What a preset that does not set ``table.key`` gets: the ModelConfig / TrainConfig default."""
    kind = ModelConfig if table == "model" else TrainConfig
    field = kind.__dataclass_fields__.get(key)
    return None if field is None or field.default is dataclasses.MISSING else field.default


def overrides(fields: dict[str, Any]) -> list[str]:
    """The lab's ``fields`` as the trainer's ``--set`` assignments, each checked (`checked`)."""
    return [f"{field}={checked(field, value)}" for field, value in fields.items()]


def checked(field: str, value: Any) -> str:
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
