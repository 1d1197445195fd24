"""Every Hugging Face family Glassformer reads is written back (`glassformer.formats.hf_export`).

A tiny random HF model of each family -> ``gf.from_hf`` -> ``lm.save_hf`` -> transformers'
``from_pretrained`` must load it whole (nothing missing or unexpected) with the original's
logits and ours (within 1e-5), as the family export chooses: the original's model_type, or,
where an earlier one in the table computes the same (RoBERTa is BERT with its positions
offset), that one, and the original's when asked for (``model_type=``). Configs built here
land on the model_type that holds them (a window: Mistral; q/k/v biases alone: Qwen2; partial
rotary: Phi-3), and what a family cannot hold is refused, naming the field.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import glassformer as gf
from glassformer.config import llama_style
from glassformer.formats.key_map import Mapped, TheirRows, hf_state
from tests.test_hf_export import perturbed
from tests.test_hf_parity import BUILDERS, SMALL, VOCAB
from tests.test_hf_parity_gemma2_olmo2 import BUILDERS as GEMMA_BUILDERS
from tests.test_hf_parity_gemma2_olmo2 import _loud

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")
transformers.logging.set_verbosity_error()

CAUSAL, MASKED, SEQ2SEQ = (
    transformers.AutoModelForCausalLM,
    transformers.AutoModelForMaskedLM,
    transformers.AutoModelForSeq2SeqLM,
)


def _gemma(name: str):
    builder, norm_centre = GEMMA_BUILDERS[name]
    model = _loud(builder(), norm_centre)  # soft-caps reached, norms away from their start
    model.config._attn_implementation = "eager"  # HF's reference path for soft-caps
    return model


def _phi3_partial():
    """Phi-3 as Phi-4-mini has it: RoPE over part of each head; and a 4-key window."""
    config = transformers.Phi3Config(
        **SMALL,
        num_key_value_heads=2,
        max_position_embeddings=128,
        partial_rotary_factor=0.5,
        sliding_window=4,
        pad_token_id=0,
    )
    return transformers.Phi3ForCausalLM(config)


def _opt_untied():
    config = BUILDERS["opt"]().config
    config.tie_word_embeddings = False
    return transformers.OPTForCausalLM(config)


CASES = {  # name -> (HF model builder, the Auto class that loads it, the model_type export writes)
    "mistral": (BUILDERS["mistral"], CAUSAL, "mistral"),
    "qwen2": (BUILDERS["qwen2"], CAUSAL, "qwen2"),
    "gemma": (BUILDERS["gemma"], CAUSAL, "gemma"),
    "gemma2": (lambda: _gemma("gemma2"), CAUSAL, "gemma2"),
    "gemma3": (lambda: _gemma("gemma3"), CAUSAL, "gemma3_text"),
    "phi3": (BUILDERS["phi3"], CAUSAL, "llama"),  # full rotary, no window: Llama's model
    "phi3-partial-rotary": (_phi3_partial, CAUSAL, "phi3"),
    "phi-2": (BUILDERS["phi-2"], CAUSAL, "phi"),
    "opt": (BUILDERS["opt"], CAUSAL, "gpt2"),  # tied, biased: GPT-2's model with ReLU
    "opt-untied": (_opt_untied, CAUSAL, "opt"),
    "gpt-neox": (BUILDERS["gpt-neox"], CAUSAL, "gpt_neox"),
    "roberta": (BUILDERS["roberta"], MASKED, "bert"),  # BERT's model, positions offset
    "distilbert": (BUILDERS["distilbert"], MASKED, "distilbert"),
    "marian": (BUILDERS["marian"], SEQ2SEQ, "marian"),
    "bart": (BUILDERS["bart"], SEQ2SEQ, "bart"),
}
ASKED = ["phi3", "opt", "roberta"]  # written as another unless asked


@pytest.fixture(scope="module")
def models():
    """name -> (HF model, our LanguageModel), built once per module."""
    out = {}
    for name, (builder, _, _) in CASES.items():
        torch.manual_seed(0)
        hf = builder().eval()
        with torch.no_grad():
            if hasattr(hf, "final_logits_bias"):  # HF starts it at zero: make it matter
                hf.final_logits_bias.normal_()
            for param_name, param in hf.named_parameters():  # biases start at 0: make them matter
                if param_name.endswith("bias") and "norm" not in param_name:
                    param.normal_(0.0, 0.1)
        out[name] = (hf, gf.from_hf(hf))
    return out


def _logits(model, ids: torch.Tensor) -> torch.Tensor:
    """An HF model's logits (float32) or ours, for ``ids`` (and its first 5 as the decoder's)."""
    with torch.no_grad():
        if isinstance(model, gf.LanguageModel):
            return model.logits(ids, ids[:, :5]) if model.config.seq2seq else model.logits(ids)
        if model.config.is_encoder_decoder:
            return model(input_ids=ids, decoder_input_ids=ids[:, :5]).logits
        return model(input_ids=ids).logits


def _written_back(hf, lm, auto, directory, **asked):
    """Our export loaded by ``auto``, checked whole; (what save_hf said, the loaded model)."""
    done = lm.save_hf(directory, **asked)
    back, info = auto.from_pretrained(directory, output_loading_info=True, attn_implementation="eager")
    assert not any(info.values()), info  # nothing missing, unexpected or mismatched
    torch.manual_seed(1)
    ids = torch.randint(3, VOCAB - 1, (2, 12))  # 12 tokens: longer than the 4-key windows
    theirs, original, ours = _logits(back.eval(), ids), _logits(hf, ids), _logits(lm, ids)
    diff = max((theirs - original).abs().max().item(), (theirs - ours).abs().max().item())
    print(f"{done.model_type}: max abs logit difference {diff:.1e}")
    assert diff <= 1e-5
    assert gf.load(directory, fast_paths=False).config == lm.config  # and our reader takes it back
    return done, back


@pytest.mark.parametrize("name", list(CASES))
def test_every_family_read_is_written_back(models, name, tmp_path):
    hf, lm = models[name]
    _, auto, written = CASES[name]
    done, back = _written_back(hf, lm, auto, tmp_path / name)
    assert done.model_type == back.config.model_type == written
    if written == hf.config.model_type:
        assert type(back) is type(hf)


@pytest.mark.parametrize("name", ASKED)
def test_the_original_model_type_is_written_when_asked(models, name, tmp_path):
    """RoBERTa, OPT and Phi-3 models that BERT, GPT-2 and Llama also hold, written as themselves."""
    hf, lm = models[name]
    done, back = _written_back(hf, lm, CASES[name][1], tmp_path / name, model_type=hf.config.model_type)
    assert done.model_type == hf.config.model_type
    assert type(back) is type(hf)


def test_the_export_command_writes_the_model_type_asked_for(models, tmp_path, capsys):
    from glassformer import cli

    hf, _ = models["roberta"]
    hf.save_pretrained(tmp_path / "hf")
    assert cli.main(["export", str(tmp_path / "hf"), str(tmp_path / "bert")]) == 0
    assert "BertForMaskedLM" in capsys.readouterr().out
    assert (
        cli.main(["export", str(tmp_path / "hf"), str(tmp_path / "roberta"), "--model-type", "roberta"]) == 0
    )
    assert "RobertaForMaskedLM" in capsys.readouterr().out


LLAMA = dict(vocab_size=61, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48, max_seq_len=64)
BUILT = {  # name -> (config, the model_type that holds it first)
    "llama": (llama_style(**LLAMA), "llama"),
    "window, linear RoPE scaling": (
        llama_style(**LLAMA, attn_window=4, rope_scaling="linear", rope_scaling_factor=2.0),
        "mistral",
    ),
    "Llama 3.1 RoPE scaling": (
        llama_style(**LLAMA, rope_scaling="llama3", rope_scaling_factor=8.0, rope_original_max_len=16),
        "llama",
    ),
    "q/k/v biases alone": (llama_style(**LLAMA, qkv_bias=True), "qwen2"),
    "q/k/v biases alone, window": (llama_style(**LLAMA, qkv_bias=True, attn_window=4), "qwen2"),
    "partial rotary": (llama_style(**LLAMA, rotary_dim=4), "phi3"),
    "q/k/v and o biases": (llama_style(**LLAMA, qkv_bias=True, out_bias=True), "llama"),
    "GPT-2 without biases": (
        gf.ModelConfig(**{**LLAMA, "n_kv_heads": 4}, qkv_bias=False, out_bias=False, ffn_bias=False),
        "opt",
    ),
}


@pytest.mark.parametrize("name", list(BUILT))
def test_a_model_built_here_is_written_as_the_first_family_that_holds_it(name, tmp_path):
    config, written = BUILT[name]
    lm = perturbed(config)
    done = lm.save_hf(tmp_path)
    assert done.model_type == written
    hf, info = CAUSAL.from_pretrained(tmp_path, output_loading_info=True, attn_implementation="eager")
    assert not any(info.values()), info
    ids = torch.randint(0, 61, (2, 12))
    diff = (_logits(hf.eval(), ids) - lm.logits(ids)).abs().max().item()
    assert diff <= 1e-5
    assert gf.load(tmp_path, fast_paths=False).config == lm.config


def test_gemma_norms_trained_here_are_written_within_one_rounding(tmp_path):
    """Our norm weight 1 + w with bits below float32's 1's last (as training leaves it, here
    under 0.5): (1 + w) - 1 + 1 is not always it again, so export checks the read-back within
    one rounding, and HF's logits are ours."""
    config = llama_style(**LLAMA, embed_scale=True, activation="geglu_tanh", tie_embeddings=True)
    lm = perturbed(config)
    with torch.no_grad():
        for name, param in lm.net.named_parameters():
            if name.endswith("norm.weight"):
                param.uniform_(-0.4, 0.4)
    done = lm.save_hf(tmp_path)
    assert done.model_type == "gemma"
    from safetensors.torch import load_file

    written = load_file(tmp_path / "model.safetensors")
    ours = lm.net.stack.final_norm.weight
    assert not torch.equal(written["model.norm.weight"] + 1.0, ours)  # not exact, here
    hf = CAUSAL.from_pretrained(tmp_path).eval()
    ids = torch.randint(0, 61, (2, 12))
    assert (_logits(hf, ids) - lm.logits(ids)).abs().max().item() <= 1e-5


REFUSED = {  # name -> (config, model_type asked for or None, what the message names)
    "a window on some layers": (
        llama_style(**LLAMA, attn_window=4, global_every=2),
        None,
        r"no Hugging Face family holds this decoder model exactly; .*global_every",
    ),
    "Phi without its head's bias": (
        gf.ModelConfig(
            **LLAMA, positions="rope", parallel_residual=True, shared_norm=True, tie_embeddings=False
        ),
        "phi",
        r"phi \(PhiForCausalLM\) cannot hold this model exactly: .*lm_head_bias \(False here, True as phi\)",
    ),
    "Gemma with an MLP bias": (
        llama_style(**LLAMA, embed_scale=True, activation="geglu_tanh", tie_embeddings=True, ffn_bias=True),
        "gemma",
        r"ffn_bias \(True here, False as gemma\)",
    ),
    "Phi-3 with linear RoPE scaling": (
        llama_style(**LLAMA, rope_scaling="linear", rope_scaling_factor=2.0),
        "phi3",
        r"rope_scaling \('linear' here, 'none' as phi3\)",
    ),
    "RoBERTa without a pad token": (
        gf.ModelConfig(
            **{**LLAMA, "n_kv_heads": 4},
            family="encoder",
            norm_placement="post",
            type_vocab_size=1,
            embed_norm=True,
            activation="gelu",
        ),
        "roberta",
        r"pad_token_id \(None here, 1 as roberta\)",
    ),
    "a family of another kind": (llama_style(**LLAMA), "bert", r"'bert' is not one export writes a decoder"),
}


@pytest.mark.parametrize("name", list(REFUSED))
def test_what_a_family_cannot_hold_is_refused(name, tmp_path):
    config, model_type, message = REFUSED[name]
    with pytest.raises(ValueError, match=message):
        gf.LanguageModel(gf.build(config)).save_hf(tmp_path / "out", model_type=model_type)
    assert not (tmp_path / "out").exists()


def test_pieces_of_one_fused_tensor_are_joined_back():
    """Phi-3's gate_up_proj from our gate and up; a position table whose first rows we skip
    gets zeros there; a gap between pieces is refused."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gate, self.up = (
                torch.nn.Parameter(torch.ones(2, 3)),
                torch.nn.Parameter(torch.full((2, 3), 2.0)),
            )

    fused = "mlp.gate_up_proj.weight"
    state = hf_state(Net(), [Mapped("gate", fused, TheirRows(0, 2)), Mapped("up", fused, TheirRows(2, 4))])
    assert state[fused][:, 0].tolist() == [1.0, 1.0, 2.0, 2.0]
    state = hf_state(Net(), [Mapped("gate", "table", TheirRows(2, 4)), Mapped("up", "more", TheirRows(1, 3))])
    assert state["table"][:, 0].tolist() == [0.0, 0.0, 1.0, 1.0] and state["more"].shape == (3, 3)
    with pytest.raises(ValueError, match=r"no parameter of ours fills its rows 2:3"):
        hf_state(Net(), [Mapped("gate", fused, TheirRows(0, 2)), Mapped("up", fused, TheirRows(3, 5))])
