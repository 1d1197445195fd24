"""Weight files of Hugging Face checkpoint directories, read one tensor at a time.

A loader fills an already-built model tensor by tensor, so reading must not first pull
the whole file into memory: `WeightFiles` is a read-only mapping name -> tensor whose
``[name]`` reads just that tensor, and ``read_into(name, parameter)`` reads it straight
into the model's own memory. Safetensors files are read with plain reads
(`glassformer.formats.safetensors_file`: no mapping whose pages would stay resident);
``pytorch_model.bin`` is opened with ``torch.load(mmap=True, weights_only=True)`` —
``weights_only`` means the unpickler accepts tensors and plain containers only, never
arbitrary objects, so a malicious checkpoint cannot run code.

Damaged files (a truncated download, a corrupted header) raise ``ValueError`` naming
the file and what is wrong with it.
"""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import torch

from glassformer.formats.safetensors_file import SafetensorsFile

WEIGHT_FILES = "model.safetensors, a sharded model.safetensors.index.json, or pytorch_model.bin"


class WeightFiles(Mapping[str, torch.Tensor]):
    """The tensors of one checkpoint directory: ``files[name]`` reads one from disk."""

    def __init__(self, directory: str | Path) -> None:
        directory = Path(directory)
        self._handles: dict[Path, Any] = {}
        self._where: dict[str, Path] = {}
        index = directory / "model.safetensors.index.json"
        if index.exists():
            try:
                weight_map = json.loads(index.read_text())["weight_map"]
            except (json.JSONDecodeError, KeyError, TypeError) as error:
                raise ValueError(f"{index} is not a valid safetensors index: {error}") from None
            for shard in sorted(set(weight_map.values())):
                self._add_safetensors(directory / shard)
        elif (directory / "model.safetensors").exists():
            self._add_safetensors(directory / "model.safetensors")
        elif (directory / "pytorch_model.bin").exists():
            self._add_pickle(directory / "pytorch_model.bin")
        else:
            raise FileNotFoundError(f"{directory} holds no weights: expected {WEIGHT_FILES}")

    def _add_safetensors(self, path: Path) -> None:
        if not path.is_file():
            raise FileNotFoundError(f"the checkpoint index names {path.name}, which is missing")
        handle = SafetensorsFile(path)  # checks the header against the file
        self._handles[path] = handle
        self._where.update(dict.fromkeys(handle.keys(), path))

    def _add_pickle(self, path: Path) -> None:
        try:
            try:
                state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as error:  # the legacy (pre-zip) format cannot be memory-mapped
                if "mmap" not in str(error):
                    raise
                state = torch.load(path, map_location="cpu", weights_only=True)
        except pickle.UnpicklingError as error:
            refusal = _refusal(error)
            if "GLOBAL" in refusal:  # the pickle names a function or class to call
                raise ValueError(
                    f"{path} holds more than tensors, and Glassformer does not unpickle arbitrary objects "
                    f"(that could run code); torch.load(weights_only=True) refused it: {refusal}"
                ) from None
            raise ValueError(f"{path} is a damaged or truncated PyTorch checkpoint: {refusal}") from None
        except Exception as error:  # damage surfaces anywhere in the zip reader or the unpickler:
            # RuntimeError, EOFError, UnicodeDecodeError, struct.error, IndexError, AssertionError, ...
            raise ValueError(
                f"{path} is a damaged or truncated PyTorch checkpoint: {type(error).__name__}: {error}"
            ) from None
        if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
            raise ValueError(f"{path} does not hold a state dict (a mapping of names to tensors)")
        self._handles[path] = state
        self._where.update(dict.fromkeys(state, path))

    def __getitem__(self, name: str) -> torch.Tensor:
        path = self._where[name]
        handle = self._handles[path]
        return handle[name] if isinstance(handle, dict) else handle.read(name)

    def __contains__(self, name: object) -> bool:  # without it, Mapping's `in` reads the tensor
        return name in self._where

    def read_into(self, name: str, target: torch.Tensor) -> bool:
        """Read ``name`` straight into ``target`` when dtype and shape allow (safetensors
        only); False when the caller must copy ``self[name]`` itself."""
        handle = self._handles[self._where[name]]
        return isinstance(handle, SafetensorsFile) and handle.read_into(name, target)

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


def _refusal(error: pickle.UnpicklingError) -> str:
    """What torch's weights_only unpickler refused, without its advice on how to load it anyway:
    'Unsupported global: GLOBAL posix.system was not an allowed global by default'."""
    text = str(error).split("WeightsUnpickler error:")[-1].strip()
    return text.splitlines()[0].split(". Please use")[0] if text else type(error).__name__
