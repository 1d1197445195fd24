"""What a model computes, step by step: the workshop's diagram.

`stages(net)` lists the steps of one forward pass in order: the model's own hook points
(`net.hook_points`), each with the trace name that holds its value, and the mask, a step with
no tensor of its own; each described by the stage catalogue (`stage_catalogue.py`). A step the
model does not have is not listed: its hook point does not exist (no position vectors for
RoPE / ALiBi / T5 models, cross-attention only in an encoder-decoder's decoder) or is not a
step of its pass (`_listed`).

>>> import glassformer as gf
>>> from glassformer.config import llama_style
>>> [s["id"] for s in stages(gf.build(llama_style(n_layers=1)))][:6]
['tokens', 'embed.tokens', 'embed.out', 'blocks.0.attn.in', 'blocks.0.attn.q', 'blocks.0.attn.k']

`summary(config)` also carries every field an equation of the page needs to be the
model's own rather than the textbook's: the norm's epsilon, which projections have a bias,
the embedding scale and norm, the head (tied, biased, its input scale), the sliding window
and the constants of the position scheme:

>>> arch = summary(llama_style(n_layers=1, rope_base=500000.0, norm_eps=1e-6))
>>> arch["norm_eps"], arch["attention"]["qkv_bias"], arch["position_params"]["base"]
(1e-06, False, 500000.0)
"""

from __future__ import annotations

import math
import re
from typing import Any

from glassformer.config import ModelConfig
from glassformer.nn.hooks import hook_name
from glassformer.nn.positions import RotaryEmbedding, alibi_slopes
from glassformer.workshop.walk.model_words import model_words
from glassformer.workshop.walk.stage_catalogue import describe
from glassformer.workshop.walk.stage_words import POSITION_NAMES, Context, attention_kind


def summary(config: ModelConfig) -> dict[str, Any]:
    """The architecture in a few fields: what the page shows next to the diagram (its plain
    words too, `model_words`), and every constant its equations (static/js/equations/equations.js) need
    to be this model's own."""
    return {
        "family": config.family,
        "words": model_words(config),  # what it is, its blocks, its norms' place: shown as they are
        "stacks": [stack._asdict() for stack in config.stacks],
        "capabilities": {  # what the page asks instead of the family's name
            "has_lm_head": config.has_lm_head,
            "generates": config.generates,
            "masked_lm": config.masked_lm,
            "sentence_encoder": config.sentence_encoder,
            "seq2seq": config.seq2seq,
            "vision": config.vision,  # reads an image: [CLS] and its patches are the tokens
            # where each sublayer's norms sit: x + f(N(x)), x + N2(f(.)), N(x + f(x)); a final N(x)
            "norm_on_input": config.norm_on_input,
            "norm_on_output": config.norm_on_output,
            "norm_after_add": config.norm_after_add,
            "has_final_norm": config.has_final_norm,
        },
        "norm": config.norm,
        "placement": config.norm_placement,  # its name only (shown; capabilities say what it does)
        "parallel_residual": config.parallel_residual,  # attention and the FFN both read x
        "shared_norm": config.shared_norm,  # ... through one norm (Phi-2)
        "positions": config.positions,
        "positions_text": POSITION_NAMES[config.positions],
        "attention": {
            "kind": attention_kind(config),
            "heads": config.n_heads,
            "kv_heads": config.n_kv_heads,
            "d_head": config.d_head,
            "scale": config.attn_scale if config.attn_scale is not None else config.d_head**-0.5,
            "window": config.attn_window,  # None: every key the mask allows
            # each block's own window (None: global), by layer; Gemma 2 and 3 mix both
            "layer_windows": [config.layer_window(i) for i in range(max(config.stack_depths))],
            "global_every": config.global_every,
            "softcap": config.attn_softcap,  # scores -> cap tanh(scores / cap) before the mask (Gemma 2)
            "qkv_bias": config.qkv_bias,
            "qk_norm": config.qk_norm,  # q and k normalized before RoPE
            "qk_norm_scope": config.qk_norm_scope,  # each head's e features, or all h e (g e) at once
            "out_bias": config.out_bias,
        },
        "ffn": {
            "activation": config.activation,
            "gated": config.gated,
            "d_ff": config.d_ff,
            "bias": config.ffn_bias,
            # a mixture of experts: n experts of expert_d_ff, k per token (0: one dense FFN)
            "experts": config.n_experts,
            "per_token": config.experts_per_token if config.moe else 0,
            "expert_d_ff": config.expert_d_ff if config.moe else 0,
            "shared_d_ff": config.shared_expert_d_ff,
            "router": config.router if config.moe else None,
            "normalize_weights": config.normalize_expert_weights,
        },
        "d_model": config.d_model,
        "vocab_size": config.vocab_size,
        "norm_eps": config.norm_eps,
        "embeddings": {
            "scale": math.sqrt(config.d_model) if config.embed_scale else 1.0,  # E[id] * scale
            "norm": config.embed_norm,  # a norm (config.norm) after the sum (BERT)
            "segments": config.type_vocab_size,  # 0: no segment table S
        },
        "position_params": _position_params(config),
        "head": _head(config),
        "classifier": _classifier(config),
        "sentence": _sentence(config),
        "vision": _vision(config),
    }


def _vision(config: ModelConfig) -> dict[str, Any] | None:
    """A vision transformer's image and patches (`nn/patches.py`); None for a text model."""
    if not config.vision:
        return None
    return {
        "image_size": config.image_size,  # H = W
        "patch_size": config.patch_size,  # P
        "channels": config.n_channels,  # C
        "patches": config.n_patches,  # n = (H / P)^2; t = n + 1 with [CLS]
    }


def _position_params(config: ModelConfig) -> dict[str, Any]:
    """The constants of the position scheme: the config's, with RoPE's base and ALiBi's
    slopes as the library's own modules compute them."""
    if config.positions == "learned":
        return {"max_seq_len": config.max_seq_len}
    if config.positions == "sinusoidal":
        return {"style": config.sinusoidal_style}  # interleaved: sin, cos, ...; halved: sins, cosines
    if config.positions == "rope":
        rotary = RotaryEmbedding(config)  # NTK scaling raises the base; linear divides positions
        local = config.rope_local_base if config.attn_window is not None else None
        return {
            "local_base": local,  # the windowed layers' own base, unscaled (Gemma 3); None: one base
            "base": config.rope_base,
            "style": config.rope_style,  # rotate_half pairs (i, i + e/2); interleaved (2i, 2i + 1)
            "scaling": config.rope_scaling,
            "factor": config.rope_scaling_factor,
            "scaled_base": rotary.base,
            "rotary_dim": config.rotary_dim or config.d_head,  # the features of each head that turn
            "position_scale": rotary.position_scale,
        }
    if config.positions == "alibi":
        return {"slopes": alibi_slopes(config.n_heads).tolist()}  # m_h, one per head
    if config.positions == "t5_relative":
        return {"buckets": config.relative_buckets, "max_distance": config.relative_max_distance}
    return {}


def _classifier(config: ModelConfig) -> dict[str, Any] | None:
    """A classification head: its classes (named, or numbered) and its pooling; None without one."""
    if not config.n_classes:
        return None
    return {"classes": list(config.labels), "pooling": config.classifier_pooling}


def _sentence(config: ModelConfig) -> dict[str, Any] | None:
    """A sentence encoder's ending (no MLM head, no classifier): its pooling; None otherwise."""
    if not config.sentence_encoder:
        return None
    return {"pooling": config.sentence_pooling, "normalized": True}


def _head(config: ModelConfig) -> dict[str, Any]:
    """What turns the final stream into logits. An encoder's masked-LM head (`MLMHead`)
    always has its biases and no input scale; an LM head follows the config."""
    mlm = config.masked_lm
    return {
        "tied": config.tie_embeddings,  # output matrix E^T, the token table transposed
        "softcap": config.logit_softcap,  # logits -> cap tanh(logits / cap) (Gemma 2, 3)
        "bias": True if mlm else config.lm_head_bias,
        "input_scale": 1.0 if mlm else config.lm_head_input_scale,  # T5 (tied): d_model^-0.5
    }


def stages(net) -> list[dict[str, Any]]:
    """Every step of ``net``'s forward pass, in order: its own hook points (and the mask, which
    has none), each described by the stage catalogue (`stage_catalogue.describe`): id, group,
    trace name, what its name says (`name_parts`: stack, layer, kind, cross; the page parses no
    name), title, plain title, words, shape letters, equation, code location."""
    config = net.config
    causal = {stack.name: stack.causal for stack in config.stacks}
    out = [_stage("tokens", "input", None, "tokens", Context(config))]
    # the mask, a step with no tensor, comes before the softmax: after the scores, or after
    # their soft-cap where the model caps them (Gemma 2)
    masked_after = "attn.capped" if config.attn_softcap is not None else "attn.scores"
    for name in net.hook_points:
        if not _listed(name, config):
            continue
        stack, layer, cross, kind = name_parts(name)
        ctx = Context(config, causal=causal.get(stack, False) and not cross, cross=cross, layer=layer)
        out.append(_stage(name, _group(name, stack, layer, kind), name, kind, ctx, stack))
        if kind == masked_after and (ctx.causal or ctx.window):
            mask = name.removesuffix(kind.removeprefix("attn.")) + "mask"
            out.append(_stage(mask, out[-1]["group"], None, "attn.mask", ctx, stack))
    return out


def _listed(name: str, config: ModelConfig) -> bool:
    """Whether a hook point is a step of this model's pass. Two are not: a post-norm stack's
    final norm (the identity: each block already normalized its sum), and the vocabulary head
    of a model without one (a sentence encoder, a classifier)."""
    if name.endswith("final_norm"):
        return config.has_final_norm
    if name in ("logits", "logits_raw"):
        return config.has_lm_head
    return True


_NAME = re.compile(r"^(?:(encoder|decoder)\.)?(?:blocks\.(\d+)\.)?(.+)$")


def name_parts(name: str) -> tuple[str, int | None, bool, str]:
    """ "decoder.blocks.1.cross_attn.q" -> ("decoder", 1, True, "attn.q"): the one parser of a
    stage's name; each stage carries what it says (`_stage`), so the page parses none."""
    stack, layer, rest = _NAME.match(name).groups()
    cross = rest.startswith("cross_attn.")
    return stack or "", None if layer is None else int(layer), cross, rest.replace("cross_attn.", "attn.", 1)


def _group(name: str, stack: str, layer: int | None, kind: str) -> str:
    """The part of the walk a step belongs to: a stack's embedding, one of its blocks, its end
    (the final norm), or the model's output."""
    if layer is not None:  # a block: the prefix of its hook names ("decoder.blocks.1")
        return hook_name("", layer, stack)
    if kind.startswith("embed."):
        return stack or "embed"
    if kind == "final_norm":
        return f"{stack}.final" if stack else "final"
    return "output"


def _stage(id_: str, group: str, trace: str | None, kind: str, ctx: Context, stack: str = "") -> dict:
    """One step: its names, what its name says (stack "" | "encoder" | "decoder", layer int |
    None, kind: the step whatever its block ("attn.q" self or cross), cross), the catalogue's words."""
    where = {"stack": stack, "layer": ctx.layer, "kind": kind, "cross": ctx.cross}
    return {"id": id_, "group": group, "trace": trace, **where, **describe(kind, ctx)}


def model_entry(name: str, lm, fine_tuned_from: str | None = None, quantization=None) -> dict[str, Any]:
    """What `/api/models` says of the model ``name``: its label, its sizes, its architecture, its
    stages; ``quantization`` (a `quantized_model.Quantization`): its kind, in the label too."""
    config = lm.config
    quantized = None
    if quantization is not None:
        quantized = {
            "kind": quantization.kind,
            "label": quantization.label,
            "bits": quantization.bits_per_weight,
        }
    return {
        "name": name,
        "label": name if quantization is None else quantization.model_label(name),
        "quantization": quantized,
        "fine_tuned_from": fine_tuned_from,
        "parameters": lm.net.num_parameters(),
        "max_seq_len": config.max_seq_len,
        "reads_text": lm.tokenizer is not None,
        "reads_images": lm.config.vision,
        "architecture": summary(config),
        "stages": stages(lm.net),
    }
