"""The genre of a Shakespeare passage: comedy, history or tragedy, split by play.

Labels follow the First Folio (1623), which prints 36 plays in three sections,
"Comedies", "Histories" and "Tragedies". All 36 are in the corpus
(`glassformer.train.corpus.shakespeare_texts`); left out are *Pericles* (not in the
Folio; added in 1664) and the poems (the Sonnets, *A Lover's Complaint*, *The Rape of
Lucrece*, *The Passionate Pilgrim*, *The Phoenix and the Turtle*). *Troilus and
Cressida*, printed between the histories and the tragedies under the title "The Tragedie
of Troylus and Cressida", and *Cymbeline* ("The Tragedie of Cymbeline") count as
tragedies, as the Folio titles them: 14 comedies, 10 histories, 12 tragedies.

A passage is ``passage_words`` consecutive words of a play (whitespace-separated, line
breaks kept), from its first act heading on: the title and the list of persons before
it would name the play (and some titles name the genre). The rest after the last whole
passage is dropped.

The split is by play, so that no play gives passages to both sides: with the seed
``split_seed``, ``val_plays_per_genre`` plays of each genre are drawn for validation
(stratified: every genre is on both sides, and validation is balanced). A validation
play gives ``val_passages_per_play`` passages spread evenly over it (0: all of them).

>>> passages("a b c d e f g", 3)
['a b c', 'd e f']
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from glassformer.train.corpus import shakespeare_texts

GENRES = ("comedy", "history", "tragedy")

# The First Folio's catalogue, section by section, in its order: file of the corpus -> genre.
FOLIO_GENRES = {
    **dict.fromkeys(
        (
            "tempest_gut.txt",
            "two_gentlemen_of_verona_gut.txt",
            "merry_wives_of_windsor_gut.txt",
            "measure_for_measure_gut.txt",
            "comedy_of_errors_gut.txt",
            "much_ado_about_nothing_gut.txt",
            "loves_labours_lost_gut.txt",
            "midsummer_nights_dream_gut.txt",
            "merchant_of_venice_gut.txt",
            "as_you_like_it_gut.txt",
            "taming_of_the_shrew_gut.txt",
            "alls_well_that_ends_well_gut.txt",
            "twelfth_night_gut.txt",
            "winters_tale_gut.txt",
        ),
        "comedy",
    ),
    **dict.fromkeys(
        (
            "john_gut.txt",
            "richard_ii_gut.txt",
            "henry_iv_part_1_gut.txt",
            "henry_iv_part_2_gut.txt",
            "henry_v_gut.txt",
            "henry_vi_part_1_gut.txt",
            "henry_vi_part_2_gut.txt",
            "henry_vi_part_3_gut.txt",
            "richard_iii_gut.txt",
            "henry_viii_gut.txt",
        ),
        "history",
    ),
    **dict.fromkeys(
        (
            "troilus_and_cressida_gut.txt",
            "coriolanus_gut.txt",
            "tragedy_of_titus_andronicus_gut.txt",
            "romeo_and_juliet_gut.txt",
            "timon_of_athens_gut.txt",
            "julius_caesar_gut.txt",
            "macbeth_gut.txt",
            "hamlet_gut.txt",
            "lear_gut.txt",
            "othello_gut.txt",
            "antony_and_cleopatra_gut.txt",
            "cymbeline_gut.txt",
        ),
        "tragedy",
    ),
}
LEFT_OUT = {
    "pericles_gut.txt": "not in the First Folio",
    "sonnets_gut.txt": "poems",
    "lovers_complaint_gut.txt": "poem",
    "rape_of_lucrece_gut.txt": "poem",
    "passionate_pilgrim_gut.txt": "poems",
    "phoenix_and_the_turtle_gut.txt": "poem",
}
FIRST_ACT = re.compile(r"^\s*ACT\s+(I|1|FIRST)\b", re.IGNORECASE | re.MULTILINE)
WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Passage:
    """A piece of a play with its genre: ``label`` is the genre's index in `GENRES`."""

    text: str
    genre: str
    play: str

    @property
    def label(self) -> int:
        return GENRES.index(self.genre)


@dataclass(frozen=True)
class GenreSplit:
    """Training and validation passages, and which plays each side holds."""

    train: list[Passage] = field(repr=False)
    val: list[Passage] = field(repr=False)
    train_plays: tuple[str, ...]
    val_plays: tuple[str, ...]

    def __post_init__(self) -> None:
        shared = set(self.train_plays) & set(self.val_plays)
        if shared:  # the point of a split by play
            raise ValueError(f"plays on both sides of the split: {sorted(shared)}")


def play_body(text: str, name: str = "play") -> str:
    """The play from its first act heading on (title and list of persons dropped)."""
    found = FIRST_ACT.search(text)
    if found is None:
        raise ValueError(f"{name}: no first act heading (ACT I / ACT 1 / ACT FIRST) found")
    return text[found.start() :]


def passages(text: str, words: int) -> list[str]:
    """Consecutive pieces of ``words`` words each (their line breaks kept); a shorter rest is dropped."""
    if isinstance(words, bool) or not isinstance(words, int) or words < 1:
        raise ValueError(f"passage_words must be a positive integer, got {words!r}")
    spans = [m.span() for m in WORD.finditer(text)]
    return [text[spans[i][0] : spans[i + words - 1][1]] for i in range(0, len(spans) - words + 1, words)]


def spread(items: list, n: int) -> list:
    """``n`` items spread evenly from first to last (all of them if n is 0 or too many)."""
    if n <= 0 or n >= len(items):
        return list(items)
    return [items[int(i)] for i in np.linspace(0, len(items) - 1, n).round()]


def genre_split(
    texts: dict[str, str],
    passage_words: int = 48,
    val_plays_per_genre: int = 3,
    val_passages_per_play: int = 40,
    split_seed: int = 0,
) -> GenreSplit:
    """Passages of the Folio's plays in ``texts`` (file name -> text), split by play."""
    missing = sorted(set(FOLIO_GENRES) - set(texts))
    if missing:
        raise ValueError(f"the corpus lacks {len(missing)} of the Folio's plays: {', '.join(missing)}")
    for name, value in (("val_plays_per_genre", val_plays_per_genre), ("split_seed", split_seed)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    rng = np.random.default_rng(split_seed)
    val_plays: list[str] = []
    for genre in GENRES:
        plays = sorted(p for p, g in FOLIO_GENRES.items() if g == genre)
        if not 1 <= val_plays_per_genre < len(plays):
            raise ValueError(
                f"val_plays_per_genre={val_plays_per_genre}: each genre needs plays on both sides "
                f"(the {genre} has {len(plays)}), so choose 1..{len(plays) - 1}"
            )
        val_plays += sorted(plays[i] for i in rng.permutation(len(plays))[:val_plays_per_genre])
    train_plays = sorted(set(FOLIO_GENRES) - set(val_plays))
    train, val = [], []
    for play in sorted(FOLIO_GENRES):
        pieces = passages(play_body(texts[play], play), passage_words)
        if play in val_plays:
            pieces = spread(pieces, val_passages_per_play)
        chosen = val if play in val_plays else train
        chosen += [Passage(text, FOLIO_GENRES[play], play) for text in pieces]
    return GenreSplit(train, val, tuple(train_plays), tuple(val_plays))


def shakespeare_genres(data_dir: str | Path | None = None, **params) -> GenreSplit:
    """`genre_split` of the Shakespeare corpus (downloaded on first use); ``params`` are
    its keyword arguments (a preset's ``data.task`` table)."""
    known = ("passage_words", "val_plays_per_genre", "val_passages_per_play", "split_seed")
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(f"unknown genre task parameter(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return genre_split(shakespeare_texts(data_dir), **params)
