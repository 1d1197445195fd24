"""`glassformer inspect`: every view of a small model, written to the file it names."""

from __future__ import annotations

import pytest

import glassformer as gf
from glassformer import cli
from glassformer.tokenizers.bpe_train import train_bpe

TEXT = "the cat sat on the mat. the dog sat on the log."


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny GPT-2-style model with a byte-level BPE tokenizer, as an HF directory."""
    tokenizer = train_bpe(TEXT * 4, vocab_size=272, progress=False)
    config = gf.ModelConfig(
        vocab_size=tokenizer.vocab_size, d_model=32, n_layers=2, n_heads=4, max_seq_len=64
    )
    out = tmp_path_factory.mktemp("inspect") / "tiny"
    gf.LanguageModel(gf.build(config), tokenizer).save_hf(out)
    return str(out)


@pytest.mark.parametrize(
    ("view", "suffix", "options"),
    [
        ("head", ".html", ["--layer", "1"]),
        ("model", ".html", []),
        ("neuron", ".html", ["--layer", "1", "--head", "2"]),
        ("tokens", ".html", []),
        ("tokens", ".html", ["--target", " the"]),
        ("heatmap", ".png", ["--layer", "1"]),
        ("heatmap", ".svg", ["--layer", "0", "--head", "3"]),
        ("lens", ".png", ["--target", " the"]),
        ("embeddings", ".html", []),
    ],
)
def test_each_view_is_written(model_dir, tmp_path, capsys, view, suffix, options):
    out = tmp_path / f"view{suffix}"
    assert (
        cli.main(["inspect", model_dir, "the cat sat on the", "--view", view, *options, "--out", str(out)])
        == 0
    )
    assert capsys.readouterr().out.strip() == str(out)
    data = out.read_bytes()
    assert len(data) > 1000
    if suffix == ".png":
        assert data.startswith(b"\x89PNG")
    elif suffix == ".html":
        assert b"<html" in data[:2000].lower() or b"<div" in data


def test_without_out_a_temporary_file_is_printed(model_dir, capsys):
    from pathlib import Path

    assert cli.main(["inspect", model_dir, "the cat", "--view", "lens"]) == 0
    path = Path(capsys.readouterr().out.strip())
    assert path.suffix == ".png" and path.stat().st_size > 1000
    path.unlink()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--view", "heatmap", "--out", "x.html"], "writes .png or .svg"),
        (["--view", "head", "--layer", "7"], "layer"),
        (["--view", "neuron", "--layer", "0", "--head", "9"], "head"),
        (["--view", "lens", "--target", " not one token at all"], "token"),
    ],
)
def test_bad_requests_are_explained(model_dir, capsys, options, message):
    assert cli.main(["inspect", model_dir, "the cat sat", *options]) == 2
    assert message in capsys.readouterr().err
