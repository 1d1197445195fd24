"""A distributed checkpoint read without unpickling anything: its metadata as JSON.

`torch.distributed.checkpoint` (torch 2.13) keeps a checkpoint's metadata in ``.metadata``,
a pickle that ``FileSystemReader.read_metadata`` unpickles, and reads each non-tensor value
(an optimizer's learning rate, its betas) with ``torch.load(weights_only=False)``: a run
folder someone shared could run any code the moment it is resumed. So the saver writes the
same metadata as JSON beside it (`write`), and `load` reads a checkpoint only through it:

- `ManifestReader` builds DCP's ``Metadata`` from ``manifest.json`` (plain values, checked
  field by field: a tensor's dtype by name, a shard's file a plain name inside the folder,
  no storage transforms) and never opens ``.metadata``; a checkpoint without a manifest is
  refused with the reason.
- `WeightsOnlyPlanner` reads the non-tensor values with ``torch.load(weights_only=True)``.
  The tensors themselves DCP already reads that way.

    manifest.json   {"format": "glassformer-dcp", "version": 1,
                     "tensors": {fqn: {"dtype": "float32", "size": [..],
                                       "chunks": [{"offsets": [..], "sizes": [..]}]}},
                     "values": [fqn, ...],                  (non-tensor values)
                     "storage": [{"fqn", "offset", "index", "file", "at", "length"}],
                     "paths": {fqn: [key, ...]}}            (the nesting DCP flattened)
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader
from torch.distributed.checkpoint._traverse import set_element
from torch.distributed.checkpoint.api import CheckpointException
from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner
from torch.distributed.checkpoint.filesystem import _StorageInfo
from torch.distributed.checkpoint.metadata import (
    BytesStorageMetadata,
    ChunkStorageMetadata,
    Metadata,
    MetadataIndex,
    StorageMeta,
    TensorProperties,
    TensorStorageMetadata,
)
from torch.distributed.checkpoint.planner import ReadItem

from glassformer.atomic import write_text_atomic
from glassformer.formats.bounded_read import checked, read_bounded

MANIFEST = "manifest.json"
FORMAT, VERSION = "glassformer-dcp", 1
MAX_MANIFEST_BYTES = 64 << 20  # tens of thousands of tensors' entries; a larger one is refused unread


def write(folder: str | Path, metadata: Metadata) -> Path:
    """Write ``metadata`` (what ``dcp.save`` returned) as ``folder/manifest.json``."""
    tensors, values = {}, []
    for fqn, item in metadata.state_dict_metadata.items():
        if isinstance(item, BytesStorageMetadata):
            values.append(fqn)
            continue
        tensors[fqn] = {
            "dtype": str(item.properties.dtype).removeprefix("torch."),
            "size": list(item.size),
            "chunks": [{"offsets": list(c.offsets), "sizes": list(c.sizes)} for c in item.chunks],
        }
    storage = []
    for index, info in (metadata.storage_data or {}).items():
        if info.transform_descriptors:
            raise ValueError(f"{index.fqn} was saved with storage transforms; the manifest carries none")
        offset = None if index.offset is None else list(index.offset)
        storage.append(
            {
                "fqn": index.fqn,
                "offset": offset,
                "index": index.index,
                "file": info.relative_path,
                "at": info.offset,
                "length": info.length,
            }
        )
    paths = {fqn: list(path) for fqn, path in (metadata.planner_data or {}).items()}
    manifest = {"format": FORMAT, "version": VERSION, "tensors": tensors, "values": values}
    path = Path(folder) / MANIFEST
    write_text_atomic(path, json.dumps(manifest | {"storage": storage, "paths": paths}))
    return path


def load(state: dict[str, Any], folder: str | Path) -> None:
    """``dcp.load(state, folder)``, reading the metadata from the manifest and every value
    weights-only (see the module docstring); ValueError for a checkpoint it cannot trust."""
    reader = ManifestReader(folder, read(Path(folder)))  # checked here: DCP would wrap the error
    try:
        dcp.load(state, storage_reader=reader, planner=WeightsOnlyPlanner())
    except CheckpointException as error:  # one per rank; each names the exception it wraps
        lines = [line.strip() for line in str(error).splitlines()]
        reason = next((line for line in lines if "GLOBAL" in line), lines[-1] if lines else "")
        raise ValueError(
            f"{folder} could not be read as a checkpoint of tensors and plain values "
            f"(read with torch.load(weights_only=True), nothing else unpickled): {reason}"
        ) from None


class ManifestReader(FileSystemReader):
    """DCP's file reader, its metadata the manifest's (`read`) instead of unpickled."""

    def __init__(self, folder: str | Path, metadata: Metadata) -> None:
        super().__init__(folder)
        self.metadata = metadata

    def read_metadata(self, *args: Any, **kwargs: Any) -> Metadata:
        if kwargs.get("rank") is not None:  # DCP asks for a rank's own metadata first: there is none
            raise FileNotFoundError("no per-rank metadata")
        return self.metadata


class WeightsOnlyPlanner(DefaultLoadPlanner):
    """DCP's load planner, reading non-tensor values with ``torch.load(weights_only=True)``."""

    def load_bytes(self, read_item: ReadItem, value: io.BytesIO) -> None:
        loaded = torch.load(value, weights_only=True)
        if self.flatten_state_dict:
            set_element(self.original_state_dict, self.mappings[read_item.dest_index.fqn], loaded)
        else:
            self.state_dict[read_item.dest_index.fqn] = loaded


def read(folder: Path) -> Metadata:
    """DCP's ``Metadata`` of the checkpoint in ``folder``, from its manifest (ValueError if it
    has none, or one that is not what `write` writes)."""
    path = folder / MANIFEST
    try:  # a regular file of the folder, within its size, never blocking (`bounded_read`)
        text = read_bounded(path, MAX_MANIFEST_BYTES, inside=folder)
    except FileNotFoundError:
        raise ValueError(
            f"{folder} has no {MANIFEST}: a distributed checkpoint is read only through the manifest "
            "Glassformer writes beside it (its .metadata is a pickle, which could run code); "
            "resume a run that Glassformer itself saved"
        ) from None
    try:
        manifest = json.loads(text)
        if manifest.get("format") != FORMAT or manifest.get("version") != VERSION:
            raise ValueError(f"not a {FORMAT} manifest of version {VERSION}")
        described: dict[str, Any] = {fqn: BytesStorageMetadata() for fqn in _strings(manifest["values"])}
        for fqn, tensor in manifest["tensors"].items():
            chunks = [ChunkStorageMetadata(_size(c["offsets"]), _size(c["sizes"])) for c in tensor["chunks"]]
            properties = TensorProperties(dtype=_dtype(tensor["dtype"]))
            described[str(fqn)] = TensorStorageMetadata(properties, _size(tensor["size"]), chunks)
        storage = {}
        for entry in manifest["storage"]:
            offset = None if entry["offset"] is None else _size(entry["offset"])
            index = MetadataIndex(str(entry["fqn"]), offset, _optional_int(entry["index"]))
            file = _shard_file(folder, entry["file"])
            storage[index] = _StorageInfo(file, _int(entry["at"]), _int(entry["length"]))
        paths = {str(fqn): tuple(_key(k) for k in path) for fqn, path in manifest["paths"].items()}
    except (KeyError, TypeError, AttributeError, ValueError, UnicodeError, RecursionError) as error:
        raise ValueError(f"{path} is damaged or not a Glassformer manifest: {error!r}") from None
    return Metadata(described, planner_data=paths, storage_data=storage, storage_meta=StorageMeta())


def _dtype(name: Any) -> torch.dtype:
    dtype = getattr(torch, name, None) if isinstance(name, str) and name.isidentifier() else None
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"{name!r} is not a torch dtype")
    return dtype


def _shard_file(folder: Path, name: Any) -> str:
    """A shard's file: a plain name of a regular file in ``folder`` itself (no path, no link out)."""
    if not isinstance(name, str) or Path(name).name != name or name in (".", ".."):
        raise ValueError(f"a shard's file must be a plain name in the checkpoint's folder, not {name!r}")
    checked(folder / name, inside=folder)  # a regular file of the folder (RunFileRefused)
    return name


def _int(value: Any) -> int:
    if type(value) is not int or value < 0:
        raise ValueError(f"expected a whole number >= 0, got {value!r}")
    return value


def _optional_int(value: Any) -> int | None:
    return None if value is None else _int(value)


def _size(values: Any) -> torch.Size:
    if not isinstance(values, list):
        raise ValueError(f"expected a list of whole numbers, got {values!r}")
    return torch.Size(_int(v) for v in values)


def _strings(values: Any) -> list[str]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise ValueError(f"expected a list of names, got {values!r}")
    return values


def _key(value: Any) -> str | int:
    if type(value) not in (str, int):
        raise ValueError(f"a state dict key must be a name or an index, got {value!r}")
    return value
