"""Tensors for the page: typed arrays in base64, never JSON lists of floats.

    {"dtype": "float32", "shape": [t, d], "data": "<base64>"}
    {"dtype": "uint8", "shape": [h, t, s], "scale": 1/255, "data": "<base64>"}   value = byte * scale

The page turns ``data`` into a Float32Array or Uint8Array (`static/js/arrays.js`).
Attention weights lie in [0, 1] and are only drawn, so 8 bits carry them (error <= 1/510).

>>> import torch
>>> packed = pack(torch.tensor([[0.5, 1.0]]))
>>> packed["dtype"], packed["shape"], unpack(packed).tolist()
('float32', [1, 2], [[0.5, 1.0]])
"""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import torch


def pack(tensor: torch.Tensor) -> dict[str, Any]:
    """A float32 typed array (little-endian, as every browser reads it)."""
    array = tensor.detach().to(torch.float32).cpu().contiguous().numpy().astype("<f4")
    return {
        "dtype": "float32",
        "shape": list(array.shape),
        "data": base64.b64encode(array.tobytes()).decode(),
    }


def pack_unit(tensor: torch.Tensor) -> dict[str, Any]:
    """Values in [0, 1] as bytes: round(value * 255)."""
    array = (tensor.detach().float().clamp(0, 1) * 255).round().to(torch.uint8).cpu().contiguous().numpy()
    return {
        "dtype": "uint8",
        "shape": list(array.shape),
        "scale": 1 / 255,
        "data": base64.b64encode(array.tobytes()).decode(),
    }


def unpack(packed: dict[str, Any]) -> torch.Tensor:
    """The tensor a packed array holds (what the page reads), for tests and notebooks."""
    raw = base64.b64decode(packed["data"])
    if packed["dtype"] == "uint8":
        values = np.frombuffer(raw, dtype=np.uint8).astype(np.float32) * packed["scale"]
    else:
        values = np.frombuffer(raw, dtype="<f4")
    return torch.from_numpy(values.copy()).reshape(packed["shape"])
