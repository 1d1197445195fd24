import json
import re
from pathlib import Path

import pytest

import glassformer as gf
from glassformer.config import ModelConfig


def test_derived_sizes():
    c = ModelConfig(d_model=64, n_heads=8)
    assert (c.n_kv_heads, c.d_head, c.d_ff, c.n_decoder_layers) == (8, 8, 256, c.n_layers)


def test_json_round_trip(tmp_path):
    c = ModelConfig(family="encoder_decoder", positions="t5_relative", n_kv_heads=2, activation="swiglu")
    assert ModelConfig.from_json(c.to_json()) == c
    c.to_json(tmp_path / "config.json")
    assert ModelConfig.from_json(tmp_path / "config.json") == c
    assert json.loads((tmp_path / "config.json").read_text())["positions"] == "t5_relative"


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(d_model=100, n_heads=3), "d_model=100 must be divisible by n_heads=3"),
        (dict(n_heads=4, n_kv_heads=3), "n_heads=4 must be divisible by n_kv_heads=3"),
        (dict(activation="swish"), "activation='swish' is not supported; allowed values: 'relu'"),
        (dict(positions="absolute"), "positions='absolute' is not supported"),
        (dict(norm_placement="middle"), "norm_placement='middle'"),
        (dict(family="gpt"), "family='gpt'"),
        (dict(attn_dropout=1.5), "attn_dropout=1.5 must lie in [0, 1)"),
        (dict(vocab_size=0), "vocab_size=0 must be a positive integer"),
        (dict(positions="rope", d_model=36, n_heads=4), "needs an even d_head"),
        (dict(eos_token_id=500, vocab_size=100), "eos_token_id=500 must lie in [0, vocab_size=100)"),
        (dict(pooler=True), "pooler=True is only for family='encoder'"),
    ],
)
def test_invalid_configs_name_the_field(fields, message):
    with pytest.raises(ValueError) as error:
        ModelConfig(**fields)
    assert message in str(error.value)


def test_unknown_field_in_json():
    with pytest.raises(ValueError, match="unknown ModelConfig field"):
        ModelConfig.from_dict({"d_modle": 3})


def test_frozen():
    c = ModelConfig()
    with pytest.raises(AttributeError):
        c.d_model = 3  # type: ignore[misc]
    assert c.replace(n_layers=1).n_layers == 1


def test_build_rejects_non_config():
    with pytest.raises(TypeError, match="needs a ModelConfig"):
        gf.build({"d_model": 3})


def test_depth_of_each_stack():
    decoder = ModelConfig(n_layers=3)
    seq2seq = ModelConfig(family="encoder_decoder", n_layers=3, n_decoder_layers=2)
    encoder = ModelConfig(family="encoder", n_layers=3)
    assert (decoder.stack_depths, decoder.decoder_depth) == ((3,), 3)
    assert (seq2seq.stack_depths, seq2seq.decoder_depth) == ((3, 2), 2)
    assert (encoder.stack_depths, encoder.decoder_depth) == ((3,), 0)


def test_llama_style_preset():
    from glassformer.config import LLAMA_STYLE, llama_style

    config = llama_style(vocab_size=64, d_model=32, n_layers=1, n_heads=4, n_kv_heads=2)
    assert all(getattr(config, name) == value for name, value in LLAMA_STYLE.items())
    assert llama_style(activation="geglu").activation == "geglu"  # fields override the style


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # stacks, seq2seq, causal, has_lm_head, generates, masked_lm, sentence_encoder
        ({}, ("", False, True, True, True, False, False)),
        ({"family": "encoder"}, ("", False, False, True, False, True, False)),
        ({"family": "encoder", "mlm_head": False}, ("", False, False, False, False, False, True)),
        ({"family": "encoder", "n_classes": 2}, ("", False, False, False, False, False, False)),
        ({"family": "decoder", "n_classes": 2}, ("", False, True, False, False, False, False)),
        ({"family": "encoder_decoder"}, ("encoder decoder", True, True, True, True, False, False)),
    ],
)
def test_a_config_says_what_its_model_can_do(fields, expected):
    """The capabilities every caller asks instead of the family's name."""
    config = ModelConfig(n_layers=2, n_decoder_layers=3, **fields)
    stacks = " ".join(stack.name for stack in config.stacks)
    names = ("seq2seq", "causal", "has_lm_head", "generates", "masked_lm", "sentence_encoder")
    assert (stacks, *(getattr(config, name) for name in names)) == expected
    assert config.stack_depths == tuple(stack.layers for stack in config.stacks)
    assert [stack.cross for stack in config.stacks] == ([False, True] if config.seq2seq else [False])


FAMILY_TEST = re.compile(r"\bfamily\s*(?:===?|!==?|in\b|not in\b)|\.family\s*(?:===?|!==?)")


def test_callers_ask_capabilities_not_family_names():
    """The family's name is read where a model is built (config.py and its checks, models/, formats/, a
    preset's objective in train/runs.py): at most ten tests in all, none anywhere else."""
    root = Path(__file__).resolve().parents[1]
    sources = [*root.glob("glassformer/**/*.py"), *root.glob("glassformer/workshop/static/js/**/*.js")]
    found = {str(p.relative_to(root)): n for p in sources if (n := len(FAMILY_TEST.findall(p.read_text())))}
    building = ("glassformer/config.py", "glassformer/config_checks.py", "glassformer/train/runs.py")
    building += ("glassformer/models/",)
    building += ("glassformer/formats/",)
    assert {path: n for path, n in found.items() if not path.startswith(building)} == {}
    assert sum(found.values()) <= 10, found
