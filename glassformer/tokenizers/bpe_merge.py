"""The BPE merge loop: the parts of one pre-token merge, lowest-ranked adjacent pair first.

A piece's UTF-8 bytes start as one part per byte; the adjacent pair with the lowest rank is
merged into one part, again and again, until no adjacent pair has a rank (Sennrich et al.
2016, on bytes as in GPT-2). On a tie the leftmost pair merges first, as in tiktoken.

A pair's rank comes from one of two sources (`pair_ranker`), as in the two reference
implementations:

- ``merges=None`` (tiktoken): rank(a, b) = vocab[a + b], the id of the merged token;
- ``merges=[(a, b), ...]`` (GPT-2's vocab.bpe, HF tokenizer.json): rank(a, b) = position of
  (a, b) in the list; only listed pairs merge.

>>> rank = pair_ranker({bytes([b]): b for b in range(256)} | {b"ab": 256, b"abc": 257})
>>> merge([b"a", b"b", b"c", b"a", b"b"], rank)
[b'abc', b'ab']
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Sequence
from typing import Any

NO_MERGE = 1 << 62  # the rank of a pair that never merges
LONG_PIECE = 256  # pieces longer than this (in parts) merge with a heap: O(n log n), not O(n^2)
PARTS_RECORDED = 32  # a recorded step lists every part only in pieces this short: the record stays
# linear in the text (a 1,000-byte piece would list ~500,000 parts over its merges)
SINGLE_BYTES = [bytes([b]) for b in range(256)]  # byte value -> its one-byte part

PairRank = Callable[[bytes, bytes], int]


def pair_ranker(vocab: dict[bytes, int], merges: Sequence[tuple[bytes, bytes]] | None = None) -> PairRank:
    """rank(a, b): tiktoken's (the id of a + b) when ``merges`` is None, else the position
    of (a, b) in ``merges``; `NO_MERGE` for a pair that never merges."""
    ranks: dict[Any, int]
    if merges is None:
        ranks = vocab
        return lambda a, b: ranks.get(a + b, NO_MERGE)
    ranks = {pair: rank for rank, pair in reversed(list(enumerate(merges)))}  # first listing wins
    return lambda a, b: ranks.get((a, b), NO_MERGE)


def merge(parts: list[bytes], pair_rank: PairRank, steps: list[dict] | None = None) -> list[bytes]:
    """Merge adjacent parts, lowest rank first (leftmost on ties), until no pair has a rank.

    ``steps``, if given, receives one ``{"merge": [a, b], "rank": r, "at": byte offset}`` per
    merge (``at``: where in the piece the merged part starts), and ``"parts"``: every part after
    it, in pieces of at most `PARTS_RECORDED` parts. Long pieces go to `merge_with_heap`, which
    gives the same result and the same steps.
    """
    if len(parts) > LONG_PIECE:
        return merge_with_heap(parts, pair_rank, steps)
    parts = list(parts)
    starts = _starts(parts)  # starts[i]: the byte offset of parts[i]
    record_parts = len(parts) <= PARTS_RECORDED
    ranks = [pair_rank(a, b) for a, b in zip(parts, parts[1:], strict=False)]  # ranks[i]: parts i, i+1
    while ranks:
        best = min(ranks)
        if best == NO_MERGE:
            break
        i = ranks.index(best)
        if steps is not None:
            steps.append({"merge": [parts[i], parts[i + 1]], "rank": best, "at": starts[i]})
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
        del starts[i + 1]
        del ranks[i]
        if i < len(ranks):
            ranks[i] = pair_rank(parts[i], parts[i + 1])
        if i > 0:
            ranks[i - 1] = pair_rank(parts[i - 1], parts[i])
        if steps is not None and record_parts:
            steps[-1]["parts"] = list(parts)
    return parts


def merge_with_heap(parts: list[bytes], pair_rank: PairRank, steps: list[dict] | None = None) -> list[bytes]:
    """`merge` for long pieces: the same order of merges (and ``steps``, without the parts),
    from a heap of (rank, position).

    A heap entry is stale once either part has changed since it was pushed; part versions
    tell (version -1: merged into its left neighbour).
    """
    parts, n = list(parts), len(parts)
    starts = _starts(parts)  # a merged part keeps its left part's index, so its start too
    next_, prev, version = list(range(1, n + 1)), list(range(-1, n - 1)), [0] * n
    heap = [(pair_rank(parts[i], parts[i + 1]), i, i + 1, 0, 0) for i in range(n - 1)]
    heap = [entry for entry in heap if entry[0] != NO_MERGE]
    heapq.heapify(heap)
    while heap:
        rank, i, j, version_i, version_j = heapq.heappop(heap)
        if version[i] != version_i or version[j] != version_j:
            continue
        if steps is not None:
            steps.append({"merge": [parts[i], parts[j]], "rank": rank, "at": starts[i]})
        parts[i] += parts[j]
        version[i] += 1
        version[j] = -1
        k = next_[i] = next_[j]
        if k < n:
            prev[k] = i
        for left, right in ((prev[i], i), (i, k)):
            if 0 <= left and right < n and (rank := pair_rank(parts[left], parts[right])) != NO_MERGE:
                heapq.heappush(heap, (rank, left, right, version[left], version[right]))
    return [part for part, v in zip(parts, version, strict=True) if v >= 0]


def _starts(parts: Sequence[bytes]) -> list[int]:
    """The byte offset at which each part starts."""
    starts, offset = [], 0
    for part in parts:
        starts.append(offset)
        offset += len(part)
    return starts
