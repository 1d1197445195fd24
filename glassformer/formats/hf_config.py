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
