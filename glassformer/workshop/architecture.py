"""What a model computes, step by step, read from its `ModelConfig`: the workshop's diagram.

`stages(config)` lists the steps of one forward pass in order, each with the trace name
that holds its value (None for a step with no tensor of its own, such as the mask) and
the letters of its shape. A step the model does not have is not listed: no position
vectors for RoPE / ALiBi / T5 models, no gate for plain FFNs, cross-attention only in
an encoder-decoder's decoder, the final norm only where pre-norm blocks need one.

>>> from glassformer.config import llama_style
>>> [s["id"] for s in stages(llama_style(n_layers=1))][:6]
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
from typing import Any

from glassformer.config import ModelConfig
from glassformer.nn.positions import RotaryEmbedding, alibi_slopes

POSITION_NAMES = {
    "learned": "learned position vectors, added",
    "sinusoidal": "sinusoidal position vectors, added",
    "rope": "RoPE: q and k rotated by position",
    "alibi": "ALiBi: a distance penalty added to the scores",
    "t5_relative": "T5 relative position bias added to the scores",
    "none": "no position information",
}
POOLING_NAMES = {  # glassformer/models/classifier.py, pool_sequence
    "cls": "the first token's vector",
    "mean": "the mean of the token vectors",
    "pooler": "tanh(W_p x_0 + b_p), BERT's pooler",
    "last": "the last token's vector",
}


def attention_kind(config: ModelConfig) -> str:
    """MHA (g = h), GQA (1 < g < h) or MQA (g = 1)."""
    if config.n_kv_heads == config.n_heads:
        return "MHA"
    return "MQA" if config.n_kv_heads == 1 else "GQA"


def summary(config: ModelConfig) -> dict[str, Any]:
    """The architecture in a few fields: what the page shows next to the diagram, and every
    constant its equations (static/js/equations.js) need to be this model's own."""
    stacks = [{"name": "", "layers": config.n_layers, "causal": config.family == "decoder", "cross": False}]
    if config.family == "encoder_decoder":
        stacks = [
            {"name": "encoder", "layers": config.n_layers, "causal": False, "cross": False},
            {"name": "decoder", "layers": config.n_decoder_layers, "causal": True, "cross": True},
        ]
    return {
        "family": config.family,
        "stacks": stacks,
        "norm": config.norm,
        "placement": config.norm_placement,
        "positions": config.positions,
        "positions_text": POSITION_NAMES[config.positions],
        "attention": {
            "kind": attention_kind(config),
            "heads": config.n_heads,
            "kv_heads": config.n_kv_heads,
            "d_head": config.d_head,
            "scale": config.attn_scale if config.attn_scale is not None else config.d_head**-0.5,
            "window": config.attn_window,  # None: every key the mask allows
            "qkv_bias": config.qkv_bias,
            "out_bias": config.out_bias,
        },
        "ffn": {
            "activation": config.activation,
            "gated": config.gated,
            "d_ff": config.d_ff,
            "bias": config.ffn_bias,
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
        return {
            "base": config.rope_base,
            "style": config.rope_style,  # rotate_half pairs (i, i + e/2); interleaved (2i, 2i + 1)
            "scaling": config.rope_scaling,
            "factor": config.rope_scaling_factor,
            "scaled_base": rotary.base,
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
    if config.family != "encoder" or config.mlm_head or config.n_classes:
        return None
    return {"pooling": config.sentence_pooling, "normalized": True}


def _head(config: ModelConfig) -> dict[str, Any]:
    """What turns the final stream into logits. An encoder's masked-LM head (`MLMHead`)
    always has its biases and no input scale; an LM head follows the config."""
    mlm = config.family == "encoder"
    return {
        "tied": config.tie_embeddings,  # output matrix E^T, the token table transposed
        "bias": True if mlm else config.lm_head_bias,
        "input_scale": 1.0 if mlm else config.lm_head_input_scale,  # T5 (tied): d_model^-0.5
    }


def stages(config: ModelConfig) -> list[dict[str, Any]]:
    """Every step of the forward pass, in order: id, group, title, trace name, shape letters."""
    out = [_stage("tokens", "input", "tokens", None, "t")]
    for stack in summary(config)["stacks"]:
        out += _stack_stages(config, stack)
    if config.n_classes:  # a classifier ends at its class logits, not at the vocabulary
        pooling = POOLING_NAMES[config.classifier_pooling]
        out.append(_stage("classifier.pooled", "output", f"pooled: {pooling}", "classifier.pooled", "d"))
        logits = "class logits: W_c pooled + b_c"
        out.append(_stage("classifier.logits", "output", logits, "classifier.logits", "c"))
    elif config.family != "encoder" or config.mlm_head:
        head = "the masked-LM head" if config.family == "encoder" else "the LM head"
        out.append(_stage("logits", "output", f"logits: {head}", "logits", "t v"))
    else:  # a sentence encoder ends at its sentence vector (glassformer/models/sentence.py)
        pooling = POOLING_NAMES[config.sentence_pooling]
        out.append(_stage("sentence.pooled", "output", f"pooled: {pooling}", "sentence.pooled", "d"))
        out.append(
            _stage(
                "sentence.vector", "output", "the sentence vector: pooled / ‖pooled‖", "sentence.vector", "d"
            )
        )
    return out


def _stage(id_: str, group: str, title: str, trace: str | None, shape: str) -> dict[str, Any]:
    return {"id": id_, "group": group, "title": title, "trace": trace, "shape": shape}


def _stack_stages(config: ModelConfig, stack: dict[str, Any]) -> list[dict[str, Any]]:
    prefix = f"{stack['name']}." if stack["name"] else ""
    group = stack["name"] or "embed"
    out = [_stage(f"{prefix}embed.tokens", group, "token embedding E[T]", f"{prefix}embed.tokens", "t d")]
    if config.positions in ("learned", "sinusoidal"):
        out.append(
            _stage(
                f"{prefix}embed.positions",
                group,
                POSITION_NAMES[config.positions],
                f"{prefix}embed.positions",
                "t d",
            )
        )
    out.append(
        _stage(f"{prefix}embed.out", group, "the stream entering block 0", f"{prefix}embed.out", "t d")
    )
    for i in range(stack["layers"]):
        out += _block_stages(config, f"{prefix}blocks.{i}", stack)
    if config.norm_placement == "pre":
        out.append(
            _stage(
                f"{prefix}final_norm",
                f"{prefix}final",
                f"final {_norm(config)}",
                f"{prefix}final_norm",
                "t d",
            )
        )
    return out


def _norm(config: ModelConfig) -> str:
    return "RMSNorm" if config.norm == "rmsnorm" else "LayerNorm"


def _block_stages(config: ModelConfig, block: str, stack: dict[str, Any]) -> list[dict[str, Any]]:
    norm, pre = _norm(config), config.norm_placement == "pre"
    # a post-norm block normalizes each sum: the step is named for what it computes
    add = "residual add: x + out" if pre else f"residual add, then {norm}: {norm}(x + out)"
    out = _attention_stages(config, block, "attn", "self-attention", stack["causal"], pre, norm)
    out.append(_stage(f"{block}.resid_mid", block, add, f"{block}.resid_mid", "t d"))
    if stack["cross"]:
        out += _attention_stages(config, block, "cross_attn", "cross-attention", False, pre, norm)
        out.append(_stage(f"{block}.resid_cross", block, add, f"{block}.resid_cross", "t d"))
    ffn = f"{block}.ffn"
    hidden = f"x W_gate (the gate, {config.activation})" if config.gated else "x W_up"
    act = f"{config.activation}(x W_gate) * x W_up" if config.gated else f"{config.activation}(x W_up)"
    out += [
        _stage(
            f"{ffn}.in",
            block,
            f"feed-forward input ({norm} first)" if pre else "feed-forward input",
            f"{ffn}.in",
            "t d",
        ),
        _stage(f"{ffn}.hidden", block, hidden, f"{ffn}.hidden", "t f"),
        _stage(f"{ffn}.act", block, act, f"{ffn}.act", "t f"),
        _stage(f"{ffn}.out", block, "W_down: back to d_model", f"{ffn}.out", "t d"),
        _stage(
            f"{block}.resid_post",
            block,
            "residual add: x + out" if pre else f"residual add, then {norm}: {norm}(x + out)",
            f"{block}.resid_post",
            "t d",
        ),
    ]
    return out


def _attention_stages(config, block: str, part: str, title: str, causal: bool, pre: bool, norm: str):
    name = f"{block}.{part}"
    kind = attention_kind(config)
    kv = "b g s e" if kind != "MHA" else "b h s e"
    scale = (
        "Q K^T"
        if config.attn_scale == 1.0
        else ("Q K^T / sqrt(d_head)" if config.attn_scale is None else f"Q K^T * {config.attn_scale:g}")
    )
    scores_text = scale + (
        " + position bias" if config.positions in ("alibi", "t5_relative") and part == "attn" else ""
    )
    return [
        _stage(
            f"{name}.in",
            block,
            f"{title} input ({norm} first)" if pre else f"{title} input",
            f"{name}.in",
            "t d",
        ),
        _stage(
            f"{name}.q",
            block,
            "queries Q" + (" (RoPE applied)" if config.positions == "rope" and part == "attn" else ""),
            f"{name}.q",
            "h t e",
        ),
        _stage(f"{name}.k", block, f"keys K ({kind})", f"{name}.k", kv[2:]),
        _stage(f"{name}.v", block, f"values V ({kind})", f"{name}.v", kv[2:]),
        _stage(f"{name}.scores", block, scores_text, f"{name}.scores", "h t s"),
        *_mask_stage(config, name, block, causal, windowed=part == "attn"),
        _stage(f"{name}.pattern", block, "softmax: attention weights", f"{name}.pattern", "h t s"),
        _stage(f"{name}.z", block, "weighted values: pattern @ V", f"{name}.z", "h t e"),
        _stage(f"{name}.out", block, "output projection W_O", f"{name}.out", "t d"),
    ]


def _mask_stage(
    config: ModelConfig, name: str, block: str, causal: bool, windowed: bool
) -> list[dict[str, Any]]:
    """The mask step, where the model has one (a single unpadded input needs none otherwise).
    The sliding window is a self-attention mask: cross-attention sees every encoder token
    (`TransformerStack.forward` builds it from padding alone)."""
    window = config.attn_window if windowed else None
    if not causal and window is None:
        return []
    title = "causal mask: no looking ahead" if causal else "mask"
    if window is not None:
        title += f", sliding window of {window}"
    return [_stage(f"{name}.mask", block, title, None, "t s")]
