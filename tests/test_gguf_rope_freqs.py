"""Llama 3.1's RoPE scaling from a GGUF file's ``rope_freqs.weight``: the settings read back from
the divisors llama.cpp's converter computes, at parity with transformers' ``llama3`` RoPE.

The tiny Llama has 32 frequencies of base 500000 (heads of 64), so that Llama 3's settings
(original context 8192, low 1, high 4) keep some frequencies, blend three and slow the rest, as
in the real models.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from glassformer.formats.gguf import load_gguf
from glassformer.formats.gguf_rope_freqs import llama3_settings
from glassformer.models import build
from glassformer.nn.positions import llama3_frequencies
from tests.test_gguf import finish
from tests.test_gguf_architectures import TOKENS, converted
from tests.test_hf_parity import VOCAB

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")
BASE, D_HEAD = 500000.0, 64


def llama31(factor: float, low: float, high: float, original: int):
    config = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=128,
        intermediate_size=96,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        max_position_embeddings=16384,
        rope_theta=BASE,
        rope_scaling={
            "rope_type": "llama3",
            "factor": factor,
            "low_freq_factor": low,
            "high_freq_factor": high,
            "original_max_position_embeddings": original,
        },
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    with torch.no_grad():  # sharper attention, so that the slow frequencies change the logits
        for name, param in model.named_parameters():
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                param.mul_(8.0)
    return model


def converter_divisors(factor: float, low: float, high: float, original: int) -> np.ndarray:
    """LlamaModel.generate_extra_tensors in llama.cpp's convert_hf_to_gguf.py, as written there."""
    freqs = 1.0 / (BASE ** (torch.arange(0, D_HEAD, 2, dtype=torch.float32) / D_HEAD))
    low_freq_wavelen, high_freq_wavelen = original / low, original / high
    rope_factors = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_freq_wavelen:
            rope_factors.append(1)
        elif wavelen > low_freq_wavelen:
            rope_factors.append(factor)
        else:
            smooth = (original / wavelen - low) / (high - low)
            rope_factors.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(rope_factors, dtype=torch.float32).numpy()


def write_llama31(model, path: Path, divisors: np.ndarray) -> Path:
    """The model as the converter writes it: no scaling key, the divisors as rope_freqs.weight."""
    c, writer = model.config, gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(c.num_hidden_layers)  # LlamaModel.set_gguf_parameters: no scaling key
    writer.add_context_length(c.max_position_embeddings)
    writer.add_embedding_length(c.hidden_size)
    writer.add_feed_forward_length(c.intermediate_size)
    writer.add_head_count(c.num_attention_heads)
    writer.add_head_count_kv(c.num_key_value_heads)
    writer.add_layer_norm_rms_eps(c.rms_norm_eps)
    writer.add_rope_freq_base(BASE)
    writer.add_vocab_size(c.vocab_size)
    writer.add_rope_dimension_count(D_HEAD)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(TOKENS)
    writer.add_token_types([1] * len(TOKENS))
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, model.config.num_hidden_layers)
    for name, tensor in converted(model, "llama"):
        writer.add_tensor(names.get_name(name, try_suffixes=(".weight", ".bias")), tensor.numpy())
    writer.add_tensor("rope_freqs.weight", divisors)
    finish(writer)
    return path


def assert_same_frequencies(net, hf) -> None:
    """Our RoPE's frequencies are transformers' llama3 ones."""
    torch.testing.assert_close(
        net.output_stack.rotary.inv_freq, hf.model.rotary_emb.inv_freq, atol=0, rtol=1e-6
    )


SETTINGS = [  # (factor, low, high, original)
    (8.0, 1.0, 4.0, 8192),  # Llama 3.1 / 3.3: one of the common settings
    (32.0, 1.0, 4.0, 8192),  # Llama 3.2
    (16.0, 2.0, 8.0, 8192),  # none of the common ones: solved from the blended divisors
]


@pytest.mark.parametrize("settings", SETTINGS, ids=str)
def test_rope_freqs_read_back_as_the_settings_with_transformers_logits(tmp_path, settings):
    hf = llama31(*settings)
    net, _, _ = load_gguf(write_llama31(hf, tmp_path / "llama31.gguf", converter_divisors(*settings)))
    c = net.config
    read = (c.rope_scaling_factor, c.rope_low_freq_factor, c.rope_high_freq_factor, c.rope_original_max_len)
    assert c.rope_scaling == "llama3" and read == settings
    torch.testing.assert_close(
        net.output_stack.rotary.inv_freq, hf.model.rotary_emb.inv_freq, atol=0, rtol=1e-6
    )
    ids = torch.randint(3, VOCAB - 1, (1, 600))  # long enough for the slow frequencies to turn
    with torch.no_grad():
        theirs, ours = hf(input_ids=ids).logits, net(ids)
        unscaled = build(dataclasses.replace(c, rope_scaling="none", rope_scaling_factor=1.0)).eval()
        unscaled.load_state_dict(net.state_dict())
        ignored = (unscaled(ids) - theirs).abs().max().item()
    diff, scale = (ours - theirs).abs().max().item(), theirs.abs().max().item()
    print(
        f"{settings}: max abs logit difference {diff:.2e} ({ignored:.2f} unscaled), max |logit| {scale:.2f}"
    )
    assert diff <= 1e-4 * scale < ignored  # the scaling counts, and it is the one transformers applies


def test_an_equivalent_setting_is_read_where_the_original_context_differs(tmp_path):
    """Only L / low and L / high are in the divisors: original 4096, low 1, high 4 reads as 8192,
    2, 8, the same frequencies."""
    hf = llama31(8.0, 1.0, 4.0, 4096)
    net, _, _ = load_gguf(write_llama31(hf, tmp_path / "l.gguf", converter_divisors(8.0, 1.0, 4.0, 4096)))
    c = net.config
    assert (c.rope_original_max_len, c.rope_low_freq_factor, c.rope_high_freq_factor) == (8192, 2.0, 8.0)
    torch.testing.assert_close(
        net.output_stack.rotary.inv_freq, hf.model.rotary_emb.inv_freq, atol=0, rtol=1e-6
    )


def test_divisors_that_no_setting_gives_are_refused(tmp_path):
    divisors = np.ones(D_HEAD // 2, dtype=np.float32)
    divisors[10] = 3.0  # one frequency slowed, faster and slower ones kept: no llama3 setting does that
    path = write_llama31(llama31(8.0, 1.0, 4.0, 8192), tmp_path / "odd.gguf", divisors)
    with pytest.raises(
        ValueError, match=r"odd.gguf: rope_freqs.weight fits no Llama 3 RoPE scaling: it divides"
    ):
        load_gguf(path)
    with pytest.raises(ValueError, match=r"x.gguf: rope_freqs.weight holds 31 divisors; RoPE over 64 .* 32"):
        llama3_settings(divisors[:31], BASE, D_HEAD, "x.gguf")


def test_a_step_with_no_blended_frequency_is_a_setting_too():
    """Divisors 1 then the factor with nothing between: low and high both fall in the gap."""
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, 64, 2).float() / 64)
    divisors = np.ones(32, dtype=np.float32)
    divisors[-4:] = 8.0
    settings = llama3_settings(divisors, 10000.0, 64, "step.gguf")
    fields = ("rope_scaling_factor", "rope_low_freq_factor", "rope_high_freq_factor", "rope_original_max_len")
    scaled = llama3_frequencies(inv_freq, *(settings[k] for k in fields))
    torch.testing.assert_close(inv_freq / scaled, torch.from_numpy(divisors), atol=0, rtol=1e-5)
