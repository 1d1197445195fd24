"""Hugging Face checkpoints -> Glassformer models, through one explicit key map per family.

    net = convert_hf(*read_hf_checkpoint("checkpoint-dir/"))    # or an HF model object

The checkpoint's ``model_type`` picks a family module from the table in
`glassformer.formats.hf_families`; its ``config_from_hf`` gives our config, the model is
built without random initialization, and `glassformer.formats.key_map.load_mapped` fills
it by the family's key map, checking every shape and that every parameter is filled
exactly once and every checkpoint tensor used or deliberately ignored.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from glassformer.formats.hf_families import reader
from glassformer.formats.key_map import load_mapped
from glassformer.formats.weights import WeightFiles
from glassformer.models import TransformerModel, build


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
    family = reader(hf_config.get("model_type", "?"))
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
