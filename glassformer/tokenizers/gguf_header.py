"""The header of a GGUF file (llama.cpp's format): its metadata and where each tensor lies.

The header comes first, every number little-endian; the tensors' data follows it:

==================  ==========================================================================
magic               4 bytes, ``b"GGUF"``
version             uint32: 2 or 3 (version 1, with 32-bit lengths, is refused)
tensor count        uint64
key/value count     uint64
key/value pairs     key (a string), value type (uint32), value
tensor infos        name (a string), n_dims (uint32), n_dims dims (uint64 each, the fastest-varying
                    first: a (rows, cols) matrix is stored as (cols, rows)), storage type (uint32, a
                    ``gguf.GGMLQuantizationType``), offset (uint64, from the start of the data)
padding             to ``general.alignment`` (32 unless the metadata says otherwise)
data                each tensor at the start of the data + its offset
==================  ==========================================================================

A string is a uint64 byte count and that many UTF-8 bytes. A value type is one of 0 uint8,
1 int8, 2 uint16, 3 int16, 4 uint32, 5 int32, 6 float32, 7 bool, 8 string, 9 array, 10 uint64,
11 int64, 12 float64; an array is an element type (uint32), a count (uint64) and the elements.

`read_gguf_header` maps the file and walks the header once (numeric arrays with numpy, string
arrays in one tight loop), never touching the tensors' data: a file of several GB costs its header
only. A damaged header raises ``ValueError`` naming the file, before its numbers allocate anything.
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

import numpy as np

MAGIC = b"GGUF"
VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4  # ggml's tensors have at most 4 dimensions
STRING, ARRAY = 8, 9
# value type -> struct format of one scalar (numpy reads the same letters for arrays)
SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_SCALAR = {kind: struct.Struct("<" + code) for kind, code in SCALARS.items()}
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
_COUNTS = struct.Struct("<IQQ")  # version, tensor count, key/value count
_ARRAY_HEAD = struct.Struct("<IQ")  # element type, count
# storage types whose items are single values (the others are read as bytes, BF16 included, as
# the gguf package reads them: `gguf.quants.dequantize` takes their raw bytes)
PLAIN_ITEMS = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I8": np.int8, "I16": np.int16,
               "I32": np.int32, "I64": np.int64}  # fmt: skip


class _Damaged(Exception):
    """Raised inside the parser; `read_gguf_header` names the file."""


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of a GGUF file: its ``shape`` as stored (fastest-varying dimension first, like
    ``gguf.ReaderTensor.shape``), its storage type (a ``gguf.GGMLQuantizationType``, or the bare
    number where the gguf package does not know it) and the absolute byte ``offset`` of its data."""

    name: str
    shape: tuple[int, ...]
    storage: Any
    offset: int

    def layout(self) -> tuple[np.dtype, int, int]:
        """(item, rows, row_items): the data as ``rows`` rows (every dimension but the fastest) of
        ``row_items`` items: values for the plain types, bytes of whole blocks for the others."""
        from gguf.constants import GGML_QUANT_SIZES

        rows = prod(self.shape[1:])
        if self.storage.name in PLAIN_ITEMS:
            return np.dtype(PLAIN_ITEMS[self.storage.name]), rows, self.shape[0]
        block, block_bytes = GGML_QUANT_SIZES[self.storage]
        return np.dtype(np.uint8), rows, self.shape[0] // block * block_bytes

    @property
    def n_bytes(self) -> int:
        item, rows, row_items = self.layout()
        return item.itemsize * rows * row_items


@dataclass(frozen=True)
class GGUFHeader:
    """A GGUF file's header: ``metadata`` (key -> int, float, bool, str or list, in file order),
    ``tensors`` (name -> `TensorInfo`, in file order) and where their data starts."""

    path: Path
    version: int
    metadata: dict[str, Any]
    tensors: dict[str, TensorInfo]
    data_offset: int


class _Cursor:
    """Reads the header's values one after another from byte ``at`` of ``buffer`` (the mapped file)."""

    def __init__(self, buffer: mmap.mmap, at: int) -> None:
        self.buffer, self.at, self.end = buffer, at, len(buffer)

    def take(self, form: struct.Struct) -> tuple:
        if form.size > self.end - self.at:
            raise _Damaged(f"the file ends at byte {self.end}, inside the header")
        values = form.unpack_from(self.buffer, self.at)
        self.at += form.size
        return values

    def string(self, what: str) -> str:
        (length,) = self.take(_U64)
        if length > self.end - self.at:
            raise _Damaged(f"{what} is {length} bytes long at byte {self.at}, past the end of the file")
        self.at += length
        try:
            return self.buffer[self.at - length : self.at].decode("utf-8")
        except UnicodeDecodeError as error:
            raise _Damaged(f"{what} is not valid UTF-8: {error}") from None

    def strings(self, count: int, what: str) -> list[str]:
        """``count`` strings in a row: a vocabulary, a merge list (the loop is the hot path)."""
        buffer, at, end, length = self.buffer, self.at, self.end, _U64.unpack_from
        if count > (end - at) // 8:
            raise _Damaged(f"{what} claims {count} strings, more than the file can hold")
        out: list[str] = []
        try:
            for _ in range(count):
                (size,) = length(buffer, at)
                at += 8
                if size > end - at:
                    raise _Damaged(f"a string of {what} is {size} bytes long at byte {at}, past the end")
                out.append(buffer[at : at + size].decode("utf-8"))
                at += size
        except struct.error:
            raise _Damaged(f"the file ends inside {what}") from None
        except UnicodeDecodeError as error:
            raise _Damaged(f"{what} is not valid UTF-8: {error}") from None
        self.at = at
        return out

    def numbers(self, kind: int, count: int, what: str) -> list:
        dtype = np.dtype("<" + SCALARS[kind])
        if count > (self.end - self.at) // dtype.itemsize:
            raise _Damaged(f"{what} claims {count} values, more than the file can hold")
        values = np.frombuffer(self.buffer, dtype, count, self.at).tolist()
        self.at += count * dtype.itemsize
        return values

    def value(self, kind: int, what: str) -> Any:
        """One value of type ``kind``: a scalar, a string or an array (of scalars or strings)."""
        if kind in _SCALAR:
            return self.take(_SCALAR[kind])[0]
        if kind == STRING:
            return self.string(what)
        if kind != ARRAY:
            raise _Damaged(f"{what} has the unknown value type {kind}")
        element, count = self.take(_ARRAY_HEAD)
        if element == STRING:
            return self.strings(count, what)
        if element in SCALARS:
            return self.numbers(element, count, what)
        raise _Damaged(f"{what} is an array of value type {element}, which GGUF readers do not read")


def read_gguf_header(path: str | Path) -> GGUFHeader:
    """The header of the GGUF file at ``path``: its metadata and tensor infos (no tensor data)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no GGUF file at {path}")
    with open(path, "rb") as handle:
        magic = handle.read(4)
        if magic != MAGIC:
            raise ValueError(f"{path} is not a GGUF file (it starts with {magic!r}, not b'GGUF')")
        try:
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
                return _parse(path, _Cursor(buffer, len(MAGIC)))
        except _Damaged as error:
            raise ValueError(f"{path} is a damaged or truncated GGUF file: {error}") from None


def _parse(path: Path, cursor: _Cursor) -> GGUFHeader:
    version, n_tensors, n_kv = cursor.take(_COUNTS)
    if version not in VERSIONS:
        raise ValueError(_version_problem(path, version))
    metadata: dict[str, Any] = {}
    for _ in range(n_kv):
        key = cursor.string("a metadata key")
        if key in metadata:
            raise _Damaged(f"the metadata key {key!r} appears twice")
        (kind,) = cursor.take(_U32)
        metadata[key] = cursor.value(kind, f"the metadata {key!r}")
    stored = [_tensor_info(cursor) for _ in range(n_tensors)]
    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if type(alignment) is not int or alignment <= 0 or alignment & (alignment - 1):
        raise _Damaged(f"general.alignment={alignment!r} is not a power of two")
    data_offset = -(-cursor.at // alignment) * alignment  # the header, rounded up to the alignment
    tensors: dict[str, TensorInfo] = {}
    for name, shape, storage, offset in stored:
        if name in tensors:
            raise _Damaged(f"the tensor {name} appears twice")
        tensors[name] = _checked(TensorInfo(name, shape, storage, data_offset + offset), cursor.end)
    return GGUFHeader(path, version, metadata, tensors, data_offset)


def _version_problem(path: Path, version: int) -> str:
    if version == 1:
        return (
            f"{path} is a GGUF version 1 file (llama.cpp's first format, with 32-bit lengths); only "
            "versions 2 and 3 are read: convert the model again with a current llama.cpp"
        )
    if version & 0xFFFF == 0 and int.from_bytes(version.to_bytes(4, "little"), "big") in VERSIONS:
        return f"{path} is a big-endian GGUF file; only little-endian files are read"
    return f"{path} is a damaged or truncated GGUF file: version {version}, where 2 or 3 was expected"


def _tensor_info(cursor: _Cursor) -> tuple[str, tuple[int, ...], Any, int]:
    """(name, shape as stored, storage type, offset from the data start) of the next tensor info."""
    from gguf.constants import GGMLQuantizationType

    name = cursor.string("a tensor name")
    (n_dims,) = cursor.take(_U32)
    if not 1 <= n_dims <= MAX_DIMS:
        raise _Damaged(f"tensor {name} has {n_dims} dimensions (GGUF tensors have 1 to {MAX_DIMS})")
    shape = cursor.take(struct.Struct(f"<{n_dims}Q"))
    number, offset = cursor.take(_U32)[0], cursor.take(_U64)[0]
    try:
        storage = GGMLQuantizationType(number)
    except ValueError:
        storage = number  # the loader names the tensor and refuses its storage
    return name, shape, storage, offset


def _checked(tensor: TensorInfo, file_size: int) -> TensorInfo:
    """``tensor``, once its rows are whole blocks and its data lies inside the file."""
    from gguf.constants import GGML_QUANT_SIZES

    if tensor.storage not in GGML_QUANT_SIZES:  # an unknown type: its size cannot be known
        return tensor
    block, name, start = GGML_QUANT_SIZES[tensor.storage][0], tensor.name, tensor.offset
    if tensor.shape[0] % block:
        raise _Damaged(f"tensor {name} has rows of {tensor.shape[0]} values, not whole blocks of {block}")
    end = start + tensor.n_bytes
    if end > file_size:  # a truncated file, or a damaged shape or offset
        raise _Damaged(f"tensor {name}'s data (bytes {start} to {end}) runs past the end of the file")
    return tensor
