"""Every Hugging Face family the library reads, walked in the workshop: a tiny random checkpoint
of each (the parity tests' builders), converted with `gf.from_hf`, served, and

* through the API: the walk lists the model's own steps, and every step opens with the
  library's own values (`lm.trace`);
* in Chromium: the page walks it, draws the overview and typesets every step's equation,
  with no error in the console.

The checkpoints carry no tokenizer; each model reads characters, one per id of its vocabulary."""

from __future__ import annotations

import warnings

import pytest
import torch

import glassformer as gf
from glassformer.tokenizers.char import CharTokenizer
from glassformer.workshop.walk.arrays import unpack
from tests.conftest import workshop_client
from tests.test_hf_parity import VOCAB
from tests.test_workshop_page import TEXT

transformers = pytest.importorskip("transformers")
warnings.filterwarnings("ignore")


def _builders() -> dict:
    """name -> a function making the tiny HF model, from every parity test module."""
    from tests import test_hf_parity, test_hf_parity_gemma2_olmo2, test_moe

    builders = dict(test_hf_parity.BUILDERS)
    builders |= {name: build for name, (build, _) in test_hf_parity_gemma2_olmo2.BUILDERS.items()}
    builders |= {name: build for name, build in test_moe.BUILDERS.items() if name != "mixtral-window"}
    return builders


BUILDERS = _builders()


@pytest.fixture(scope="module")
def models() -> dict[str, gf.LanguageModel]:
    characters = "".join(chr(c) for c in range(32, 127)) + "é"  # printable ASCII and one more: every id
    assert len(characters) == VOCAB
    tokenizer = CharTokenizer.from_text(characters)
    out = {}
    for name, build in BUILDERS.items():
        torch.manual_seed(0)
        lm = gf.from_hf(build().eval())
        out[name] = gf.LanguageModel(lm.net, tokenizer)
    return out


@pytest.fixture(scope="module")
def app(models):
    from glassformer.workshop.server import create_app

    return create_app(models)


@pytest.fixture(scope="module")
def api(app):
    with workshop_client(app) as client:
        yield client


def _input(lm: gf.LanguageModel) -> dict:
    body = {"text": TEXT}
    if lm.config.seq2seq:
        body["decoder_text"] = "a cat"
    return body


@pytest.mark.parametrize("name", list(BUILDERS))
def test_every_step_opens_with_the_library_s_values(api, models, name):
    lm, body = models[name], _input(models[name])
    walk = api.post("/api/walk", json={"model": name, **body})
    assert walk.status_code == 200, walk.text
    traced = [stage["trace"] for stage in walk.json()["stages"] if stage["trace"]]
    assert set(traced) <= set(lm.activation_names())
    ids = lm.tokenizer.encode(TEXT)
    decoder = lm.tokenizer.encode(body["decoder_text"]) if lm.config.seq2seq else None
    if decoder is not None and lm.config.decoder_start_token_id is not None:
        decoder = [lm.config.decoder_start_token_id, *decoder]
    trace = lm.trace(ids, traced, decoder_input=decoder)
    for stage in traced:
        answer = api.post("/api/stage", json={"model": name, **body, "name": stage})
        assert answer.status_code == 200, (stage, answer.text)
        got, expected = unpack(answer.json()["value"]), trace[stage][0].float()
        tolerance = 1 / 510 + 1e-6 if stage.endswith("pattern") else 1e-4 * max(1.0, expected.abs().max())
        assert got.shape == expected.shape and (got - expected).abs().max() <= tolerance, stage


def test_the_page_walks_every_family(workshop, models):
    from tests.test_workshop_katex import assert_every_equation_typeset

    for name, lm in models.items():
        workshop.open(model=name, level="intermediate", **_input(lm))
        assert workshop.page.locator("body").get_attribute("data-state") == "ready", name
        stacks = len(lm.config.stacks)
        assert workshop.page.locator("#overview .ov-block").count() == stacks, name
        assert_every_equation_typeset(workshop)
    workshop.close()
