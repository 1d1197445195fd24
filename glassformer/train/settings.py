"""`TrainConfig` and presets: everything about a run that is not the architecture.

A preset is a TOML file shipped in ``glassformer/train/presets/`` with three tables::

    [data]    what to learn from: corpus, tokenizer, objective, task parameters
    [model]   ModelConfig fields (vocab_size is filled in from the tokenizer)
    [train]   TrainConfig fields: steps, batch size, context, optimizer, schedule, ...

Any field can be overridden: ``--set train.steps=500 --set model.n_layers=6`` (values
are TOML literals; bare words are strings). Unknown tables or fields fail naming the
allowed ones.
"""

from __future__ import annotations

import dataclasses
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from glassformer.config import ModelConfig

OBJECTIVES = ("lm", "mlm", "seq2seq", "task", "classify")
OPTIMIZERS = ("adamw", "sgd")
SCHEDULES = ("constant", "cosine", "linear", "inverse_sqrt")
PARALLEL = ("ddp", "fsdp")  # train.parallel: how several processes share the model
DTYPES = ("auto", "float32", "bfloat16", "float16")  # auto: measured on this machine (train/precision.py)


@dataclass(frozen=True)
class DataConfig:
    """What the model learns from.

    ``corpus``: "shakespeare", a path to .txt files, or a synthetic task name (copy,
    reverse, sort, addition, induction) with ``objective="task"`` / ``"seq2seq"``, or
    "shakespeare-genre" with ``objective="classify"`` (`glassformer.train.genres`), or
    "digits" with ``objective="classify"``: images, for a vision transformer
    (`glassformer.train.images`).
    ``tokenizer``: "char", "bpe" (trained on the corpus to ``bpe_vocab_size``), a named
    tokenizer ("minilm") or a path; "pretrained": the own tokenizer of ``train.init_from``;
    "none" for images (an image run reads pixels: its tokenizer is not read).
    """

    corpus: str = "shakespeare"
    tokenizer: str = "char"
    bpe_vocab_size: int = 4096
    objective: str = "lm"
    task: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"data.objective={self.objective!r}; allowed values: {', '.join(OBJECTIVES)}")


@dataclass(frozen=True)
class TrainConfig:
    """Optimization and bookkeeping of one run."""

    steps: int = 2000
    batch_size: int = 12
    context: int = 64
    grad_accum: int = 1
    optimizer: str = "adamw"
    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    schedule: str = "cosine"
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.99
    momentum: float = 0.9
    grad_clip: float = 1.0
    label_smoothing: float = 0.0
    # a mixture of experts' router losses, added to the cross-entropy (glassformer.nn.moe)
    router_aux_loss_coef: float = 0.01  # Switch Transformer's load balancing
    router_z_loss_coef: float = 0.001  # ST-MoE's z-loss
    # "auto": bf16 autocast where this machine runs it faster (measured once, glassformer.train.precision);
    # "float32", "bfloat16" (autocast), "float16" (autocast with a gradient scaler)
    dtype: str = "auto"
    device: str = "auto"  # cuda if available, else mps, else cpu (glassformer.train.device)
    checkpoint_activations: bool = False  # each block recomputed in backward: less memory, more time
    # torch.compile the model's forward (and so its backward): true, false, or "auto": compiled only
    # where that measures faster on this run's own steps (glassformer.train.compile_trial)
    compile: bool | str = "auto"
    seed: int = 1337
    eval_interval: int = 250
    eval_batches: int = 20
    sample_tokens: int = 200
    checkpoint_interval: int = 500
    tensorboard: bool = True
    threads: int | None = None
    # "scratch", or a model to start from (a registry name such as "minilm-l6", a Hugging Face
    # checkpoint or a run directory; nanoGPT's init_from): classify runs put a new head on it
    init_from: str = "scratch"
    # LoRA (glassformer.lora): lora_rank > 0 adds adapters of that rank to the lora_targets of every
    # block of train.init_from and trains them alone (alpha / rank scales their term); 0 trains every
    # weight. Targets: the trace's names, q k v qkv o gate up down (glassformer.lora.TARGETS)
    lora_rank: int = 0
    lora_alpha: float = 16.0
    lora_targets: tuple[str, ...] = ("q", "v")
    # on several processes (torchrun; glassformer.train.distributed): "ddp" replicates the model,
    # "fsdp" shards it (FSDP2); how long a rank waits for the others before it fails
    parallel: str = "ddp"
    distributed_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        if not (self.compile is True or self.compile is False or self.compile == "auto"):
            raise ValueError(
                f'train.compile={self.compile!r}; allowed values: true, false, "auto" (compiled only where '
                "it measures faster on the run's own steps: glassformer.train.compile_trial)"
            )
        for name, allowed in (("optimizer", OPTIMIZERS), ("schedule", SCHEDULES), ("dtype", DTYPES)):
            if getattr(self, name) not in allowed:
                raise ValueError(
                    f"train.{name}={getattr(self, name)!r}; allowed values: {', '.join(allowed)}"
                )
        for name in (
            "steps",
            "batch_size",
            "context",
            "grad_accum",
            "eval_interval",
            "eval_batches",
            "checkpoint_interval",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"train.{name}={value!r} must be a positive integer")
        if self.lr <= 0:
            raise ValueError(f"train.lr={self.lr} must be positive")
        for name in ("router_aux_loss_coef", "router_z_loss_coef"):
            if getattr(self, name) < 0:
                raise ValueError(f"train.{name}={getattr(self, name)} must be >= 0")
        if not 0 <= self.label_smoothing < 1:
            raise ValueError(f"train.label_smoothing={self.label_smoothing} must lie in [0, 1)")
        if self.parallel not in PARALLEL:
            raise ValueError(f"train.parallel={self.parallel!r}; allowed values: {', '.join(PARALLEL)}")
        if not self.distributed_timeout_s > 0:
            raise ValueError(
                f"train.distributed_timeout_s={self.distributed_timeout_s} must be positive (seconds)"
            )
        self._check_lora()

    def _check_lora(self) -> None:
        """train.lora_*: a whole rank >= 0, a positive alpha, targets LoRA knows, each once."""
        from glassformer.lora import TARGETS

        rank, alpha = self.lora_rank, self.lora_alpha
        if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
            raise ValueError(
                f"train.lora_rank={rank!r} must be a whole number >= 0 (0: no LoRA, every weight trains; "
                "typical: 4 to 64)"
            )
        if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not alpha > 0:
            raise ValueError(
                f"train.lora_alpha={alpha!r} must be a positive number (the scale is alpha / rank; "
                "typical: twice the rank)"
            )
        targets = self.lora_targets
        if isinstance(targets, str) or not isinstance(targets, list | tuple) or not targets:
            raise ValueError(
                f'train.lora_targets={targets!r} must be a non-empty list of targets, e.g. ["q", "v"]; '
                f"valid targets: {', '.join(TARGETS)}"
            )
        for target in targets:
            if target not in TARGETS:
                raise ValueError(
                    f"train.lora_targets holds {target!r}, which is not a LoRA target; "
                    f"valid targets: {', '.join(TARGETS)}"
                )
        if len(set(targets)) != len(targets):
            raise ValueError(f"train.lora_targets={list(targets)!r} names a target twice")
        if "qkv" in targets and {"q", "k", "v"} & set(targets):
            raise ValueError(
                "train.lora_targets: 'qkv' already holds the rows of 'q', 'k' and 'v'; choose one"
            )
        object.__setattr__(self, "lora_targets", tuple(targets))  # a TOML or JSON list, kept as a tuple
        if rank and self.init_from == "scratch":
            raise ValueError(
                f"train.lora_rank={rank} adapts a pretrained model: set train.init_from (e.g. "
                "'smollm2-135m-instruct'), or lora_rank=0 to train a model from scratch"
            )


@dataclass(frozen=True)
class RunConfig:
    """A whole run: data + model + train, as a preset file describes it."""

    name: str
    data: DataConfig
    model: dict[str, Any]
    train: TrainConfig

    def model_config(self, vocab_size: int, **fixed: Any) -> ModelConfig:
        """The ModelConfig of this run once the tokenizer is known."""
        fields = {"max_seq_len": self.train.context, **self.model, "vocab_size": vocab_size, **fixed}
        return ModelConfig(**fields)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "data": dataclasses.asdict(self.data),
            "model": dict(self.model),
            "train": dataclasses.asdict(self.train),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], name: str = "custom") -> RunConfig:
        unknown = set(data) - {"name", "data", "model", "train"}
        if unknown:
            raise ValueError(f"unknown table(s) {', '.join(sorted(unknown))}; allowed: data, model, train")
        model = dict(data.get("model", {}))
        known_model = {f.name for f in dataclasses.fields(ModelConfig)} - {"vocab_size"}
        bad = set(model) - known_model
        if bad:
            raise ValueError(
                f"unknown model field(s) {', '.join(sorted(bad))}; see `glassformer config --help`"
            )
        return cls(
            name=data.get("name", name),
            data=_make(DataConfig, data.get("data", {}), "data"),
            model=model,
            train=_make(TrainConfig, data.get("train", {}), "train"),
        )


def _make(cls, values: dict[str, Any], table: str):
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - known
    if unknown:
        raise ValueError(
            f"unknown {table} field(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(known))}"
        )
    return cls(**values)


def preset_names() -> list[str]:
    folder = resources.files("glassformer.train") / "presets"
    return sorted(p.name.removesuffix(".toml") for p in folder.iterdir() if p.name.endswith(".toml"))


def preset_summary(name: str) -> str:
    """What a preset trains, in a sentence: the first sentence of its file's header comment.

    >>> preset_summary("reverse-seq2seq")
    'The original Transformer (post-norm, sinusoidal positions) learns to reverse strings.'
    """
    path = resources.files("glassformer.train") / "presets" / f"{name}.toml"
    if not path.is_file():
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(preset_names())}")
    header = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        header.append(line.lstrip("# ").strip())
    text = " ".join(header)
    end = text.find(". ")
    return text if end < 0 else text[: end + 1]


def load_preset(name: str) -> RunConfig:
    """A shipped preset by name (see `preset_names`)."""
    path = resources.files("glassformer.train") / "presets" / f"{name}.toml"
    if not path.is_file():
        raise ValueError(f"unknown preset {name!r}; presets: {', '.join(preset_names())}")
    return RunConfig.from_dict(tomllib.loads(path.read_text(encoding="utf-8")), name=name)


def apply_overrides(config: RunConfig, assignments: list[str]) -> RunConfig:
    """``["train.steps=500", "model.n_layers=6"]`` applied to a run config."""
    data = config.to_dict()
    for assignment in assignments:
        key, sep, text = assignment.partition("=")
        table, dot, name = key.strip().partition(".")
        if not sep or not dot or table not in ("data", "model", "train"):
            raise ValueError(
                f"--set {assignment!r}: write TABLE.FIELD=VALUE with TABLE one of data, model, train"
            )
        data[table][name] = _literal(text.strip())
    return RunConfig.from_dict(data, name=config.name)


def _literal(text: str) -> Any:
    """A TOML literal (500, 3e-4, true, "x", [1, 2]); anything else is a bare string."""
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError:
        return text
