"""A safetensors file read tensor by tensor with plain reads, straight into place.

The format (https://huggingface.co/docs/safetensors): 8 bytes little-endian N, then N
bytes of JSON — for each tensor ``{"dtype": "F32", "shape": [r, c], "data_offsets":
[begin, end]}`` (offsets into the data section that follows), plus an optional
``__metadata__`` — then the raw little-endian data.

Why not memory-map it: pages of a mapped file that a loader has read stay in the
process's resident set until the mapping goes, on top of the model the bytes were
copied into. Reading each tensor with ``readinto`` — into the model's own parameter
when no reshaping is needed — keeps loading at about one copy of the weights.

Every header entry is checked against the file (known dtype, a size that matches the
shape, offsets inside the file, no overlaps) before any tensor is read, so a truncated
or corrupted file raises ``ValueError`` naming the problem instead of reading garbage.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import torch

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}
MAX_HEADER = 100_000_000  # bytes; the reference implementation's limit
if sys.byteorder != "little":  # the bytes are copied as they are
    raise ImportError("glassformer.formats.safetensors_file reads little-endian data on little-endian CPUs")


class SafetensorsFile:
    """``file.keys()``, ``file.read(name)`` -> a new tensor, ``file.read_into(name, tensor)``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        size = self.path.stat().st_size
        with open(self.path, "rb") as handle:
            prefix = handle.read(8)
            if len(prefix) < 8:
                raise ValueError(f"{self.path} is not a safetensors file: it is only {size} bytes long")
            length = int.from_bytes(prefix, "little")
            if length > min(MAX_HEADER, size - 8):
                raise ValueError(
                    f"{self.path} is a damaged or truncated safetensors file: its header claims {length:,} "
                    f"bytes, the file has {size - 8:,} after the length field"
                )
            try:
                header = json.loads(handle.read(length))
            except (json.JSONDecodeError, UnicodeDecodeError) as error:
                raise ValueError(f"{self.path}: the safetensors header is not valid JSON: {error}") from None
        self._data_start = 8 + length
        self._entries = self._checked(header, size - self._data_start)

    def _checked(self, header: object, data_size: int) -> dict[str, tuple[torch.dtype, tuple, int, int]]:
        """name -> (dtype, shape, begin, end), every entry validated against the file."""
        if not isinstance(header, dict):
            raise ValueError(f"{self.path}: the safetensors header is not a JSON object")
        entries = {}
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            try:
                dtype, shape = DTYPES[entry["dtype"]], tuple(int(n) for n in entry["shape"])
                begin, end = (int(n) for n in entry["data_offsets"])
            except (KeyError, TypeError, ValueError):
                raise ValueError(
                    f"{self.path}: header entry {name!r} is malformed ({str(entry)[:80]}); expected a "
                    f"dtype in {', '.join(DTYPES)}, a shape and two data_offsets"
                ) from None
            expected = math.prod(shape) * dtype.itemsize
            if min(shape, default=0) < 0 or not 0 <= begin <= end or end - begin != expected:
                raise ValueError(
                    f"{self.path}: tensor {name!r} ({entry['dtype']} {list(shape)}) needs "
                    f"{expected:,} bytes, its data_offsets [{begin}, {end}] give {end - begin:,}"
                )
            if end > data_size:
                raise ValueError(
                    f"{self.path} is truncated: tensor {name!r} ends at byte {end:,} of the data section, "
                    f"which has only {data_size:,}"
                )
            entries[name] = (dtype, shape, begin, end)
        spans = sorted((begin, end, name) for name, (_, _, begin, end) in entries.items() if end > begin)
        for (_, end, first), (begin, _, second) in zip(spans, spans[1:], strict=False):
            if begin < end:
                raise ValueError(f"{self.path}: the data of {first!r} and {second!r} overlap")
        return entries

    def keys(self) -> list[str]:
        return list(self._entries)

    def read(self, name: str) -> torch.Tensor:
        """A new tensor with ``name``'s data."""
        dtype, shape, _, _ = self._entries[name]
        tensor = torch.empty(shape, dtype=dtype)
        self._fill(name, tensor)
        return tensor

    def read_into(self, name: str, target: torch.Tensor) -> bool:
        """Read ``name`` straight into ``target`` if dtype and shape match and ``target`` is a
        contiguous CPU tensor; False (nothing read) otherwise."""
        dtype, shape, _, _ = self._entries[name]
        if target.dtype != dtype or tuple(target.shape) != shape or not target.is_contiguous():
            return False
        if target.device.type != "cpu":
            return False
        self._fill(name, target)
        return True

    def _fill(self, name: str, tensor: torch.Tensor) -> None:
        _, _, begin, end = self._entries[name]
        if end == begin:
            return
        view = memoryview(tensor.detach().view(-1).view(torch.uint8).numpy())  # the tensor's own bytes
        with open(self.path, "rb") as handle:
            handle.seek(self._data_start + begin)
            done = handle.readinto(view)
        if done != end - begin:
            raise ValueError(f"{self.path}: tensor {name!r} is cut short ({done:,} of {end - begin:,} bytes)")
