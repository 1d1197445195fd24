"""The beginner's words have one home, the server (`workshop/walk/model_words.py`): the walk
payload carries them (``architecture.words``, ``tour``) and the page only shows them, filling a
template's ``{fields}`` with this input's numbers. No page module looks a family's words up by
its name, or holds them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

import glassformer as gf
from glassformer.tokenizers.char import CharTokenizer
from glassformer.workshop.server import create_app
from glassformer.workshop.walk.architecture import summary
from glassformer.workshop.walk.model_words import (
    FAMILY_WORDS,
    PLACEMENT_WORDS,
    VISION_WORDS,
    model_words,
    tour_words,
)
from tests.conftest import tiny, workshop_client
from tests.test_vit import vit_config

STATIC = Path(__file__).resolve().parents[1] / "glassformer" / "workshop" / "static" / "js"
ALPHABET = "abcdefghijklmnopqrstuvwxyz .,"
TEXT = "the cat sat."
FAMILIES = ("decoder", "encoder", "encoder_decoder")
# a family's name as a key of an object (`encoder_decoder: "..."`, `"decoder": ...`), or an
# index by the family (`WORDS[arch.family]`)
FAMILY_KEY = re.compile(r"""(?:^|[{,]\s*)["']?(?:encoder_decoder|decoder|encoder)["']?\s*:""", re.M)
FAMILY_INDEX = re.compile(r"\[\s*[\w.?]*family\s*\]")
STACK_TITLES = re.compile(r"STACK_TITLES = \{[^}]*\}")  # a stack's name, not a family's


def char_lm(**overrides) -> gf.LanguageModel:
    torch.manual_seed(0)
    return gf.LanguageModel(
        gf.build(tiny(vocab_size=len(ALPHABET), **overrides)).eval(), CharTokenizer(ALPHABET)
    )


@pytest.fixture(scope="module")
def client():
    models = {
        "gpt": char_lm(norm="rmsnorm"),
        "t5": char_lm(family="encoder_decoder", decoder_start_token_id=0),
    }
    with workshop_client(create_app(models)) as client:
        yield client


@pytest.mark.parametrize("family", FAMILIES)
def test_the_architecture_carries_the_family_s_words(family):
    words = summary(tiny(family=family, norm_placement="post"))["words"]
    assert words["plain"].startswith(f"is {FAMILY_WORDS[family]}. It has ")
    assert words["placement"] == PLACEMENT_WORDS["post"]
    blocks = "2 encoder blocks and 2 decoder blocks" if family == "encoder_decoder" else "2 blocks"
    assert words["blocks"] == blocks and blocks in words["plain"]


def test_a_vision_model_is_worded_as_one():
    words = model_words(vit_config())
    assert words["plain"].startswith(f"is {VISION_WORDS}.")
    assert words["blocks"] == "2 blocks"  # test_vit's tiny ViT


def test_the_walk_payload_carries_the_tour_s_words(client):
    answer = client.post("/api/walk", json={"model": "gpt", "text": TEXT})
    assert answer.status_code == 200, answer.text
    payload = answer.json()
    assert payload["architecture"]["words"] == model_words(tiny(vocab_size=len(ALPHABET), norm="rmsnorm"))
    tour = payload["tour"]
    assert tour["heads"].startswith(
        "Open this stop to see one head at a time: this model has 4 heads per block"
    )
    assert f"Every one of the {len(ALPHABET)} tokens gets a score" in tour["logits"]
    assert tour["norm"].startswith("Why the sizes change: RMSNorm divides each vector by the root")
    t5 = client.post("/api/walk", json={"model": "t5", "text": TEXT}).json()
    assert t5["tour"]["norm"].startswith("Why the sizes change: LayerNorm subtracts")
    assert t5["architecture"]["words"]["plain"].startswith(f"is {FAMILY_WORDS['encoder_decoder']}.")


def test_the_model_s_numbers_are_filled_on_the_server():
    """What the config fixes is written out; only this input's numbers stay {fields}."""
    words = tour_words(tiny(vocab_size=50_257))
    assert "50,257 tokens" in words["logits"]
    texts = [text for text in words.values() if isinstance(text, str)] + list(words["stops"].values())
    fields = {field for text in texts for field in re.findall(r"\{(\w+)\}", text)}
    assert fields == {
        "stops", "steps", "others", "trend", "first", "last", "before", "after", "features", "mask",
        "position", "temperature", "top_k", "top_p", "kept", "seed", "t", "s", "scores", "ahead",
    }  # fmt: skip


def test_the_tour_shows_every_sentence_it_is_sent():
    source = (STATIC / "walk" / "tour.js").read_text()
    unused = [key for key in tour_words(tiny()) if not re.search(rf"\.{key}\b", source)]
    assert unused == []


def test_no_page_module_looks_up_a_family_s_words():
    found = {}
    for path in sorted(STATIC.rglob("*.js")):
        source = STACK_TITLES.sub("", path.read_text())
        hits = FAMILY_KEY.findall(source) + FAMILY_INDEX.findall(source)
        hits += [words for words in (*FAMILY_WORDS.values(), VISION_WORDS) if words in source]
        if hits:
            found[path.name] = hits
    assert found == {}, f"the family's words come with the payload (architecture.words): {found}"


@pytest.mark.parametrize(
    "source",
    [
        'const WORDS = {\n  decoder: "a decoder",\n};',
        "x = WORDS[arch.family] ?? arch.family;",
        '{"encoder": 1}',
    ],
)
def test_the_scan_finds_a_planted_lookup(source):
    assert FAMILY_KEY.findall(source) or FAMILY_INDEX.findall(source)


def test_the_scan_passes_a_stack_s_title():
    source = 'const STACK_TITLES = { "": "", encoder: "Encoder", decoder: "Decoder" };'
    assert not FAMILY_KEY.findall(STACK_TITLES.sub("", source))
