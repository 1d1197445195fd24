"""Key map for Hugging Face ViT (``ViTForImageClassification``, ``ViTModel``; Dosovitskiy et al.
2021): a pre-norm encoder over an image's patches and [CLS], LayerNorm eps 1e-12, GELU.

Its patch embedding is ours (`glassformer.nn.patches`): the convolution ``projection`` is our
``patch_proj`` as it is; HF keeps [CLS] as 1 x 1 x d and the positions as 1 x (n + 1) x d (a
batch of one, to broadcast), ours are d and (n + 1) x d (`key_map.Unbatched`). Its separate query, key
and value Linears are stacked into our ``qkv_proj``; ``layernorm_before`` / ``layernorm_after``
are each block's ``attn_norm`` / ``ffn_norm``, ``vit.layernorm`` the final norm.
``ViTForImageClassification`` (a ``vit.`` prefix) reads its ``classifier`` from the final
[CLS] (our ``classifier_pooling="cls"``); ``id2label`` becomes ``class_names`` (HF's
placeholders ``LABEL_0``, ``LABEL_1``, ... become none). ``ViTModel`` has no head (our
encoder without one: its hidden states are its output).

What HF's image processor does before the model (resize, scale, normalize with its mean and
std: ``preprocessor_config.json``) is not read: ``pixel_values`` are given ready.
A ViT has no vocabulary; its config's ``vocab_size`` is 1 (`glassformer.nn.patches.NO_VOCABULARY`).

Written too: ``config_to_hf`` is the inverse of ``config_from_hf``.
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats.hf_config import hf_activation, hf_activation_name
from glassformer.formats.key_map import Mapped, Unbatched, stacked_qkv, with_bias
from glassformer.nn.patches import NO_VOCABULARY

VISION = True  # export writes this family for vision models only (`hf_export.choose_family`)
HARMLESS = {
    "encoder_stride": "ViTForMaskedImageModeling's decoder, which is not read",
    "pooler_output_size": "ViTModel's pooler, which is not read",
    "pooler_act": "ViTModel's pooler, which is not read",
}
IGNORED = {
    r"(vit\.)?pooler\.dense\..*": "ViTModel's pooler (tanh of a dense layer on [CLS]): no part of the "
    "hidden states, and ViTForImageClassification does not use it",
}


def _prefix(keys: set[str]) -> str:
    return "vit." if "vit.embeddings.cls_token" in keys else ""


def _class_names(hf: dict[str, Any], n_classes: int) -> tuple[str, ...]:
    """``id2label`` in id order; () for HF's placeholders LABEL_0, LABEL_1, ... (no names)."""
    labels = {int(k): v for k, v in hf.get("id2label", {}).items()}
    names = tuple(labels.get(k, f"LABEL_{k}") for k in range(n_classes))
    return () if names == tuple(f"LABEL_{k}" for k in range(n_classes)) else names


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    for name in ("image_size", "patch_size"):
        if not isinstance(hf[name], int):
            raise ValueError(
                f"ViT {name}={hf[name]!r}: only square images and patches (one int) are supported"
            )
    n_classes = len(hf.get("id2label", {})) if "classifier.weight" in keys else 0  # ViTModel: no head
    side = hf["image_size"] // hf["patch_size"]
    return ModelConfig(
        family="encoder",
        vocab_size=NO_VOCABULARY,
        d_model=hf["hidden_size"],
        n_layers=hf["num_hidden_layers"],
        n_heads=hf["num_attention_heads"],
        d_ff=hf["intermediate_size"],
        max_seq_len=side * side + 1,  # the patches and [CLS]
        image_size=hf["image_size"],
        patch_size=hf["patch_size"],
        n_channels=hf.get("num_channels", 3),
        positions="learned",
        qkv_bias=hf.get("qkv_bias", True),
        activation=hf_activation(hf.get("hidden_act", "gelu")),
        norm="layernorm",
        norm_placement="pre",
        norm_eps=hf.get("layer_norm_eps", 1e-12),
        mlm_head=False,
        n_classes=n_classes,
        classifier_pooling="cls" if n_classes else None,
        class_names=_class_names(hf, n_classes),
    )


def config_to_hf(config: ModelConfig) -> dict[str, Any]:
    """A ``ViTForImageClassification`` (a classifier) or ``ViTModel`` config.json: the inverse of
    `config_from_hf`. What ViT cannot express (text, post-norm, mean pooling) is written as ViT
    has it; `glassformer.formats.hf_export` reads the result back and refuses it."""
    names = config.class_names or tuple(f"LABEL_{k}" for k in range(config.n_classes))
    out = {
        "model_type": "vit",
        "architectures": ["ViTForImageClassification" if config.n_classes else "ViTModel"],
        "image_size": config.image_size,
        "patch_size": config.patch_size,
        "num_channels": config.n_channels,
        "hidden_size": config.d_model,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "intermediate_size": config.d_ff,
        "hidden_act": hf_activation_name(config.activation),
        "layer_norm_eps": config.norm_eps,
        "qkv_bias": config.qkv_bias,
        "encoder_stride": config.patch_size,  # ViTForMaskedImageModeling's; kept as HF's default does
        "hidden_dropout_prob": config.resid_dropout,  # training only
        "attention_probs_dropout_prob": config.attn_dropout,
        "initializer_range": config.init_std,
    }
    if config.n_classes:
        out["id2label"] = {str(k): name for k, name in enumerate(names)}
        out["label2id"] = {name: k for k, name in enumerate(names)}
    return out


def layout_keys(config: ModelConfig) -> set[str]:
    """``ViTForImageClassification`` prefixes the encoder with ``vit.``; a bare ``ViTModel`` does not."""
    return {"vit.embeddings.cls_token", "classifier.weight"} if config.n_classes else set()


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    p = _prefix(keys)
    e = f"{p}embeddings"
    out = [
        Mapped("stack.embed.cls_token", f"{e}.cls_token", Unbatched(2)),  # 1 1 d -> d
        *with_bias("stack.embed.patch_proj", f"{e}.patch_embeddings.projection"),
        Mapped("stack.embed.position.weight", f"{e}.position_embeddings", Unbatched(1)),  # 1 t d -> t d
    ]
    for i in range(config.n_layers):
        ours, theirs = f"stack.blocks.{i}", f"{p}encoder.layer.{i}"
        attn = f"{theirs}.attention.attention"
        out += stacked_qkv(f"{ours}.attn", f"{attn}.query", f"{attn}.key", f"{attn}.value", config)
        out += [
            *with_bias(f"{ours}.attn_norm", f"{theirs}.layernorm_before"),
            *with_bias(f"{ours}.attn.o_proj", f"{theirs}.attention.output.dense"),
            *with_bias(f"{ours}.ffn_norm", f"{theirs}.layernorm_after"),
            *with_bias(f"{ours}.ffn.up_proj", f"{theirs}.intermediate.dense"),
            *with_bias(f"{ours}.ffn.down_proj", f"{theirs}.output.dense"),
        ]
    out += with_bias("stack.final_norm", f"{p}layernorm")
    if config.n_classes:
        out += with_bias("classifier.out_proj", "classifier")
    return out
