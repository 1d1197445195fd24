"""The vision transformer: patches, HF's ViT read and written, the digits preset, its costs.

The patch embedding's convolution equals cutting the image into patches and one matrix; a tiny
random ``ViTForImageClassification`` read by `gf.from_hf` gives HF's logits; `save_hf` writes a
directory HF loads with the same logits; bad inputs are explained; the trace has the patch hook
points; the parameter count is the built model's; `vit-digits` trains and reads back.
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

import glassformer as gf
from glassformer import cli
from glassformer.formats.hf_export import save_hf
from glassformer.inspect.costs import flops_per_token, parameter_counts
from glassformer.nn.patches import NO_VOCABULARY, cut_patches
from glassformer.train.images import DIGITS, digits_split
from glassformer.train.pace import measure, stand_in
from glassformer.train.runs import prepare
from glassformer.train.settings import apply_overrides, load_preset

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")
transformers.logging.set_verbosity_error()

HF_SIZES = dict(  # HF's names: a 16 x 16 image of 3 channels, 4 x 4 patches -> 16 patches + [CLS]
    image_size=16,
    patch_size=4,
    num_channels=3,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=64,
)


def vit_config(**overrides) -> gf.ModelConfig:
    """Our tiny ViT classifier: 8 x 8 pixels of one channel, 2 x 2 patches, 3 classes."""
    fields = dict(
        family="encoder",
        vocab_size=NO_VOCABULARY,
        d_model=32,
        n_layers=2,
        n_heads=4,
        d_ff=64,
        image_size=8,
        patch_size=2,
        n_channels=1,
        max_seq_len=17,
        mlm_head=False,
        n_classes=3,
        activation="gelu",
    )
    return gf.ModelConfig(**{**fields, **overrides})


def perturbed(model: torch.nn.Module) -> torch.nn.Module:
    """HF starts norms and biases at 1 and 0: make every tensor matter."""
    torch.manual_seed(0)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(0.1 * torch.randn_like(param))
    return model.eval()


def hf_classifier(**overrides):
    config = transformers.ViTConfig(**{**HF_SIZES, "num_labels": 3, **overrides})
    return perturbed(transformers.ViTForImageClassification(config))


# the patch embedding ---------------------------------------------------------------------------
def test_the_convolution_is_cutting_patches_and_one_matrix():
    """Conv2d(C, d, kernel P, stride P) == cut into P x P patches, flatten, x W_patch^T + b."""
    net = gf.build(vit_config(n_channels=3, image_size=8, patch_size=4, max_seq_len=5))
    embed = net.stack.embed
    pixels = torch.randn(2, 3, 8, 8)  # b C H W
    by_convolution = embed.patch_proj(pixels).flatten(2).transpose(1, 2)  # b n d
    patches = cut_patches(pixels, 4)  # b n (C P P)
    assert patches.shape == (2, 4, 48)
    assert torch.equal(patches[0, 1], pixels[0, :, 0:4, 4:8].flatten())  # patch (row 0, column 1)
    by_matrix = patches @ embed.patch_matrix.T + embed.patch_proj.bias  # b n d
    torch.testing.assert_close(by_convolution, by_matrix, rtol=1e-5, atol=1e-6)


def test_the_trace_has_the_patch_hook_points():
    lm = gf.LanguageModel(gf.build(vit_config()))
    pixels = torch.rand(2, 1, 8, 8)
    trace = lm.trace(pixels, ["embed.*", "blocks.0.attn.pattern", "classifier.logits"])
    assert list(trace) == [
        "embed.patches",
        "embed.tokens",
        "embed.positions",
        "embed.out",
        "blocks.0.attn.pattern",
        "classifier.logits",
    ]
    assert trace.shapes()["embed.patches"] == (2, 16, 32)  # b n d
    for name in ("embed.tokens", "embed.positions", "embed.out"):
        assert trace.shapes()[name] == (2, 17, 32)  # b t d: [CLS] and 16 patches
    assert trace.shapes()["blocks.0.attn.pattern"] == (2, 4, 17, 17)
    assert torch.equal(trace["embed.tokens"][:, 1:], trace["embed.patches"])  # [CLS] goes first
    assert torch.equal(trace["embed.tokens"][0, 0], lm.net.stack.embed.cls_token.detach())
    assert trace.tokens[:3] == ["[CLS]", "patch 0,0", "patch 0,1"] and len(trace.tokens) == 17
    torch.testing.assert_close(trace["classifier.logits"], lm.logits(pixels))


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("a photo of a cat", ValueError, r"vision model \(ViT\): it reads images, pixel_values"),
        ([[1, 2, 3]], TypeError, r"must be a float tensor \(b, C, H, W\) = \(b, 1, 8, 8\), got list"),
        (
            torch.rand(2, 3, 8, 8),
            ValueError,
            r"shape \(b, C, H, W\) = \(b, 1, 8, 8\), got shape \(2, 3, 8, 8\)",
        ),
        (torch.rand(1, 1, 16, 16), ValueError, r"got shape \(1, 1, 16, 16\)"),
        (torch.rand(8, 8), ValueError, r"got shape \(8, 8\)"),
        (torch.zeros(2, 1, 8, 8, dtype=torch.long), TypeError, "must hold float pixel values"),
    ],
)
def test_bad_inputs_say_what_a_vision_model_reads(value, error, message):
    lm = gf.LanguageModel(gf.build(vit_config()))
    with pytest.raises(error, match=message):
        lm.logits(value)


def test_a_vision_model_has_no_tokens_and_a_text_model_no_pixels():
    lm = gf.LanguageModel(gf.build(vit_config()))
    assert lm.logits(torch.rand(1, 8, 8)).shape == (1, 3)  # one image C H W: a batch of one
    probabilities = lm.classify(torch.rand(4, 1, 8, 8))
    torch.testing.assert_close(probabilities.sum(-1), torch.ones(4))
    with pytest.raises(ValueError, match="reads no token ids; pass pixel_values"):
        lm.ids([1, 2, 3])
    with pytest.raises(ValueError, match="has no token table"):
        lm.net.token_embedding  # noqa: B018
    with pytest.raises(ValueError, match="no masked-LM head .no vocabulary.: set mlm_head=False"):
        gf.build(vit_config(mlm_head=True, n_classes=0))
    with pytest.raises(ValueError, match="reads pixels, not token ids; set vocab_size=1"):
        vit_config(vocab_size=256)
    text = gf.LanguageModel(gf.build(gf.ModelConfig(vocab_size=50, d_model=32, n_layers=1, n_heads=4)))
    with pytest.raises(ValueError, match="pixel values are for vision models"):
        text.inputs.pixels(torch.rand(1, 1, 8, 8))


# Hugging Face ----------------------------------------------------------------------------------
def test_vit_for_image_classification_has_hf_logits(tmp_path):
    hf = hf_classifier(id2label={0: "cat", 1: "dog", 2: "bird"}, label2id={"cat": 0, "dog": 1, "bird": 2})
    hf.save_pretrained(tmp_path)
    pixels = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        theirs = hf(pixel_values=pixels).logits  # b c
    for lm in (gf.from_hf(tmp_path), gf.load(tmp_path), gf.from_hf(hf)):
        diff = (lm.logits(pixels) - theirs).abs().max().item()
        print(f"ViTForImageClassification: max abs logit difference {diff:.1e}")
        assert diff <= 1e-4
    config = lm.config
    assert config.vision and config.n_patches == 16 and config.max_seq_len == 17
    assert config.class_names == ("cat", "dog", "bird") and config.norm_eps == 1e-12
    assert lm.tokenizer is None


def test_vit_model_has_hf_hidden_states_and_its_pooler_is_ignored(tmp_path):
    hf = perturbed(transformers.ViTModel(transformers.ViTConfig(**HF_SIZES, qkv_bias=False)))
    assert "pooler.dense.weight" in hf.state_dict()
    hf.save_pretrained(tmp_path)
    lm = gf.load(tmp_path)
    assert lm.config.sentence_encoder and not lm.config.qkv_bias
    pixels = torch.randn(2, 3, 16, 16)
    with torch.no_grad():
        theirs = hf(pixel_values=pixels).last_hidden_state  # b t d
    assert (lm.logits(pixels) - theirs).abs().max().item() <= 1e-4


def test_hf_to_ours_to_hf_is_the_same_model(tmp_path):
    hf = hf_classifier()
    hf.save_pretrained(tmp_path / "hf")
    done = gf.load(tmp_path / "hf").save_hf(tmp_path / "export")
    assert (done.model_type, done.architecture) == ("vit", "ViTForImageClassification")
    back, info = transformers.AutoModelForImageClassification.from_pretrained(
        tmp_path / "export", output_loading_info=True
    )
    assert not any(info.values()), info
    theirs, ours = hf.state_dict(), back.state_dict()
    assert theirs.keys() == ours.keys()
    for key in theirs:
        assert torch.equal(theirs[key], ours[key]), key


def test_a_vit_built_here_loads_in_hf_with_our_logits(tmp_path):
    lm = gf.LanguageModel(perturbed(gf.build(vit_config(class_names=("a", "b", "c")))))
    lm.save_hf(tmp_path)
    hf, info = transformers.AutoModelForImageClassification.from_pretrained(
        tmp_path, output_loading_info=True
    )
    assert not any(info.values()), info
    assert hf.config.id2label == {0: "a", 1: "b", 2: "c"}
    pixels = torch.rand(2, 1, 8, 8)
    with torch.no_grad():
        theirs = hf.eval()(pixel_values=pixels).logits
    diff = (theirs - lm.logits(pixels)).abs().max().item()
    print(f"ours -> ViTForImageClassification: max abs logit difference {diff:.1e}")
    assert diff <= 1e-5
    assert gf.load(tmp_path).config == lm.config


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            vit_config(classifier_pooling="mean"),
            r"closest, vit \(ViTForImageClassification\).*classifier_pooling",
        ),
        (vit_config(norm_placement="post"), r"closest, vit .*norm_placement"),
        (vit_config(max_seq_len=32), r"closest, vit .*max_seq_len \(32 here, 17 as vit\)"),
        (  # a text encoder HF's BERT cannot hold is still compared with BERT, not with ViT
            gf.ModelConfig(family="encoder", vocab_size=61, d_model=32, n_layers=2, n_heads=4),
            r"closest, bert \(BertForMaskedLM\).*norm_placement",
        ),
    ],
)
def test_what_vit_cannot_hold_is_refused_naming_the_fields(config, message, tmp_path):
    with pytest.raises(ValueError, match=message):
        save_hf(gf.build(config), tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


# costs -----------------------------------------------------------------------------------------
def test_the_parameter_count_is_the_built_models():
    for config in (vit_config(), vit_config(n_channels=3, qkv_bias=False), vit_config(n_classes=0)):
        counts = parameter_counts(config)
        assert counts["patch embedding"] == config.n_channels * 2 * 2 * 32 + 32  # W_patch (C P P) x d, b
        assert counts["cls token"] == 32 and "token embedding" not in counts
        net = gf.build(config)
        assert sum(counts.values()) == sum(p.numel() for p in net.parameters()) == net.num_parameters()


def test_flops_match_the_flop_counter():
    config, b = vit_config(d_model=64, d_ff=128), 4
    net = gf.build(config).eval()
    counter = FlopCounterMode(display=False)
    with net.attention_impl("explicit"), counter, torch.no_grad():
        net.classify(torch.rand(b, 1, 8, 8))
    measured = counter.get_total_flops() / (b * (config.n_patches + 1))
    assert flops_per_token(config, config.n_patches + 1).forward == pytest.approx(measured, rel=0.005)


def test_count_a_vit_preset_and_hf_directory(tmp_path, capsys):
    assert cli.main(["count", "vit-digits", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    built = gf.build(gf.ModelConfig.from_dict(_preset_config()))
    assert figures["total_parameters"] == built.num_parameters() and figures["seq_len"] == 17
    assert figures["parameters"]["patch embedding"] == 1 * 2 * 2 * 64 + 64
    assert cli.main(["count", "vit-digits"]) == 0
    assert "8x8x1 images, 2x2 patches (16 + [CLS])" in capsys.readouterr().out
    hf_classifier().save_pretrained(tmp_path)
    assert cli.main(["count", str(tmp_path), "--load", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["real_parameters"] == figures["total_parameters"]


def _preset_config() -> dict:
    return prepare(load_preset("vit-digits")).net.config.to_dict()


# the digits preset -----------------------------------------------------------------------------
def test_the_digits_split_is_fixed_and_stratified():
    split, again = digits_split(0.25, split_seed=0), digits_split(0.25, split_seed=0)
    assert torch.equal(split.test_images, again.test_images)
    assert not torch.equal(split.test_images, digits_split(0.25, split_seed=1).test_images)
    assert 0.0 <= float(split.train_images.min()) and float(split.train_images.max()) == 1.0
    train_share = torch.bincount(split.train_labels) / len(split.train_labels)
    test_share = torch.bincount(split.test_labels) / len(split.test_labels)
    assert (train_share - test_share).abs().max() < 0.01  # every digit in the same proportion
    with pytest.raises(ValueError, match="test_fraction must be a number in"):
        digits_split(1.5)


def test_the_lab_times_vit_digits_on_its_own_images():
    run = load_preset("vit-digits")
    assert "pixel_values" in stand_in(run).val_batches[0]
    pace = measure(apply_overrides(run, ["train.eval_interval=1000"]))
    assert pace.step_s > 0 and pace.evaluation_s > 0


def test_vit_digits_trains_and_reads_back(tmp_path, capsys):
    out = tmp_path / "vit"
    settings = ("train.steps=4", "train.eval_interval=2", "train.warmup_steps=1", "train.tensorboard=false")
    argv = ["train", "--preset", "vit-digits", "--out", str(out)]
    argv += [word for setting in settings for word in ("--set", setting)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    assert "val_accuracy" in printed and "image " in printed and "glassformer eval" in printed
    assert not (out / "film.jsonl").exists() and not (out / "tokenizer.json").exists()
    lm = gf.load(out)
    assert lm.config.class_names == DIGITS and lm.config.vision and lm.tokenizer is None
    run = apply_overrides(load_preset("vit-digits"), ["train.steps=4"])
    pixels = prepare(run).val_batches[0]["pixel_values"][:5]
    assert lm.logits(pixels).shape == (5, 10)
    assert cli.main(["eval", str(out)]) == 0
    assert "macro_f1" in capsys.readouterr().out
