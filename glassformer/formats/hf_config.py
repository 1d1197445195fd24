"""Reading and writing Hugging Face ``config.json`` fields: what the family modules share.

Each family module (``hf_gpt2``, ``hf_llama``, ...) turns a ``config.json`` dict into a
`ModelConfig` and back; the names HF gives activations and special tokens are the same
across families, so their translation lives here, once.
"""

from __future__ import annotations

from typing import Any

HF_ACTIVATIONS = {  # HF hidden_act / activation_function -> ours
    "gelu": "gelu",
    "gelu_new": "gelu_tanh",
    "gelu_pytorch_tanh": "gelu_tanh",
    "relu": "relu",
    "silu": "silu",
    "swish": "silu",
}


def hf_activation(name: str) -> str:
    """Our activation for an HF ``hidden_act`` / ``activation_function`` name.

    >>> hf_activation("gelu_new")
    'gelu_tanh'
    """
    if name not in HF_ACTIVATIONS:
        raise ValueError(f"activation {name!r} is not supported; supported: {', '.join(HF_ACTIVATIONS)}")
    return HF_ACTIVATIONS[name]


def hf_activation_name(activation: str, tanh_gelu: str = "gelu_new") -> str:
    """The HF name of our activation, the inverse of `hf_activation`; for a gated one (SwiGLU,
    GeGLU) the name of its gate's. ``tanh_gelu`` spells tanh-GELU: ``gelu_new`` (GPT-2) or
    ``gelu_pytorch_tanh`` (Llama-style configs).

    >>> hf_activation_name("swiglu"), hf_activation_name("gelu_tanh")
    ('silu', 'gelu_new')
    """
    gate = {"swiglu": "silu", "geglu": "gelu", "geglu_tanh": "gelu_tanh"}.get(activation, activation)
    return tanh_gelu if gate == "gelu_tanh" else gate


def special_id(hf: dict[str, Any], name: str) -> int | None:
    """A special-token id, or None when absent or outside the vocabulary (tiny test configs).

    >>> special_id({"vocab_size": 10, "eos_token_id": [2, 3]}, "eos_token_id")
    2
    """
    value = hf.get(name)
    if isinstance(value, list):
        value = value[0] if value else None
    return value if value is not None and 0 <= value < hf["vocab_size"] else None


def partial_rotary(hf: dict[str, Any], fraction_key: str, default: float) -> int | None:
    """``rotary_dim`` for a config that turns a fraction of each head (GPT-NeoX's
    ``rotary_pct``, Phi's ``partial_rotary_factor``): int(d_head * fraction), None for all.

    >>> partial_rotary({"hidden_size": 64, "num_attention_heads": 4, "rotary_pct": 0.25}, "rotary_pct", 1.0)
    4
    """
    d_head = hf.get("head_dim") or hf["hidden_size"] // hf["num_attention_heads"]  # as HF's RoPE reads it
    rotary = int(d_head * hf.get(fraction_key, default))
    return rotary if rotary < d_head else None


def rotary_fraction(rotary_dim: int | None, d_head: int) -> float:
    """The inverse of `partial_rotary`: the fraction of each head RoPE turns (1.0 for all).

    >>> rotary_fraction(4, 16), rotary_fraction(None, 16)
    (0.25, 1.0)
    """
    return 1.0 if rotary_dim is None else rotary_dim / d_head
