"""Train a byte-level BPE: start from the 256 bytes, merge the most frequent adjacent pair, repeat.

>>> tok = train_bpe("low lower lowest " * 20, vocab_size=262, progress=False)
>>> [tok.id_to_token(i) for i in range(256, 262)]
['lo', 'low', ' low', ' lowe', ' lower', ' lowes']
>>> tok.tokens(" lowest low")
[' lowes', 't', ' low']

The vocabulary is laid out as: ids 0..255 the single bytes (id = byte value), then one id
per merge in the order learned, then the special tokens. ``vocab_size`` counts all of them.

Which pair wins a round: the highest count; on a tie, the smallest pair of byte strings
(compared as (left bytes, right bytes)), so training is deterministic. A merge whose result
already is a token (the same bytes reached by another split: "ab"+"c" and "a"+"bc") reuses its
id, as HF's trainer does: the vocabulary grows by one token per *new* byte string.

Two trainers give the same merges (tests check it):

- `train_bpe_naive` (minbpe's way): each round recounts every pair of the whole corpus.
- `train_bpe`: counts each distinct pre-token once, with its frequency; keeps the pair counts
  and an index pair -> words containing it; after a merge it recounts only the words that
  contained the pair, and a heap with lazy invalidation finds the next best pair.
"""

from __future__ import annotations

import heapq
import warnings
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence

from tqdm.auto import tqdm

from glassformer.tokenizers.bpe import ByteBPE
from glassformer.tokenizers.bpe_merge import SINGLE_BYTES
from glassformer.tokenizers.byte_unicode import reject_surrogates
from glassformer.tokenizers.pretokenize import check_covers, split
from glassformer.tokenizers.special import special_regex


def train_bpe(
    text: str | Iterable[str],
    vocab_size: int,
    pattern: str = "gpt2",
    special_tokens: Sequence[str] | None = None,
    progress: bool = True,
) -> ByteBPE:
    """Learn ``vocab_size - 256 - len(special_tokens)`` new tokens from ``text`` (a string or
    an iterable of strings, e.g. the lines of a file). Special-token text in the corpus is cut
    out before counting, so no merge ever spans it. ``progress`` shows a tqdm bar (on a TTY)."""
    special_tokens = list(special_tokens or ())
    target = _target_size(vocab_size, special_tokens)
    pieces = _count_pieces(text, pattern, special_tokens)
    words = [list(piece.encode("utf-8")) for piece in pieces]  # token ids; the bytes at first
    freqs = list(pieces.values())
    token_bytes = list(SINGLE_BYTES)  # id -> bytes
    token_id = {token: i for i, token in enumerate(token_bytes)}  # bytes -> id

    pair_counts: defaultdict[tuple[int, int], int] = defaultdict(int)
    words_with: defaultdict[tuple[int, int], set[int]] = defaultdict(set)  # may hold stale words
    for w, (ids, freq) in enumerate(zip(words, freqs, strict=True)):
        for pair in zip(ids, ids[1:], strict=False):
            pair_counts[pair] += freq
            words_with[pair].add(w)

    def entry(pair: tuple[int, int]) -> tuple:  # heap order: highest count, then smallest bytes
        return (-pair_counts[pair], token_bytes[pair[0]], token_bytes[pair[1]], pair)

    heap = [entry(pair) for pair in pair_counts]
    heapq.heapify(heap)
    merges: list[tuple[int, int]] = []
    with tqdm(total=target - 256, desc="BPE merges", unit="merge", disable=None if progress else True) as bar:
        while len(token_bytes) < target and heap:
            negative_count, _, _, pair = heapq.heappop(heap)
            count = pair_counts.get(pair, 0)
            if count != -negative_count:  # stale: counts only fall, so re-queue the true one
                if count > 0:
                    heapq.heappush(heap, entry(pair))
                continue
            new = _add_token(token_bytes[pair[0]] + token_bytes[pair[1]], token_bytes, token_id)
            merges.append(pair)
            changes = _merge_in_words(pair, new, words, freqs, words_with)
            for changed, delta in changes.items():
                pair_counts[changed] += delta
                if pair_counts[changed] == 0:
                    del pair_counts[changed]
                elif delta > 0:
                    heapq.heappush(heap, entry(changed))
            bar.update(len(token_bytes) - 256 - bar.n)
    return _build(token_bytes, merges, target, pattern, special_tokens)


def train_bpe_naive(
    text: str | Iterable[str],
    vocab_size: int,
    pattern: str = "gpt2",
    special_tokens: Sequence[str] | None = None,
) -> ByteBPE:
    """The reference trainer (minbpe's loop): recount all pairs of all pre-tokens every round.
    Same result as `train_bpe`, O(merges x corpus) time: for small texts and tests."""
    special_tokens = list(special_tokens or ())
    target = _target_size(vocab_size, special_tokens)
    chunks = [
        list(piece.encode("utf-8")) for piece in _count_pieces(text, pattern, special_tokens).elements()
    ]
    token_bytes, merges = list(SINGLE_BYTES), []
    token_id = {token: i for i, token in enumerate(token_bytes)}
    while len(token_bytes) < target:
        counts = Counter(pair for ids in chunks for pair in zip(ids, ids[1:], strict=False))
        if not counts:
            break
        pair = min(counts, key=lambda p: (-counts[p], token_bytes[p[0]], token_bytes[p[1]]))
        new = _add_token(token_bytes[pair[0]] + token_bytes[pair[1]], token_bytes, token_id)
        merges.append(pair)
        chunks = [merge_pair(ids, pair, new) for ids in chunks]
    return _build(token_bytes, merges, target, pattern, special_tokens)


def _merge_in_words(
    pair: tuple[int, int],
    new: int,
    words: list[list[int]],
    freqs: list[int],
    words_with: defaultdict[tuple[int, int], set[int]],
) -> defaultdict[tuple[int, int], int]:
    """Merge ``pair`` into ``new`` in every word that holds it (updating ``words`` and the index
    ``words_with``); return how much each pair's count changed."""
    changes: defaultdict[tuple[int, int], int] = defaultdict(int)
    for w in words_with.pop(pair, ()):
        old = words[w]
        new_ids = merge_pair(old, pair, new)
        if len(new_ids) == len(old):
            continue  # a stale index entry: this word lost the pair to an earlier merge
        for before in zip(old, old[1:], strict=False):
            changes[before] -= freqs[w]
        for after in zip(new_ids, new_ids[1:], strict=False):
            changes[after] += freqs[w]
            words_with[after].add(w)
        words[w] = new_ids
    return changes


def merge_pair(ids: list[int], pair: tuple[int, int], new: int) -> list[int]:
    """Replace each occurrence of ``pair`` in ``ids``, left to right, by ``new``.

    >>> merge_pair([1, 1, 1, 2], (1, 1), 9)
    [9, 1, 2]
    """
    a, b = pair
    out, i, n = [], 0, len(ids)
    while i < n:
        if ids[i] == a and i + 1 < n and ids[i + 1] == b:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


def _target_size(vocab_size: int, special_tokens: list[str]) -> int:
    """How many ordinary tokens (bytes + merges) to reach."""
    if len(set(special_tokens)) != len(special_tokens):
        raise ValueError(f"special_tokens has duplicates: {special_tokens}")
    target = vocab_size - len(special_tokens)
    if target < 256:
        raise ValueError(
            f"vocab_size={vocab_size} leaves no room: the 256 byte tokens and {len(special_tokens)} special "
            f"tokens need at least {256 + len(special_tokens)}"
        )
    return target


def _count_pieces(text: str | Iterable[str], pattern: str, special_tokens: list[str]) -> Counter[str]:
    """Each distinct pre-token with its frequency. Special-token text is cut out first."""
    texts = [text] if isinstance(text, str) else text
    cutter = special_regex(frozenset(special_tokens)) if special_tokens else None  # longest first
    counts: Counter[str] = Counter()
    for item in texts:
        if not isinstance(item, str):
            raise TypeError(
                f"train_bpe takes a str or an iterable of str, got an item of type {type(item).__name__}"
            )
        reject_surrogates(item)
        for chunk in cutter.split(item) if cutter else (item,):
            pieces = split(chunk, pattern)
            check_covers(chunk, pieces, pattern)
            counts.update(pieces)
    return counts


def _add_token(data: bytes, token_bytes: list[bytes], token_id: dict[bytes, int]) -> int:
    """The id of ``data``: a new one, or the existing one if a different split made it before."""
    if data not in token_id:
        token_id[data] = len(token_bytes)
        token_bytes.append(data)
    return token_id[data]


def _build(token_bytes, merges, target, pattern, special_tokens) -> ByteBPE:
    if len(token_bytes) < target:
        warnings.warn(
            f"the text ran out of pairs to merge after {len(token_bytes) - 256} new tokens: the vocabulary "
            f"has {len(token_bytes) + len(special_tokens)} tokens, not {target + len(special_tokens)} "
            "(give more text or a smaller vocab_size)",
            stacklevel=3,
        )
    specials = {token: len(token_bytes) + i for i, token in enumerate(special_tokens)}
    return ByteBPE(
        vocab={token: i for i, token in enumerate(token_bytes)},
        merges=[(token_bytes[a], token_bytes[b]) for a, b in merges],
        pattern=pattern,
        special_tokens=specials,
    )
