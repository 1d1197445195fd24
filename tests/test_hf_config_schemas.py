"""Configs as transformers 5.x writes them (``rope_parameters``), and as 4.x did: read strictly.

* The settings that once loaded with wrong numbers and no warning (Mixtral's base of 1e6,
  GPT-NeoX's partial rotary, Gemma 3's two bases, a Llama base of 5e5, Llama 3.1's scaling):
  a tiny model saved by transformers 5.x to a folder, read by us, gives HF's logits.
* Every model type we read: the config its transformers 5.x class writes is read without a
  refusal, and the same settings in 4.x's top-level keys read as the same model.
* Refusals, by name: a RoPE type we do not compute (yarn, longrope, dynamic, unknown), a RoPE
  setting we do not read, any key no family reads, a family's key away from its neutral value,
  and a file whose two schemas disagree.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import glassformer as gf
from glassformer.formats.hf_families import FAMILIES, reader
from glassformer.formats.hf_strict import read_config

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")

SMALL = dict(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4)


def _mixtral():  # the class's base, 1e6, not written out by the test
    return transformers.MixtralConfig(
        **SMALL, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2
    )


def _neox(fraction: float):
    return transformers.GPTNeoXConfig(**SMALL, rotary_pct=fraction, rotary_emb_base=500.0)


def _gemma3():  # global layers at base 1e6, windowed ones at 1e4: HF's defaults
    return transformers.Gemma3TextConfig(
        **SMALL,
        num_key_value_heads=2,
        head_dim=8,
        sliding_window=3,
        layer_types=["sliding_attention", "full_attention"],
    )


def _llama(**rope):
    return transformers.LlamaConfig(**SMALL, num_key_value_heads=2, max_position_embeddings=256, **rope)


LLAMA31 = {
    "rope_type": "llama3",
    "rope_theta": 500.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 64,
}
SAVED = {  # name -> a config transformers 5.x writes
    "mixtral": _mixtral,
    "gpt-neox-0.25": lambda: _neox(0.25),
    "gpt-neox-0.5": lambda: _neox(0.5),
    "gemma3": _gemma3,
    "llama-5e5": lambda: _llama(rope_parameters={"rope_type": "default", "rope_theta": 5e5}),
    "llama-3.1": lambda: _llama(rope_parameters=LLAMA31),
    "llama-linear": lambda: _llama(rope_parameters={"rope_type": "linear", "factor": 4.0, "rope_theta": 5e4}),
}


@pytest.mark.parametrize("name", list(SAVED))
def test_a_folder_saved_by_transformers_5_gives_its_logits(name, tmp_path):
    torch.manual_seed(0)
    config = SAVED[name]()
    hf = transformers.AutoModelForCausalLM.from_config(config).eval()
    hf.save_pretrained(tmp_path)
    assert "rope_parameters" in (tmp_path / "config.json").read_text()  # the 5.x schema
    ours = gf.from_hf(tmp_path)
    ids = torch.randint(0, 96, (1, 40))  # longer than the window and the original context
    with torch.no_grad():
        expected = hf(ids).logits
    # these tiny models' logits are about 0.4: 1e-5 is 2.5e-5 of their size (read with a default, each
    # of these configs was off by 5e-5 to 1.4e-2; read right, by 1.4e-7 at most)
    assert torch.allclose(ours.logits(ids), expected, atol=1e-5), (ours.logits(ids) - expected).abs().max()


def test_phi3_longrope_is_refused_by_name(tmp_path):
    config = transformers.Phi3Config(
        **SMALL,
        rope_parameters={
            "rope_type": "longrope",
            "rope_theta": 1e4,
            "short_factor": [1.0] * 4,
            "long_factor": [2.0] * 4,
            "original_max_position_embeddings": 32,
        },
        max_position_embeddings=128,
        original_max_position_embeddings=32,
        pad_token_id=0,
        eos_token_id=1,
    )
    transformers.Phi3ForCausalLM(config).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="RoPE type 'longrope' is not supported"):
        gf.from_hf(tmp_path)


def _written_by_5(model_type: str) -> dict:
    """The config.json transformers 5.x writes for ``model_type``'s defaults."""
    return transformers.AutoConfig.for_model(model_type).to_dict()


def _as_4x(hf: dict) -> dict:
    """The same settings as transformers 4.x wrote them: top-level rope_theta / rope_scaling /
    partial_rotary_factor (GPT-NeoX: rotary_emb_base, rotary_pct), Gemma 3's rope_local_base_freq."""
    old = {key: value for key, value in hf.items() if key != "rope_parameters"}
    params = hf.get("rope_parameters")
    if not params:
        return old
    if "full_attention" in params:
        old["rope_local_base_freq"] = params["sliding_attention"]["rope_theta"]
        params = params["full_attention"]
    neox = hf["model_type"] == "gpt_neox"
    old["rotary_emb_base" if neox else "rope_theta"] = params["rope_theta"]
    if "partial_rotary_factor" in params:
        old["rotary_pct" if neox else "partial_rotary_factor"] = params["partial_rotary_factor"]
    if params.get("rope_type", "default") != "default":
        old["rope_scaling"] = {
            k: v for k, v in params.items() if k not in ("rope_theta", "partial_rotary_factor")
        }
    return old


@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_every_family_reads_both_schemas_alike(model_type):
    hf = _written_by_5(model_type)
    family = reader(model_type)
    new = read_config(family, hf, set())
    assert read_config(family, _as_4x(hf), set()) == new


ROPE_FAMILIES = [t for t in FAMILIES if "rope_parameters" in _written_by_5(t)]


def _with_rope(hf: dict, **settings) -> dict:
    """``hf`` with its (global layers') RoPE parameters changed."""
    params = dict(hf["rope_parameters"])
    if "full_attention" in params:
        return {
            **hf,
            "rope_parameters": {**params, "full_attention": {**params["full_attention"], **settings}},
        }
    return {**hf, "rope_parameters": {**params, **settings}}


@pytest.mark.parametrize("model_type", ROPE_FAMILIES)
@pytest.mark.parametrize("kind", ["yarn", "longrope", "dynamic", "rotary-of-tomorrow"])
def test_a_rope_type_we_do_not_compute_is_refused(model_type, kind):
    hf = _with_rope(_written_by_5(model_type), rope_type=kind, factor=2.0)
    with pytest.raises(ValueError, match=f"RoPE type '{kind}' is not supported"):
        read_config(reader(model_type), hf, set())


@pytest.mark.parametrize("model_type", ROPE_FAMILIES)
def test_a_rope_setting_we_do_not_read_is_refused(model_type):
    hf = _with_rope(_written_by_5(model_type), attention_factor=0.5)
    with pytest.raises(ValueError, match="RoPE setting 'attention_factor' = 0.5"):
        read_config(reader(model_type), hf, set())


@pytest.mark.parametrize("model_type", list(FAMILIES))
def test_a_key_no_family_reads_is_refused_by_name(model_type):
    hf = {**_written_by_5(model_type), "attention_sinks": 4}
    with pytest.raises(ValueError, match=f"{model_type} config.json sets attention_sinks = 4"):
        read_config(reader(model_type), hf, set())
    assert read_config(reader(model_type), {**hf, "attention_sinks": None}, set())  # null: off


@pytest.mark.parametrize(
    ("model_type", "key", "value"),
    [
        ("gpt2", "scale_attn_weights", False),
        ("gpt2", "tie_word_embeddings", False),
        ("bert", "is_decoder", True),
        ("bert", "tie_word_embeddings", False),
        ("roberta", "add_cross_attention", True),
        ("llama", "pruned_heads", {"0": [1]}),
    ],
)
def test_a_key_away_from_its_neutral_value_is_refused(model_type, key, value):
    hf = {**_written_by_5(model_type), key: value}
    with pytest.raises(ValueError, match=f"sets {key} = "):
        read_config(reader(model_type), hf, set())


def test_two_schemas_that_disagree_are_refused():
    hf = {**_written_by_5("llama"), "rope_theta": 5e5}  # rope_parameters says 1e4
    with pytest.raises(ValueError, match="rope_theta = 10000.0 in rope_parameters and 500000.0 in the older"):
        read_config(reader("llama"), hf, set())


def test_partial_rotary_where_the_family_has_none_is_refused():
    hf = _with_rope(_written_by_5("llama"), partial_rotary_factor=0.5)
    with pytest.raises(ValueError, match="partial_rotary_factor=0.5 is not supported for llama"):
        read_config(reader("llama"), hf, set())


def _every_builder() -> dict:
    """name -> a function making the tiny HF model, from every parity test module."""
    from tests import test_hf_parity, test_hf_parity_gemma2_olmo2, test_moe, test_vit

    builders = dict(test_hf_parity.BUILDERS)
    builders |= {name: build for name, (build, _) in test_hf_parity_gemma2_olmo2.BUILDERS.items()}
    builders |= dict(test_moe.BUILDERS)
    return builders | {"vit": test_vit.hf_classifier}


EVERY = _every_builder()


@pytest.mark.parametrize("name", list(EVERY))
def test_a_folder_saved_by_transformers_reads_as_its_model_object(name, tmp_path):
    """The parity tests compare HF's model objects with ours; a checkpoint folder the installed
    transformers saved (its config.json schema, its tensor names: fused experts turned back) gives
    the same model, parameter for parameter, so the parity holds for files too."""
    torch.manual_seed(0)
    hf = EVERY[name]().eval()
    hf.save_pretrained(tmp_path)
    from_folder, from_object = gf.from_hf(tmp_path).net, gf.from_hf(hf).net
    assert from_folder.config == from_object.config
    folder, obj = from_folder.state_dict(), from_object.state_dict()
    assert folder.keys() == obj.keys()
    assert all(torch.equal(folder[key], obj[key]) for key in folder), name
