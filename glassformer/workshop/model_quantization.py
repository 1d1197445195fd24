"""What the page shows of a quantized model (`glassformer.quantized_model`), bounded in size
whatever the model:

    model_summary(facts)              `Quantization.summary`, each matrix with where it sits:
                                      ``stack``, ``layer``, ``cross`` and ``sublayer`` ("attn",
                                      "ffn", or null for the head), so the page finds a step's
                                      matrices by what the step says of itself, no name parsed

    matrix_view(facts, net, name)     one matrix: its numbers; the error of every block as a map
                                      of at most MAP_ROWS x MAP_COLS cells (each the largest error
                                      of the blocks it covers, 8 bits); its WORST blocks with their
                                      step, bound and largest weight; and a window of the weights
                                      as they are now (the blocks' values), WINDOW_ROWS x
                                      WINDOW_BLOCKS blocks of 32, around the worst block or the
                                      one asked for

The weights are read from the model itself: after `quantize_model` they are the dequantized
ones, the same the walk's forward pass multiplies by. The map's bytes are value / scale, with
``scale`` = its largest value / 255 (`arrays.pack_unit`'s format).
"""

from __future__ import annotations

from typing import Any

import torch

from glassformer.block_quant import BLOCK
from glassformer.quantized_model import MatrixQuantization, Quantization
from glassformer.workshop.walk.architecture import name_parts
from glassformer.workshop.walk.arrays import pack, pack_unit

MAP_ROWS = 256  # the error map's most rows of cells (each the largest of the rows it covers)
MAP_COLS = 64  # its most columns of cells (each the largest of the blocks it covers)
WORST = 8  # the blocks of largest error listed
WINDOW_ROWS = 16  # the weights' window: rows
WINDOW_BLOCKS = 4  # and blocks of 32 along a row


def model_summary(facts: Quantization) -> dict[str, Any]:
    """The model's quantization in numbers, each matrix placed (the module docstring)."""
    summary = facts.summary()
    for matrix in summary["matrices"]:
        stack, layer, cross, kind = name_parts(matrix["name"])
        sublayer = kind.split(".")[0] if layer is not None else None
        matrix.update(stack=stack, layer=layer, cross=cross, sublayer=sublayer)
    return summary


def matrix_view(
    facts: Quantization,
    net: torch.nn.Module,
    name: str,
    row: int | None = None,
    block: int | None = None,
) -> dict[str, Any]:
    """The page's view of the matrix ``name`` of ``net`` (the module docstring), its weight read now
    (out x in). ``row`` and ``block``: the window's block, else the block of largest error."""
    matrix = facts.matrix(name)  # a KeyError naming the matrices there are
    weight = matrix_weight(net, name)
    if weight is None or tuple(weight.shape) != matrix.shape:
        raise ValueError(f"the model's {name} is not the matrix that was quantized")
    out, inner = matrix.shape
    n = inner // BLOCK
    worst = _worst(matrix.max_error)
    worst_row, worst_block = worst[0]  # the window opens on the first block listed
    row = worst_row if row is None else _within(row, out, "row", f"{out} rows")
    block = worst_block if block is None else _within(block, n, "block", f"{n} blocks of {BLOCK} a row")
    values = weight.detach().to("cpu", torch.float32).view(out, n, BLOCK)  # out n 32
    scale = float(matrix.max_error.max()) / 255 or 1.0
    errors, pool = _pooled(matrix.max_error)
    return {
        "matrix": {**matrix.summary(), "weights": matrix.weights},
        "kind": matrix.kind,
        "label": matrix.label,
        "bits_per_weight": matrix.bytes_after * 8 / matrix.weights,
        "block": BLOCK,
        "bytes_before": 4 * matrix.weights,
        "bytes_after": matrix.bytes_after,
        "errors": {**pack_unit(errors / (scale * 255)), "scale": scale, "pool": pool},
        "worst": [_block_facts(matrix, values, r, b) for r, b in worst],
        "window": _window(matrix, values, row, block),
    }


def matrix_weight(net: torch.nn.Module, name: str) -> torch.Tensor | None:
    """The weight of the matrix ``name`` (``blocks.3.ffn.up_proj``, a stack's ``stack.`` left out),
    or None if ``net`` has no such module (`matrix_view` then names the matrices there are)."""
    for path in (name, f"stack.{name}"):
        try:
            return net.get_submodule(path).weight
        except AttributeError:
            continue
    return None


def _within(index: int, size: int, what: str, sizes: str) -> int:
    if not 0 <= index < size:
        raise ValueError(f"{what} {index} is past this matrix's {sizes} (0 to {size - 1})")
    return index


def _pooled(per_block: torch.Tensor) -> tuple[torch.Tensor, list[int]]:
    """``per_block`` (out n) shrunk to at most MAP_ROWS x MAP_COLS cells, each the largest of the
    blocks it covers (an outlier stays visible); and [rows, blocks] a cell covers."""
    out, n = per_block.shape
    rows, cols = -(-out // MAP_ROWS), -(-n // MAP_COLS)  # ceiling division
    padded = torch.nn.functional.pad(per_block, (0, -n % cols, 0, -out % rows))  # errors >= 0: 0 pads
    cells = padded.view(padded.shape[0] // rows, rows, padded.shape[1] // cols, cols)
    return cells.amax(dim=(1, 3)), [rows, cols]


def _worst(per_block: torch.Tensor) -> list[tuple[int, int]]:
    """(row, block) of the WORST largest errors, largest first."""
    n = per_block.shape[1]
    top = per_block.flatten().topk(min(WORST, per_block.numel())).indices
    return [divmod(int(i), n) for i in top]


def _block_facts(matrix: MatrixQuantization, values: torch.Tensor, row: int, block: int) -> dict[str, Any]:
    """One block in numbers: its error, its bound, its step (and Q4_1's minimum), its weights' range."""
    weights = values[row, block]  # 32
    return {
        "row": row,
        "block": block,
        "columns": [block * BLOCK, (block + 1) * BLOCK - 1],
        "max_error": float(matrix.max_error[row, block]),
        "rms_error": float(matrix.rms_error[row, block]),
        "bound": float(matrix.bound[row, block]),
        "step": float(matrix.steps[row, block]),
        "minimum": float(matrix.minimums[row, block]),
        "largest": float(weights.abs().max()),
        "low": float(weights.min()),
        "high": float(weights.max()),
    }


def _window(matrix: MatrixQuantization, values: torch.Tensor, row: int, block: int) -> dict[str, Any]:
    """WINDOW_ROWS x WINDOW_BLOCKS blocks of the weights around (``row``, ``block``), and their
    blocks' errors and bounds."""
    out, n, _ = values.shape
    rows, blocks = min(WINDOW_ROWS, out), min(WINDOW_BLOCKS, n)
    first_row = min(max(0, row - rows // 2), out - rows)
    first_block = min(max(0, block - blocks // 2), n - blocks)
    kept = slice(first_row, first_row + rows), slice(first_block, first_block + blocks)
    return {
        "row": first_row,
        "block": first_block,
        "chosen": [row, block],
        "weights": pack(values[kept].reshape(rows, blocks * BLOCK)),  # rows x blocks*32
        "max_error": pack(matrix.max_error[kept]),  # rows x blocks
        "bound": pack(matrix.bound[kept]),
        "steps": pack(matrix.steps[kept]),
        "minimums": pack(matrix.minimums[kept]),  # Q4_1's m16; zeros for the symmetric kinds
    }
