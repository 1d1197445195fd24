"""`Costs`: parameters, FLOPs, KV cache and activation memory of one config, as one table.

    >>> from glassformer.config import ModelConfig
    >>> report = costs(ModelConfig(vocab_size=100, d_model=32, n_layers=2, n_heads=4), seq_len=64)
    >>> report.total_parameters, report.flops.forward
    (36864, 71936)
    >>> print(report)  # doctest: +ELLIPSIS
    decoder: d_model 32, 2 layers, 4 heads (4 kv), d_head 8, d_ff 128, vocab 100, ...
    ...
      total                                            36,864
    ...

The figures come from `glassformer.inspect.costs`, where each equation is stated.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from glassformer.config import ModelConfig
from glassformer.inspect.costs import (
    FlopsPerToken,
    activation_bytes,
    active_parameters,
    as_dtype,
    bytes_per_number,
    cross_kv_bytes,
    embedding_parameters,
    flops_per_token,
    kv_cache_bytes,
    parameter_counts,
)


@dataclass(frozen=True)
class Costs:
    """What ``config`` costs at ``seq_len`` tokens x ``batch`` sequences in ``dtype``."""

    config: ModelConfig
    seq_len: int
    batch: int
    dtype: str
    parameters: dict[str, int]
    flops: FlopsPerToken
    kv_cache_bytes_per_token: int  # one token of one sequence
    kv_cache_bytes: int  # seq_len x batch tokens
    cross_kv_bytes: int  # encoder-decoder: the source's cross-attention K/V
    activation_bytes: int  # kept for backward by one training step of batch x seq_len tokens
    real_parameters: int | None = None  # a loaded model's own count, when there is one
    notes: list[str] = field(default_factory=list)

    @property
    def total_parameters(self) -> int:
        return sum(self.parameters.values())

    @property
    def non_embedding_parameters(self) -> int:
        """All but the lookup tables (Kaplan et al.'s N)."""
        return self.total_parameters - embedding_parameters(self.config)

    @property
    def active_parameters(self) -> int:
        """What one token passes through: a mixture's k of n experts (all, without one)."""
        return active_parameters(self.config)

    @property
    def weight_bytes(self) -> int:
        return self.total_parameters * bytes_per_number(self.dtype)

    def to_dict(self) -> dict[str, Any]:
        """Plain numbers, for ``--json``."""
        return {
            "family": self.config.family,
            "seq_len": self.seq_len,
            "batch": self.batch,
            "dtype": self.dtype,
            "parameters": dict(self.parameters),
            "total_parameters": self.total_parameters,
            "non_embedding_parameters": self.non_embedding_parameters,
            "active_parameters": self.active_parameters,
            "real_parameters": self.real_parameters,
            "flops_per_token": {
                "weights": self.flops.weights,
                "attention": self.flops.attention,
                "forward": self.flops.forward,
                "training": self.flops.training,
            },
            "training_flops_per_step": self.flops.training * self.seq_len * self.batch,
            "weight_bytes": self.weight_bytes,
            "kv_cache_bytes_per_token": self.kv_cache_bytes_per_token,
            "kv_cache_bytes": self.kv_cache_bytes,
            "cross_kv_bytes": self.cross_kv_bytes,
            "activation_bytes": self.activation_bytes,
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        return "\n".join(
            [_title(self), "", *_parameter_rows(self), "", *_flop_rows(self), "", *_memory_rows(self)]
            + ([""] + [f"note: {n}" for n in self.notes] if self.notes else [])
        )


def costs(
    config: ModelConfig,
    seq_len: int | None = None,
    batch: int = 1,
    dtype: torch.dtype | str = "float32",
    real_parameters: int | None = None,
) -> Costs:
    """Every figure of `glassformer.inspect.costs` for ``config`` (``seq_len`` defaults to
    ``config.max_seq_len``), with notes on what each one assumes."""
    seq_len = config.max_seq_len if seq_len is None else seq_len
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 1:
        raise ValueError(f"seq_len={seq_len!r} must be a positive integer")
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(f"batch={batch!r} must be a positive integer")
    name = str(as_dtype(dtype)).removeprefix("torch.")
    return Costs(
        config=config,
        seq_len=seq_len,
        batch=batch,
        dtype=name,
        parameters=parameter_counts(config),
        flops=flops_per_token(config, seq_len),
        kv_cache_bytes_per_token=kv_cache_bytes(config, 1, 1, name),
        kv_cache_bytes=kv_cache_bytes(config, seq_len, batch, name),
        cross_kv_bytes=cross_kv_bytes(config, seq_len, batch, name),
        activation_bytes=activation_bytes(config, seq_len, batch, name),
        real_parameters=real_parameters,
        notes=_notes(config, seq_len),
    )


def _notes(config: ModelConfig, seq_len: int) -> list[str]:
    notes = []
    if config.positions == "learned" and seq_len > config.max_seq_len:
        notes.append(
            f"seq_len {seq_len:,} exceeds max_seq_len={config.max_seq_len:,}: learned positions "
            "cannot run it (the figures are what it would cost)"
        )
    if config.causal:
        notes.append(
            "attention FLOPs count the full t x s square, as the kernels compute it; under the causal "
            "mask half of it is used"
        )
    if config.seq2seq:
        notes.append(f"encoder-decoder: per target token, with as many source tokens ({seq_len:,})")
    if not config.causal and not config.mlm_head:
        notes.append("no masked-LM head: FLOPs are encode()'s, activations leave out any loss")
    if config.n_classes or config.pooler:
        notes.append("the pooler and classifier act once per sequence: left out of FLOPs and activations")
    return notes


# the table ------------------------------------------------------------------------------------
WIDTH = 46  # label column


def _row(label: str, value: str, extra: str = "") -> str:
    return f"  {label:<{WIDTH}} {value:>16}  {extra}".rstrip()


def _title(report: Costs) -> str:
    c = report.config
    layers = "+".join(str(depth) for depth in c.stack_depths)
    return (
        f"{c.family}: d_model {c.d_model}, {layers} layers, {c.n_heads} heads ({c.n_kv_heads} kv), "
        f"d_head {c.d_head}, {_ffn_words(c)}{' (gated)' if c.gated else ''}, {_input_words(c)}, "
        f"{c.positions} positions; seq_len {report.seq_len:,}, batch {report.batch}, {report.dtype}"
    )


def _input_words(c: ModelConfig) -> str:
    """ "vocab 50,257", or a vision model's "8x8x1 images, 2x2 patches (16 + [CLS])"."""
    if not c.vision:
        return f"vocab {c.vocab_size:,}"
    size, patch = c.image_size, c.patch_size
    return f"{size}x{size}x{c.n_channels} images, {patch}x{patch} patches ({c.n_patches} + [CLS])"


def _ffn_words(c: ModelConfig) -> str:
    """ "d_ff 512", or a mixture's "8 experts (2 per token) of d_ff 256" (+ its shared expert)."""
    if not c.moe:
        return f"d_ff {c.d_ff}"
    shared = f" + a shared expert of d_ff {c.shared_expert_d_ff}" if c.shared_expert_d_ff else ""
    return f"{c.n_experts} experts ({c.experts_per_token} per token) of d_ff {c.expert_d_ff}{shared}"


def _parameter_rows(report: Costs) -> list[str]:
    total = report.total_parameters
    rows = [f"{'parameters':<{WIDTH + 2}} {'count':>16}  share"]
    tied = report.config.tie_embeddings
    for name, count in report.parameters.items():
        label = name
        if tied and name in ("lm head", "mlm head"):
            label = f"{name} (tied: its matrix is the token embedding's)"
        rows.append(_row(label, f"{count:,}", f"{100 * count / total:5.1f}%"))
    rows.append(_row("total", f"{total:,}"))
    rows.append(_row("non-embedding (without lookup tables)", f"{report.non_embedding_parameters:,}"))
    c = report.config
    if c.moe:
        active = report.active_parameters
        rows.append(
            _row(f"active per token ({c.experts_per_token} of {c.n_experts} experts)", f"{active:,}")
            + f"  {100 * active / total:5.1f}%"
        )
    if report.real_parameters is not None:
        same = "equal" if report.real_parameters == total else "DIFFERENT"
        rows.append(_row("the loaded model's own count", f"{report.real_parameters:,}", same))
    return rows


def _flop_rows(report: Costs) -> list[str]:
    f, tokens = report.flops, report.seq_len * report.batch
    return [
        f"FLOPs per token at seq_len {report.seq_len:,}",
        _row("weights: 2 N_matmul", _flops(f.weights), f"(head {_flops(f.head)})"),
        _row("attention: 4 L s h e (full square)", _flops(f.attention)),
        _row("forward", _flops(f.forward)),
        _row("training: 3 x forward", _flops(f.training)),
        _row(f"training step: {report.batch} x {report.seq_len:,} tokens", _flops(f.training * tokens)),
    ]


def _memory_rows(report: Costs) -> list[str]:
    rows = [
        f"memory ({report.dtype})",
        _row("weights", _bytes(report.weight_bytes)),
        _row("KV cache per token: 2 L g e bytes", _bytes(report.kv_cache_bytes_per_token)),
        _row(f"KV cache at {report.seq_len:,} tokens x batch {report.batch}", _bytes(report.kv_cache_bytes)),
    ]
    if report.cross_kv_bytes:
        rows.append(_row("cross-attention K/V of the source", _bytes(report.cross_kv_bytes)))
    rows.append(_row("activations kept for backward (training)", _bytes(report.activation_bytes)))
    return rows


def _flops(n: int) -> str:
    """1.23 GFLOP style, or the plain number below a thousand."""
    for unit, size in (("PFLOP", 1e15), ("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} FLOP"


def _bytes(n: int) -> str:
    """Bytes in binary units: 1.5 KiB, 12.3 MiB."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} B"
