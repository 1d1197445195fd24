"""Tensors for the page: typed arrays in base64, never JSON lists of floats.

The blocks of `glassformer.viz.html` (the notebook views' format), uncompressed so the
page reads them at once, and with the scale of an 8-bit block spelled out:

    {"dtype": "float32", "shape": [t, d], "compression": null, "data": "<base64>"}
    {"dtype": "uint8", "shape": [h, t, s], "compression": null, "scale": 1/255, "data": "<base64>"}

The page turns ``data`` into a Float32Array or Uint8Array (`static/js/core/arrays.js`).
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

from glassformer.viz.html import decode_weights, encode_float32, encode_weights

PACKED_BYTES = {"float32": 4 * 4 / 3, "uint8": 4 / 3}  # sent per value: its bytes in base64


def pack(tensor: torch.Tensor) -> dict[str, Any]:
    """A float32 typed array (little-endian, as every browser reads it)."""
    return encode_float32(tensor)


def pack_unit(tensor: torch.Tensor) -> dict[str, Any]:
    """Values in [0, 1] as bytes: round(value * 255)."""
    return {**encode_weights(tensor, compress=False), "scale": 1 / 255}


def unpack(packed: dict[str, Any]) -> torch.Tensor:
    """The tensor a packed array holds (what the page reads), for tests and notebooks."""
    if packed["dtype"] == "uint8":
        return torch.from_numpy(decode_weights(packed).astype(np.float32) * packed["scale"])
    values = np.frombuffer(base64.b64decode(packed["data"]), dtype="<f4")
    return torch.from_numpy(values.copy()).reshape(packed["shape"])
