"""The glassformer command and its demo."""

import json

import pytest

from glassformer import __version__, cli, demo
from glassformer.train.denormals import flushing_denormals

# every command and its flags (beyond -h): each command module registers its own parser
FLAGS = {
    "workshop": {"--port", "--host", "--token", "--no-browser"},
    "lessons": set(),  # its actions (show, export, run) are subcommands: tests/test_lessons.py
    "demo": {"--steps", "--length", "--seed"},
    "config": {"--d-model", "--n-heads", "--n-kv-heads", "--positions", "--tie-embeddings", "--d-ff"},
    "data": {"--data-dir"},
    "train": {"--preset", "--out", "--set", "--resume", "--overwrite", "--data-dir"},
    "generate": {
        "--max-new-tokens",
        "--temperature",
        "--top-k",
        "--top-p",
        "--seed",
        "--dtype",
        "--decode-weights",
    },  # fmt: skip
    "eval": {"--data-dir"},
    "runs": {"--root"},
    "chat": {"--dtype", "--system", "--max-new-tokens", "--temperature", "--top-k", "--top-p", "--seed"},
    "export": {"--overwrite"},
    "inspect": {"--view", "--layer", "--head", "--target", "--out", "--dtype"},
    "count": {"--seq-len", "--batch", "--dtype", "--json", "--load"},
    "tokenize": {"--tokenizer", "--pattern", "--explain", "--allow-special", "--color"},
    "tokenizer": set(),
    "tokenizer train": {"--corpus", "--vocab-size", "--pattern", "--special", "--data-dir", "--out"},
}


def test_version_and_help(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out.strip() == f"glassformer {__version__}"
    assert cli.main([]) == 0
    assert "demo" in capsys.readouterr().out


def test_every_command_has_its_flags_help_and_a_handler(capsys):
    commands = cli.subcommands(cli.build_parser())
    assert list(commands) == [name for name in FLAGS if " " not in name]  # in --help's order
    commands["tokenizer train"] = cli.subcommands(commands.pop("tokenizer"))["train"]
    for name, parser in commands.items():
        flags = {flag for action in parser._actions for flag in action.option_strings}
        assert FLAGS.get(name, set()) <= flags, name
        assert parser.get_default("handler") is not None, name
        with pytest.raises(SystemExit) as done:
            cli.main([*name.split(), "--help"])
        assert done.value.code == 0
        assert capsys.readouterr().out.startswith(f"usage: glassformer {name}")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["generate", "m", "--top-k", "5", "the cat"], {"model": "m", "prompt": "the cat", "top_k": 5}),
        (["generate", "m", "the cat", "--top-k", "5"], {"model": "m", "prompt": "the cat", "top_k": 5}),
        (["generate", "--decode-weights", "q4_1", "m", "猫"], {"model": "m", "prompt": "猫"}),
        (["workshop", "--port", "9000", "a", "b"], {"models": ["a", "b"], "port": 9000}),
        (["chat", "--max-new-tokens", "4", "smol"], {"model": "smol", "max_new_tokens": 4}),
    ],
)
def test_a_command_s_options_and_words_come_in_any_order(argv, words):
    args = vars(cli.parse(cli.build_parser(), argv))
    assert args["command"] == argv[0] and args["handler"] is not None
    assert {key: args[key] for key in words} == words


def test_a_word_too_many_is_still_refused(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["generate", "m", "--top-k", "5", "the cat", "sat"])
    assert done.value.code == 2
    assert "unrecognized arguments: sat" in capsys.readouterr().err


def test_bad_demo_sizes_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as done:
        cli.main(["demo", "--steps", "0"])
    assert done.value.code == 2
    assert "argument --steps: must be >= 1, got 0" in capsys.readouterr().err


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
    flushing_before = flushing_denormals()
    figures = demo.run(steps=150, out=lines.append)
    assert flushing_denormals() == flushing_before  # training flushed denormals, then put it back
    assert figures["second_copy_loss"] < 0.5
    assert 0.9 <= figures["accuracy"] <= 1.0  # a fraction of the 20 tokens
    assert figures["induction"] > 0.5
    assert figures["cache_identical"]
    assert any("induction head: layer" in line for line in lines)
    assert demo.continuation_line(figures["accuracy"], 20) in "\n".join(lines)


def test_the_continuation_line_gives_a_percentage():
    assert demo.copied_right([5, 6, 7, 9], [5, 6, 7, 8]) == 0.75
    assert demo.copied_right([5], [5, 6]) == 0.5  # stopped short: the missing token is wrong
    assert demo.continuation_line(demo.copied_right(list(range(20)), list(range(20))), 20) == (
        "greedy continuation of a new sequence: 100% of 20 tokens copied right"
    )
    assert demo.continuation_line(19 / 20, 20).endswith(": 95% of 20 tokens copied right")
    with pytest.raises(ValueError, match="no expected continuation"):
        demo.copied_right([1], [])


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


def test_export_overwrite_refuses_a_directory_holding_other_files(tmp_path, capsys):
    from glassformer.train.checkpoint import save_checkpoint
    from tests.conftest import tiny_model

    run = save_checkpoint(tmp_path / "run", tiny_model(n_layers=1), None, {"name": "tiny"}, {"step": 0})
    out = tmp_path / "out"
    assert cli.main(["export", str(run), str(out)]) == 0
    assert "GPT2LMHeadModel" in capsys.readouterr().out
    assert cli.main(["export", str(run), str(out)]) == 2  # holds files: --overwrite needed
    assert "--overwrite" in capsys.readouterr().err
    assert cli.main(["export", str(run), str(out), "--overwrite"]) == 0  # only its own files: replaced
    capsys.readouterr()
    (out / "notes.txt").write_text("mine")
    assert cli.main(["export", str(run), str(out), "--overwrite"]) == 2
    assert "notes.txt" in capsys.readouterr().err
    assert (out / "notes.txt").read_text() == "mine" and (out / "config.json").exists()


def test_workshop_models_default_to_the_registry_and_local_runs(tmp_path):
    from glassformer.commands.workshop import DEFAULT_MODELS, model_names

    assert model_names(["runs/x"], tmp_path) == ["runs/x"]
    assert model_names([], tmp_path / "none") == list(DEFAULT_MODELS)
    (tmp_path / "char").mkdir()
    (tmp_path / "char" / "train_config.json").write_text("{}")
    (tmp_path / "notes").mkdir()
    assert model_names([], tmp_path) == [*DEFAULT_MODELS, str(tmp_path / "char")]


def test_workshop_refuses_a_bad_port(capsys):
    assert cli.main(["workshop", "minilm-l6", "--port", "70000", "--no-browser"]) == 2
    assert "not a port number" in capsys.readouterr().err
