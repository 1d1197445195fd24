"""A run's TensorBoard events, written beside ``metrics.jsonl`` (which always has the figures).

Every step: the training loss, the gradient norm and the learning rate. Every evaluation: the
validation figures, each layer's attention entropy on one validation row, and a histogram of
every parameter. At the end: the token embeddings with their tokens as labels, for the
projector. TensorBoard is optional: without it installed, `TensorBoardLog.open` says so and
returns None, and the run goes on.

    tensorboard --logdir runs
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from glassformer.train import metrics

PROJECTED_TOKENS = 5000  # the projector's table: the first tokens of the vocabulary


class TensorBoardLog:
    """``run_dir/tensorboard``'s event files, through torch's `SummaryWriter`."""

    def __init__(self, writer: Any) -> None:
        self.writer = writer

    @classmethod
    def open(cls, run_dir: str | Path, step: int, log: Callable[[str], None]) -> TensorBoardLog | None:
        """The log of a run at ``step`` (a resumed run drops the events written after it)."""
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            log("tensorboard is not installed: logging to metrics.jsonl only")
            return None
        return cls(SummaryWriter(str(Path(run_dir) / "tensorboard"), purge_step=step or None))

    def scalar(self, tag: str, value: float, step: int) -> None:
        self.writer.add_scalar(tag, value, step)

    @torch.no_grad()
    def evaluation(self, net: torch.nn.Module, run_batch: Callable[[], Any], step: int) -> None:
        """Attention entropy per layer (from the patterns of ``run_batch()``, one validation
        row through ``net``) and parameter histograms."""
        patterns: dict[str, torch.Tensor] = {}
        with net.hooks({"*attn.pattern": lambda x, name: patterns.__setitem__(name, x)}):
            run_batch()
        for name, pattern in patterns.items():
            self.writer.add_scalar(
                f"attention_entropy/{name}", metrics.attention_entropy(pattern).mean(), step
            )
        for name, param in net.named_parameters():
            self.writer.add_histogram(f"params/{name}", param.detach().float(), step)

    def close(self, net: torch.nn.Module, tokenizer: Any, step: int) -> None:
        """The token embeddings for the projector (none for a vision model: its tokens are
        patches, it has no table), then the files closed."""
        tables = [m.weight for m in net.modules() if isinstance(m, torch.nn.Embedding)]
        if tables:
            n = min(tables[0].shape[0], PROJECTED_TOKENS)
            labels = [_label(tokenizer, i) for i in range(n)]
            self.writer.add_embedding(
                tables[0][:n].detach().float(), metadata=labels, global_step=step, tag="token_embeddings"
            )
        self.writer.close()


def _label(tokenizer: Any, token_id: int) -> str:
    try:
        text = tokenizer.id_to_token(token_id)
    except (ValueError, KeyError, IndexError, AttributeError):
        return f"<{token_id}>"
    return repr(text)[1:-1] or f"<{token_id}>"
