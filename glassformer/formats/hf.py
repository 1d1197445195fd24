"""Hugging Face checkpoints -> Glassformer models, through one explicit key map per family.

A family module (``hf_gpt2``, ``hf_llama``, ``hf_bert``, ``hf_t5``, ``hf_marian``) gives

* ``config_from_hf(hf_config: dict, keys: set[str]) -> ModelConfig``;
* ``key_map(config, keys) -> list[Mapped]``: for each of our parameters, the checkpoint
  tensor it comes from and how it is reshaped (transposed, split, squeezed);
* ``IGNORED``: checkpoint tensors we deliberately do not use (each with its reason);
* for export (`glassformer.formats.hf_export`), ``config_to_hf(config) -> dict``, the
  inverse of ``config_from_hf``. Transforms that split a tensor are `Split`s, which can
  also ``join`` the pieces back.

`load_mapped` then checks everything: every one of our parameters is filled exactly
once, every shape matches, and no checkpoint tensor is left unused unless ignored — so
a checkpoint of another layout fails loudly instead of loading half a model.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from glassformer.formats.weights import WeightFiles
from glassformer.models import TransformerModel, build

Transform = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Mapped:
    """Our parameter ``ours`` <- ``transform(checkpoint[theirs])``."""

    ours: str
    theirs: str
    transform: Transform | None = None


@dataclass(frozen=True)
class Split:
    """One piece of a checkpoint tensor: transposed (GPT-2's Conv1D), then block ``part`` of
    ``parts`` equal blocks along dim 0 (fused q/k/v). Calling it reads; `join` writes.

    Shape: a matrix (out, in) from a fused one stored as (parts * out, in), or as
    (in, parts * out) when ``transposed``; a vector (out,) from (parts * out,). Vectors are
    never transposed.

    >>> fused = torch.arange(12.0).reshape(2, 6)     # GPT-2 c_attn: (in=2, 3 * out=6)
    >>> q = Split(0, 3, transposed=True)(fused)      # (out=2, in=2)
    >>> q.tolist()
    [[0.0, 6.0], [1.0, 7.0]]
    >>> pieces = [Split(j, 3, transposed=True)(fused) for j in range(3)]
    >>> torch.equal(Split(0, 3, transposed=True).join(pieces), fused)
    True
    """

    part: int = 0
    parts: int = 1
    transposed: bool = False

    def __call__(self, w: torch.Tensor) -> torch.Tensor:
        w = w.t() if self.transposed and w.dim() == 2 else w
        return w.chunk(self.parts, dim=0)[self.part].contiguous()

    def join(self, pieces: list[torch.Tensor]) -> torch.Tensor:
        """The checkpoint tensor from all ``parts`` pieces, in part order (the inverse)."""
        if len(pieces) != self.parts:
            raise ValueError(f"a tensor split in {self.parts} needs {self.parts} pieces, got {len(pieces)}")
        w = torch.cat(pieces, dim=0) if self.parts > 1 else pieces[0]
        w = w.t() if self.transposed and w.dim() == 2 else w
        return w.contiguous()


def rows(part: int, parts: int) -> Split:
    """Take one of ``parts`` equal blocks along dim 0 (fused q/k/v matrices)."""
    return Split(part, parts)


def conv1d(part: int = 0, parts: int = 1) -> Split:
    """GPT-2's Conv1D stores W as (in, out); ours are nn.Linear (out, in): transpose, split."""
    return Split(part, parts, transposed=True)


def _family(model_type: str):
    from glassformer.formats import hf_bert, hf_gpt2, hf_llama, hf_marian, hf_t5

    families = {
        "gpt2": hf_gpt2,
        "llama": hf_llama,
        "mistral": hf_llama,
        "qwen2": hf_llama,
        "bert": hf_bert,
        "t5": hf_t5,
        "marian": hf_marian,
    }
    if model_type not in families:
        raise ValueError(
            f"Hugging Face model_type {model_type!r} is not supported; supported: "
            + ", ".join(sorted(families))
        )
    return families[model_type]


def read_hf_checkpoint(source: Any) -> tuple[dict[str, Any], Mapping[str, torch.Tensor]]:
    """(config dict, state) from an HF model object or a checkpoint directory; a
    directory's tensors are read lazily, one at a time (`WeightFiles`)."""
    if hasattr(source, "state_dict") and hasattr(source, "config"):
        return source.config.to_dict(), dict(source.state_dict())
    directory = Path(source)
    if not directory.is_dir():
        raise FileNotFoundError(
            f"{str(source)!r} is neither a Hugging Face model object nor a checkpoint directory"
        )
    config_path = directory / "config.json"
    if not config_path.exists():
        raise FileNotFoundError(f"{directory} has no config.json; is it a Hugging Face checkpoint directory?")
    try:
        config = json.loads(config_path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{config_path} is not valid JSON: {error}") from None
    if not isinstance(config, dict) or "model_type" not in config:
        raise ValueError(f"{config_path} has no model_type; is it a Hugging Face model config?")
    return config, WeightFiles(directory)


def convert_hf(
    hf_config: dict[str, Any], state: Mapping[str, torch.Tensor], dtype: torch.dtype = torch.float32
) -> TransformerModel:
    """Build our model for an HF config (without random init) and fill it from the HF state."""
    family = _family(hf_config.get("model_type", "?"))
    keys = set(state)
    try:
        config = family.config_from_hf(hf_config, keys)
    except KeyError as error:
        raise ValueError(f"the Hugging Face config lacks {error.args[0]!r}") from None
    net = build(config, initialize=False, dtype=dtype)
    if hasattr(family, "check"):
        family.check(state, config)
    load_mapped(net, state, family.key_map(config, keys), family.IGNORED)
    return net.eval()


def load_mapped(
    net: torch.nn.Module, state: Mapping[str, torch.Tensor], mapping: list[Mapped], ignored: dict[str, str]
) -> None:
    """Copy checkpoint tensors into ``net`` by ``mapping``, asserting shapes and coverage."""
    params = dict(net.named_parameters())  # tied weights appear once, under their first name
    filled: set[str] = set()
    used: set[str] = set()
    for item in mapping:
        if item.ours not in params:
            raise KeyError(f"key map names {item.ours!r}, which this model does not have")
        if item.theirs not in state:
            raise KeyError(f"checkpoint has no tensor {item.theirs!r} (needed for {item.ours!r})")
        _fill(params[item.ours], item, state)
        filled.add(item.ours)
        used.add(item.theirs)
    missing = sorted(set(params) - filled)
    if missing:
        raise ValueError(f"the key map left these parameters unfilled: {', '.join(missing)}")
    unused = sorted(k for k in set(state) - used if not any(re.fullmatch(p, k) for p in ignored))
    if unused:
        raise ValueError(f"checkpoint tensors not understood by the key map: {', '.join(unused[:10])}")


def _fill(target: torch.Tensor, item: Mapped, state: Mapping[str, torch.Tensor]) -> None:
    """One parameter from its checkpoint tensor: read straight into place when the files
    allow it (`WeightFiles.read_into`), else read, transform, check the shape and copy."""
    if item.transform is None and isinstance(state, WeightFiles) and state.read_into(item.theirs, target):
        return
    tensor = state[item.theirs]
    if item.transform is not None:
        tensor = item.transform(tensor)
    if tuple(tensor.shape) != tuple(target.shape):
        raise ValueError(
            f"shape mismatch: checkpoint {item.theirs!r} gives {tuple(tensor.shape)}, "
            f"our {item.ours!r} needs {tuple(target.shape)}"
        )
    with torch.no_grad():
        target.copy_(tensor.to(target.dtype))


def hf_activation(name: str) -> str:
    """Our activation for an HF ``hidden_act`` / ``activation_function`` name."""
    table = {
        "gelu": "gelu",
        "gelu_new": "gelu_tanh",
        "gelu_pytorch_tanh": "gelu_tanh",
        "relu": "relu",
        "silu": "silu",
        "swish": "silu",
    }
    if name not in table:
        raise ValueError(f"activation {name!r} is not supported; supported: {', '.join(table)}")
    return table[name]


def special_id(hf: dict[str, Any], name: str) -> int | None:
    """A special-token id, or None when absent or outside the vocabulary (tiny test configs)."""
    value = hf.get(name)
    if isinstance(value, list):
        value = value[0] if value else None
    return value if value is not None and 0 <= value < hf["vocab_size"] else None


def hf_activation_name(activation: str, tanh_gelu: str = "gelu_new") -> str:
    """The HF name of our activation, the inverse of `hf_activation`; for a gated one (SwiGLU,
    GeGLU) the name of its gate's. ``tanh_gelu`` spells tanh-GELU: ``gelu_new`` (GPT-2) or
    ``gelu_pytorch_tanh`` (Llama-style configs).

    >>> hf_activation_name("swiglu"), hf_activation_name("gelu_tanh")
    ('silu', 'gelu_new')
    """
    gate = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_tanh"}.get(activation, activation)
    return tanh_gelu if gate == "gelu_tanh" else gate


def expect_family(config: Any, family: str, hf_name: str) -> None:
    """Export guard: an HF family writes one of our families only."""
    if config.family != family:
        raise ValueError(f"{hf_name} checkpoints hold family={family!r} models, not {config.family!r}")
