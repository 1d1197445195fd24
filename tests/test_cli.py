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
