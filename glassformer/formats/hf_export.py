"""Glassformer models -> Hugging Face checkpoint directories: the importer, run backwards.

    save_hf(lm.net, "out/", lm.tokenizer)      # or lm.save_hf("out/"), or `glassformer export`
    transformers.AutoModelForCausalLM.from_pretrained("out/")

The export has no layout of its own: it reuses each family's import code (`hf_gpt2`,
`hf_llama`, `hf_bert`, `hf_t5`, ..., found in the one table `hf_families.FAMILIES`), so what
is written is what the importer would read.

1. **Config.** ``config_to_hf(config)`` writes the ``config.json``. The export is then
   *verified against the importer*: ``config_from_hf`` must read that dict back as exactly
   our config, the training-only fields (dropouts, init) aside. The written model_types of
   the model's family are tried in table order and the first that reads back wins (or the
   one ``model_type=`` names). A model that no family reproduces (ALiBi positions, a GPT-2
   without biases, an original Transformer with interleaved sinusoids) is refused with the
   fields that differ for the closest family, rather than written as a checkpoint HF would
   load as a different model.
2. **Weights.** The key map ``key_map(config, keys)`` says which checkpoint tensor fills
   each of our parameters, or each block of its rows; `key_map.hf_state` runs it
   backwards: our ``qkv_proj`` is cut into the q, k and v matrices Llama, BERT and T5
   store, and transposed whole into GPT-2's ``c_attn``; our gate and up matrices are joined
   into Phi-3's ``gate_up_proj``. Each tensor must read back as
   what it came from, and every one of our parameters must be written once. Tensors HF
   ties (an LM head tied to the token embedding) are left out, as ``save_pretrained``
   leaves them out.
3. **Files.** ``config.json``, ``model.safetensors`` and, with a byte-level BPE or
   WordPiece tokenizer, ``tokenizer.json`` + ``tokenizer_config.json`` are written into a
   temporary sibling directory that is then renamed into place
   (`glassformer.atomic.write_directory_atomic`): an interrupted export leaves no half
   checkpoint. An existing non-empty directory is replaced only with ``overwrite=True``,
   and only when it holds nothing but a checkpoint's files (`CHECKPOINT_FILES`):
   anything else there is named and the export refused.

Loading the result with ``gf.load`` gives back the same config and the same weights.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from glassformer.atomic import check_replaceable, write_directory_atomic
from glassformer.config import ModelConfig
from glassformer.config_checks import DROPOUT_FIELDS
from glassformer.formats.hf_families import FAMILIES, read_only, writers
from glassformer.formats.hf_strict import read_config
from glassformer.formats.key_map import Mapped, hf_state

# fields that change training, not the function the model computes; HF has its own names for some
TRAINING_ONLY = (*DROPOUT_FIELDS, "init", "init_std")
# what a Hugging Face checkpoint directory holds (shell patterns): the files this export
# writes and those save_pretrained writes beside them. Only a directory holding nothing
# else is replaced; only these files of it are deleted. A Hub clone's README.md and
# .gitattributes are left out on purpose: a README may be anyone's.
CHECKPOINT_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "model.safetensors.index.json",
    "model-*-of-*.safetensors",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
    "pytorch_model-*-of-*.bin",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "tokenizer.model",
    "spiece.model",
    "chat_template.jinja",
)


@dataclass(frozen=True)
class HFExport:
    """What `save_hf` wrote: the directory, the HF class and the files in it."""

    directory: Path
    model_type: str
    architecture: str
    files: tuple[str, ...]
    notes: tuple[str, ...] = ()


def save_hf(
    net: torch.nn.Module,
    directory: str | Path,
    tokenizer: Any | None = None,
    overwrite: bool = False,
    *,
    tokenizer_optional: bool = False,
    model_type: str | None = None,
) -> HFExport:
    """Write ``net`` (and ``tokenizer``) as a Hugging Face checkpoint directory.

    ``tokenizer`` is written as ``tokenizer.json`` when it is a byte-level BPE or a
    WordPiece; another kind (characters) raises, unless ``tokenizer_optional`` (the facade's
    ``lm.save_hf``, which passes the tokenizer it happens to hold), which leaves it out
    with a note. ``model_type`` writes that HF model_type (``"roberta"``, ``"opt"``) where the
    first in table order would be another that computes the same function. Raises ValueError
    when no HF family (or not the one ``model_type`` names) reproduces the model's config,
    FileExistsError when ``directory`` holds files and ``overwrite`` is false, and
    ValueError naming them when it holds files other than a checkpoint's (`CHECKPOINT_FILES`).

    >>> import tempfile, glassformer as gf
    >>> net = gf.build(gf.ModelConfig(vocab_size=50, d_model=32, n_layers=2, n_heads=4))
    >>> out = save_hf(net, Path(tempfile.mkdtemp()) / "tiny-gpt2")
    >>> out.architecture, out.files
    ('GPT2LMHeadModel', ('config.json', 'model.safetensors'))
    >>> loaded = gf.load(out.directory, fast_paths=False)
    >>> torch.equal(loaded.logits([[1, 2, 3]]), gf.LanguageModel(net).logits([[1, 2, 3]]))
    True
    """
    config = getattr(net, "config", None)
    if not isinstance(config, ModelConfig):
        raise TypeError(f"save_hf writes a Glassformer model (gf.build), got {type(net).__name__}")
    directory = Path(directory)
    _check_target(directory, overwrite)
    family, hf_config, mapping = choose_family(config, model_type)
    state = hf_state(net, mapping)
    hf_config["torch_dtype"] = str(next(iter(state.values())).dtype).removeprefix("torch.")
    files = {"config.json": json.dumps(hf_config, indent=2, sort_keys=True) + "\n"}
    notes = []
    if tokenizer is not None:
        try:
            files.update(tokenizer_files(tokenizer, config))
        except (TypeError, ValueError) as error:
            if not tokenizer_optional:
                raise ValueError(f"cannot write the tokenizer as an HF tokenizer.json: {error}") from None
            notes.append(f"tokenizer not written: {error}")
    _write_directory(directory, state, files, CHECKPOINT_FILES if overwrite else ())
    return HFExport(
        directory=directory,
        model_type=hf_config["model_type"],
        architecture=hf_config["architectures"][0],
        files=tuple(sorted([*files, "model.safetensors"])),
        notes=tuple(notes),
    )


# -- config: write, read back, compare ---------------------------------------------------------


def choose_family(
    config: ModelConfig, model_type: str | None = None
) -> tuple[ModuleType, dict[str, Any], list[Mapped]]:
    """The first HF family, in the table's order (or ``model_type``), whose importer reads
    ``config_to_hf(config)`` back as ``config``, with that dict and the key map; ValueError
    naming the differences of the closest one."""
    names = writers(config.family)
    if model_type is not None and model_type not in names:
        raise ValueError(
            f"model_type {model_type!r} is not one export writes a {config.family} model as; "
            f"choose one of {', '.join(names)}"
        )
    tried = []
    for name in names if model_type is None else [model_type]:
        family = FAMILIES[name].module
        if getattr(family, "VISION", False) != config.vision:  # ViT holds images, the others text
            continue
        hf_config = json.loads(json.dumps(FAMILIES[name].config_to_hf(config)))  # as config.json will hold it
        layout = family.layout_keys(config) if hasattr(family, "layout_keys") else set()
        mapping = family.key_map(config, layout)
        try:  # read back from the names the checkpoint will hold and those its class always has
            back = read_config(family, hf_config, layout | {item.theirs for item in mapping})
        except (KeyError, ValueError) as error:  # farther than any number of fields differing
            rejected, differences = True, [f"the importer rejects it: {error}"]
        else:
            rejected, differences = False, config_differences(config, back, name)
        if not differences:
            return family, hf_config, mapping
        tried.append((rejected, len(differences), name, hf_config["architectures"][0], differences))
    if not tried:
        raise ValueError(f"{model_type} holds {'text' if config.vision else 'images'}, not this model")
    *_, name, architecture, differences = min(tried)
    if model_type is not None:
        raise ValueError(
            f"{name} ({architecture}) cannot hold this model exactly: it would differ in "
            f"{'; '.join(differences)}"
        )
    families = ("decoder", "encoder", "encoder_decoder")
    written = "; ".join(f"{ours} -> {', '.join(writers(ours))}" for ours in families)
    unwritten = f" (read, not written: {', '.join(read_only())})" if read_only() else ""
    raise ValueError(
        f"no Hugging Face family holds this {config.family} model exactly; the closest, {name} "
        f"({architecture}), would differ in {'; '.join(differences)}. Families written: {written}"
        f"{unwritten}"
    )


def config_differences(ours: ModelConfig, theirs: ModelConfig, name: str) -> list[str]:
    """``field (ours here, theirs as NAME)`` for every architecture field that differs."""
    return [
        f"{field.name} ({getattr(ours, field.name)!r} here, {getattr(theirs, field.name)!r} as {name})"
        for field in dataclasses.fields(ModelConfig)
        if field.compare
        and field.name not in TRAINING_ONLY
        and getattr(ours, field.name) != getattr(theirs, field.name)
    ]


# -- tokenizer -----------------------------------------------------------------------------------


def tokenizer_files(tokenizer: Any, config: ModelConfig) -> dict[str, str]:
    """``tokenizer.json`` and a ``tokenizer_config.json`` naming the generic fast tokenizer
    (so ``AutoTokenizer`` does not apply a family's defaults, e.g. Llama's ``<s>``) and the
    special tokens the config and the tokenizer use ([CLS], [SEP], [MASK], [UNK] of a
    WordPiece). TypeError for tokenizers `to_hf_json` does not write (characters)."""
    from glassformer.tokenizers.hf_json import to_hf_dict

    text = json.dumps(to_hf_dict(tokenizer), ensure_ascii=False, indent=1)
    settings: dict[str, Any] = {"tokenizer_class": "PreTrainedTokenizerFast"}
    settings["model_max_length"] = config.max_seq_len
    by_id = {i: token for token, i in tokenizer.special_tokens.items()}
    for role in ("bos", "eos", "pad"):
        token_id = getattr(config, f"{role}_token_id")
        if token_id in by_id:
            settings[f"{role}_token"] = by_id[token_id]
    for role in ("unk", "cls", "sep", "pad", "mask"):  # a WordPiece names its own
        token = getattr(tokenizer, f"{role}_token", None)
        if isinstance(token, str):
            settings[f"{role}_token"] = token
    return {"tokenizer.json": text, "tokenizer_config.json": json.dumps(settings, indent=2) + "\n"}


# -- files: all or nothing -----------------------------------------------------------------------


def _check_target(directory: Path, overwrite: bool) -> None:
    """Before any work: a file, or a directory that holds files without ``overwrite``, or
    files that are not a checkpoint's with it, is refused."""
    if directory.exists() and not directory.is_dir():
        raise FileExistsError(f"{directory} exists and is not a directory; choose another output path")
    if directory.is_dir() and any(directory.iterdir()) and not overwrite:
        raise FileExistsError(
            f"{directory} already holds files; pass overwrite=True (--overwrite on the command line) "
            "to replace a checkpoint directory, or choose another one"
        )
    check_replaceable(directory, CHECKPOINT_FILES if overwrite else ())


def _write_directory(
    directory: Path, state: dict[str, torch.Tensor], files: dict[str, str], owned: tuple[str, ...]
) -> None:
    """Write into a hidden sibling, then rename it into place (`write_directory_atomic`)."""
    from safetensors.torch import save_file

    with write_directory_atomic(directory, owned) as staging:
        save_file(state, staging / "model.safetensors", metadata={"format": "pt"})
        for name, text in files.items():
            (staging / name).write_text(text, encoding="utf-8")
