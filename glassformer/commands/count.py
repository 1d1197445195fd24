"""``glassformer count MODEL_OR_PRESET [--seq-len N] [--batch B] [--dtype D] [--json] [--load]``.

What a model costs, computed from its config alone (`glassformer.inspect.costs`):
parameters by component (a tied head counted once), FLOPs per token (forward: the 2N rule
plus the attention term; training: 3 x forward), the KV cache per token and at
``--seq-len``, and the activation memory a training step keeps for backward.

MODEL_OR_PRESET is a training preset (its config; the vocabulary from its tokenizer where
that is cheap, else an assumed size, said so), a run directory or Hugging Face directory
(only config.json and the weights' headers are read), a registry name, a .gguf file
(loaded: GGUF keeps its sizes beside the tokenizer), or a ModelConfig JSON file.
``--load`` loads any model and prints its own parameter count beside the computed one.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

from glassformer.commands.arguments import HUB_ID_HELP, at_least
from glassformer.config import ModelConfig

DTYPES = ("float32", "bfloat16", "float16")
CHAR_VOCAB = 65  # Shakespeare's distinct characters (nanoGPT's figure); the corpus decides


@dataclass(frozen=True)
class Resolved:
    """The config MODEL_OR_PRESET stands for, what it is, and a loaded model's own count."""

    config: ModelConfig
    source: str
    real_parameters: int | None = None
    assumption: str | None = None


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "count",
        help="parameters, FLOPs per token, KV-cache and activation memory",
        description=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "model",
        metavar="MODEL_OR_PRESET",
        help="a preset, run directory, HF directory, registry name, .gguf file, ModelConfig JSON, "
        + HUB_ID_HELP,
    )
    parser.add_argument(
        "--seq-len", type=at_least(1), default=None, help="tokens per sequence (default: max_seq_len)"
    )
    parser.add_argument("--batch", type=at_least(1), default=1, help="sequences (default: 1)")
    parser.add_argument(
        "--dtype", choices=DTYPES, default="float32", help="number format of weights, cache and activations"
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--load", action="store_true", help="load the model and show its own parameter count")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from glassformer.inspect.cost_report import costs

    resolved = resolve_config(args.model, load=args.load)
    report = costs(resolved.config, args.seq_len, args.batch, args.dtype, resolved.real_parameters)
    if resolved.assumption:
        report.notes.append(resolved.assumption)
    if args.json:
        print(json.dumps({"model": args.model, "source": resolved.source, **report.to_dict()}, indent=2))
    else:
        print(f"{args.model} ({resolved.source})")
        print(report)
    return 0


def resolve_config(name: str, load: bool = False) -> Resolved:
    """The config of a preset, run / HF directory, registry name, .gguf or ModelConfig JSON."""
    from glassformer.train.settings import preset_names

    if name in preset_names() and not Path(name).exists():
        return preset_config(name)
    path = _existing(name)
    if path.is_file() and path.suffix == ".json":
        data = _read_json(path)
        if "model_type" not in data:
            try:
                return Resolved(ModelConfig.from_dict(data), "ModelConfig JSON")
            except (TypeError, ValueError) as error:
                raise ValueError(f"{path} is not a valid ModelConfig: {error}") from None
        path = path.parent  # an HF config.json: its checkpoint directory
    if load or (path.is_file() and path.suffix == ".gguf"):
        return _loaded(name)
    if path.is_dir() and (path / "train_config.json").exists():
        from glassformer.formats.run_directory import read_config

        return Resolved(read_config(path), "run directory, config.json")
    if path.is_dir() and (path / "config.json").exists():
        return Resolved(_hf_config(path), "Hugging Face directory, config.json")
    raise ValueError(
        f"cannot tell what {path} holds: expected a run directory (train_config.json), a Hugging Face "
        "directory (config.json), a .gguf file or a ModelConfig .json file"
    )


def _existing(name: str) -> Path:
    """The path a registry name stands for, or ``name`` as a path; else an error naming all inputs."""
    from glassformer.formats.registry import UnknownModel, resolve
    from glassformer.train.settings import preset_names

    try:
        return resolve(name)
    except UnknownModel as unknown:  # not a Hub id's own error (offline, no such repository): that one stands
        raise ValueError(
            f"{name!r} is not a preset ({', '.join(preset_names())}), and {unknown}; give a run "
            "directory, a Hugging Face directory, a .gguf file, a ModelConfig .json file "
            "(glassformer config > model.json) or a Hub id"
        ) from None


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} holds no JSON object: expected ModelConfig fields")
    return data


def _hf_config(directory: Path) -> ModelConfig:
    """Our config for an HF checkpoint: its config.json and the names in its weight files'
    headers (whether the head is tied), without reading a tensor."""
    from glassformer.formats.hf import read_hf_checkpoint
    from glassformer.formats.hf_families import reader

    hf_config, state = read_hf_checkpoint(directory)
    try:
        return reader(hf_config["model_type"]).config_from_hf(hf_config, set(state))
    except KeyError as error:
        raise ValueError(f"{directory / 'config.json'} lacks {error.args[0]!r}") from None


def _loaded(name: str) -> Resolved:
    from glassformer.loading import load

    lm = load(name, fast_paths=False)
    return Resolved(lm.config, "loaded", real_parameters=lm.net.num_parameters())


def preset_config(name: str) -> Resolved:
    """A preset's ModelConfig, as `glassformer.train.runs.prepare` would build it, without
    reading a corpus: the vocabulary of a task or a named tokenizer is exact; a BPE trained
    on the corpus is taken at its target size, a character tokenizer at Shakespeare's 65."""
    from glassformer.train.genres import GENRES
    from glassformer.train.images import DIGITS_CORPUS, digits_config
    from glassformer.train.settings import load_preset

    run = load_preset(name)
    source = f"preset {name}"
    data, model = run.data, run.model
    if run.train.init_from != "scratch":
        pretrained = resolve_config(run.train.init_from)
        if data.objective != "classify":  # a language model goes on as it is (LoRA's adapters aside)
            return Resolved(pretrained.config, f"{source}: {run.train.init_from}, fine-tuned")
        fields = dict(model)
        pooling = fields.pop("classifier_pooling", None)
        config = pretrained.config.replace(
            n_classes=len(GENRES), classifier_pooling=pooling, class_names=GENRES, **fields
        )
        return Resolved(config, f"{source}: {run.train.init_from} under a new head")
    if data.objective == "classify" and data.corpus == DIGITS_CORPUS:  # images: no vocabulary
        return Resolved(digits_config(run), source)
    fixed = {"n_classes": len(GENRES), "class_names": GENRES} if data.objective == "classify" else {}
    if data.objective in ("task", "seq2seq"):
        from glassformer.train.tasks import make_task

        task = make_task(data.corpus, **data.task)
        architecture = "decoder" if data.objective == "task" else "encoder-decoder"
        length = max(task.max_seq_len(architecture), model.get("max_seq_len", 0))
        return Resolved(run.model_config(task.vocab_size, max_seq_len=length), source)
    specials = 2 if data.objective == "mlm" else 0  # [MASK] and [PAD]
    if data.tokenizer == "char":
        vocab = CHAR_VOCAB + specials + (1 if data.objective == "classify" else 0)
        note = f"vocab_size {vocab} assumed: the characters of the corpus decide it"
        return Resolved(run.model_config(vocab, **fixed), source, assumption=note)
    if data.tokenizer == "bpe":
        note = f"vocab_size {data.bpe_vocab_size:,} assumed: the BPE's target size (data.bpe_vocab_size)"
        return Resolved(run.model_config(data.bpe_vocab_size, **fixed), source, assumption=note)
    from glassformer.tokenizers import load_tokenizer

    vocab = load_tokenizer(data.tokenizer).vocab_size
    return Resolved(run.model_config(vocab, **fixed), f"{source}, tokenizer {data.tokenizer}")
