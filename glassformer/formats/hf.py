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
from glassformer.formats.hf_strict import read_config
from glassformer.formats.key_map import load_mapped
from glassformer.formats.weights import WeightFiles
from glassformer.models import TransformerModel, build


def read_hf_checkpoint(source: Any) -> tuple[dict[str, Any], Mapping[str, torch.Tensor]]:
    """(config dict, state) from an HF model object or a checkpoint directory; a
    directory's tensors are read lazily, one at a time (`WeightFiles`)."""
    if hasattr(source, "state_dict") and hasattr(source, "config"):
        return source.config.to_dict(), checkpoint_state(source)
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


def checkpoint_state(model: Any) -> dict[str, torch.Tensor]:
    """An HF model object's tensors under the names its checkpoint file holds.

    transformers 5.x may keep a module's weights otherwise than its files do (a mixture's
    experts fused into one 3-d tensor, GPT-NeoX's head renamed ``lm_head``), and turns them back
    when it saves: the same functions here (`revert_weight_conversion`, after dropping tied
    copies), so the key maps read one layout, the files'. transformers 4.x kept the files' names.
    """
    state = dict(model.state_dict())
    try:
        from transformers.core_model_loading import revert_weight_conversion
        from transformers.modeling_utils import remove_tied_weights_from_state_dict
    except ImportError:  # transformers 4.x
        return state
    return dict(revert_weight_conversion(model, remove_tied_weights_from_state_dict(state, model)))


def convert_hf(
    hf_config: dict[str, Any], state: Mapping[str, torch.Tensor], dtype: torch.dtype = torch.float32
) -> TransformerModel:
    """Build our model for an HF config (without random init) and fill it from the HF state."""
    family = reader(hf_config.get("model_type", "?"))
    keys = set(state)
    config = read_config(family, hf_config, keys)
    net = build(config, initialize=False, dtype=dtype)
    if hasattr(family, "check"):
        family.check(state, config)
    load_mapped(net, state, family.key_map(config, keys), family.IGNORED)
    return net.eval()
