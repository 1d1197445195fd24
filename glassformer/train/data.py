"""Training data: seeded, resumable batchers that turn token ids (or task pairs) into batches.

The ids usually come from `glassformer.train.token_files.token_file` (a corpus tokenized
once, memory-mapped). Every batcher yields the same schema, which the trainer consumes
without knowing which batcher made it:

    input_ids                b t  long   the model's input (the encoder's, for encoder-decoder)
    labels                   b t  long   the token to predict at each position; -100 = not scored
    attention_mask           b t  long   1 = token, 0 = padding            (MLM and task batchers)
    decoder_input_ids        b u  long   [bos] + target[:-1]               (Seq2SeqBatches only)
    decoder_attention_mask   b u  long   1 = token, 0 = padding            (Seq2SeqBatches only)

For encoder-decoder batches ``labels`` is b u: it lines up with ``decoder_input_ids``.
An image classifier's batches (`glassformer.train.images`) hold ``pixel_values`` (b C H W
float) in place of ``input_ids``, and one label per image (b); `model_input` and `tokens_in`
read either kind.

Batch ``k`` of a batcher depends only on ``(seed, k)`` (a fresh ``numpy`` generator seeded
with both), so a batcher is an infinite iterator whose whole state is two ints: `state_dict`
saves them, `load_state_dict` restores them, and a resumed run sees exactly the batches an
uninterrupted one would. `Batches.fixed` (or `eval_batches`) draws a fixed list of validation
batches from a separate stream, so validation loss is comparable across evaluations and runs.

>>> ids = np.arange(100) % 7
>>> batches = LMBatches(ids, context=4, batch_size=2, seed=0)
>>> batch = next(batches)
>>> batch["input_ids"].shape, batch["labels"].dtype
(torch.Size([2, 4]), torch.int64)
>>> bool((batch["input_ids"][:, 1:] == batch["labels"][:, :-1]).all())  # y is x shifted by one
True
>>> state = batches.state_dict()
>>> state
{'batcher': 'LMBatches', 'seed': 0, 'step': 1, 'batch_size': 2, 'context': 4, 'n_tokens': 100}
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

IGNORE_INDEX = -100  # labels with this value are not scored (torch cross_entropy's default)
TRAIN_STREAM, EVAL_STREAM = 0, 1  # the two random streams of a batcher: training, fixed eval sets
Batch = dict[str, torch.Tensor]


class Batches(ABC):
    """An infinite, seeded, resumable iterator of batch dicts; subclasses implement `_make`.

    Batch ``k`` is ``_make(numpy.random.default_rng([seed, 0, k]))``: it depends on the seed
    and its index only, so resuming needs ``(seed, step)`` and nothing else.
    """

    def __init__(self, batch_size: int, seed: int):
        for name, value, least in (("batch_size", batch_size, 1), ("seed", seed, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{name} must be an int >= {least}, got {value!r}")
        self.batch_size, self.seed, self.step = batch_size, seed, 0

    @abstractmethod
    def _make(self, rng: np.random.Generator) -> Batch:
        """One batch drawn with ``rng``."""

    def _config(self) -> dict[str, int]:
        """What must be equal for a saved state to mean the same batches (sizes, not seeds)."""
        return {"batch_size": self.batch_size}

    def __iter__(self):
        return self

    def __next__(self) -> Batch:
        batch = self._make(np.random.default_rng([self.seed, TRAIN_STREAM, self.step]))
        self.step += 1
        return batch

    def fixed(self, n_batches: int, seed: int = 0) -> list[Batch]:
        """``n_batches`` batches drawn from the evaluation stream of ``seed``: the same list on
        every call and in every run, and independent of the training stream's position."""
        if n_batches < 1:
            raise ValueError(f"n_batches must be >= 1, got {n_batches}")
        return [self._make(np.random.default_rng([seed, EVAL_STREAM, i])) for i in range(n_batches)]

    def state_dict(self) -> dict[str, Any]:
        """The position in the stream: plain ints (and the batcher's name), safe to torch.save."""
        return {"batcher": type(self).__name__, "seed": self.seed, "step": self.step, **self._config()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from ``state``: the next batch is the one the saved batcher would have made."""
        if state.get("batcher") != type(self).__name__:
            raise ValueError(f"this state was saved by {state.get('batcher')}, not {type(self).__name__}")
        for key, value in self._config().items():
            if state.get(key) != value:
                raise ValueError(
                    f"this state was saved with {key}={state.get(key)!r} but this batcher has "
                    f"{key}={value!r}; resume with the same data and batch settings to get the same batches"
                )
        self.seed, self.step = int(state["seed"]), int(state["step"])

    def __repr__(self) -> str:
        settings = ", ".join(f"{k}={v:,}" for k, v in self._config().items())
        return f"{type(self).__name__}({settings}, seed={self.seed}, step={self.step})"


def model_input(batch: Batch) -> torch.Tensor:
    """What the model's first stack reads from ``batch``: its ``input_ids``, or an image batch's
    ``pixel_values``."""
    return batch["pixel_values"] if "pixel_values" in batch else batch["input_ids"]


def tokens_in(batch: Batch, n_patches: int = 0) -> int:
    """The tokens ``batch`` feeds the model: b x t ids, or b images of ``n_patches`` + 1 tokens
    (the patches and [CLS]) for a vision model."""
    if "pixel_values" in batch:
        return len(batch["pixel_values"]) * (n_patches + 1)
    return batch["input_ids"].numel()


def eval_batches(batches: Batches, n_batches: int, seed: int = 0) -> list[Batch]:
    """A fixed validation set: ``batches.fixed(n_batches, seed)``."""
    return batches.fixed(n_batches, seed)


def _as_ids(ids: Sequence[int] | np.ndarray) -> np.ndarray:
    ids = ids if isinstance(ids, np.ndarray) else np.asarray(ids)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"ids must be a 1-D array of integer token ids, got shape {ids.shape} {ids.dtype}")
    return ids


def _windows(ids: np.ndarray, starts: np.ndarray, width: int) -> np.ndarray:
    """ids[s : s + width] for each start s, as int64."""
    return np.asarray(ids[starts[:, None] + np.arange(width)], dtype=np.int64)  # b width


def _check_context(ids: np.ndarray, context: int, needed: int) -> None:
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise ValueError(f"context must be an int >= 1, got {context!r}")
    if len(ids) < needed:
        raise ValueError(
            f"the data has {len(ids):,} tokens, fewer than the {needed:,} one window of context={context:,} "
            "needs; use a shorter context or more text (is the corpus or its split empty?)"
        )


class LMBatches(Batches):
    """Next-token prediction on random windows of a token array (nanoGPT's ``get_batch``).

    For a random start i: ``input_ids = ids[i : i + t]`` and ``labels = ids[i + 1 : i + 1 + t]``,
    so every position is scored. No attention mask: windows have no padding.
    """

    def __init__(self, ids: np.ndarray | Sequence[int], context: int, batch_size: int, seed: int = 0):
        super().__init__(batch_size, seed)
        self.ids, self.context = _as_ids(ids), context
        _check_context(self.ids, context, context + 1)

    def _config(self) -> dict[str, int]:
        return {"batch_size": self.batch_size, "context": self.context, "n_tokens": len(self.ids)}

    def _make(self, rng: np.random.Generator) -> Batch:
        starts = rng.integers(0, len(self.ids) - self.context, size=self.batch_size)  # b
        window = _windows(self.ids, starts, self.context + 1)  # b t+1
        return {
            "input_ids": torch.from_numpy(np.ascontiguousarray(window[:, :-1])),  # b t
            "labels": torch.from_numpy(np.ascontiguousarray(window[:, 1:])),  # b t
        }


class MLMBatches(Batches):
    """Masked-language-model batches: BERT's recipe on random windows (Devlin et al. 2019, 3.1).

    In each window ``round(mask_prob * n)`` of its n non-special positions are chosen (at least
    one, so no batch is without labels; exactly as BERT's create_pretraining_data.py, not a
    coin per position). A chosen token becomes ``[MASK]`` with probability 0.8, a random token
    with 0.1 (drawn from the ids that are neither special nor the mask), and stays with 0.1.
    ``labels`` hold the original token at chosen positions and -100 elsewhere; special ids are
    never chosen. ``attention_mask`` is all ones (windows have no padding).
    """

    def __init__(
        self,
        ids: np.ndarray | Sequence[int],
        context: int,
        batch_size: int,
        seed: int = 0,
        *,
        vocab_size: int,
        mask_token_id: int,
        special_ids: Sequence[int] = (),
        mask_prob: float = 0.15,
    ):
        super().__init__(batch_size, seed)
        self.ids, self.context = _as_ids(ids), context
        _check_context(self.ids, context, context)
        if not 0 <= mask_token_id < vocab_size:
            raise ValueError(f"mask_token_id={mask_token_id} is not an id of a vocabulary of {vocab_size}")
        if not 0.0 < mask_prob < 1.0:
            raise ValueError(f"mask_prob must be between 0 and 1 (BERT: 0.15), got {mask_prob}")
        self.vocab_size, self.mask_token_id, self.mask_prob = vocab_size, mask_token_id, mask_prob
        self.special_ids = np.asarray(sorted(set(special_ids)), dtype=np.int64)
        self.replacements = np.setdiff1d(np.arange(vocab_size), [*self.special_ids, mask_token_id])
        if len(self.replacements) == 0:
            raise ValueError("every id is special or the mask: there is no token to predict")

    def _config(self) -> dict[str, int]:
        return {
            "batch_size": self.batch_size, "context": self.context, "n_tokens": len(self.ids),
            "vocab_size": self.vocab_size, "mask_token_id": self.mask_token_id,
        }  # fmt: skip

    def _make(self, rng: np.random.Generator) -> Batch:
        b, t = self.batch_size, self.context
        starts = rng.integers(0, len(self.ids) - t + 1, size=b)  # b
        original = _windows(self.ids, starts, t)  # b t
        candidate = ~np.isin(original, self.special_ids)  # b t
        n_candidates = candidate.sum(axis=1)  # b
        n_chosen = np.where(n_candidates > 0, np.maximum(1, np.rint(self.mask_prob * n_candidates)), 0)
        # a random order of each row's positions, specials last: the first n_chosen are chosen
        keys = np.where(candidate, rng.random((b, t)), 2.0)  # b t
        rank = keys.argsort(axis=1).argsort(axis=1)  # b t: position's place in that order
        chosen = rank < n_chosen[:, None]  # b t
        action = rng.random((b, t))  # b t
        to_mask = chosen & (action < 0.8)
        to_random = chosen & (action >= 0.8) & (action < 0.9)
        inputs = original.copy()
        inputs[to_mask] = self.mask_token_id
        inputs[to_random] = self.replacements[rng.integers(0, len(self.replacements), int(to_random.sum()))]
        return {
            "input_ids": torch.from_numpy(inputs),  # b t
            "labels": torch.from_numpy(np.where(chosen, original, IGNORE_INDEX)),  # b t
            "attention_mask": torch.ones(b, t, dtype=torch.long),  # b t
        }


Pair = tuple[list[int], list[int]]


def _check_pairs(pairs: Sequence[tuple[Sequence[int], Sequence[int]]], source_required: bool) -> list[Pair]:
    if len(pairs) == 0:
        raise ValueError(
            "pairs is empty: a task batcher needs at least one (source ids, target ids) pair, "
            "e.g. make_task('copy').pairs(1000, seed=0)"
        )
    checked = []
    for index, pair in enumerate(pairs):
        if len(pair) != 2:
            raise ValueError(f"pair {index} has {len(pair)} parts; each pair is (source ids, target ids)")
        source, target = [int(i) for i in pair[0]], [int(i) for i in pair[1]]
        if not target:
            raise ValueError(f"pair {index} has an empty target: there would be nothing to predict")
        if source_required and not source:
            raise ValueError(f"pair {index} has an empty source: give every example at least one token")
        checked.append((source, target))
    return checked


def _pad(rows: list[list[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad rows to the longest: (ids b t, mask b t with 1 = token, 0 = padding)."""
    width = max(len(row) for row in rows)
    ids = torch.tensor([row + [value] * (width - len(row)) for row in rows], dtype=torch.long)
    mask = torch.tensor([[1] * len(row) + [0] * (width - len(row)) for row in rows], dtype=torch.long)
    return ids, mask


class Seq2SeqBatches(Batches):
    """Encoder-decoder batches from (source, target) pairs, sampled with replacement.

    Targets end with the end-of-sequence id. The decoder reads ``[bos] + target[:-1]`` (teacher
    forcing) and predicts ``target``; sources and targets are right-padded to the longest in
    the batch, with -100 labels at the target's padding:

        source  7 8 9        input_ids          7 8 9    attention_mask          1 1 1
        target  4 5 eos      decoder_input_ids  bos 4 5  decoder_attention_mask  1 1 1
                             labels             4 5 eos
    """

    def __init__(self, pairs, batch_size: int, seed: int = 0, *, pad_id: int, bos_id: int):
        super().__init__(batch_size, seed)
        self.pairs, self.pad_id, self.bos_id = _check_pairs(pairs, source_required=True), pad_id, bos_id

    def _config(self) -> dict[str, int]:
        return {"batch_size": self.batch_size, "n_pairs": len(self.pairs)}

    def _make(self, rng: np.random.Generator) -> Batch:
        chosen = [self.pairs[i] for i in rng.integers(0, len(self.pairs), size=self.batch_size)]
        input_ids, attention_mask = _pad([source for source, _ in chosen], self.pad_id)  # b t
        shifted = [[self.bos_id] + target[:-1] for _, target in chosen]  # teacher forcing
        decoder_input_ids, decoder_mask = _pad(shifted, self.pad_id)  # b u
        labels, _ = _pad([target for _, target in chosen], IGNORE_INDEX)  # b u
        return {
            "input_ids": input_ids,
            "attention_mask": attention_mask,
            "decoder_input_ids": decoder_input_ids,
            "decoder_attention_mask": decoder_mask,
            "labels": labels,
        }


class DecoderTaskBatches(Batches):
    """Decoder-only batches from (source, target) pairs: only the target is scored.

    The sequence is ``source + [sep] + target`` (target ends with eos); the model reads all but
    its last token and predicts all but its first. Labels are -100 where the next token is
    still source or sep, and on right padding:

        sequence   3 1 sep 1 3 eos
        input_ids  3 1 sep 1 3          attention_mask 1 1 1 1 1
        labels     . . 1   3 eos        (. = -100)

    ``sep_id=None`` joins source and target directly (the source then needs a token).
    At generation time feed ``source + [sep]`` unpadded and decode up to eos.
    """

    def __init__(self, pairs, batch_size: int, seed: int = 0, *, pad_id: int, sep_id: int | None):
        super().__init__(batch_size, seed)
        self.pairs = _check_pairs(pairs, source_required=sep_id is None)
        self.pad_id, self.sep_id = pad_id, sep_id

    def _config(self) -> dict[str, int]:
        return {"batch_size": self.batch_size, "n_pairs": len(self.pairs)}

    def _make(self, rng: np.random.Generator) -> Batch:
        inputs, labels = [], []
        for i in rng.integers(0, len(self.pairs), size=self.batch_size):
            source, target = self.pairs[i]
            prefix = source + ([] if self.sep_id is None else [self.sep_id])
            inputs.append((prefix + target)[:-1])
            labels.append([IGNORE_INDEX] * (len(prefix) - 1) + target)
        input_ids, attention_mask = _pad(inputs, self.pad_id)  # b t
        labels, _ = _pad(labels, IGNORE_INDEX)  # b t
        return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}
