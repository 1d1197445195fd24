"""A whole model's matrices replaced by their blocks' values, as llama.cpp would store them.

`quantize_model(net, kind)` quantizes every ``nn.Linear`` weight of the blocks and of the
output head (`glassformer.block_quant`: Q8_0, Q4_0 or Q4_1, a scale per 32 consecutive weights
of a row) and writes back the weights the blocks stand for, in place, in float32:

    W  ->  W^ = dequantize(quantize(W))          each block b of 32 weights of a row:
    Q8_0:  w^ = d16 q,          d = max_b |w| / 127,          q in -127..127
    Q4_0:  w^ = d16 (q - 8),    d = (largest-magnitude w_b) / -8,   q in 0..15
    Q4_1:  w^ = d16 q + m16,    m = min_b w,  d = (max_b w - m) / 15, q in 0..15

so every later forward pass, a trace, the workshop's walk, generation, is the forward pass of
the quantized model: nothing else changes. The originals are gone afterwards, so the facts a
learner asks about are kept first, per block (out x in/32 each, float32):

    max error   max_b |w - w^|
    RMS error   sqrt(mean_b (w - w^)^2)
    bound       the stated bound every weight of the block is held to (`block_quant`):
                Q8_0  |d| / 2 + 127 |d - d16|;  Q4_0  |d| + 8 |d - d16|;
                Q4_1  d / 2 + 15 |d - d16| + |m - m16|

and the bytes: 4 per weight in float32, and llama.cpp's 34, 18 or 20 bytes per block of 32
(8.5, 4.5, 5 bits a weight). The output head is kept at Q8_0 beside the 4-bit kinds
(`block_quant.HEAD_KIND`, as llama.cpp's quantizer and the decode step keep it). A head tied to
the token table (``tie_embeddings``) is one matrix, quantized once, as llama.cpp quantizes
``token_embd``: the lookup then reads the quantized rows too. A router (a mixture of experts'
gate) stays float32, as llama.cpp keeps ``ffn_gate_inp``; so does a matrix whose rows are no
multiple of 32, named with the reason.

Weights already on a grid come back as they were. The registry's SmolLM2 is read from a
"mostly Q4_1" file, its tied head Q8_0: ``quantize_model(net, "q4_1")`` leaves every matrix as it
is (every error 0), and ``"q8_0"`` moves its 150 block matrices and leaves the head.

>>> import glassformer as gf
>>> net = gf.build(gf.ModelConfig(vocab_size=64, d_model=32, n_layers=1, n_heads=2, d_ff=64))
>>> facts = quantize_model(net, "q8_0")
>>> [m.name for m in facts.matrices]  # doctest: +NORMALIZE_WHITESPACE
['blocks.0.attn.qkv_proj', 'blocks.0.attn.o_proj', 'blocks.0.ffn.up_proj',
 'blocks.0.ffn.down_proj', 'lm_head']
>>> facts.matrix("lm_head").tied_to, facts.bits_per_weight
('embed.token', 8.5)
>>> bool((facts.matrix("blocks.0.ffn.up_proj").max_error <= facts.matrix("blocks.0.ffn.up_proj").bound).all())
True
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from glassformer.block_quant import BLOCK, HEAD_KIND, KINDS, quantize

HEADS = ("lm_head", "mlm_head")  # the output heads' module names (their Linears are quantized)
ROUTERS = ("router", "shared_expert_gate")  # a mixture's gates: kept in float32, as llama.cpp keeps them


@dataclass(frozen=True)
class MatrixQuantization:
    """One matrix's blocks: its ``name`` (the module path, a stack's ``stack.`` left out: the trace
    contract's ``blocks.3.ffn.up_proj``), ``shape`` (out, in), and per block (out x in/32, float32):
    ``max_error``, ``rms_error``, ``bound``, ``steps`` (d16) and ``minimums`` (Q4_1's m16, else
    zeros). ``kind``: its blocks' format; ``tied_to``: the other module whose weight this is (a
    tied head's token table)."""

    name: str
    kind: str
    shape: tuple[int, int]
    max_error: torch.Tensor  # out n
    rms_error: torch.Tensor  # out n
    bound: torch.Tensor  # out n
    steps: torch.Tensor  # out n
    minimums: torch.Tensor  # out n
    tied_to: str | None = None

    @property
    def weights(self) -> int:
        return self.shape[0] * self.shape[1]

    @property
    def bytes_after(self) -> int:
        """Its bytes as llama.cpp stores its blocks."""
        return self.weights // BLOCK * KINDS[self.kind]

    @property
    def label(self) -> str:
        return kind_label(self.kind)

    def summary(self) -> dict:
        """The matrix in a few numbers: its shape, its largest and RMS error, its largest bound."""
        return {
            "name": self.name,
            "kind": self.kind,
            "label": self.label,
            "shape": list(self.shape),
            "tied_to": self.tied_to,
            "max_error": float(self.max_error.max()),
            "rms_error": float(self.rms_error.square().mean().sqrt()),  # every block holds 32 weights
            "bound": float(self.bound.max()),
        }


@dataclass(frozen=True)
class Quantization:
    """What `quantize_model` did: the ``kind`` asked for (a head's may be `HEAD_KIND`'s), each
    matrix quantized, and those it left in float32 (``skipped``: {name: why})."""

    kind: str
    matrices: tuple[MatrixQuantization, ...]
    skipped: dict[str, str]

    @property
    def label(self) -> str:
        return kind_label(self.kind)

    def model_label(self, name: str) -> str:
        """How a quantized model is named to a person: "smollm2-135m-instruct · Q8_0"."""
        return f"{name} · {self.label}"

    @property
    def bits_per_weight(self) -> float:
        """Bits a weight over every matrix quantized (a head of another kind included)."""
        return self.bytes_after * 8 / sum(m.weights for m in self.matrices)

    @property
    def bytes_before(self) -> int:
        """The quantized matrices' bytes in float32."""
        return 4 * sum(m.weights for m in self.matrices)

    @property
    def bytes_after(self) -> int:
        """The same matrices' bytes as llama.cpp stores the blocks."""
        return sum(m.bytes_after for m in self.matrices)

    def matrix(self, name: str) -> MatrixQuantization:
        """The matrix ``name``; a KeyError naming the matrices there are."""
        for found in self.matrices:
            if found.name == name:
                return found
        why = f" ({self.skipped[name]})" if name in self.skipped else ""
        names = ", ".join(m.name for m in self.matrices[:6])
        more = f" and {len(self.matrices) - 6} more" if len(self.matrices) > 6 else ""
        raise KeyError(f"no quantized matrix {name!r}{why}; the matrices are {names}{more}")

    def summary(self) -> dict:
        """The kind, its bits, the bytes before and after, each matrix's summary, what was skipped."""
        return {
            "kind": self.kind,
            "label": self.label,
            "bits_per_weight": self.bits_per_weight,
            "block": BLOCK,
            "bytes_before": self.bytes_before,
            "bytes_after": self.bytes_after,
            "matrices": [m.summary() for m in self.matrices],
            "skipped": dict(self.skipped),
        }


def kind_label(kind: str) -> str:
    """A block kind as llama.cpp names it: "q8_0" -> "Q8_0"."""
    return kind.upper()


def check_kind(kind: str) -> str:
    """``kind`` if it names a block format, else a ValueError listing them."""
    if kind not in KINDS:
        raise ValueError(f"no quantization {kind!r}: the kinds are {', '.join(KINDS)} (llama.cpp's)")
    return kind


def quantize_model(net: nn.Module, kind: str) -> Quantization:
    """Replace each block's and the head's ``nn.Linear`` weights of ``net`` by their ``kind``
    blocks' values (the module docstring), in place; the facts of each matrix."""
    check_kind(kind)
    matrices, skipped, seen = [], {}, {}
    owners = _owners(net)
    for path, linear in _linears(net):
        name = _short(path)
        weight = linear.weight
        if id(weight) in seen:  # a matrix shared by two modules is quantized once
            continue
        seen[id(weight)] = name
        if path.split(".")[-1] in ROUTERS:
            skipped[name] = "a router: llama.cpp keeps it in float32"
            continue
        if weight.shape[1] % BLOCK:
            skipped[name] = f"rows of {weight.shape[1]} weights, not a multiple of {BLOCK}"
            continue
        tied = [_short(p) for p in owners.get(id(weight), []) if p != path]
        own = HEAD_KIND[kind] if path.split(".")[0] in HEADS else kind
        matrices.append(_quantize_matrix(name, weight, own, tied[0] if tied else None))
    if not matrices:
        raise ValueError(
            f"nothing to quantize: no block or head matrix of this model has rows of a multiple of {BLOCK}"
        )
    return Quantization(kind, tuple(matrices), skipped)


@torch.no_grad()
def _quantize_matrix(name: str, weight: torch.Tensor, kind: str, tied_to: str | None) -> MatrixQuantization:
    """``weight`` replaced by its blocks' values; the facts of its blocks."""
    original = weight.detach().to("cpu", torch.float32)  # out in
    out, inner = original.shape
    blocks = quantize(original, kind)
    restored = blocks.dequantized()  # out in
    error = (original - restored).view(out, inner // BLOCK, BLOCK)  # out n 32
    bound = blocks.error_bound().view(out, inner // BLOCK, BLOCK)[..., 0]  # out n: one bound per block
    weight.copy_(restored.to(weight.dtype))  # in place: ties, hooks and the state dict kept
    return MatrixQuantization(
        name=name,
        kind=kind,
        shape=(out, inner),
        max_error=error.abs().amax(dim=-1),
        rms_error=error.square().mean(dim=-1).sqrt(),
        bound=bound.contiguous(),
        steps=blocks.steps.clone(),
        minimums=blocks.minimums.clone(),
        tied_to=tied_to,
    )


def _linears(net: nn.Module) -> list[tuple[str, nn.Linear]]:
    """(path, module) of every nn.Linear in a block or an output head, in module order."""
    found = []
    for path, module in net.named_modules():
        parts = path.split(".")
        if isinstance(module, nn.Linear) and ("blocks" in parts or parts[0] in HEADS):
            found.append((path, module))
    return found


def _owners(net: nn.Module) -> dict[int, list[str]]:
    """{id(parameter): the paths of every module holding it as its ``weight``}: a tied head's
    matrix is also the token table's."""
    owners: dict[int, list[str]] = {}
    for path, module in net.named_modules():
        weight = getattr(module, "weight", None)
        if isinstance(weight, nn.Parameter):
            owners.setdefault(id(weight), []).append(path)
    return owners


def _short(path: str) -> str:
    """A module path as the trace contract names it: a decoder's or an encoder's ``stack.``
    left out (``stack.blocks.3.ffn.up_proj`` -> ``blocks.3.ffn.up_proj``)."""
    return path.removeprefix("stack.")
