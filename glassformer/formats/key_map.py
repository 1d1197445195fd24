"""Key maps: which checkpoint tensors fill which of our parameters, read in both directions.

A family's key map is a list of `Mapped` items, each one checkpoint tensor and the place
it fills: one of our parameters, or a block of its rows, with the reshaping between them
(GPT-2's Conv1D is transposed). Our attention keeps W_Q, W_K and W_V in one matrix,
``qkv_proj`` = [W_Q; W_K; W_V] ((h + 2g) e x d; cross-attention's ``kv_proj`` =
[W_K; W_V]), so a checkpoint that stores three matrices (Llama, BERT, T5, Marian) maps
them onto three row blocks of it (`stacked_qkv`), while GPT-2's fused ``c_attn`` maps
onto it whole. The same list serves

* import (`load_mapped`): every one of our parameters is filled exactly once (its row
  blocks tile it, no gap, no overlap), every shape matches, and no checkpoint tensor is
  left unused unless ignored, so a checkpoint of another layout fails loudly instead of
  loading half a model;
* export (`hf_state`): each item run backwards, a row block cut out of our parameter and
  the transform undone, which must give back what the importer reads; the parameters cut
  from one fused checkpoint tensor (`TheirRows`: Phi-3's ``gate_up_proj``, a position table
  offset by a few rows) are put back together in row order.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch

from glassformer.config import ModelConfig
from glassformer.formats.weights import WeightFiles

Transform = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class Mapped:
    """Our parameter ``ours`` <- ``transform(checkpoint[theirs])``; with ``rows=(start, stop)``
    only those rows of it (one of the blocks [W_Q; W_K; W_V] of ``qkv_proj``)."""

    ours: str
    theirs: str
    transform: Transform | None = None
    rows: tuple[int, int] | None = None

    def target(self, params: Mapping[str, torch.Tensor]) -> torch.Tensor:
        """The parameter, or its block of rows, this item fills: a view of its memory."""
        param = params[self.ours].detach()
        return param if self.rows is None else param[self.rows[0] : self.rows[1]]

    def place(self) -> str:
        """Where it goes, for messages: ``'blocks.0.attn.qkv_proj.weight' rows 0:32``."""
        return repr(self.ours) + (f" rows {self.rows[0]}:{self.rows[1]}" if self.rows else "")


@dataclass(frozen=True)
class Conv1D:
    """GPT-2's Conv1D stores W as (in, out); ours are nn.Linear (out, in): transposed, vectors
    as they are. Its own inverse, so export can write it back.

    >>> Conv1D()(torch.zeros(2, 6)).shape          # c_attn (in=2, 3 * out) -> qkv_proj
    torch.Size([6, 2])
    """

    def __call__(self, w: torch.Tensor) -> torch.Tensor:
        return w.t().contiguous() if w.dim() == 2 else w

    def inverse(self, w: torch.Tensor) -> torch.Tensor:
        return self(w)


@dataclass(frozen=True)
class Unbatched:
    """A checkpoint tensor with ``ones`` leading axes of size 1 (a batch of one, to broadcast:
    ViT's [CLS] and positions, Marian's ``final_logits_bias``) as ours, without them; its
    inverse puts them back, so export writes what HF reads.

    >>> Unbatched(2)(torch.zeros(1, 1, 8)).shape, Unbatched(1).inverse(torch.zeros(5, 8)).shape
    (torch.Size([8]), torch.Size([1, 5, 8]))
    """

    ones: int

    def __call__(self, w: torch.Tensor) -> torch.Tensor:
        if tuple(w.shape[: self.ones]) != (1,) * self.ones:
            raise ValueError(f"expected {self.ones} leading axes of size 1, got shape {tuple(w.shape)}")
        return w.reshape(w.shape[self.ones :])

    def inverse(self, w: torch.Tensor) -> torch.Tensor:
        return w.reshape((1,) * self.ones + tuple(w.shape))


class TheirRows:
    """Rows ``start`` to ``stop`` of a checkpoint tensor: one of our parameters cut from a fused
    one (Phi-3's ``gate_up_proj`` = [W_gate; W_up]), or from a table whose first rows we do not
    use (OPT's and BART's positions start at row 2). No inverse of its own: one piece alone is
    not the checkpoint's tensor; `hf_state` joins the pieces of each (`join_rows`)."""

    def __init__(self, start: int, stop: int) -> None:
        self.rows = (start, stop)

    def __call__(self, w: torch.Tensor) -> torch.Tensor:
        return w[self.rows[0] : self.rows[1]].contiguous()


def join_rows(theirs: str, pieces: list[tuple[TheirRows, torch.Tensor]]) -> torch.Tensor:
    """The checkpoint tensor ``theirs`` from the `TheirRows` pieces cut from it: concatenated in
    row order, each following the last with no gap, to the last piece's end. The rows before
    the first piece are rows the importer skips (a position table's offset: OPT's and BART's
    rows 0, 1, RoBERTa's up to its pad id, where a padding token's position may land) and are
    written as zeros.

    >>> gate, up = torch.ones(2, 3), torch.zeros(2, 3)
    >>> join_rows("gate_up", [(TheirRows(2, 4), up), (TheirRows(0, 2), gate)])[:, 0]
    tensor([1., 1., 0., 0.])
    >>> join_rows("positions", [(TheirRows(2, 3), torch.ones(1, 2))])
    tensor([[0., 0.],
            [0., 0.],
            [1., 1.]])
    """
    pieces = sorted(pieces, key=lambda piece: piece[0].rows)
    first, tensor = pieces[0][0].rows[0], pieces[0][1]
    blocks, end = [tensor.new_zeros(first, *tensor.shape[1:])], first
    for cut, piece in pieces:
        start, stop = cut.rows
        if start != end:  # an overlap is refused before (`check_coverage`): this is a gap
            raise ValueError(f"cannot write {theirs!r}: no parameter of ours fills its rows {end}:{start}")
        if piece.shape[0] != stop - start:
            raise ValueError(f"cannot write {theirs!r}: {piece.shape[0]} rows given for rows {start}:{stop}")
        blocks.append(piece)
        end = stop
    return torch.cat(blocks)


def with_bias(ours: str, theirs: str, bias: bool = True) -> list[Mapped]:
    """A linear layer or a norm, one to one: its weight (and its bias, when ``bias``).

    >>> [(m.ours, m.theirs) for m in with_bias("attn.o_proj", "attention.dense")]
    [('attn.o_proj.weight', 'attention.dense.weight'), ('attn.o_proj.bias', 'attention.dense.bias')]
    """
    kinds = ("weight", "bias") if bias else ("weight",)
    return [Mapped(f"{ours}.{kind}", f"{theirs}.{kind}") for kind in kinds]


def stacked(ours: str, pieces: list[tuple[str, int]]) -> list[Mapped]:
    """Our ``ours`` <- the checkpoint tensors ``pieces`` (name, rows) concatenated along dim 0,
    in that order.

    >>> [m.rows for m in stacked("attn.qkv_proj.weight", [("q.weight", 8), ("k.weight", 4), ("v.weight", 4)])]
    [(0, 8), (8, 12), (12, 16)]
    """
    out, start = [], 0
    for theirs, n_rows in pieces:
        out.append(Mapped(ours, theirs, rows=(start, start + n_rows)))
        start += n_rows
    return out


def stacked_qkv(ours: str, q: str, k: str, v: str, config: ModelConfig) -> list[Mapped]:
    """Self-attention ``{ours}.qkv_proj`` <- checkpoint matrices ``{q}``, ``{k}``, ``{v}``
    (names without ``.weight``): h e, g e and g e rows; their biases too with ``qkv_bias``."""
    h, g, e = config.n_heads, config.n_kv_heads, config.d_head
    out = []
    for kind in ("weight", "bias") if config.qkv_bias else ("weight",):
        pieces = [(f"{q}.{kind}", h * e), (f"{k}.{kind}", g * e), (f"{v}.{kind}", g * e)]
        out += stacked(f"{ours}.qkv_proj.{kind}", pieces)  # (h + 2g) e rows: [W_Q; W_K; W_V]
    return out


def stacked_kv(ours: str, q: str, k: str, v: str, config: ModelConfig) -> list[Mapped]:
    """Cross-attention ``{ours}.q_proj`` <- ``{q}`` and ``{ours}.kv_proj`` <- [``{k}``; ``{v}``]
    (g e rows each); biases too with ``qkv_bias``."""
    kv_rows = config.n_kv_heads * config.d_head
    kinds = ("weight", "bias") if config.qkv_bias else ("weight",)
    out = [Mapped(f"{ours}.q_proj.{kind}", f"{q}.{kind}") for kind in kinds]
    for kind in kinds:
        out += stacked(f"{ours}.kv_proj.{kind}", [(f"{k}.{kind}", kv_rows), (f"{v}.{kind}", kv_rows)])
    return out


def check_coverage(shapes: Mapping[str, tuple[int, ...]], mapping: list[Mapped]) -> None:
    """Every parameter in ``shapes`` (name -> shape) is filled exactly once: the blocks of rows
    the key map gives it tile it, with no gap or overlap; every name it uses exists, and
    no checkpoint tensor fills two places."""
    blocks: dict[str, list[tuple[int, int]]] = {}
    sources: dict[str, list[tuple[tuple[int, int] | None, str]]] = {}
    for item in mapping:
        if item.ours not in shapes:
            raise KeyError(f"key map names {item.ours!r}, which this model does not have")
        cut = item.transform.rows if isinstance(item.transform, TheirRows) else None
        for other, place in sources.get(item.theirs, []):  # two cuts of one tensor may not overlap
            if cut is None or other is None or (cut[0] < other[1] and other[0] < cut[1]):
                raise ValueError(f"the key map reads {item.theirs!r} twice ({place} and {item.place()})")
        sources.setdefault(item.theirs, []).append((cut, item.place()))
        n_rows = shapes[item.ours][0] if shapes[item.ours] else 1
        blocks.setdefault(item.ours, []).append(item.rows or (0, n_rows))
    missing = sorted(set(shapes) - set(blocks))
    if missing:
        raise ValueError(f"the key map left these parameters unfilled: {', '.join(missing)}")
    for name, spans in blocks.items():
        end = 0
        for start, stop in sorted(spans):
            if start != end:
                problem = "fills them twice" if start < end else "leaves them empty"
                span = f"{min(start, end)}:{max(start, end)}"
                raise ValueError(f"the key map {problem}: rows {span} of {name!r}")
            end = stop
        n_rows = shapes[name][0] if shapes[name] else 1
        if end != n_rows:
            raise ValueError(f"the key map fills rows 0:{end} of {name!r}, which has {n_rows}")


# -- import: checkpoint -> our parameters ------------------------------------------------------


def load_mapped(
    net: torch.nn.Module, state: Mapping[str, torch.Tensor], mapping: list[Mapped], ignored: dict[str, str]
) -> None:
    """Copy checkpoint tensors into ``net`` by ``mapping``, asserting shapes and coverage;
    ``ignored`` holds patterns of checkpoint names deliberately left unused."""
    params = dict(net.named_parameters())  # tied weights appear once, under their first name
    check_coverage({name: tuple(p.shape) for name, p in params.items()}, mapping)
    names = set(state)  # the names only: a checkpoint's tensors are read once, into place
    absent = [item for item in mapping if item.theirs not in names]
    if absent:
        raise KeyError(f"checkpoint has no tensor {absent[0].theirs!r} (needed for {absent[0].place()})")
    used = {item.theirs for item in mapping}
    unused = sorted(k for k in names - used if not any(re.fullmatch(p, k) for p in ignored))
    if unused:
        raise ValueError(f"checkpoint tensors not understood by the key map: {', '.join(unused[:10])}")
    for item in mapping:
        _fill(item.target(params), item, state)


def _fill(target: torch.Tensor, item: Mapped, state: Mapping[str, torch.Tensor]) -> None:
    """One parameter (or block of rows) from its checkpoint tensor: read straight into place
    when the files allow it (`WeightFiles.read_into`), else read, transform, check, copy."""
    if item.transform is None and isinstance(state, WeightFiles) and state.read_into(item.theirs, target):
        return
    tensor = state[item.theirs]
    if item.transform is not None:
        tensor = item.transform(tensor)
    if tuple(tensor.shape) != tuple(target.shape):
        raise ValueError(
            f"shape mismatch: checkpoint {item.theirs!r} gives {tuple(tensor.shape)}, "
            f"our {item.place()} needs {tuple(target.shape)}"
        )
    with torch.no_grad():
        target.copy_(tensor.to(target.dtype))


# -- export: our parameters -> checkpoint --------------------------------------------------------


def hf_state(net: torch.nn.Module, mapping: list[Mapped]) -> dict[str, torch.Tensor]:
    """Checkpoint name -> tensor (on the CPU, contiguous, no two sharing memory) for ``net`` by
    an import key map: each item backwards (the `TheirRows` pieces of one tensor joined,
    `join_rows`), and the importer must read each back exactly; a transform marked ``rounds``
    (arithmetic, such as Gemma's 1 + w) within one float rounding."""
    params = dict(net.named_parameters())  # tied weights appear once, under their first name
    check_coverage({name: tuple(p.shape) for name, p in params.items()}, mapping)
    out: dict[str, torch.Tensor] = {}
    cut: dict[str, list[tuple[Mapped, torch.Tensor]]] = {}
    for item in mapping:
        piece = item.target(params).cpu()
        if isinstance(item.transform, TheirRows):
            cut.setdefault(item.theirs, []).append((item, piece))
            continue
        if item.transform is None:
            out[item.theirs] = piece.clone() if item.rows else piece.contiguous()  # blocks share memory
            continue
        inverse = getattr(item.transform, "inverse", None)
        if inverse is None:
            raise ValueError(f"cannot write {item.theirs!r}: its import transform has no inverse")
        tensor = inverse(piece).contiguous()
        tensor = tensor.clone() if item.rows and tensor.data_ptr() == piece.data_ptr() else tensor
        _check_read_back(item, tensor, piece)
        out[item.theirs] = tensor
    for theirs, pieces in cut.items():
        out[theirs] = join_rows(theirs, [(item.transform, piece) for item, piece in pieces])
        for item, piece in pieces:
            _check_read_back(item, out[theirs], piece)
    return out


def _check_read_back(item: Mapped, tensor: torch.Tensor, piece: torch.Tensor) -> None:
    """The importer must give ``piece`` back from ``tensor``: exactly, or for a transform that
    ``rounds`` within one rounding of 1 + |x| (``(1 + w) - 1`` cannot always give w back)."""
    back = item.transform(tensor)
    if getattr(item.transform, "rounds", False) and back.shape == piece.shape:
        same = bool(((back - piece).abs() <= torch.finfo(piece.dtype).eps * (1 + piece.abs())).all())
    else:
        same = torch.equal(back, piece)
    if not same:
        raise ValueError(f"{item.theirs!r} does not read back as our {item.place()}")
