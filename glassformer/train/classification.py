"""Sequence-classification data and evaluation: balanced batches, a fixed validation set, and
the figures a classifier is judged by (accuracy, macro-F1, the confusion matrix, ECE).

Batches follow the trainer's schema with one label per sequence::

    input_ids        b t  long   the tokens, right-padded to the longest row of the batch
    attention_mask   b t  long   1 = token, 0 = padding
    labels           b    long   the class of each row

Training batches are balanced: each row draws its class uniformly, then one example of that
class, so every class weighs the same in the loss however many examples it has (the
alternative, weighting the loss by inverse class frequency, gives the same expected
gradient with noisier batches). Validation batches hold every validation example once, in
order, so their figures are exact and comparable across evaluations and with a baseline
scored on the same examples.

>>> rows, labels = [[5, 6, 7], [8], [9, 9]], [0, 1, 1]
>>> batch = next(ClassificationBatches(rows, labels, batch_size=4, seed=0, pad_id=0, n_classes=2))
>>> batch["input_ids"].shape[0], batch["labels"].shape
(4, torch.Size([4]))
>>> [b["labels"].tolist() for b in in_order(rows, labels, batch_size=2, pad_id=0)]
[[0, 1], [1]]
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from glassformer.inputs import ModelInputs, right_pad
from glassformer.models import TransformerModel
from glassformer.train import metrics
from glassformer.train.data import Batch, Batches, model_input


class Encoded(Sequence[list[int]]):
    """``texts`` as token ids, each encoded on first use and kept: a batcher that draws a few
    thousand of many passages tokenizes only those (and `glassformer eval` none of them).

    >>> rows = Encoded(["ab", "c"], lambda text: [ord(ch) for ch in text])
    >>> len(rows), rows[0]
    (2, [97, 98])
    """

    def __init__(self, texts: Sequence[str], encode: Callable[[str], list[int]]) -> None:
        self.texts, self.encode, self.cache = list(texts), encode, {}

    def __len__(self) -> int:
        return len(self.texts)

    def __getitem__(self, index):
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index not in self.cache:
            row = self.encode(self.texts[index])
            if len(row) == 0:
                raise ValueError(f"example {index} has no tokens: {self.texts[index][:40]!r}")
            self.cache[index] = row
        return self.cache[index]


def _check_examples(rows: Sequence[Sequence[int]], labels: Sequence[int], n_classes: int) -> None:
    if len(rows) == 0 or len(rows) != len(labels):
        raise ValueError(
            f"need one label per example and at least one: {len(rows)} rows, {len(labels)} labels"
        )
    if not isinstance(rows, Encoded) and any(len(row) == 0 for row in rows):
        raise ValueError("an example has no tokens: give every example at least one token")
    bad = sorted({int(y) for y in labels if not 0 <= int(y) < n_classes})
    if bad:
        raise ValueError(f"labels {bad} lie outside the classes 0..{n_classes - 1}")


class ClassificationBatches(Batches):
    """Class-balanced batches of (token ids, class) examples, drawn with replacement."""

    def __init__(
        self,
        rows: Sequence[Sequence[int]],
        labels: Sequence[int],
        batch_size: int,
        seed: int = 0,
        *,
        pad_id: int,
        n_classes: int,
    ):
        super().__init__(batch_size, seed)
        _check_examples(rows, labels, n_classes)
        self.rows = rows if isinstance(rows, Encoded) else [list(r) for r in rows]
        self.labels = [int(y) for y in labels]
        self.pad_id, self.n_classes = pad_id, n_classes
        self.by_class = [np.flatnonzero(np.asarray(self.labels) == k) for k in range(n_classes)]
        empty = [k for k, members in enumerate(self.by_class) if len(members) == 0]
        if empty:
            raise ValueError(f"classes {empty} have no training example: balanced batches need each class")

    def _config(self) -> dict[str, int]:
        return {"batch_size": self.batch_size, "n_examples": len(self.rows), "n_classes": self.n_classes}

    def _make(self, rng: np.random.Generator) -> Batch:
        classes = rng.integers(0, self.n_classes, size=self.batch_size)  # b
        chosen = [int(self.by_class[k][rng.integers(0, len(self.by_class[k]))]) for k in classes]
        return _batch([self.rows[i] for i in chosen], [self.labels[i] for i in chosen], self.pad_id)


def in_order(
    rows: Sequence[Sequence[int]], labels: Sequence[int], batch_size: int, pad_id: int
) -> list[Batch]:
    """Every example once, in order, ``batch_size`` to a batch (the last may be smaller)."""
    _check_examples(rows, labels, max(labels, default=0) + 1)
    return [
        _batch(rows[i : i + batch_size], labels[i : i + batch_size], pad_id)
        for i in range(0, len(rows), batch_size)
    ]


def _batch(rows: Sequence[Sequence[int]], labels: Sequence[int], pad_id: int) -> Batch:
    input_ids, attention_mask = right_pad(rows, pad_id)  # b t
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": torch.tensor(labels)}


def truncate(row: list[int], limit: int, closing: int | None = None) -> list[int]:
    """At most ``limit`` tokens, keeping a closing token (WordPiece's [SEP]) at the end.

    >>> truncate([101, 7, 8, 9, 102], 4, closing=102)
    [101, 7, 8, 102]
    """
    if len(row) <= limit:
        return row
    if closing is not None and row[-1] == closing:
        return row[: limit - 1] + [closing]
    return row[:limit]


@torch.no_grad()
def predict(
    net: TransformerModel, batches: list[Batch], bfloat16: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """(class logits n c in float32, labels n) of every example of ``batches`` (token ids, or an
    image classifier's pixels), in eval mode."""
    was_training = net.training
    net.eval()
    autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bfloat16 else contextlib.nullcontext()
    logits = []
    try:
        with autocast:
            for batch in batches:
                output = ModelInputs(net).forward(model_input(batch), None, batch.get("attention_mask"))
                logits.append(output.float())  # b c
    finally:
        net.train(was_training)
    return torch.cat(logits), torch.cat([batch["labels"] for batch in batches])


def report(logits: torch.Tensor, labels: torch.Tensor) -> dict[str, Any]:
    """Accuracy, macro-F1, ECE and the confusion matrix (rows: true class) of class logits n c."""
    predictions = logits.argmax(dim=-1)
    n_classes = logits.shape[-1]
    return {
        "accuracy": metrics.token_accuracy(logits, labels),
        "macro_f1": metrics.macro_f1(labels, predictions, n_classes),
        "ece": metrics.expected_calibration_error(logits, labels),
        "confusion_matrix": metrics.confusion_matrix(labels, predictions, n_classes).tolist(),
    }


def extra_eval(batches: list[Batch]) -> Callable[[TransformerModel], dict[str, Any]]:
    """The trainer's extra evaluation of a classifier: macro-F1 and the confusion matrix on
    ``batches`` (accuracy and ECE are in the trainer's own evaluation; the trainer runs both
    in the run's precision)."""

    def evaluate(net: TransformerModel) -> dict[str, Any]:
        figures = report(*predict(net, batches))
        return {"macro_f1": round(figures["macro_f1"], 5), "confusion_matrix": figures["confusion_matrix"]}

    return evaluate


def sampler(
    batches: list[Batch], examples: Sequence[str], class_names: Sequence[str], shown: int = 3
) -> Callable[[TransformerModel], str]:
    """A line of predictions on ``shown`` validation examples (the middle one of each class, in
    turn): ``true -> predicted p: "text..."``, what the trainer prints at each evaluation."""
    labels = torch.cat([batch["labels"] for batch in batches]).tolist()
    members = [[i for i, y in enumerate(labels) if y == k] for k in range(len(class_names))]
    picks = [m[len(m) // 2] for m in members if m][:shown]
    chosen = [_locate(batches, i) for i in picks]

    def sample(net: TransformerModel) -> str:
        logits, _ = predict(net, chosen)
        probs = torch.softmax(logits, dim=-1)
        lines = []
        for i, p in zip(picks, probs, strict=True):
            text = " ".join(examples[i].split())[:60]
            k = int(p.argmax())
            lines.append(f'{class_names[labels[i]]} -> {class_names[k]} {float(p[k]):.2f}: "{text}..."')
        return " | ".join(lines)

    return sample


def _locate(batches: list[Batch], index: int) -> Batch:
    """The one-row batch of example ``index`` (padding removed)."""
    for batch in batches:
        if index < len(batch["labels"]):
            length = int(batch["attention_mask"][index].sum())
            return {
                "input_ids": batch["input_ids"][index : index + 1, :length],
                "attention_mask": batch["attention_mask"][index : index + 1, :length],
                "labels": batch["labels"][index : index + 1],
            }
        index -= len(batch["labels"])
    raise IndexError(index)
