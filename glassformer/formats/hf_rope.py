"""RoPE settings of a Hugging Face ``config.json``, in both schemas transformers writes.

transformers 4.x wrote them as top-level keys: ``rope_theta``, a ``rope_scaling`` dict
(``{"rope_type" or "type": "linear", "factor": 8.0, ...}``), a partial rotary fraction
(``partial_rotary_factor``; GPT-NeoX's ``rotary_pct``, with ``rotary_emb_base`` for the base) and
Gemma 3's ``rope_local_base_freq``. transformers 5.x writes one dict, ``rope_parameters =
{"rope_theta", "rope_type", "factor", ..., "partial_rotary_factor"}``, or one such dict per
layer type (Gemma 3: ``{"sliding_attention": {...}, "full_attention": {...}}``).

`read_rope` reads either (both, when a file holds both, must agree) into one `Rope`; every
key inside is read or refused by name, and a ``rope_type`` Glassformer does not compute
(``yarn``, ``longrope``, ``dynamic``, ...) is refused: a model is never loaded with the
wrong positions. `rope_to_hf` writes a `ModelConfig`'s settings in both schemas at once
(transformers 5.x reads ``rope_parameters`` and ignores the rest; 4.x reads the top-level
keys and keeps the dict as an unused attribute), so either version reads the file right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from glassformer.config import ModelConfig

DEFAULT_BASE = {"mixtral": 1e6, "gemma3_text": 1e6}  # a config class's rope_theta when a file names none
LLAMA3_KEYS = {  # rope_scaling / rope_parameters key -> our ModelConfig field
    "low_freq_factor": "rope_low_freq_factor",
    "high_freq_factor": "rope_high_freq_factor",
    "original_max_position_embeddings": "rope_original_max_len",
}
KEYS = {  # rope_type -> the keys it may hold besides rope_theta, rope_type and partial_rotary_factor
    "default": set(),
    # linear scaling divides positions by factor; original_max_position_embeddings, where a file
    # has it, only notes the context the model was trained on
    "linear": {"factor", "original_max_position_embeddings"},
    "llama3": {"factor", *LLAMA3_KEYS},
}
COMMON = {"rope_theta", "rope_type", "type", "partial_rotary_factor"}


@dataclass(frozen=True)
class Rope:
    """One set of RoPE settings: rotation base, scaling (``"none"``, ``"linear"``, ``"llama3"``)
    with its factors, and the fraction of each head's features rotated.

    >>> Rope(500000.0).fields()
    {'rope_base': 500000.0, 'rope_scaling': 'none', 'rope_scaling_factor': 1.0}
    """

    base: float
    scaling: str = "none"
    factor: float = 1.0
    llama3: tuple[tuple[str, float], ...] = ()  # (our field, value) of llama3 scaling
    fraction: float = 1.0

    def fields(self) -> dict[str, Any]:
        """Our ModelConfig fields for these settings (the fraction is the family's to place)."""
        return {
            "rope_base": self.base,
            "rope_scaling": self.scaling,
            "rope_scaling_factor": self.factor,
            **dict(self.llama3),
        }

    def rotary_dim(self, d_head: int) -> int | None:
        """Features of each head rotated, None for all: int(d_head * fraction), as HF counts.

        >>> Rope(1e4, fraction=0.25).rotary_dim(16), Rope(1e4).rotary_dim(16)
        (4, None)
        """
        rotary = int(d_head * self.fraction)
        return rotary if rotary < d_head else None


def read_rope(
    hf: dict[str, Any],
    *,
    default_base: float = 10000.0,
    scalings: tuple[str, ...] = ("linear", "llama3"),
    partial: float | None = None,
    layer_type: str | None = None,
) -> Rope:
    """The RoPE settings of ``hf`` (a config.json dict of either schema).

    ``default_base``: the family's base when the file names none (its config class's default);
    ``scalings``: the scaling types the family computes; ``partial``: the fraction of each head it
    rotates when the file names none (None: every feature, always); ``layer_type``: which layers'
    settings, where they differ by layer type.

    >>> read_rope({"model_type": "llama", "rope_parameters": {"rope_type": "linear", "factor": 2.0}})
    Rope(base=10000.0, scaling='linear', factor=2.0, llama3=(), fraction=1.0)
    >>> read_rope({"model_type": "llama", "rope_theta": 5e5}).base
    500000.0
    >>> read_rope({"model_type": "llama", "rope_parameters": {"rope_type": "yarn", "factor": 4.0}})
    Traceback (most recent call last):
    ...
    ValueError: llama config.json: RoPE type 'yarn' is not supported (Glassformer computes default, ...
    """
    kind = hf.get("model_type", "?")
    settings = _merged(hf, layer_type, kind)
    rope_type = settings.get("rope_type", settings.get("type")) or "default"
    allowed = ("default", *scalings)
    if rope_type not in allowed:
        raise ValueError(
            f"{kind} config.json: RoPE type {rope_type!r} is not supported (Glassformer computes "
            f"{', '.join(allowed)}): read with it, the model would see every position wrong"
        )
    unknown = sorted(k for k, v in settings.items() if k not in COMMON | KEYS[rope_type] and v is not None)
    if unknown:
        raise ValueError(
            f"{kind} config.json: RoPE setting {unknown[0]!r} = {settings[unknown[0]]!r} (with rope_type "
            f"{rope_type!r}) is not read by Glassformer, and would change the positions"
        )
    fraction = float(settings.get("partial_rotary_factor") or partial or 1.0)
    if fraction != 1.0 and partial is None:
        raise ValueError(f"{kind} config.json: partial_rotary_factor={fraction} is not supported for {kind}")
    base = float(settings.get("rope_theta") or default_base)
    if rope_type == "default":
        return Rope(base, fraction=fraction)
    llama3 = ()
    if rope_type == "llama3":  # Llama 3.1 and later: low frequencies slowed by factor, high ones kept
        llama3 = tuple((ours, float(settings[theirs])) for theirs, ours in LLAMA3_KEYS.items())
        llama3 = tuple((ours, int(v) if ours == "rope_original_max_len" else v) for ours, v in llama3)
    return Rope(base, rope_type, float(settings["factor"]), llama3, fraction)


def _merged(hf: dict[str, Any], layer_type: str | None, kind: str) -> dict[str, Any]:
    """One flat dict of settings from both schemas; a setting in both must agree."""
    legacy: dict[str, Any] = {}
    for key in ("rope_theta", "partial_rotary_factor"):
        if hf.get(key) is not None:
            legacy[key] = hf[key]
    if hf.get("rotary_emb_base") is not None:  # GPT-NeoX before rope_theta
        legacy["rope_theta"] = hf["rotary_emb_base"]
    if hf.get("rotary_pct") is not None:  # GPT-NeoX's name for partial_rotary_factor
        legacy["partial_rotary_factor"] = hf["rotary_pct"]
    scaling = hf.get("rope_scaling")
    if layer_type == "sliding_attention":  # Gemma 3's windowed layers, in 4.x: a base of their own, unscaled
        local = hf.get("rope_local_base_freq")
        legacy, scaling = ({} if local is None else {"rope_theta": local}), None
    if scaling:
        legacy.update(scaling)
    params = hf.get("rope_parameters") or {}
    if params and all(isinstance(value, dict) for value in params.values()):  # one dict per layer type
        if layer_type not in params:
            raise ValueError(
                f"{kind} config.json: rope_parameters per layer type {sorted(params)} is not supported "
                "for this family (one set of RoPE settings for every layer)"
            )
        params = params[layer_type]
    for key, value in legacy.items():
        if key in params and params[key] != value and key != "type":
            raise ValueError(
                f"{kind} config.json says {key} = {params[key]!r} in rope_parameters and {value!r} in the "
                "older top-level keys: which one the model was trained with is not clear"
            )
    return {**legacy, **params}


def rope_to_hf(config: ModelConfig, partial: bool = False) -> dict[str, Any]:
    """``config``'s RoPE settings in both schemas: ``rope_parameters`` (transformers 5.x) and
    ``rope_theta`` + ``rope_scaling`` (4.x); ``partial`` adds ``partial_rotary_factor``.

    >>> from glassformer.config import llama_style
    >>> hf = rope_to_hf(llama_style(rope_base=5e5))
    >>> hf["rope_theta"], hf["rope_scaling"], hf["rope_parameters"]
    (500000.0, None, {'rope_type': 'default', 'rope_theta': 500000.0})
    """
    scaling: dict[str, Any] | None = None
    if config.rope_scaling == "linear":
        scaling = {"rope_type": "linear", "factor": config.rope_scaling_factor}
    elif config.rope_scaling == "llama3":
        scaling = {"rope_type": "llama3", "factor": config.rope_scaling_factor}
        scaling |= {theirs: getattr(config, ours) for theirs, ours in LLAMA3_KEYS.items()}
    # NTK scaling has no HF form: written as none, so that export's read-back refuses the model
    params = {"rope_type": "default", **(scaling or {}), "rope_theta": config.rope_base}
    out: dict[str, Any] = {"rope_theta": config.rope_base, "rope_scaling": scaling}
    if partial:
        out["partial_rotary_factor"] = params["partial_rotary_factor"] = rotary_fraction(config)
    return {**out, "rope_parameters": params}


def rotary_fraction(config: ModelConfig) -> float:
    """The fraction of each head RoPE turns (1.0 for all), the inverse of `Rope.rotary_dim`.

    >>> from glassformer.config import llama_style
    >>> rotary_fraction(llama_style(d_model=64, n_heads=4, rotary_dim=4))
    0.25
    """
    return 1.0 if config.rotary_dim is None else config.rotary_dim / config.d_head
