"""A Hub id is a model: ``gf.load("owner/name")`` through huggingface_hub, against a Hub on
127.0.0.1 (`tests.fake_hub`) and a cache under tmp_path, never the network."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch

import glassformer as gf
from glassformer import cli
from glassformer.commands.workshop import load_models
from glassformer.formats.hub import ALLOWED_FILES
from glassformer.formats.registry import UnknownModel
from glassformer.tokenizers.bpe_train import train_bpe
from tests.fake_hub import FakeHub

TEXT = "the cat sat on the mat. the dog sat on the log."
PICKLES = {"pytorch_model.bin": b"a pickle we must never fetch", "training_args.pt": b"another"}


def tiny_model(folder: Path, seed: int) -> Path:
    """A tiny GPT-2-style model with its byte-level BPE tokenizer, as an HF directory."""
    tokenizer = train_bpe(TEXT * 4, vocab_size=272, progress=False)
    config = gf.ModelConfig(
        vocab_size=tokenizer.vocab_size, d_model=32, n_layers=2, n_heads=4, max_seq_len=64
    )
    torch.manual_seed(seed)
    gf.LanguageModel(gf.build(config), tokenizer).save_hf(folder)
    return folder


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("hub_models")
    return tiny_model(root / "a", seed=0), tiny_model(root / "b", seed=1)


@pytest.fixture
def hub(models, tmp_path, monkeypatch):
    """The Hub, serving owner/tiny: model a as main (beside pickles and a README), model b as v2;
    huggingface_hub's cache under tmp_path, online."""
    with FakeHub() as hub:
        files = {p.name: p.read_bytes() for p in models[0].iterdir()} | PICKLES | {"README.md": b"# tiny"}
        hub.add("owner/tiny", files)
        hub.add("owner/tiny", models[1], revision="v2")
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf_home"))
        for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
            monkeypatch.delenv(name, raising=False)
        offline(monkeypatch, False)
        yield hub


def offline(monkeypatch, on: bool) -> None:
    """$HF_HUB_OFFLINE as a user sets it before starting Python: huggingface_hub reads it once, at
    import (its ``constants``), and the test suite imported it long ago with the variable set."""
    import huggingface_hub.constants

    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    if on:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    else:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", on)


def logits(lm: gf.LanguageModel) -> torch.Tensor:
    return lm.logits("the cat sat")


def fetched(hub: FakeHub) -> set[str]:
    """The repository files asked for (HEAD or GET on /resolve/; a weights file's bytes then
    come from the file store)."""
    resolved = [path for _, path in hub.requests if "/resolve/" in path]
    return {path.split("/resolve/", 1)[1].split("/", 1)[1] for path in resolved}


def test_a_hub_id_is_the_model_its_folder_holds(hub, models):
    lm = gf.load("owner/tiny")
    assert torch.equal(logits(lm), logits(gf.load(models[0])))
    assert lm.tokenizer.encode(TEXT) == gf.load(models[0]).tokenizer.encode(TEXT)
    assert fetched(hub) == {p.name for p in models[0].iterdir()} & set(ALLOWED_FILES)
    assert "model.safetensors" in fetched(hub)
    asked = " ".join(path for _, path in hub.requests)
    assert ".bin" not in asked and ".pt" not in asked and "README" not in asked
    assert any(path.startswith("/lfs/") for path in hub.paths("GET"))  # the weights came by the redirect


def test_from_hf_takes_a_hub_id(hub, models):
    assert torch.equal(logits(gf.from_hf("owner/tiny")), logits(gf.load(models[0], fast_paths=False)))


def test_a_revision_is_picked_by_argument_or_after_the_at(hub, models):
    expected = logits(gf.load(models[1]))
    assert torch.equal(logits(gf.load("owner/tiny", revision="v2")), expected)
    assert torch.equal(logits(gf.load("owner/tiny@v2")), expected)
    assert not torch.equal(logits(gf.load("owner/tiny")), expected)  # main is the other model
    commit = hub.repos["owner/tiny"]["v2"][0]
    assert torch.equal(logits(gf.load(f"owner/tiny@{commit}")), expected)
    with pytest.raises(ValueError, match="two revisions for owner/tiny"):
        gf.load("owner/tiny@v2", revision="main")
    with pytest.raises(FileNotFoundError, match="owner/tiny has no revision 'v3' on the Hub"):
        gf.load("owner/tiny", revision="v3")


def test_a_repository_of_pickles_is_refused_before_any_download(hub):
    hub.add("owner/pickled", {"config.json": b'{"model_type": "gpt2"}', **PICKLES})
    with pytest.raises(ValueError) as refused:
        gf.load("owner/pickled")
    message = str(refused.value)
    assert "owner/pickled has only pickled weights (pytorch_model.bin, training_args.pt)" in message
    assert "never unpickles" in message and "save_pretrained(folder, safe_serialization=True)" in message
    assert not [path for path in hub.paths("GET") + hub.paths("HEAD") if "/resolve/" in path]


def test_a_missing_repository_is_named(hub):
    with pytest.raises(FileNotFoundError, match="owner/absent is not a model repository on the Hub"):
        gf.load("owner/absent")


def test_offline_a_warm_cache_is_enough(hub, models, monkeypatch):
    gf.load("owner/tiny")
    gf.load("owner/tiny@v2")
    hub.stop()
    hub.requests.clear()
    offline(monkeypatch, True)
    assert torch.equal(logits(gf.load("owner/tiny")), logits(gf.load(models[0])))
    assert torch.equal(logits(gf.load("owner/tiny", revision="v2")), logits(gf.load(models[1])))
    assert hub.requests == []
    offline(monkeypatch, False)  # no network at all: the cache answers too
    assert torch.equal(logits(gf.load("owner/tiny")), logits(gf.load(models[0])))


def test_offline_a_cold_cache_names_the_command_that_fetches(hub, monkeypatch):
    offline(monkeypatch, True)
    with pytest.raises(FileNotFoundError) as missing:
        gf.load("owner/tiny@v2")
    message = str(missing.value)
    assert "owner/tiny (revision v2) is not in the Hugging Face cache" in message
    assert "HF_HUB_OFFLINE is set" in message
    assert "\n  hf download owner/tiny --revision v2 --include config.json --include generation" in message
    assert "--include model.safetensors --include model.safetensors.index.json" in message
    assert message.endswith(
        "--include 'model-*-of-*.safetensors'\n(or unset HF_HUB_OFFLINE and load it again)"
    )
    assert hub.requests == []


def test_without_a_network_a_cold_cache_says_the_hub_was_unreachable(monkeypatch, tmp_path):
    with socket.socket() as unused:  # a port nothing listens on
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    offline(monkeypatch, False)
    with pytest.raises(FileNotFoundError) as missing:
        gf.load("owner/tiny")
    message = str(missing.value)
    assert "owner/tiny is not in the Hugging Face cache" in message
    assert "and the Hub could not be reached (" in message
    assert "\n  hf download owner/tiny --include config.json" in message and "HF_HUB_OFFLINE" not in message


def test_a_local_folder_shaped_like_an_id_wins(hub, models, tmp_path, monkeypatch):
    local = tiny_model(tmp_path / "owner" / "tiny", seed=2)
    monkeypatch.chdir(tmp_path)
    assert torch.equal(logits(gf.load("owner/tiny")), logits(gf.load(local)))
    assert hub.requests == []
    with pytest.raises(ValueError, match="revision='v2' picks a revision of a Hub id"):
        gf.load("owner/tiny", revision="v2")


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("../x", "'..' in '../x' is not a Hub name"),
        ("a/b/c", "a Hub id has one '/' between owner and name; 'a/b/c' has 2"),
        ("", "the name is empty"),
        ("owner/", "'' in 'owner/' is not a Hub name"),
        ("a--b/c", "'--' and '..' are not allowed"),
        ("owner/name@", "has nothing after '@'"),
        ("no-such-model", "has 0"),
    ],
)
def test_bad_ids_are_explained(hub, tmp_path, monkeypatch, name, reason):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UnknownModel) as unknown:
        gf.load(name)
    assert "is neither a registry name" in str(unknown.value) and "nor a Hub id owner/name[@revision]" in str(
        unknown.value
    )
    assert reason in str(unknown.value)
    assert hub.requests == []


def test_the_commands_take_a_hub_id(hub, models, capsys):
    argv = ["generate", "owner/tiny@v2", "the", "--max-new-tokens", "4", "--temperature", "0"]
    assert cli.main(argv) == 0
    expected = "".join(gf.load(models[1]).stream("the", max_new_tokens=4, temperature=0))
    assert capsys.readouterr().out.rstrip("\n") == "the" + expected
    assert cli.main(["count", "owner/tiny", "--json"]) == 0
    assert '"source": "Hugging Face directory, config.json"' in capsys.readouterr().out
    assert cli.main(["generate", "owner/absent", "x"]) == 2
    assert "owner/absent is not a model repository on the Hub" in capsys.readouterr().err
    assert list(load_models(["owner/tiny"])) == ["owner/tiny"]


def test_the_help_says_the_id_form(capsys):
    for command in ("generate", "chat", "inspect", "export", "count", "workshop"):
        with pytest.raises(SystemExit):
            cli.main([command, "--help"])
        assert "owner/name[@revision]" in capsys.readouterr().out, command
