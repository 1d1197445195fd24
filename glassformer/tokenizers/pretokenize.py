"""Pre-tokenization: the regex that cuts text into pieces before BPE merges bytes inside each.

BPE never merges across a piece boundary, so "dog." can become "dog" + "." but never "g.".
GPT-2 introduced the idea (Radford et al. 2019, section 2.2) to stop the vocabulary filling
up with "dog.", "dog!", "dog?" ...; every byte-level BPE since uses a variant of its regex.

>>> [piece for piece, start, end in pretokenize("Hello world, it's 2024!")]
['Hello', ' world', ',', ' it', "'s", ' 2024', '!']
>>> pretokenize("I'm 42", "cl100k")
[('I', 0, 1), ("'m", 1, 3), (' ', 3, 4), ('42', 4, 6)]
>>> split("year 2024", "smollm")
['year', ' ', '2', '0', '2', '4']

``pattern`` is one of the names in `PATTERNS` or a regex of your own (Python's ``regex``
package syntax: ``\\p{L}`` is any letter, ``\\p{N}`` any number, ``\\s`` any white space).
"""

from __future__ import annotations

import functools

import regex

PATTERNS: dict[str, str] = {
    # GPT-2 (openai/gpt-2 src/encoder.py): English contractions, then runs of letters, of
    # numbers, of other symbols (each with at most one leading space), then white space; the
    # lookahead leaves the last space of a run to start the next word (" " + "world").
    "gpt2": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
    # GPT-4's cl100k_base (tiktoken_ext/openai_public.py): case-insensitive contractions, one
    # non-letter may lead a word ("_name", "(x"), numbers in groups of at most 3 digits, and
    # newlines kept apart from the other white space.
    "cl100k": (
        r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
        r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
    ),
    # SmolLM / SmolLM2 (HF tokenizer.json): Sequence[Digits(individual_digits=True), ByteLevel],
    # i.e. first cut out every single number character, then GPT-2's regex inside each remaining
    # piece. As one regex: GPT-2's with " ?\p{N}+" replaced by "\p{N}", and a digit counting as
    # the end of a piece for the white-space lookahead ("a   1" -> "a", "   ", "1").
    "smollm": r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?![^\s\p{N}])|\s+""",
}


def pattern_name(pattern: str) -> str | None:
    """The name of a pattern given by name or by its exact regex; None for a custom regex."""
    if pattern in PATTERNS:
        return pattern
    return next((name for name, regex_ in PATTERNS.items() if regex_ == pattern), None)


@functools.lru_cache(maxsize=32)
def compile_pattern(pattern: str) -> regex.Pattern:
    """A named pattern ("gpt2", "cl100k", "smollm") or a regex, compiled with ``regex``.

    >>> compile_pattern("gpt2").findall("a  b")
    ['a', ' ', ' b']
    """
    if not isinstance(pattern, str) or not pattern:
        raise ValueError(f"pattern must be a name ({', '.join(PATTERNS)}) or a regex string, got {pattern!r}")
    if pattern in PATTERNS:
        return regex.compile(PATTERNS[pattern])
    if regex.fullmatch(r"[A-Za-z0-9_]+", pattern):
        # a bare word compiles as a regex that matches only itself: almost surely a typo'd name
        raise ValueError(f"unknown pattern name {pattern!r}; named patterns: {', '.join(PATTERNS)}")
    try:
        return regex.compile(pattern)
    except regex.error as error:
        raise ValueError(f"pattern {pattern!r} is not a valid regex: {error}") from None


def split(text: str, pattern: str = "gpt2") -> list[str]:
    """The pieces of ``text`` (fast path: no spans).

    A regex with capture groups still yields whole matches (``findall`` would return groups).
    Characters the regex does not match are dropped: use `check_covers` for custom patterns.
    """
    compiled = compile_pattern(pattern)
    if compiled.groups:
        return [match.group() for match in compiled.finditer(text)]
    return compiled.findall(text)


def pretokenize(text: str, pattern: str = "gpt2") -> list[tuple[str, int, int]]:
    """Pieces of ``text`` with their character spans: ``[(piece, start, end), ...]``,
    ``text[start:end] == piece``.

    >>> pretokenize(" hi there")
    [(' hi', 0, 3), (' there', 3, 9)]
    """
    return [(match.group(), match.start(), match.end()) for match in compile_pattern(pattern).finditer(text)]


def check_covers(text: str, pieces: list[str], pattern: str) -> None:
    """Raise if the pieces leave out characters of ``text`` (a custom regex that matches too little).

    The named patterns match every character; tiktoken silently drops what a regex skips.

    >>> check_covers("a-b", split("a-b", r"\\w+"), r"\\w+")
    Traceback (most recent call last):
    ...
    ValueError: pattern '\\\\w+' skips characters of the text (first: '-' at 1); ...
    """
    if sum(map(len, pieces)) == len(text):
        return
    position = 0
    for match in compile_pattern(pattern).finditer(text):
        if match.start() != position:
            break
        position = match.end()
    raise ValueError(
        f"pattern {pattern!r} skips characters of the text (first: {text[position]!r} at {position}); "
        "they would vanish from the tokens: end the regex with a catch-all alternative such as |\\s+|."
    )
