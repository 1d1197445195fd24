"""The glassformer command and its demo."""

import json

import pytest

from glassformer import __version__, cli, demo


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"glassformer {__version__}"
    assert cli.main([]) == 0
    assert "demo" in capsys.readouterr().out


def test_config_flags_map_to_fields(capsys):
    assert (
        cli.main(
            ["config", "--positions", "rope", "--n-kv-heads", "2", "--no-tie-embeddings", "--d-ff", "none"]
        )
        == 0
    )
    captured = capsys.readouterr()
    config = json.loads(captured.out)
    assert (config["positions"], config["n_kv_heads"], config["tie_embeddings"]) == ("rope", 2, False)
    assert config["d_ff"] == 4 * config["d_model"]
    assert "parameters" in captured.err


def test_config_errors_are_explained(capsys):
    assert cli.main(["config", "--d-model", "100", "--n-heads", "3"]) == 2
    assert "d_model=100 must be divisible by n_heads=3" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["config", "--positions", "absolute"])
    assert "invalid choice: 'absolute'" in capsys.readouterr().err


def test_demo_learns_to_copy_and_finds_an_induction_head():
    lines = []
    figures = demo.run(steps=150, out=lines.append)
    assert figures["second_copy_loss"] < 0.5
    assert figures["accuracy"] >= 0.9
    assert figures["induction"] > 0.5
    assert figures["cache_identical"]
    assert any("induction head: layer" in line for line in lines)


def test_tokenize_shows_tokens_ids_and_offsets(capsys):
    assert cli.main(["tokenize", "The cat sat on", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "|The| cat| sat| on|"
    assert "464" in out and "3797" in out and "3:7" in out
    assert cli.main(["tokenize", "Hello", "--explain", "--color", "always"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[30;" in out and "merge=['l', 'l']" in out


def test_tokenize_errors_are_one_clear_line(capsys):
    assert cli.main(["tokenize", "x", "--tokenizer", "/no/such/file.json"]) == 2
    assert "no tokenizer at /no/such/file.json" in capsys.readouterr().err
    assert cli.main(["tokenize", "a <|endoftext|>", "--color", "never"]) == 2
    assert "allowed_special" in capsys.readouterr().err


def test_tokenizer_train_and_use(tmp_path, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("the cat sat on the mat. " * 200 + "a dog sat on a log. " * 100)
    out = tmp_path / "tok.json"
    assert (
        cli.main(
            [
                "tokenizer",
                "train",
                "--corpus",
                str(corpus),
                "--vocab-size",
                "270",
                "--special",
                "<|endoftext|>",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    assert "trained a 270-token BPE" in capsys.readouterr().out
    assert (
        cli.main(
            [
                "tokenize",
                "the cat<|endoftext|>",
                "--tokenizer",
                str(out),
                "--allow-special",
                "--color",
                "never",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out.splitlines()[0] == "|the| cat|<|endoftext|>|"
