"""Synthetic tasks: small, exactly checkable problems for training and interpretability.

Each task has its own vocabulary — a `CharTokenizer` over the task's symbols plus the special
tokens ``<pad> <bos> <sep> <eos>`` — so examples go to and from readable text. An example is
a pair (source ids, target ids), and every target ends with ``<eos>``:

    copy       abca          -> abca
    reverse    abca          -> acba
    sort       cabd          -> abcd              (by token id, i.e. alphabet order)
    addition   123+45=       -> 168               (reverse_answer=True: 861, easier to learn)
    induction  <bos>xqzr     -> xqzr              (a random sequence, then the same again)

Induction is for decoder models: its batches are ``<bos> r r <eos>`` with labels on the
second copy (and eos) only — the first copy is random, so scoring it would only add a floor of
ln(alphabet_size) to the loss (Olsson et al. 2022, "In-context learning and induction heads").

>>> task = make_task("addition", digits=2)
>>> source, target = task.example(np.random.default_rng(0))
>>> task.decode(source), task.decode(target)
('67+34=', '101<eos>')
>>> task.exact_match(task.encode("101<eos><pad>"), target)
True
>>> make_task("copy", length=3)
Traceback (most recent call last):
...
ValueError: task 'copy' has no parameter 'length'; its parameters: alphabet_size, min_length, max_length
"""

from __future__ import annotations

import dataclasses
import string
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import numpy as np

from glassformer.tokenizers.char import CharTokenizer
from glassformer.train.data import Batches, DecoderTaskBatches, Seq2SeqBatches

SPECIAL_TOKENS = ("<pad>", "<bos>", "<sep>", "<eos>")
LETTERS = string.ascii_lowercase + string.ascii_uppercase + string.digits  # the first alphabet_size
ARCHITECTURES = ("decoder", "encoder-decoder")


def _check_int(task: str, name: str, value: object, least: int, most: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least or (most and value > most):
        bounds = f">= {least}" if most is None else f"between {least} and {most}"
        raise ValueError(f"task {task!r}: {name} must be an int {bounds}, got {value!r}")


@dataclass(frozen=True)
class Task(ABC):
    """A synthetic task: subclasses set ``name`` and ``symbols`` and implement `texts`."""

    name: ClassVar[str]
    architectures: ClassVar[tuple[str, ...]] = ARCHITECTURES
    separated: ClassVar[bool] = True  # decoder sequences are source <sep> target (induction: no sep)

    @property
    @abstractmethod
    def symbols(self) -> str:
        """The task's characters, in id order."""

    @abstractmethod
    def texts(self, rng: np.random.Generator) -> tuple[str, str]:
        """One random example as (source text, target text), the target without <eos>."""

    @property
    @abstractmethod
    def max_source_length(self) -> int:
        """Longest source in tokens."""

    @property
    @abstractmethod
    def max_target_length(self) -> int:
        """Longest target in tokens, <eos> included."""

    # -- vocabulary and text ---------------------------------------------------------------

    @cached_property
    def tokenizer(self) -> CharTokenizer:
        """Ids 0 .. len(symbols)-1 for the symbols, then <pad> <bos> <sep> <eos>."""
        return CharTokenizer(self.symbols, special_tokens=SPECIAL_TOKENS, pad_token="<pad>")

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.vocab_size

    pad_id = property(lambda self: self.tokenizer.special_tokens["<pad>"])
    bos_id = property(lambda self: self.tokenizer.special_tokens["<bos>"])
    sep_id = property(lambda self: self.tokenizer.special_tokens["<sep>"])
    eos_id = property(lambda self: self.tokenizer.special_tokens["<eos>"])

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``; the special tokens may appear in it ("abc<eos>")."""
        return self.tokenizer.encode(text, allowed_special="all")

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode([int(i) for i in ids])

    # -- examples ----------------------------------------------------------------------------

    def example(self, rng: np.random.Generator) -> tuple[list[int], list[int]]:
        """One random (source ids, target ids + [eos])."""
        source, target = self.texts(rng)
        return self.encode(source), self.encode(target) + [self.eos_id]

    def pairs(self, n: int, seed: int = 0) -> list[tuple[list[int], list[int]]]:
        """``n`` examples from ``numpy.random.default_rng(seed)``; small tasks repeat examples,
        and two seeds can share some (use `exact_match` on fresh seeds to test generalization)."""
        _check_int(self.name, "n", n, 1)
        rng = np.random.default_rng(seed)
        return [self.example(rng) for _ in range(n)]

    def exact_match(self, predicted: Sequence[int], target: Sequence[int]) -> bool:
        """Whether ``predicted`` equals ``target`` up to the first <eos>, ignoring <pad> and <bos>
        (so a generation that stops at eos, or runs on past it, is judged by its answer)."""

        def answer(ids: Sequence[int]) -> list[int]:
            ids = [int(i) for i in ids]
            ids = ids[: ids.index(self.eos_id)] if self.eos_id in ids else ids
            return [i for i in ids if i not in (self.pad_id, self.bos_id)]

        return answer(predicted) == answer(target)

    def max_seq_len(self, architecture: str = "decoder") -> int:
        """The longest input a model sees: its config's ``max_seq_len`` must be at least this."""
        self._check_architecture(architecture)
        if architecture == "encoder-decoder":
            return max(self.max_source_length, self.max_target_length)
        return self.max_source_length + int(self.separated) + self.max_target_length - 1

    def batches(self, architecture: str, batch_size: int, seed: int = 0, n_pairs: int = 10_000) -> Batches:
        """A batcher over ``pairs(n_pairs, seed)``: `DecoderTaskBatches` or `Seq2SeqBatches`."""
        self._check_architecture(architecture)
        pairs = self.pairs(n_pairs, seed)
        if architecture == "encoder-decoder":
            return Seq2SeqBatches(pairs, batch_size, seed, pad_id=self.pad_id, bos_id=self.bos_id)
        sep_id = self.sep_id if self.separated else None
        return DecoderTaskBatches(pairs, batch_size, seed, pad_id=self.pad_id, sep_id=sep_id)

    def _check_architecture(self, architecture: str) -> None:
        if architecture not in self.architectures:
            raise ValueError(
                f"task {self.name!r} is for {' and '.join(self.architectures)} models, "
                f"not {architecture!r}; choose one of {', '.join(self.architectures)}"
            )


@dataclass(frozen=True)
class _StringTask(Task):
    """A random string of ``min_length .. max_length`` letters from the first ``alphabet_size``
    of a-z A-Z 0-9, and a function of it as the target."""

    alphabet_size: int = 10
    min_length: int = 1
    max_length: int = 8

    def __post_init__(self):
        _check_int(self.name, "alphabet_size", self.alphabet_size, 1, len(LETTERS))
        _check_int(self.name, "min_length", self.min_length, 1)
        _check_int(self.name, "max_length", self.max_length, self.min_length)

    @property
    def symbols(self) -> str:
        return LETTERS[: self.alphabet_size]

    def texts(self, rng: np.random.Generator) -> tuple[str, str]:
        length = int(rng.integers(self.min_length, self.max_length + 1))
        letters = "".join(self.symbols[i] for i in rng.integers(0, self.alphabet_size, size=length))
        return letters, self.transform(letters)

    @abstractmethod
    def transform(self, letters: str) -> str:
        """The target text for a source text."""

    max_source_length = property(lambda self: self.max_length)
    max_target_length = property(lambda self: self.max_length + 1)


@dataclass(frozen=True)
class Copy(_StringTask):
    """Output the input: ``abca -> abca``."""

    name: ClassVar[str] = "copy"

    def transform(self, letters: str) -> str:
        return letters


@dataclass(frozen=True)
class Reverse(_StringTask):
    """Output the input backwards: ``abca -> acba``."""

    name: ClassVar[str] = "reverse"

    def transform(self, letters: str) -> str:
        return letters[::-1]


@dataclass(frozen=True)
class Sort(_StringTask):
    """Output the input's letters in alphabet (= token id) order: ``cabd -> abcd``."""

    name: ClassVar[str] = "sort"

    def transform(self, letters: str) -> str:
        return "".join(sorted(letters, key=self.symbols.index))


@dataclass(frozen=True)
class Addition(Task):
    """``a+b=`` -> the decimal sum, for operands of ``min_digits .. digits`` digits.

    The number of digits of each operand is drawn uniformly first, then the number, so short
    operands are as common as long ones. ``reverse_answer=True`` writes the sum least
    significant digit first, the order in which carries are computed — much easier for a small
    transformer to learn (Lee et al. 2023, "Teaching arithmetic to small transformers").
    """

    name: ClassVar[str] = "addition"
    digits: int = 3
    min_digits: int = 1
    reverse_answer: bool = False

    def __post_init__(self):
        _check_int(self.name, "min_digits", self.min_digits, 1)
        _check_int(self.name, "digits", self.digits, self.min_digits, 18)
        if not isinstance(self.reverse_answer, bool):
            raise ValueError(f"task 'addition': reverse_answer must be a bool, got {self.reverse_answer!r}")

    @property
    def symbols(self) -> str:
        return "0123456789+="

    def _number(self, rng: np.random.Generator) -> int:
        n_digits = int(rng.integers(self.min_digits, self.digits + 1))
        return int(rng.integers(0 if n_digits == 1 else 10 ** (n_digits - 1), 10**n_digits))

    def texts(self, rng: np.random.Generator) -> tuple[str, str]:
        a, b = self._number(rng), self._number(rng)
        total = str(a + b)
        return f"{a}+{b}=", total[::-1] if self.reverse_answer else total

    max_source_length = property(lambda self: 2 * self.digits + 2)
    max_target_length = property(lambda self: self.digits + 2)


@dataclass(frozen=True)
class Induction(Task):
    """A random sequence r of ``length`` letters, then r again: ``<bos> r`` -> ``r``.

    Decoder batches are ``<bos> r r <eos>`` (no <sep>) with labels on the second copy and eos:
    predicting it needs an induction head (find the previous occurrence of the current token,
    copy the token after it).
    """

    name: ClassVar[str] = "induction"
    architectures: ClassVar[tuple[str, ...]] = ("decoder",)
    separated: ClassVar[bool] = False
    alphabet_size: int = 26
    length: int = 16

    def __post_init__(self):
        _check_int(self.name, "alphabet_size", self.alphabet_size, 2, len(LETTERS))
        _check_int(self.name, "length", self.length, 1)

    @property
    def symbols(self) -> str:
        return LETTERS[: self.alphabet_size]

    def texts(self, rng: np.random.Generator) -> tuple[str, str]:
        letters = "".join(self.symbols[i] for i in rng.integers(0, self.alphabet_size, size=self.length))
        return "<bos>" + letters, letters

    max_source_length = property(lambda self: self.length + 1)
    max_target_length = property(lambda self: self.length + 1)


TASKS: dict[str, type[Task]] = {task.name: task for task in (Copy, Reverse, Sort, Addition, Induction)}


def make_task(name: str, **params) -> Task:
    """The task called ``name`` with ``params`` overriding its defaults (`TASKS` lists them)."""
    if name not in TASKS:
        raise ValueError(f"unknown task {name!r}; known tasks: {', '.join(sorted(TASKS))}")
    known = [field.name for field in dataclasses.fields(TASKS[name])]
    for param in params:
        if param not in known:
            raise ValueError(f"task {name!r} has no parameter {param!r}; its parameters: {', '.join(known)}")
    return TASKS[name](**params)
