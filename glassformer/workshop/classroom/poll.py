"""The class's poll, "what comes next?": the teacher asks, every student guesses the next token
of the class's text, then the model's own token is drawn and shown beside the class's counts.

A `Poll` is opened on the class's model and text: one forward pass (`next_scores`, on the model
thread) gives the model's next-token logits at the text's last position, kept whole, so any
guess maps to the model's token and its probability without another pass; its `TOP` likeliest
tokens are what the teacher sees beside the guesses. A new poll replaces the old one.

**A guess as a token.** A guess is a short text a student types (`request_types.PollGuess`: at
most 40 characters): the words they expect after the text. It is read as the model would read
it after the text: the first token of ``tokenize(text + guess)`` beyond the text's own tokens.
A student who types "Paris" after "The capital of France is" means " Paris" (the space the
model's token carries), so a guess that starts with no space after a text that ends with none
is read both ways, joined and after a space, and the reading the model finds likelier wins (so
"al" after "The capit" stays "al"). Only the text's last `TAIL_CHARS` characters are tokenized
with the guess: a token never spans further, and a guess costs the same after a long text.
Where the text's tokens are no prefix of the reading (a merge across the join), the guess's own
first token is taken; a guess the tokenizer cannot read maps to no token and is counted by its
text alone.

Each client (`door/guard.py`: "teacher", or "student:<id>") has one guess; a new one replaces
theirs, at most one per `GUESS_EVERY_S` (429), at most `MAX_GUESSES` clients per poll (429).
No names: the guesses are counted by the token they map to, and a client's id never leaves the
server. The reveal draws the model's token with the class's sampling settings
(`walk/prediction.next_token`, the pipeline the walk and generation use; greedy when the class
has none) and closes the poll.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch

from glassformer.nn.trace import evaluating
from glassformer.sampling import GenerationSettings, generation_settings
from glassformer.workshop.door.http import RequestError
from glassformer.workshop.door.rights import TEACHER
from glassformer.workshop.walk.prediction import next_token

TOP = 10  # the model's likeliest tokens shown
GUESS_EVERY_S = 1.0  # one guess per client per second
MAX_GUESSES = 2000  # clients that may answer one poll: a class of hundreds, and a bound on memory
TAIL_CHARS = 200  # the text's characters tokenized with a guess (a token spans far fewer)
NO_POLL = 'no poll runs in this class: the teacher opens one with "Ask the class: what comes next?"'


@dataclass
class Guess:
    text: str
    id: int | None  # the model's token it maps to (None: the tokenizer cannot read it)


@dataclass
class Poll:
    """One "what comes next?" on ``model``'s reading of ``question``: its next-token ``logits``
    (v), the ``seen`` ids (1 t) the sampling pipeline's penalty reads, its tokens' ``labels``."""

    model: str
    question: str
    logits: torch.Tensor
    seen: torch.Tensor
    tail_ids: list[int]  # the tokens of the text's last TAIL_CHARS characters
    encode: Any  # str -> ids, as the model reads a text
    label: Any  # id -> the token's text, as the walk shows it
    open: bool = True
    revealed: dict[str, Any] | None = None
    guesses: dict[str, Guess] = field(default_factory=dict)  # client -> their guess
    last_guess: dict[str, float] = field(default_factory=dict)  # client -> when (monotonic)
    shared_id: int | None = None  # its number in Redis, served by several workers (`broadcast.py`)

    def __post_init__(self) -> None:
        self.probs = torch.softmax(self.logits.float(), dim=-1)  # v: the model's own distribution

    def token(self, i: int | None) -> dict[str, Any] | None:
        return None if i is None else {"text": self.label(i), "id": i, "p": float(self.probs[i])}

    def top(self) -> list[dict[str, Any]]:
        values = torch.topk(self.probs, min(TOP, self.probs.numel()))
        return [self.token(int(i)) for i in values.indices]

    def read(self, guess: str) -> int | None:
        """The model's token ``guess`` maps to (the module docstring says how), None if none."""
        tail = self.question[-TAIL_CHARS:]
        readings = [tail + guess]
        if tail and not tail[-1].isspace() and not guess[0].isspace():
            readings.append(f"{tail} {guess}")
        n, found = len(self.tail_ids), []
        for reading in readings:
            ids = self._ids(reading)
            if ids is not None and ids[:n] == self.tail_ids and len(ids) > n:
                found.append(ids[n])
        if not found:
            found = (self._ids(guess) or [])[:1]
        found = [i for i in found if 0 <= i < self.probs.numel()]
        return max(found, key=lambda i: float(self.probs[i])) if found else None

    def _ids(self, text: str) -> list[int] | None:
        try:
            return list(self.encode(text))
        except (ValueError, TypeError, KeyError):  # a character this tokenizer does not have
            return None

    def guess(self, client: str, text: str, now: float | None = None) -> None:
        """``client``'s guess ``text`` (replacing theirs): 409 once closed, 429 too soon or too many."""
        if not self.open:
            raise RequestError(
                "this poll is closed"
                + (" and its token revealed" if self.revealed else "")
                + ": wait for the teacher's next question",
                status=409,
            )
        now = time.monotonic() if now is None else now
        if now - self.last_guess.get(client, -GUESS_EVERY_S) < GUESS_EVERY_S:
            raise RequestError(f"one guess a second: wait {GUESS_EVERY_S:g} s and send it again", status=429)
        if client not in self.guesses and len(self.guesses) >= MAX_GUESSES:
            raise RequestError(f"this poll has {MAX_GUESSES} answers already: it takes no more", status=429)
        self.last_guess[client] = now
        self.guesses[client] = Guess(text, self.read(text))

    def sync_guesses(self, kept: dict[str, str]) -> None:
        """The class's guesses as kept in Redis ({client: text}, `broadcast.py`), each mapped
        here (a guess this copy mapped already is not read again)."""
        mine = self.guesses
        self.guesses = {
            client: mine[client]
            if client in mine and mine[client].text == text
            else Guess(text, self.read(text))
            for client, text in kept.items()
        }

    def groups(self) -> list[dict[str, Any]]:
        """The guesses grouped by the token they map to (a guess of no token: by its text), the
        commonest first: each group's commonest text, its count, the model's token and p."""
        by_token: dict[Any, Counter] = {}
        for guess in self.guesses.values():
            key = ("id", guess.id) if guess.id is not None else ("text", guess.text)
            by_token.setdefault(key, Counter())[guess.text] += 1
        groups = []
        for (kind, value), texts in by_token.items():
            token = self.token(value) if kind == "id" else None
            groups.append(
                {
                    "text": texts.most_common(1)[0][0],
                    "count": sum(texts.values()),
                    "token": None if token is None else token["text"],
                    "id": None if token is None else token["id"],
                    "p": None if token is None else token["p"],
                }
            )
        return sorted(groups, key=lambda g: (-g["count"], -(g["p"] or 0.0), g["text"]))

    def news(self) -> dict[str, Any]:
        """What the class's event streams say of it: ``event: poll``."""
        return {"open": self.open, "answers": len(self.guesses), "revealed": self.revealed}

    def view(self, role: str, client: str) -> dict[str, Any]:
        """The poll as ``role`` sees it: the teacher everything; a student their own guess and
        the count, and only after the reveal the model's tokens and the class's counts."""
        common = {"open": self.open, "question": self.question, "answers": len(self.guesses)}
        if role == TEACHER:
            return {**common, "guesses": self.groups(), "model": self.top(), "revealed": self.revealed}
        mine = self.guesses.get(client)
        answer = {**common, "yours": None if mine is None else mine.text, "revealed": self.revealed}
        if self.revealed is not None:
            mapped = None if mine is None else self.token(mine.id)
            answer |= {
                "guesses": self.groups(),
                "model": self.top(),
                "yours_token": mapped,
                "matched": mapped is not None and mapped["id"] == self.revealed["id"],
            }
        return answer

    def close(self) -> bool:
        """No more guesses; whether that changed anything."""
        was, self.open = self.open, False
        return was

    def reveal(self, token: int) -> None:
        """The model's drawn ``token`` is shown; the poll takes no more guesses."""
        self.open = False
        self.revealed = self.token(token)


def next_scores(lm, text: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's next-token logits after ``text`` (v) and the ids it read (1 t): one forward
    pass, on the model thread."""
    inputs = lm.inputs
    ids = inputs.single(text)
    with torch.no_grad(), evaluating(lm.net):
        output = inputs.forward(ids)  # 1 t v
    return output[0, -1].detach().clone(), ids


def open_poll(lm, model: str, text: str) -> Poll:
    """A new poll on ``lm`` (named ``model``) reading ``text`` (on the model thread)."""
    logits, seen = next_scores(lm, text)

    def encode(piece: str) -> list[int]:
        return lm.tokenizer.encode(piece, allowed_special="all")

    def label(i: int) -> str:
        return lm.inputs.labels([i])[0]

    return Poll(model, text, logits, seen, encode(text[-TAIL_CHARS:]), encode, label)


def reveal_settings(sampling: dict[str, Any]) -> GenerationSettings:
    """The class's sampling as the walk reads it (`generation_settings`); greedy without any."""
    if not sampling:
        return generation_settings(max_new_tokens=1, temperature=0.0)
    return generation_settings(max_new_tokens=1, **sampling)


def draw(poll: Poll, settings: GenerationSettings) -> int:
    """The token the model picks for the poll's text with ``settings``: the first step of a
    generation (`prediction.next_token`, `glassformer.sampling.pipeline`)."""
    return next_token(poll.logits, poll.seen, settings, 0)[1]
