"""Training data: a corpus tokenized once into a memory-mapped file, and seeded batchers.

`token_file` encodes a text once and caches the ids on disk (nanoGPT's ``train.bin``); the
batchers turn ids (or task pairs) into batches. Every batcher yields the same schema, which the
trainer consumes without knowing which batcher made it:

    input_ids                b t  long   the model's input (the encoder's, for encoder-decoder)
    labels                   b t  long   the token to predict at each position; -100 = not scored
    attention_mask           b t  long   1 = token, 0 = padding            (MLM and task batchers)
    decoder_input_ids        b u  long   [bos] + target[:-1]               (Seq2SeqBatches only)
    decoder_attention_mask   b u  long   1 = token, 0 = padding            (Seq2SeqBatches only)

For encoder-decoder batches ``labels`` is b u: it lines up with ``decoder_input_ids``.

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

import hashlib
import json
import os
import re
import tempfile
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from glassformer.atomic import write_text_atomic
from glassformer.tokenizers.base import Tokenizer

IGNORE_INDEX = -100  # labels with this value are not scored (torch cross_entropy's default)
TOKEN_FILE_FORMAT = "glassformer-tokens"
TOKEN_FILE_VERSION = 1
TRAIN_STREAM, EVAL_STREAM = 0, 1  # the two random streams of a batcher: training, fixed eval sets
# A cut after a newline with a non-space character on both sides: no pre-tokenizer (GPT-2's,
# cl100k's) nor WordPiece's whitespace split joins tokens across it, so encoding chunk by chunk
# gives the ids of encoding the whole text. ("a  \nb" would not do: GPT-2's \s+(?!\S) reads
# the spaces differently at the end of a chunk.)
CHUNK_BOUNDARY = re.compile(r"(?<=\S)\n(?=\S)")
Batch = dict[str, torch.Tensor]


# -- tokenize once, memory-map ----------------------------------------------------------------


def token_file(text: str, tokenizer: Tokenizer, path: str | Path, chunk_chars: int = 1 << 20) -> np.memmap:
    """The ids of ``text``, encoded once and cached at ``path`` (raw uint16/uint32), memory-mapped.

    Beside ``path`` a sidecar ``path + ".json"`` records the dtype, the length and two sha256
    fingerprints: of the tokenizer (its ``to_dict`` as JSON) and of the text. The cache is used
    only when both match; otherwise the text is encoded again, in chunks of about
    ``chunk_chars`` characters (with a progress bar on a terminal). Both files are written
    atomically, the sidecar last, so a crash leaves the old cache or none, never half a file.

    Special-token text inside the corpus ("<|endoftext|>" in a web page) is encoded as ordinary
    text: a ByteBPE gets ``disallowed_special=()`` (by default it would raise), WordPiece gets
    ``allowed_special="none", add_special_tokens=False`` (no [CLS]/[SEP] per chunk).
    """
    path = Path(path)
    if not text:
        raise ValueError(f"the text for {path.name} is empty: there is nothing to train on")
    dtype = np.dtype(np.uint16 if tokenizer.vocab_size <= 1 << 16 else np.uint32)
    meta = {
        "format": TOKEN_FILE_FORMAT,
        "version": TOKEN_FILE_VERSION,
        "dtype": dtype.name,
        "tokenizer_sha256": tokenizer_fingerprint(tokenizer),
        "text_sha256": hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest(),
    }
    sidecar = path.with_name(path.name + ".json")
    cached = _read_meta(sidecar)
    if cached is not None and {k: cached.get(k) for k in meta} == meta and _size_matches(path, cached):
        return np.memmap(path, dtype=dtype, mode="r", shape=(cached["length"],))

    options = _plain_text_options(tokenizer)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    length = 0
    quiet = True if len(text) <= chunk_chars else None  # None: a bar on a terminal only
    bar = tqdm(total=len(text), unit="char", unit_scale=True, desc=f"tokenizing {path.name}", disable=quiet)
    try:
        with os.fdopen(fd, "wb") as handle, bar:
            for chunk in _chunks(text, chunk_chars):
                ids = np.asarray(tokenizer.encode(chunk, **options), dtype=dtype)
                handle.write(ids.tobytes())
                length += len(ids)
                bar.update(len(chunk))
            handle.flush()
            os.fsync(handle.fileno())
        if length == 0:
            raise ValueError(f"the text for {path.name} encodes to no tokens: there is nothing to train on")
        sidecar.unlink(missing_ok=True)  # from here until the new sidecar, no cache is valid
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    write_text_atomic(sidecar, json.dumps({**meta, "length": length}, indent=1))
    return np.memmap(path, dtype=dtype, mode="r", shape=(length,))


def tokenizer_fingerprint(tokenizer: Tokenizer) -> str:
    """sha256 of the tokenizer's kind and ``to_dict()`` as canonical JSON: it changes whenever the
    vocabulary, the merges or a setting changes."""
    data = {"type": tokenizer.kind, **tokenizer.to_dict()}
    return hashlib.sha256(json.dumps(data, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _plain_text_options(tokenizer: Tokenizer) -> dict[str, Any]:
    if tokenizer.kind == "bpe":
        return {"disallowed_special": ()}
    if tokenizer.kind == "wordpiece":
        return {"allowed_special": "none", "add_special_tokens": False}
    return {}


def _chunks(text: str, chunk_chars: int):
    """Pieces of about ``chunk_chars`` characters, cut only at a `CHUNK_BOUNDARY`."""
    start = 0
    while start < len(text):
        match = CHUNK_BOUNDARY.search(text, start + max(1, chunk_chars))
        end = match.end() if match else len(text)
        yield text[start:end]
        start = end


def _read_meta(sidecar: Path) -> dict[str, Any] | None:
    try:
        return json.loads(sidecar.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _size_matches(path: Path, meta: dict[str, Any]) -> bool:
    length = meta.get("length")
    if not isinstance(length, int) or length < 1 or not path.is_file():
        return False
    return path.stat().st_size == length * np.dtype(meta["dtype"]).itemsize


# -- batchers -----------------------------------------------------------------------------------


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
