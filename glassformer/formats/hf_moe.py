"""Key map for Hugging Face mixtures of experts: Mixtral and Qwen2-MoE.

Both are Llama's decoder (`hf_llama`: RMSNorm pre-norm, RoPE, GQA) whose FFN is a sparse
mixture (`glassformer.nn.moe.MoEFeedForward`): a router ``gate`` (n x d) over n SwiGLU
experts, k per token.

* Mixtral (``MixtralForCausalLM``): ``block_sparse_moe.gate`` and experts ``w1`` (the gate
  matrix), ``w3`` (up) and ``w2`` (down); the k chosen weights always renormalized; a
  sliding window when ``sliding_window`` is set.
* Qwen2-MoE (``Qwen2MoeForCausalLM``): ``mlp.gate``, experts with ``gate_proj`` / ``up_proj``
  / ``down_proj`` of ``moe_intermediate_size``, renormalized only with ``norm_topk_prob``,
  plus a shared expert every token uses, scaled by sigmoid(``shared_expert_gate`` x);
  q/k/v biases. Every layer must be sparse (``decoder_sparse_step`` 1, no
  ``mlp_only_layers``): a mix of dense and sparse layers is refused.

Both are written back by export (`config_to_mixtral`, `config_to_qwen2_moe`).
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats import hf_llama
from glassformer.formats.hf_strict import overlay
from glassformer.formats.key_map import Mapped

IGNORED = hf_llama.IGNORED
HARMLESS = {"max_window_layers": "names windowed layers for use_sliding_window alone, which is refused"}

# model_type -> (where the mixture sits in a layer, its experts' gate / up / down names)
LAYOUTS = {
    "mixtral": ("block_sparse_moe", ("w1", "w3", "w2")),
    "qwen2_moe": ("mlp", ("gate_proj", "up_proj", "down_proj")),
}


def config_from_hf(hf: dict[str, Any], keys: set[str]) -> ModelConfig:
    kind = hf["model_type"]
    if kind == "qwen2_moe":
        if hf.get("decoder_sparse_step", 1) != 1 or hf.get("mlp_only_layers"):
            raise ValueError(
                "Qwen2-MoE with dense layers among the sparse ones (decoder_sparse_step "
                f"{hf.get('decoder_sparse_step')}, mlp_only_layers {hf.get('mlp_only_layers')}) is not "
                "supported: every layer must be a mixture"
            )
        experts, expert_d_ff = hf["num_experts"], hf["moe_intermediate_size"]
        normalize, shared = (
            bool(hf.get("norm_topk_prob", False)),
            hf.get("shared_expert_intermediate_size", 0),
        )
        extra = {"qkv_bias": bool(hf.get("qkv_bias", True)), "out_bias": False}
        windowed = any(kind != "full_attention" for kind in hf.get("layer_types") or [])
        if hf.get("use_sliding_window") or windowed:
            raise ValueError("Qwen2-MoE with a sliding window (use_sliding_window, layer_types) is refused")
    else:
        experts, expert_d_ff = hf["num_local_experts"], hf["intermediate_size"]
        normalize, shared = True, 0
        extra = {"attn_window": hf.get("sliding_window") or None}
    if experts < 1:  # a dense model is Llama's (export asked to write one as a mixture lands here)
        raise ValueError(f"{kind} with {experts} experts is not a mixture of experts")
    dense = hf_llama.config_from_hf(overlay(hf, sliding_window=None), keys)
    return dense.replace(
        d_ff=expert_d_ff,  # every layer is a mixture: no dense FFN uses intermediate_size
        n_experts=experts,
        experts_per_token=hf.get("num_experts_per_tok", 2),
        normalize_expert_weights=normalize,
        expert_d_ff=expert_d_ff,
        shared_expert_d_ff=shared,
        **extra,
    )


def config_to_mixtral(config: ModelConfig) -> dict[str, Any]:
    """A ``MixtralForCausalLM`` config.json: Llama's, with the mixture's sizes."""
    hf = hf_llama.config_to_hf(config)
    for key in ("attention_bias", "mlp_bias", "rope_scaling"):
        hf.pop(key)  # Mixtral has no such options: export's read-back refuses a model that needs them
    return {
        **hf,
        "model_type": "mixtral",
        "architectures": ["MixtralForCausalLM"],
        "intermediate_size": config.expert_d_ff,
        "num_local_experts": config.n_experts,
        "num_experts_per_tok": config.experts_per_token,
        "sliding_window": config.attn_window,
        "router_aux_loss_coef": 0.001,
    }


def config_to_qwen2_moe(config: ModelConfig) -> dict[str, Any]:
    """A ``Qwen2MoeForCausalLM`` config.json: Llama's, with the mixture and its shared expert."""
    hf = hf_llama.config_to_hf(config)
    for key in ("attention_bias", "mlp_bias", "rope_scaling", "head_dim"):
        hf.pop(key)
    return {
        **hf,
        "model_type": "qwen2_moe",
        "architectures": ["Qwen2MoeForCausalLM"],
        "qkv_bias": config.qkv_bias,
        "intermediate_size": config.expert_d_ff,  # the dense layers' size: none here
        "moe_intermediate_size": config.expert_d_ff,
        "shared_expert_intermediate_size": config.shared_expert_d_ff,
        "num_experts": config.n_experts,
        "num_experts_per_tok": config.experts_per_token,
        "norm_topk_prob": config.normalize_expert_weights,
        "decoder_sparse_step": 1,
        "mlp_only_layers": [],
        "use_sliding_window": False,
    }


def key_map(config: ModelConfig, keys: set[str]) -> list[Mapped]:
    """Llama's attention and norms, then each layer's router, experts and shared expert."""
    # Qwen2-MoE's layout holds a shared expert and Mixtral's none; a checkpoint says which by its names
    qwen = config.shared_expert_d_ff or any(".mlp.gate.weight" in key for key in keys)
    place, (gate, up, down) = LAYOUTS["qwen2_moe" if qwen else "mixtral"]
    out = [item for item in hf_llama.key_map(config, keys) if ".ffn." not in item.ours]
    for i in range(config.n_layers):
        ours, theirs = f"stack.blocks.{i}.ffn", f"model.layers.{i}.{place}"
        out.append(Mapped(f"{ours}.router.weight", f"{theirs}.gate.weight"))
        for j in range(config.n_experts):
            out += _expert(f"{ours}.experts.{j}", f"{theirs}.experts.{j}", (gate, up, down))
        if config.shared_expert_d_ff:
            out += _expert(
                f"{ours}.shared_expert", f"{theirs}.shared_expert", ("gate_proj", "up_proj", "down_proj")
            )
            out.append(Mapped(f"{ours}.shared_expert_gate.weight", f"{theirs}.shared_expert_gate.weight"))
    return out


def _expert(ours: str, theirs: str, names: tuple[str, str, str]) -> list[Mapped]:
    """One SwiGLU expert: our gate / up / down matrices from the checkpoint's ``names``."""
    return [
        Mapped(f"{ours}.{mine}_proj.weight", f"{theirs}.{name}.weight")
        for mine, name in zip(("gate", "up", "down"), names, strict=True)
    ]
