"""The decode step without the module tree: one new token per row through a decoder's
blocks in as few kernel launches as its formula allows, proven equal to the modules.

Decoding a token on a CPU costs two things: streaming every weight from memory once (the
bound: bytes of weights / read bandwidth), and running the modules' Python and small
kernels between the matrix products (for SmolLM2-135M's 30 blocks, about 5 ms a token,
a quarter of the step). `DecodeStep` keeps the first and trims the second. Each block of
a pre-norm decoder, for the new token's row x (b 1 d), is still

    u = x + W_O Attn(RoPE(W_QKV N1(x)), cached K, V)        (or x + Attn + FFN, parallel)
    x = u + W_down (act(W_gate N2(u)) * W_up N2(u))          (plain FFN: act(W_up N2(u)))

computed with the same kernels in the same order, but:

* each product reads the copy of W its `glassformer.fast.DecodeLinear` keeps for inference
  (oneDNN's packed blocks, or W^T cut along its input features, one block per thread): the
  prefill made it, and decoding shares it;
* the norms are one fused kernel each (``F.rms_norm``, ``F.layer_norm``: bit-identical to
  `glassformer.nn.norms` in float32, `tests/test_fast_decode.py`), the rotation is
  computed once per step, and no module, hook point or mask is visited.

The embedding, the final norm and the head are the model's own modules. A `DecodeStep`
serves the decoders it can reproduce exactly (`unsupported` says why not otherwise) and
only while no hook is attached; `glassformer.generate` uses it after the prefill when
`glassformer.fast` is switched on. The layout is remade whenever a weight changes.

``use_weights(net, kind)`` makes the step read quantized copies of the matrices, the head's
included: "int8" (`glassformer.fast_int8`, a scale per row) or llama.cpp's block formats "q8_0",
"q4_0", "q4_1" (`glassformer.block_quant`, a scale per 32 weights; `glassformer.fast_blocks`
multiplies them), the head at Q8_0 beside the 4-bit kinds (as llama.cpp's quantizer keeps the
output matrix finer). Each is an approximation with a stated bound, used only where its kernel
measures faster than float32 on this CPU (`faster_than_float32`; ``step.weights`` and
``step.reason`` say what was chosen and why). The default, "float32", is greedy-identical to
the modules. A model read from a Q4_1 file (the registry's SmolLM2) holds its blocks' values,
so "q4_1" multiplies by the file's own blocks.
"""

from __future__ import annotations

import functools
import weakref

import torch
from torch import nn
from torch.nn import functional as F

from glassformer import block_quant, fast, fast_blocks, fast_int8
from glassformer.nn import hooks
from glassformer.nn.kv_cache import KVCache
from glassformer.nn.norms import LayerNorm, RMSNorm


def unsupported(net: nn.Module) -> str | None:
    """Why `DecodeStep` cannot run ``net``, or None when it can."""
    config = getattr(net, "config", None)
    if config is None or not config.generates or config.seq2seq:
        return "only decoder-only language models"
    pre_norm = config.norm_on_input and not config.norm_on_output  # x + f(N(x)) and nothing else
    reasons = {
        "a mixture of experts": config.moe,
        f"norm placement {config.norm_placement!r} (only 'pre')": not pre_norm,
        f"{config.positions!r} positions (a bias on scores)": config.positions in ("alibi", "t5_relative"),
        "soft-capped scores or logits": config.attn_softcap is not None or config.logit_softcap is not None,
        "q/k-norm over the whole projection": config.qk_norm and config.qk_norm_scope == "all",
        "a local RoPE base": config.rope_local_base is not None,
        # the step computes x W^T + b from each W: a linear layer of another kind (a LoRA
        # adapter's, gf.lora) computes more, which it would leave out
        "linear layers other than nn.Linear (LoRA adapters: gf.merge_lora folds them in)": any(
            isinstance(m, nn.Linear) and type(m) not in (nn.Linear, fast.DecodeLinear) for m in net.modules()
        ),
        "training mode": net.training,
        "weights off the CPU": any(p.device.type != "cpu" for p in net.parameters()),
        "glassformer.fast switched off": not fast.enabled(net),
    }
    return next((reason for reason, applies in reasons.items() if applies), None)


def _blocks(kind: str):
    """A maker of ``kind`` block products from a weight."""
    return lambda weight: fast_blocks.BlockProduct(block_quant.quantize(weight, kind))


QUANTIZED = {"int8": fast_int8.Int8Product, **{kind: _blocks(kind) for kind in block_quant.KINDS}}
HEAD = {"int8": "int8", **block_quant.HEAD_KIND}  # the head's kind beside each
WEIGHTS = ("float32", *QUANTIZED)
_STEPS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # net -> its DecodeStep
_CHOSEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # net -> the weights asked for


def use_weights(net: nn.Module, weights: str) -> None:
    """Decode ``net`` with "float32" weights (the default) or quantized copies (`QUANTIZED`)."""
    if weights not in WEIGHTS:
        raise ValueError(f"decode weights {weights!r}; allowed values: {', '.join(WEIGHTS)}")
    _CHOSEN[net] = weights


def step_for(net: nn.Module) -> DecodeStep | None:
    """``net``'s decode step with its weights' current layout, or None where it cannot serve
    (`unsupported`) or a hook is attached (a hook must see the plain modules run)."""
    if unsupported(net) is not None or _hooked(net):
        return None
    step, asked = _STEPS.get(net), _CHOSEN.get(net, "float32")
    if step is None or not step.current() or step.asked != asked:
        _STEPS.pop(net, None)  # free the old layout before making the new one
        step = _STEPS[net] = DecodeStep(net, asked)
    return step


def _hooked(net: nn.Module) -> bool:
    """Whether a hook function is attached (to any hook point: the rule `fast.DecodeLinear`
    follows too) or a torch module hook anywhere in ``net``."""
    if hooks.any_attached():
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in net.modules())


class _Float32Product:
    """x W^T + b from the inference copy of W that its `fast.DecodeLinear` keeps (no copy of our own)."""

    def __init__(self, linear: nn.Linear) -> None:
        if not isinstance(linear, fast.DecodeLinear):
            raise ValueError(f"{linear} is not a fast.DecodeLinear: switch glassformer.fast on (fast.enable)")
        self.linear = linear

    def __call__(self, x: torch.Tensor, bias: torch.Tensor | None = None) -> torch.Tensor:
        return fast.inference_product(x, self.linear.prepared(), bias)


@functools.cache
def faster_than_float32(weights: str, out_features: int, in_features: int, threads: int) -> tuple[bool, str]:
    """(whether the ``weights`` product of an out x in matrix beats the float32 decode product on
    this CPU, with the timings): medians of single-row products, taken in turn, over copies of the
    matrix that together exceed the caches, once per process, kind, shape and thread count."""
    copies = fast.copies_past_caches(out_features * in_features)
    matrices = [torch.randn(out_features, in_features) * 0.02 for _ in range(copies)]
    splits = [fast.inference_weight(w) for w in matrices]
    products = [QUANTIZED[weights](w) for w in matrices]
    x = torch.randn(1, in_features)
    runs = {
        "float32": lambda: [fast.inference_product(x, split) for split in splits],
        weights: lambda: [product(x) for product in products],
    }
    median = {name: seconds / copies for name, seconds in fast.interleaved_medians(runs, repeats=9).items()}
    return median[weights] < median["float32"], (
        f"{weights} {median[weights] * 1e6:.0f} us vs float32 {median['float32'] * 1e6:.0f} us per "
        f"{out_features} x {in_features} product on {threads} threads"
    )


class _Layer:
    """One block's matrices for the decode step, each as a product (float32 or quantized), with
    its bias. Quantized copies are the step's own, so a gated FFN's two input matrices become
    one, [W_gate; W_up]: one kernel launch fewer per block."""

    def __init__(self, block: nn.Module, quantized) -> None:
        attn, ffn = block.attn, block.ffn
        self.attn, self.act_fn = attn, ffn.act_fn
        self.attn_norm, self.ffn_norm = block.attn_norm, block.ffn_norm  # ffn_norm None: shared
        self.parallel = block.parallel
        linears = {"qkv": attn.qkv_proj, "o": attn.o_proj, "gate": ffn.gate_proj, "up": ffn.up_proj}
        linears = {name: m for name, m in {**linears, "down": ffn.down_proj}.items() if m is not None}
        if quantized is None:
            self.products = {name: (_Float32Product(linear), linear.bias) for name, linear in linears.items()}
            return
        matrices = {name: (linear.weight, linear.bias) for name, linear in linears.items()}  # W, b
        if "gate" in linears:
            gate, up = linears["gate"], linears["up"]
            both = None if gate.bias is None and up.bias is None else torch.cat([_bias(gate), _bias(up)])
            matrices["gate_up"] = (torch.cat([matrices.pop("gate")[0], matrices.pop("up")[0]]), both)
        self.products = {name: (quantized(weight), bias) for name, (weight, bias) in matrices.items()}

    def __call__(self, name: str, x: torch.Tensor) -> torch.Tensor:
        """x W^T + b with matrix ``name`` (qkv, o, gate, up or gate_up, down)."""
        product, bias = self.products[name]
        return product(x, bias)


class DecodeStep:
    """A decoder's weights laid out for decoding, and the step that reads them."""

    def __init__(self, net: nn.Module, weights: str = "float32") -> None:
        reason = unsupported(net)
        if reason is not None:
            raise ValueError(f"DecodeStep cannot run this model: {reason}")
        if weights not in WEIGHTS:
            raise ValueError(f"decode weights {weights!r}; allowed values: {', '.join(WEIGHTS)}")
        self._net = weakref.ref(net)
        self.stack = net.output_stack
        self.asked, self.weights, self.reason = weights, weights, "asked for"
        if weights != "float32":  # only where the kernel beats float32 on this CPU
            c = net.config
            widest = (2 if c.gated else 1) * c.d_ff
            faster, timings = faster_than_float32(weights, widest, c.d_model, torch.get_num_threads())
            self.weights = weights if faster else "float32"
            self.reason = f"{'faster' if faster else 'slower, so float32'}: {timings}"
        quantized = QUANTIZED.get(self.weights)
        self.layers = [_Layer(block, quantized) for block in self.stack.blocks]
        self.head = None if quantized is None else QUANTIZED[HEAD[self.weights]](net.lm_head.weight)
        self.windows = [w for w in self.stack.windows if w is not None]
        self._versions = self._current_versions()

    def _current_versions(self) -> list[tuple]:
        """The quantized copies' sources (float32 products read their `fast.DecodeLinear`'s own
        copy, which it remakes itself when W changes)."""
        if self.head is None:
            return []
        net = self._net()
        return [fast.version(p) for p in [*net.output_stack.blocks.parameters(), net.lm_head.weight]]

    def current(self) -> bool:
        """Whether every weight is as it was when laid out (else a new `DecodeStep` is needed)."""
        return self._current_versions() == self._versions

    def covers(self, rows: int, past: int) -> bool:
        """Whether the step computes what the modules would for ``rows`` new tokens after
        ``past`` cached ones: few rows (the decode regime) and no window hiding a key yet."""
        return rows <= fast.DECODE_ROWS and all(past < window for window in self.windows)

    @torch.no_grad()
    def __call__(self, ids: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """Logits of one new token per row after the cached ones.  ids b 1 -> b 1 v."""
        net, stack = self._net(), self.stack
        b, past = ids.shape[0], cache.length
        positions = torch.full((b, 1), past, dtype=torch.long, device=ids.device)  # b 1
        x = stack.embed(ids, positions)  # b 1 d
        rope = stack.rotary(positions, x.dtype) if stack.rotary is not None else None
        for layer in self.layers:
            x = self._block(layer, x, rope, cache)
        cache.advance(1)
        x = _norm(stack.final_norm, x)
        if self.head is None:
            return net.unembed(x)  # b 1 v
        scale, bias = net.config.lm_head_input_scale, net.lm_head.bias
        return self.head(x * scale if scale != 1.0 else x, bias)  # b 1 v: quantized W_U

    def _block(self, layer: _Layer, x: torch.Tensor, rope, cache: KVCache) -> torch.Tensor:
        """One block for the new rows.  b 1 d -> b 1 d."""
        normed = _norm(layer.attn_norm, x)
        attn = self._attention(layer, normed, rope, cache)  # b 1 d
        if layer.parallel:  # both sublayers read the block's input
            ffn_in = normed if layer.ffn_norm is None else _norm(layer.ffn_norm, x)
            return x + attn + self._ffn(layer, ffn_in)
        x = x + attn
        return x + self._ffn(layer, _norm(layer.ffn_norm, x))

    @staticmethod
    def _attention(layer: _Layer, x: torch.Tensor, rope, cache: KVCache) -> torch.Tensor:
        """softmax(q K^T * scale) V over every cached key and the new one.  b 1 d -> b 1 d."""
        attn = layer.attn
        b, h, g, e = x.shape[0], attn.n_heads, attn.n_kv_heads, attn.d_head
        qkv = layer("qkv", x)  # b 1 (h+2g)e
        qkv = qkv.view(b, 1, h + 2 * g, e).transpose(1, 2)  # b (h+2g) 1 e
        qk, v = qkv[:, : h + g], qkv[:, h + g :]
        if attn.q_norm is not None:  # each head's e features
            qk = torch.cat([_norm(attn.q_norm, qk[:, :h]), _norm(attn.k_norm, qk[:, h:])], dim=1)
        if rope is not None:
            qk = rope.apply(qk)
        k, v = cache.append(attn.layer, qk[:, h:], v)  # b g s e
        z = attn.fused_attention(qk[:, :h], k, v, None, None)  # b h 1 e: no key is hidden
        return layer("o", z.transpose(1, 2).reshape(b, 1, h * e))

    @staticmethod
    def _ffn(layer: _Layer, x: torch.Tensor) -> torch.Tensor:
        """act(x W_gate) * x W_up (plain: act(x W_up)), then W_down.  b 1 d -> b 1 d."""
        if "gate_up" in layer.products:
            gate, up = layer("gate_up", x).chunk(2, dim=-1)  # b 1 f each
            act = layer.act_fn(gate) * up
        elif "gate" in layer.products:
            act = layer.act_fn(layer("gate", x)) * layer("up", x)  # b 1 f
        else:
            act = layer.act_fn(layer("up", x))  # b 1 f
        return layer("down", act)


def _bias(linear: nn.Linear) -> torch.Tensor:
    """``linear``'s bias, zeros where it has none."""
    return linear.bias if linear.bias is not None else torch.zeros(linear.out_features)


def _norm(norm: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """``norm(x)`` as one fused kernel where that is bit-identical (float32), else the module."""
    if x.dtype == torch.float32 and type(norm) is RMSNorm:
        return F.rms_norm(x, x.shape[-1:], norm.weight, norm.eps)
    if type(norm) is LayerNorm:
        return F.layer_norm(x, x.shape[-1:], norm.weight, norm.bias, norm.eps)
    return norm(x)


@torch.no_grad()
def compare_weights(
    net: nn.Module, prompts: list[list[int]], weights: str = "int8", new_tokens: int = 8
) -> tuple[float, float]:
    """What ``weights`` (quantized decode weights) do to ``net``'s next-token distributions,
    teacher-forced: float32's greedy continuation of each prompt is fed to both steps, so every
    position sees the same input. -> (top-1 agreement, mean KL(float32 || quantized) in nats),
    over every new position."""
    kinds = ("float32", weights)
    steps = {kind: DecodeStep(net, kind) for kind in kinds}
    agree, divergence, count = 0, 0.0, 0
    for prompt in prompts:
        ids = torch.tensor([prompt])
        caches = {k: KVCache.for_model(net.config, 1, len(prompt) + new_tokens) for k in kinds}
        prefill = [net(ids, cache=caches[k]) for k in kinds][0]  # b t v: the modules fill both caches
        token = prefill[:, -1:].argmax(-1)  # b 1
        for _ in range(new_tokens):
            reference, approximate = (steps[k](token, caches[k])[0, -1].log_softmax(-1) for k in kinds)
            agree += int(reference.argmax() == approximate.argmax())
            divergence += float((reference.exp() * (reference - approximate)).sum())
            count += 1
            token = reference.argmax().view(1, 1)
    return agree / count, divergence / count
