"""What training and evaluation measure (loss, accuracy, perplexity, calibration, attention
entropy; a classifier's macro-F1 and confusion matrix) and `MetricsLog`, which appends the
measurements to a run's ``metrics.jsonl``.

Labels use the Hugging Face convention: a label of ``-100`` (`IGNORE_INDEX`) marks a
position that is not scored (padding, the prompt, unmasked tokens in masked-LM).

Shapes: b=batch, t=query positions, s=key positions, h=heads, v=vocab. Functions that
take ``logits (b t v)`` and ``labels (b t)`` accept any leading shape ``(..., v)`` and
``(...)``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from glassformer.atomic import write_text_atomic

IGNORE_INDEX = -100


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Mean next-token cross-entropy in nats over scored positions (labels != -100).

    Without smoothing, for each scored position with label y::

        loss = -log p_y,    p = softmax(logits)

    Label smoothing (Szegedy et al. 2016; the original Transformer used eps = 0.1) trains
    toward the target ``q = (1 - eps) * onehot(y) + eps / v`` instead of the one-hot::

        loss = -sum_i q_i log p_i = (1 - eps) * (-log p_y) + eps * mean_i(-log p_i)

    which keeps the model from pushing one logit to infinity. A smoothed loss is not the
    model's likelihood: report perplexity from an unsmoothed loss.

    Logits are upcast to float32 (a softmax over a large vocabulary in bfloat16 loses the
    small probabilities). If no position is scored, the mean is 0/0 = nan, as in torch.

    >>> logits = torch.tensor([[[0.0, 0.0], [0.0, 0.0]]])  # b=1, t=2, v=2: p = 1/2 everywhere
    >>> round(cross_entropy(logits, torch.tensor([[1, -100]])).item(), 4)  # ln 2
    0.6931
    """
    _check_pair(logits, labels)
    if not 0.0 <= label_smoothing < 1.0:
        raise ValueError(f"label_smoothing={label_smoothing} must lie in [0, 1)")
    v = logits.shape[-1]
    return F.cross_entropy(
        logits.reshape(-1, v).float(),  # (b t) v
        labels.reshape(-1).long(),  # (b t)
        ignore_index=IGNORE_INDEX,
        label_smoothing=label_smoothing,
    )


def token_accuracy(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Fraction of scored positions whose most likely token (argmax) is the label; nan if none.

    >>> token_accuracy(torch.tensor([[[2.0, 0.0], [2.0, 0.0]]]), torch.tensor([[0, 1]]))
    0.5
    """
    _check_pair(logits, labels)
    scored = labels != IGNORE_INDEX
    n = int(scored.sum())
    if n == 0:
        return math.nan
    correct = (logits.argmax(dim=-1) == labels) & scored
    return int(correct.sum()) / n


def perplexity(loss: float | torch.Tensor) -> float:
    """``exp(loss)`` for a mean cross-entropy in nats: the effective number of equally likely
    choices per token (a uniform guess over v tokens has perplexity v). ``inf`` on overflow.

    >>> round(perplexity(math.log(50)), 6)
    50.0
    """
    loss = float(loss)
    return math.exp(loss) if loss < 709.0 else math.inf  # exp(709.8) overflows a float64


def bits_per_character(loss_nats_per_token: float, n_tokens: int, n_chars: int) -> float:
    """Loss converted to bits per character, comparable across tokenizers::

        bpc = loss * n_tokens / (n_chars * ln 2)

    (nats/token times tokens/char gives nats/char; dividing by ln 2 turns nats into bits).

    >>> bits_per_character(math.log(2), n_tokens=10, n_chars=40)  # 1 bit/token, 4 chars/token
    0.25
    """
    if n_tokens < 0 or n_chars <= 0:
        raise ValueError(f"n_tokens={n_tokens} must be >= 0 and n_chars={n_chars} positive")
    return float(loss_nats_per_token) * n_tokens / (n_chars * math.log(2))


def calibration_bins(logits: torch.Tensor, labels: torch.Tensor, n_bins: int = 15) -> dict[str, list]:
    """Per-bin data of a reliability diagram: ``count``, mean ``confidence``, ``accuracy``.

    Confidence is the top softmax probability ``max_i p_i``; a prediction is correct when
    its argmax equals the label. Bin m (m = 1..M) holds confidences in ((m-1)/M, m/M],
    equal-width bins as in Guo et al. 2017. Empty bins have confidence and accuracy nan.
    Positions labelled -100 are left out.
    """
    _check_pair(logits, labels)
    if isinstance(n_bins, bool) or not isinstance(n_bins, int) or n_bins < 1:
        raise ValueError(f"n_bins={n_bins!r} must be a positive integer (15 is usual)")
    scored = labels != IGNORE_INDEX
    probs = torch.softmax(logits[scored].double(), dim=-1)  # n v
    confidence, prediction = probs.max(dim=-1)  # n, n
    correct = (prediction == labels[scored]).double()  # n
    index = (torch.ceil(confidence * n_bins).long() - 1).clamp(0, n_bins - 1)  # n: bin of each
    count = torch.bincount(index, minlength=n_bins)
    conf_sum = torch.bincount(index, weights=confidence, minlength=n_bins)
    correct_sum = torch.bincount(index, weights=correct, minlength=n_bins)
    safe = count.clamp(min=1).double()
    empty = count == 0
    return {
        "edges": [m / n_bins for m in range(n_bins + 1)],
        "count": count.tolist(),
        "confidence": torch.where(empty, math.nan, conf_sum / safe).tolist(),
        "accuracy": torch.where(empty, math.nan, correct_sum / safe).tolist(),
    }


def expected_calibration_error(logits: torch.Tensor, labels: torch.Tensor, n_bins: int = 15) -> float:
    """Expected calibration error (Naeini et al. 2015; Guo et al. 2017)::

        ECE = sum_m |B_m| / n * |acc(B_m) - conf(B_m)|

    over the equal-width confidence bins B_m of `calibration_bins` (n = scored positions).
    0 means "when the model says 80 %, it is right 80 % of the time"; an always-wrong model
    that is always sure has ECE 1. nan if no position is scored.

    >>> logits = torch.log(torch.tensor([[0.9, 0.1], [0.9, 0.1]]))  # sure of token 0, twice
    >>> round(expected_calibration_error(logits, torch.tensor([0, 1])), 4)  # right once: 0.9 vs 0.5
    0.4
    """
    bins = calibration_bins(logits, labels, n_bins)
    n = sum(bins["count"])
    if n == 0:
        return math.nan
    return sum(
        count / n * abs(acc - conf)
        for count, acc, conf in zip(bins["count"], bins["accuracy"], bins["confidence"], strict=True)
        if count
    )


def pooled_calibration_error(bins: list[dict[str, list]]) -> float:
    """The ECE of several batches together, from each batch's `calibration_bins` (same n_bins):
    counts add up, and each bin's confidence and accuracy become count-weighted means. Equal
    to `expected_calibration_error` on all the batches at once; nan if nothing is scored.

    >>> a = calibration_bins(torch.log(torch.tensor([[0.9, 0.1]])), torch.tensor([0]))
    >>> b = calibration_bins(torch.log(torch.tensor([[0.9, 0.1]])), torch.tensor([1]))
    >>> round(pooled_calibration_error([a, b]), 4)  # one bin: confidence 0.9, accuracy 0.5
    0.4
    """
    count = np.sum([b["count"] for b in bins], axis=0)  # bins
    weighted = {
        key: np.sum([np.nan_to_num(np.asarray(b[key]) * np.asarray(b["count"])) for b in bins], axis=0)
        for key in ("confidence", "accuracy")
    }  # bins: sums of confidences, of correct answers
    n = int(count.sum())
    if n == 0:
        return math.nan
    return float(np.abs(weighted["accuracy"] - weighted["confidence"]).sum() / n)


def confusion_matrix(labels: Any, predictions: Any, n_classes: int) -> torch.Tensor:
    """Counts c c: row i, column j holds how many examples of class i were predicted as j
    (scikit-learn's convention: rows are the truth). Labels of -100 are left out.

    >>> confusion_matrix([0, 0, 1, 2], [0, 1, 1, 1], n_classes=3).tolist()
    [[1, 1, 0], [0, 1, 0], [0, 1, 0]]
    """
    labels, predictions = _class_ids(labels, "labels"), _class_ids(predictions, "predictions")
    if labels.shape != predictions.shape:
        raise ValueError(
            f"labels {tuple(labels.shape)} and predictions {tuple(predictions.shape)} must have one "
            "entry per example each"
        )
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 1:
        raise ValueError(f"n_classes={n_classes!r} must be a positive integer")
    scored = labels != IGNORE_INDEX
    labels, predictions = labels[scored], predictions[scored]
    for name, ids in (("label", labels), ("prediction", predictions)):
        if ids.numel() and not 0 <= int(ids.min()) <= int(ids.max()) < n_classes:
            raise ValueError(f"a {name} lies outside the classes 0..{n_classes - 1}")
    counts = torch.bincount(labels * n_classes + predictions, minlength=n_classes * n_classes)
    return counts.view(n_classes, n_classes)  # c c


def macro_f1(labels: Any, predictions: Any, n_classes: int | None = None) -> float:
    """The unweighted mean of each class's F1 score, F1_k = 2 TP_k / (2 TP_k + FP_k + FN_k),
    over the classes that occur among the labels or the predictions (as scikit-learn's
    ``f1_score(average="macro")``). Every class counts the same, however rare: a model that
    always answers the majority class scores low. Labels of -100 are left out; nan if none.

    >>> round(macro_f1([0, 0, 1, 2], [0, 1, 1, 1]), 4)  # F1: 2/3, 1/2, 0
    0.3889
    """
    labels, predictions = _class_ids(labels, "labels"), _class_ids(predictions, "predictions")
    scored = labels != IGNORE_INDEX
    if not bool(scored.any()):
        return math.nan
    if n_classes is None:
        n_classes = int(max(labels[scored].max(), predictions[scored].max())) + 1
    counts = confusion_matrix(labels, predictions, n_classes).double()  # c c
    true_positive = counts.diagonal()  # c
    support, predicted = counts.sum(dim=1), counts.sum(dim=0)  # c, c: FN = support - TP, FP = ...
    present = (support + predicted) > 0
    f1 = 2 * true_positive / (support + predicted).clamp(min=1)  # 2TP / (2TP + FP + FN)
    return float(f1[present].mean())


def _class_ids(values: Any, name: str) -> torch.Tensor:
    ids = values if isinstance(values, torch.Tensor) else torch.as_tensor(np.asarray(values))
    if ids.is_floating_point() or ids.dim() != 1:
        raise ValueError(
            f"{name} must be a 1-D sequence of class ids (ints), got {ids.dtype} {tuple(ids.shape)}"
        )
    return ids.long().cpu()


def attention_entropy(pattern: torch.Tensor) -> torch.Tensor:
    """Mean entropy (nats) of each head's attention rows: pattern (b h t s) -> (h,).

    For one query row p over keys: ``H(p) = -sum_s p_s log p_s`` (with 0 log 0 = 0).
    0 means the head looks at a single key; ``log n`` means it spreads evenly over n keys.
    Rows that are all zero (a fully masked query) are left out of the mean; a head with
    no valid row gets nan.

    >>> uniform = torch.full((1, 1, 2, 4), 0.25)  # b h t s: each row spread over 4 keys
    >>> attention_entropy(uniform)  # log 4
    tensor([1.3863])
    """
    if not isinstance(pattern, torch.Tensor) or pattern.dim() != 4:
        shape = tuple(pattern.shape) if isinstance(pattern, torch.Tensor) else type(pattern).__name__
        raise ValueError(f"attention pattern must have shape (batch, heads, queries, keys), got {shape}")
    p = pattern.detach().float()
    terms = torch.where(p > 0, -p * torch.log(p.clamp(min=1e-30)), 0.0)  # b h t s
    entropy = terms.sum(dim=-1)  # b h t
    valid = (p.sum(dim=-1) > 0).float()  # b h t: 0 where the row is fully masked
    total = (entropy * valid).sum(dim=(0, 2))  # h
    rows = valid.sum(dim=(0, 2))  # h
    return torch.where(rows > 0, total / rows.clamp(min=1), math.nan)


# metrics.jsonl ----------------------------------------------------------------------
class MetricsLog:
    """Appends one JSON object per line to ``metrics.jsonl``, each line flushed and fsynced.

    A crash can cut only the line being written; the first `append` of a new MetricsLog
    drops such a partial last line so the next record starts on a line of its own.

    >>> import tempfile
    >>> log = MetricsLog(Path(tempfile.mkdtemp()) / "metrics.jsonl")
    >>> log.append({"step": 10, "val_loss": 2.5}); log.append({"step": 20, "val_loss": 2.1})
    >>> [r["val_loss"] for r in log.read()]
    [2.5, 2.1]
    """

    def __init__(self, path: str | Path, fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync  # False: flushed only (a per-step log a crash may cut short)
        self._tail_checked = False

    def append(self, record: dict[str, Any]) -> None:
        """Write ``record`` as one line; tensors and numpy scalars become numbers."""
        if not isinstance(record, dict):
            raise TypeError(f"a metrics record must be a dict, got {type(record).__name__}")
        line = json.dumps(record, ensure_ascii=False, default=_plain_number) + "\n"
        if not self._tail_checked:
            self._drop_partial_last_line()
            self._tail_checked = True
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            if self.fsync:
                os.fsync(handle.fileno())

    def read(self) -> list[dict[str, Any]]:
        """All complete records (see `read_metrics`)."""
        return read_metrics(self.path)

    def truncate_after(self, step: int) -> None:
        """Drop records with ``"step" > step`` (atomically): call it when resuming from a
        checkpoint at ``step``, so evaluations logged after that checkpoint are not doubled."""
        if self.path.exists():
            kept = [r for r in read_metrics(self.path) if not r.get("step", 0) > step]
            write_text_atomic(self.path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in kept))
        self._tail_checked = True

    def _drop_partial_last_line(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            with open(self.path, "r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)
                os.fsync(handle.fileno())


def _plain_number(value: Any) -> Any:
    """json.dumps fallback: one-element tensors and numpy values become Python numbers."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    if isinstance(value, (np.generic, np.ndarray)) and value.size == 1:
        return value.item()
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"metrics values must be numbers, strings, lists or dicts; got {type(value).__name__}")


def read_metrics(path: str | Path) -> list[dict[str, Any]]:
    """The records of a ``metrics.jsonl``; a last line cut short by a crash is skipped.

    A damaged line elsewhere is an error naming its line number ([] if the file is absent).
    """
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    while lines and not lines[-1].strip():
        lines.pop()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as error:
            if number == len(lines):  # the line being written when the process died
                break
            raise ValueError(
                f"{path} line {number} is not valid JSON ({error}); fix or delete that line"
            ) from None
        if isinstance(record, dict):
            records.append(record)
    return records


def _check_pair(logits: torch.Tensor, labels: torch.Tensor) -> None:
    if not isinstance(logits, torch.Tensor) or not isinstance(labels, torch.Tensor):
        raise TypeError("logits and labels must both be torch.Tensors")
    if logits.dim() != labels.dim() + 1 or logits.shape[:-1] != labels.shape:
        raise ValueError(
            f"logits {tuple(logits.shape)} and labels {tuple(labels.shape)} do not match: expected "
            "logits (batch, seq_len, vocab) and labels (batch, seq_len)"
        )
    if labels.is_floating_point():
        raise TypeError(f"labels must hold integer token ids (torch.long), got dtype {labels.dtype}")
