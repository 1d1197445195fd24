"""A small double-array trie in darts-clone's unit layout, the one SentencePiece's
``precompiled_charsmap`` holds (`glassformer.tokenizers.precompiled` reads it).

The builder is the plainest that reads back correctly, not darts-clone's compact one: every node
with children gets a block of 256 units of its own, its children at ``block + byte`` and its
leaf (the value of the key it ends) at ``block + 0``. A node's unit stores the XOR that takes it
to its block (``offset``), its label and whether a key ends there. Real charsmaps pack the
blocks so they overlap; the reader cannot tell the difference.

>>> units = build_double_array({b"a": 7, b"ab": 9})
>>> len(units)  # block 0 (the root), the root's children, then the blocks of "a" and "ab"
1024
"""

from __future__ import annotations

LEAF_BIT, HAS_LEAF_BIT = 1 << 31, 1 << 8
BLOCK = 256
MAX_OFFSET = 1 << 21  # an offset this large would need darts-clone's shifted form (bit 9)


def build_double_array(values: dict[bytes, int]) -> list[int]:
    """The units of a trie mapping each byte string (non-empty, no NUL) to a value < 2**31."""
    tree: dict = {}
    for key, value in values.items():
        if not key or 0 in key or not 0 <= value < LEAF_BIT:
            raise ValueError(f"key {key!r} -> {value}: keys are non-empty without NUL, values < 2**31")
        node = tree
        for byte in key:
            node = node.setdefault(byte, {})
        node[None] = value  # None: a key ends here
    units = [0] * BLOCK  # block 0 holds the root (unit 0) and nothing else
    _place(tree, 0, units)
    return units


def _place(node: dict, index: int, units: list[int]) -> None:
    """Give ``node`` (at ``index``) a block, write its unit, and place its children."""
    block = len(units)
    units.extend([0] * BLOCK)
    offset = index ^ block
    if offset >= MAX_OFFSET:
        raise ValueError("trie too large for this simple builder")
    units[index] |= offset << 10 | (HAS_LEAF_BIT if None in node else 0)
    if None in node:
        units[block] = LEAF_BIT | node[None]
    for byte, child in node.items():
        if byte is None:
            continue
        units[block + byte] = byte  # the label; _place adds the offset
        _place(child, block + byte, units)
