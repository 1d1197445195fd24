"""llama.cpp's ``bert`` and ``t5`` files as our encoder and encoder-decoder: their metadata ->
`ModelConfig`, their tensor names -> our parameters.

llama.cpp's converter (``BertModel``, ``T5Model`` in ``convert_hf_to_gguf.py``) keeps BERT for
embeddings only: the masked-LM head (``cls.predictions``) and the pooler are dropped, so a
``bert`` file reads as a sentence encoder (no MLM head) whose sentence vector pools as
``bert.pooling_type`` says (1 mean, 2 the first token: sentence-transformers' ``1_Pooling``).
T5 keeps everything, the decoder's blocks under ``dec.blk.i``, the encoder's under ``enc.blk.i``:

==========================  =================================  ===================================
llama.cpp                   ours (BERT)                        ours (T5)
==========================  =================================  ===================================
``token_embd``              ``stack.embed.token``              ``shared``
``position_embd``           ``stack.embed.position``
``token_types``             ``stack.embed.token_type``
``token_embd_norm``         ``stack.embed.norm``
``output``                                                     ``lm_head`` (untied: T5 v1.1, Flan)
``*blk.i.attn_q/k/v``       rows of ``attn.qkv_proj``          rows of ``attn.qkv_proj``
``*blk.i.attn_output``      ``attn.o_proj``                    (``attn_o``)
``blk.i.attn_output_norm``  ``attn_norm`` (post-norm)
``blk.i.layer_output_norm`` ``ffn_norm`` (post-norm)
``*blk.i.attn_norm``                                           ``attn_norm`` (pre-norm, RMS)
``*blk.0.attn_rel_b``                                          ``{encoder,decoder}.relative_bias``
``dec.blk.i.cross_attn_*``                                     ``cross_attn`` (q; [k; v]), its norm
``*blk.i.ffn_gate/up/down`` ``ffn.up_proj/down_proj``          a gate: gated GELU (tanh), else ReLU
``enc.output_norm`` ...                                        ``{encoder,decoder}.final_norm``
==========================  =================================  ===================================

What no key holds, we take where Hugging Face's reader of the same file takes it: BERT's GELU is
the exact one (``hidden_act="gelu"``; ggml's ``gelu`` is the tanh approximation); T5's relative
positions reach 128 tokens (``relative_attention_max_distance``; llama.cpp's is fixed at 128
too); with no ``output`` tensor a T5 ties its head and scales the decoder's output by
d_model^-0.5 first, as Hugging Face does with ``tie_word_embeddings``.
"""

from __future__ import annotations

from typing import Any

from glassformer.config import ModelConfig
from glassformer.formats.gguf_metadata import field, number
from glassformer.formats.key_map import Mapped, stacked_kv, stacked_qkv, with_bias

ENCODERS = ("bert", "t5")
POOLING = {1: "mean", 2: "cls"}  # llama.cpp's pooling_type -> our sentence_pooling (0: none given)


def encoder_config(header, arch: str, fields: dict[str, Any], tensors: set[str]) -> ModelConfig:
    """The config of a ``bert`` or ``t5`` file; ``fields``: the sizes every architecture reads."""
    return _bert(header, fields) if arch == "bert" else _t5(header, fields, tensors)


def _bert(header, fields: dict[str, Any]) -> ModelConfig:
    pooling = number(header, "bert.pooling_type", int, 0)
    if pooling not in (0, *POOLING):
        raise ValueError(f"bert.pooling_type={pooling} is not supported (1: mean, 2: the first token)")
    if field(header, "bert.attention.causal", False) is not False:
        raise ValueError("bert.attention.causal is set: a causal BERT is not supported")
    return ModelConfig(
        **fields,
        family="encoder",
        type_vocab_size=number(header, "tokenizer.ggml.token_type_count", int, 2),
        positions="learned",
        activation="gelu",
        norm="layernorm",
        norm_placement="post",
        norm_eps=number(header, "bert.attention.layer_norm_epsilon", float, 1e-12),
        embed_norm=True,
        tie_embeddings=True,
        mlm_head=False,
        sentence_pooling=POOLING.get(pooling, "mean"),
    )


def _t5(header, fields: dict[str, Any], tensors: set[str]) -> ModelConfig:
    tied = "output.weight" not in tensors
    gated = "enc.blk.0.ffn_gate.weight" in tensors  # llama.cpp: a gate tensor makes it gated GELU
    return ModelConfig(
        **fields,
        family="encoder_decoder",
        n_decoder_layers=number(header, "t5.decoder_block_count", int, fields["n_layers"]),
        positions="t5_relative",
        relative_buckets=number(header, "t5.attention.relative_buckets_count", int, 32),
        relative_max_distance=128,
        attn_scale=1.0,
        qkv_bias=False,
        out_bias=False,
        activation="geglu_tanh" if gated else "relu",
        ffn_bias=False,
        norm="rmsnorm",
        norm_placement="pre",
        norm_eps=number(header, "t5.attention.layer_norm_rms_epsilon", float, 1e-6),
        tie_embeddings=tied,
        lm_head_input_scale=fields["d_model"] ** -0.5 if tied else 1.0,
        decoder_start_token_id=number(header, "t5.decoder_start_token_id", int, None),
    )


def encoder_key_map(config: ModelConfig, arch: str, tensors: set[str]) -> list[Mapped]:
    """GGUF tensor -> our parameter for a ``bert`` or ``t5`` file (see the table above)."""
    return _bert_key_map(config, tensors) if arch == "bert" else _t5_key_map(config)


def _bert_key_map(config: ModelConfig, tensors: set[str]) -> list[Mapped]:
    out = [
        Mapped("stack.embed.token.weight", "token_embd.weight"),
        Mapped("stack.embed.position.weight", "position_embd.weight"),
        *with_bias("stack.embed.norm", "token_embd_norm"),
    ]
    if config.type_vocab_size:
        out.append(Mapped("stack.embed.token_type.weight", "token_types.weight"))
    for i in range(config.n_layers):
        ours, theirs = f"stack.blocks.{i}", f"blk.{i}"
        if f"{theirs}.attn_qkv.weight" in tensors:  # fused [W_Q; W_K; W_V] (BERT-likes such as Nomic)
            out += with_bias(f"{ours}.attn.qkv_proj", f"{theirs}.attn_qkv")
        else:
            names = (f"{theirs}.attn_q", f"{theirs}.attn_k", f"{theirs}.attn_v")
            out += stacked_qkv(f"{ours}.attn", *names, config)
        out += [
            *with_bias(f"{ours}.attn.o_proj", f"{theirs}.attn_output"),
            *with_bias(f"{ours}.attn_norm", f"{theirs}.attn_output_norm"),
            *with_bias(f"{ours}.ffn.up_proj", f"{theirs}.ffn_up"),
            *with_bias(f"{ours}.ffn.down_proj", f"{theirs}.ffn_down"),
            *with_bias(f"{ours}.ffn_norm", f"{theirs}.layer_output_norm"),
        ]
    return out


def _t5_key_map(config: ModelConfig) -> list[Mapped]:
    out = [Mapped("shared.weight", "token_embd.weight")]
    if not config.tie_embeddings:
        out.append(Mapped("lm_head.weight", "output.weight"))
    stacks = (("encoder", "enc", config.n_layers), ("decoder", "dec", config.n_decoder_layers))
    for stack, short, n_layers in stacks:
        out += [
            Mapped(f"{stack}.relative_bias.weight", f"{short}.blk.0.attn_rel_b.weight"),  # layer 0's, shared
            Mapped(f"{stack}.final_norm.weight", f"{short}.output_norm.weight"),
        ]
        for i in range(n_layers):
            ours, theirs = f"{stack}.blocks.{i}", f"{short}.blk.{i}"
            attn = (f"{theirs}.attn_q", f"{theirs}.attn_k", f"{theirs}.attn_v")
            out += stacked_qkv(f"{ours}.attn", *attn, config)
            out += [
                Mapped(f"{ours}.attn.o_proj.weight", f"{theirs}.attn_o.weight"),
                Mapped(f"{ours}.attn_norm.weight", f"{theirs}.attn_norm.weight"),
            ]
            if stack == "decoder":
                cross = (f"{theirs}.cross_attn_q", f"{theirs}.cross_attn_k", f"{theirs}.cross_attn_v")
                out += stacked_kv(f"{ours}.cross_attn", *cross, config)
                out += [
                    Mapped(f"{ours}.cross_attn.o_proj.weight", f"{theirs}.cross_attn_o.weight"),
                    Mapped(f"{ours}.cross_norm.weight", f"{theirs}.cross_attn_norm.weight"),
                ]
            if config.gated:
                out.append(Mapped(f"{ours}.ffn.gate_proj.weight", f"{theirs}.ffn_gate.weight"))
            out += [
                Mapped(f"{ours}.ffn.up_proj.weight", f"{theirs}.ffn_up.weight"),
                Mapped(f"{ours}.ffn.down_proj.weight", f"{theirs}.ffn_down.weight"),
                Mapped(f"{ours}.ffn_norm.weight", f"{theirs}.ffn_norm.weight"),
            ]
    return out
