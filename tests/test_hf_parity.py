"""Parity with Hugging Face transformers on tiny randomly initialized models.

Each HF model is built offline from a config, converted with ``gf.from_hf`` through its
explicit key map, and compared: fp32 logits within 1e-4, greedy tokens identical.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import glassformer as gf

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

VOCAB = 96
SMALL = dict(  # the sizes every small decoder and encoder below shares (HF's names)
    vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4
)


def _gpt2():
    config = transformers.GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4)
    return transformers.GPT2LMHeadModel(config)


def _llama(tied: bool = False):
    config = transformers.LlamaConfig(
        **SMALL,
        num_key_value_heads=2,  # grouped-query attention
        max_position_embeddings=128,
        rope_theta=500.0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=tied,
    )
    return transformers.LlamaForCausalLM(config)


def _llama31():
    """Llama 3.1's RoPE scaling: with 4 frequencies of base 500 and an original context of 64, one
    is kept, one blended and two slowed by the factor."""
    config = transformers.LlamaConfig(
        **SMALL,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rope_theta=500.0,
        rope_scaling={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
        },
    )
    return transformers.LlamaForCausalLM(config)


def _mistral():
    """Mistral: Llama's layout with a sliding window (4 keys here, shorter than the inputs)."""
    config = transformers.MistralConfig(
        **SMALL,
        num_key_value_heads=2,
        max_position_embeddings=128,
        sliding_window=4,
    )
    model = transformers.MistralForCausalLM(config)
    model.config._attn_implementation = "eager"  # the window, as HF's reference path applies it
    return model


def _qwen2():
    """Qwen2: Llama's layout with biases on q, k and v (none on the output)."""
    config = transformers.Qwen2Config(
        **SMALL,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
    )
    model = transformers.Qwen2ForCausalLM(config)
    with torch.no_grad():  # the q/k/v biases start at 0: make them matter
        for name, param in model.named_parameters():
            if name.endswith("_proj.bias"):
                param.normal_(0.0, 0.3)
    return model


def _qwen3():
    """Qwen3: Llama's layout with q/k-norm and no q/k/v biases; head_dim is not d_model / heads."""
    config = transformers.Qwen3Config(
        **SMALL,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=128,
        rope_theta=500.0,
        tie_word_embeddings=False,
    )
    model = transformers.Qwen3ForCausalLM(config)
    with torch.no_grad():  # the q/k norms start at 1: make them matter
        for name, param in model.named_parameters():
            if name.endswith(("q_norm.weight", "k_norm.weight")):
                param.normal_(1.0, 0.3)
    return model


def _gemma():
    """Gemma: GeGLU, (1 + w) RMSNorm, token vectors times sqrt(d_model), tied embeddings."""
    config = transformers.GemmaConfig(
        **SMALL,
        num_key_value_heads=1,
        head_dim=8,
        max_position_embeddings=128,
        hidden_activation="gelu_pytorch_tanh",
    )
    model = transformers.GemmaForCausalLM(config)
    with torch.no_grad():  # Gemma's norms start at w = 0 (a weight of 1): make them matter
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.normal_(0.0, 0.3)
    return model


def _phi3():
    """Phi-3: Llama's architecture with fused qkv_proj and gate_up_proj matrices."""
    config = transformers.Phi3Config(
        **SMALL,
        num_key_value_heads=2,
        max_position_embeddings=128,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    return transformers.Phi3ForCausalLM(config)


def _opt():
    """OPT: GPT-2's architecture with ReLU, separate q/k/v, and positions offset by 2."""
    config = transformers.OPTConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        ffn_dim=48,
        num_hidden_layers=2,
        num_attention_heads=4,
        max_position_embeddings=64,
        word_embed_proj_dim=32,
    )
    return transformers.OPTForCausalLM(config)


def _neox():
    """GPT-NeoX / Pythia: parallel residual, RoPE over a quarter of each head, fused qkv by head."""
    config = transformers.GPTNeoXConfig(
        **SMALL,
        max_position_embeddings=128,
        rotary_pct=0.25,
        bos_token_id=1,
        eos_token_id=2,
    )
    return transformers.GPTNeoXForCausalLM(config)


def _phi2(**sizes):
    """Phi-2: a parallel block with one shared LayerNorm, RoPE over half of each head."""
    config = transformers.PhiConfig(
        **(SMALL | sizes),
        max_position_embeddings=128,
        partial_rotary_factor=0.5,
        bos_token_id=1,
        eos_token_id=2,
    )
    return transformers.PhiForCausalLM(config)


def _bert():
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=64,
    )
    return transformers.BertForMaskedLM(config)


def _roberta():
    """RoBERTa: BERT's architecture, one segment, positions numbered from pad + 1."""
    config = transformers.RobertaConfig(
        vocab_size=VOCAB,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=48,
        max_position_embeddings=66,
        type_vocab_size=1,
        pad_token_id=1,
    )
    return transformers.RobertaForMaskedLM(config)


def _distilbert():
    """DistilBERT: BERT's architecture under other names, no segment embeddings."""
    config = transformers.DistilBertConfig(
        vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4, hidden_dim=48, max_position_embeddings=64
    )
    return transformers.DistilBertForMaskedLM(config)


def _t5(gated: bool = False):
    config = transformers.T5Config(
        vocab_size=VOCAB,
        d_model=32,
        d_kv=8,
        d_ff=48,
        num_layers=2,
        num_decoder_layers=3,
        num_heads=4,
        decoder_start_token_id=0,
        feed_forward_proj="gated-gelu" if gated else "relu",
        tie_word_embeddings=not gated,
    )
    return transformers.T5ForConditionalGeneration(config)


def _marian():
    config = transformers.MarianConfig(
        vocab_size=VOCAB,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=48,
        decoder_ffn_dim=48,
        max_position_embeddings=128,
        pad_token_id=VOCAB - 1,
        decoder_start_token_id=VOCAB - 1,
        eos_token_id=0,
        scale_embedding=True,
        activation_function="gelu",
        forced_eos_token_id=None,
    )
    return transformers.MarianMTModel(config)


def _bart():
    """BART: Marian's layout with GELU, embedding LayerNorms and learned positions offset by 2."""
    config = transformers.BartConfig(
        vocab_size=VOCAB,
        d_model=32,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=48,
        decoder_ffn_dim=48,
        max_position_embeddings=64,
        forced_eos_token_id=None,
        forced_bos_token_id=None,
    )
    return transformers.BartForConditionalGeneration(config)


BUILDERS = {
    "gpt2": _gpt2,
    "llama": _llama,
    "llama-3.1": _llama31,
    "mistral": _mistral,
    "qwen2": _qwen2,
    "qwen3": _qwen3,
    "gemma": _gemma,
    "phi3": _phi3,
    "opt": _opt,
    "gpt-neox": _neox,
    "phi-2": _phi2,
    "bert": _bert,
    "roberta": _roberta,
    "distilbert": _distilbert,
    "t5": _t5,
    "t5-gated": lambda: _t5(True),
    "marian": _marian,
    "bart": _bart,
}
SEQ2SEQ = {"t5", "t5-gated", "marian", "bart"}


@pytest.fixture(scope="module")
def models():
    """name -> (HF model, our LanguageModel), built once per test module."""
    out = {}
    for name, builder in BUILDERS.items():
        torch.manual_seed(0)
        hf = builder().eval()
        if name in ("marian", "bart"):  # HF starts final_logits_bias at zero: make it matter
            hf.final_logits_bias.normal_()
        out[name] = (hf, gf.from_hf(hf))
    return out


@pytest.mark.parametrize("name", list(BUILDERS))
def test_logits_match_hf(models, name):
    hf, lm = models[name]
    torch.manual_seed(1)
    ids = torch.randint(3, VOCAB - 1, (2, 13))
    mask = torch.ones_like(ids)
    mask[1, -4:] = 0  # right padding in row 1
    with torch.no_grad():
        if name in SEQ2SEQ:
            dec = torch.randint(3, VOCAB - 1, (2, 6))
            theirs = hf(input_ids=ids, attention_mask=mask, decoder_input_ids=dec).logits
            ours = lm.logits(ids, dec, attention_mask=mask)
            real = slice(None)
        else:
            theirs = hf(input_ids=ids, attention_mask=mask).logits
            ours = lm.logits(ids, attention_mask=mask)
            real = (slice(None), slice(0, 9))  # padded positions are don't-care
    diff = (theirs[real] - ours[real]).abs().max().item()
    print(f"{name}: max abs logit difference {diff:.2e}")
    assert diff <= 1e-4


def test_llama3_frequencies_are_hf_s(models):
    """Each of the three regions of Llama 3.1's scaling, frequency by frequency."""
    hf, lm = models["llama-3.1"]
    theirs = hf.model.rotary_emb.inv_freq
    ours = lm.net.output_stack.rotary.inv_freq
    plain = 1.0 / 500.0 ** (torch.arange(0, 8, 2).float() / 8)
    torch.testing.assert_close(ours, theirs, atol=0, rtol=1e-6)
    ratio = (plain / ours).tolist()
    assert ratio[0] == pytest.approx(1.0) and 1.0 < ratio[1] < 8.0 and ratio[2:] == pytest.approx([8.0, 8.0])


def test_hf_directory_round_trip(models, tmp_path):
    hf, lm = models["llama"]
    hf.save_pretrained(tmp_path)
    loaded = gf.from_hf(tmp_path)
    ids = torch.randint(0, VOCAB, (1, 7))
    assert torch.equal(loaded.logits(ids), lm.logits(ids))


def test_key_map_rejects_a_wrong_checkpoint(models):
    from glassformer.formats.hf import convert_hf

    hf, _ = models["gpt2"]
    state = dict(hf.state_dict())
    state["transformer.h.0.ln_1.weight"] = torch.ones(31)
    with pytest.raises(
        ValueError, match=r"shape mismatch: checkpoint 'transformer.h.0.ln_1.weight' gives \(31,\)"
    ):
        convert_hf(hf.config.to_dict(), state)
    state = dict(hf.state_dict())
    state["transformer.h.0.extra.weight"] = torch.ones(3)
    with pytest.raises(ValueError, match="not understood by the key map: transformer.h.0.extra.weight"):
        convert_hf(hf.config.to_dict(), state)
    with pytest.raises(ValueError, match="model_type 'gptj' is not supported"):
        convert_hf({"model_type": "gptj"}, {})
    with pytest.raises(
        FileNotFoundError, match="neither a Hugging Face model object nor a checkpoint directory"
    ):
        gf.from_hf("/nonexistent/dir")


GENERATORS = [
    "gpt2",
    "llama",
    "llama-3.1",
    "mistral",
    "qwen2",
    "qwen3",
    "gemma",
    "phi3",
    "opt",
    "gpt-neox",
    "phi-2",
    "t5",
    "marian",
    "bart",
]


def _hf_generate(hf, ids, mask, **kwargs):
    if hf.config.model_type == "t5":
        # HF 4.57's T5 cache breaks when the decoder is deeper than the encoder (ours is).
        kwargs["use_cache"] = False
    with torch.no_grad():
        out = hf.generate(
            input_ids=ids,
            attention_mask=mask,
            max_new_tokens=32,
            min_new_tokens=32,
            do_sample=False,
            pad_token_id=0,
            **kwargs,
        )
    if not hf.config.is_encoder_decoder:
        out = out[:, ids.shape[1] :]
    else:
        out = out[:, 1:]  # drop the decoder start token
    return out.tolist()


@pytest.mark.parametrize("name", GENERATORS)
def test_greedy_32_tokens_match_hf_generate(models, name):
    from glassformer.generate import GenerationSettings, generate_ids

    hf, lm = models[name]
    torch.manual_seed(2)
    ids = torch.randint(3, VOCAB - 1, (1, 9))
    theirs = _hf_generate(hf, ids, torch.ones_like(ids))
    ours = generate_ids(lm.net, ids, GenerationSettings(max_new_tokens=32, min_new_tokens=32, greedy=True))
    assert ours == theirs


@pytest.mark.parametrize("name", ["gpt2", "llama", "opt"])
def test_left_padded_batch_matches_hf_generate(models, name):
    from glassformer.generate import GenerationSettings, generate_ids

    hf, lm = models[name]
    torch.manual_seed(3)
    ids = torch.randint(3, VOCAB - 1, (2, 8))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0  # row 1 is a 5-token prompt, left-padded
    ids[1, :3] = 0
    theirs = _hf_generate(hf, ids, mask)
    settings = GenerationSettings(max_new_tokens=32, min_new_tokens=32, greedy=True)
    ours = generate_ids(lm.net, ids, settings, attention_mask=mask)
    assert ours == theirs


@pytest.mark.parametrize("name", ["gpt2", "t5"])
def test_beam_search_matches_hf_generate(models, name):
    from glassformer.generate import GenerationSettings, generate_ids

    hf, lm = models[name]
    torch.manual_seed(4)
    ids = torch.randint(3, VOCAB - 1, (2, 7))
    theirs = _hf_generate(hf, ids, torch.ones_like(ids), num_beams=3, length_penalty=0.7)
    settings = GenerationSettings(max_new_tokens=32, min_new_tokens=32, num_beams=3, length_penalty=0.7)
    ours = generate_ids(lm.net, ids, settings)
    assert ours == theirs
