"""Every script in the workshop: Chinese, Arabic, Hindi and emoji prompts, cut into bytes by
GPT-2's byte-level BPE, show as real characters. A token that holds part of a character shows
its bytes (⟨F0 9F⟩), its chips are held together under the character they make, and the
text the page rebuilds is the prompt itself; GPT-2's byte-to-unicode stand-ins ("ĠðŁ") never
reach the page. Once an emoji prompt read "The old sailorĠðŁĮĬâĽµ looked…".
"""

from __future__ import annotations

import pytest
import torch

import glassformer as gf
from glassformer.workshop.server import create_app
from tests.conftest import tiny, workshop_client
from tests.test_bpe import gpt2, readable_to_bytes
from tests.test_workshop_page import Workshop
from tests.workshop_server import serving

PROMPTS = {
    "chinese": "老水手望着大海",
    "arabic": "نظر البحار العجوز إلى البحر",
    "hindi": "बूढ़े नाविक ने समुद्र को देखा",
    "emoji": "The old sailor 🌊⛵ looked at the sea",
}
BYTE_MAP = set("ĠðŁĮĬâĽµÃ¤Ċ")  # GPT-2's stand-ins for bytes, as they once showed


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    net = gf.build(tiny(vocab_size=50257, max_seq_len=128)).eval()
    return {"gpt2-bytes": gf.LanguageModel(net, gpt2())}


@pytest.fixture(scope="module")
def app(models):
    return create_app(models)


@pytest.mark.parametrize("script", PROMPTS)
def test_every_token_is_real_characters_or_its_bytes(client, script):
    text = PROMPTS[script]
    walk = client.post("/api/walk", json={"model": "gpt2-bytes", "text": text}).json()
    labels = [token["text"] for token in walk["tokens"]]
    assert not BYTE_MAP & set("".join(labels)), labels
    assert b"".join(readable_to_bytes(label) for label in labels) == text.encode()  # nothing lost
    assert walk["read"] == text  # the rebuilt text is the prompt, as characters
    for group in walk["characters"]:  # the tokens of each group make its characters
        held = b"".join(readable_to_bytes(label) for label in labels[group["first"] : group["last"] + 1])
        assert group["text"].encode() in held and group["last"] > group["first"]
    shown = walk["prediction"]["steps"][0]["top"]
    assert not BYTE_MAP & set("".join(entry["token"] for entry in shown))
    tokenized = client.post("/api/tokens", json={"model": "gpt2-bytes", "text": text}).json()
    parts = [part for piece in tokenized["pieces"] for part in piece["parts"]]
    assert b"".join(readable_to_bytes(part) for part in parts) == text.encode()
    assert not BYTE_MAP & set("".join(parts))


def test_an_emoji_s_tokens_are_held_together_under_it(client):
    walk = client.post("/api/walk", json={"model": "gpt2-bytes", "text": PROMPTS["emoji"]}).json()
    assert "🌊⛵" in "".join(group["text"] for group in walk["characters"])
    assert any("\u27e8" in token["text"] for token in walk["tokens"])  # a byte shown as ⟨hex⟩


@pytest.fixture(scope="module")
def server(app):
    with serving(app) as url:
        yield url


def test_the_page_shows_characters_in_every_script(browser, server, tmp_path):
    workshop = Workshop(browser, server, tmp_path)
    page = workshop.page
    for script, text in PROMPTS.items():
        workshop.open(model="gpt2-bytes", text=text, level="beginner")
        chips = "".join(workshop.texts("#tokens .chip-text"))
        assert not BYTE_MAP & set(chips), (script, chips)
        if script == "emoji":
            groups = workshop.texts("#tokens .char-group-text")
            assert "🌊" in "".join(groups) and "⛵" in "".join(groups)
            workshop.shot("scripts-emoji", full_page=False)
        rebuilt = page.locator(".continuation-text").inner_text()
        assert rebuilt == text, (script, rebuilt)
    workshop.close()


@pytest.fixture(scope="module")
def client(app):
    return workshop_client(app)


def test_attention_axes_and_query_key_rows_name_each_character(browser, server, client, tmp_path, models):
    """The attention map's axes, the overview's head map and the query · key rows spell a token
    of a character group by the character it helps make (今₁ 今₂), never as bytes alone."""
    tokenizer = models["gpt2-bytes"].tokenizer
    workshop = Workshop(browser, server, tmp_path)
    page = workshop.page
    for script in ("chinese", "hindi", "emoji"):
        text = PROMPTS[script]
        walk = client.post("/api/walk", json={"model": "gpt2-bytes", "text": text}).json()
        groups = [group["text"] for group in walk["characters"]]
        assert groups, script  # GPT-2 cuts a character of each of these between tokens
        workshop.open(model="gpt2-bytes", text=text, level="intermediate", stage="blocks.0.attn.pattern")
        page.wait_for_selector('.detail[data-stage="blocks.0.attn.pattern"][data-ready="1"] .hm-canvas')
        for axis in (".hm-rows", ".hm-cols"):
            labels = workshop.texts(f'.detail[data-stage="blocks.0.attn.pattern"] {axis} .hm-label')
            assert len(labels) == len(tokenizer.encode(text)), (script, labels)
            assert not any("\u27e8" in label for label in labels), (script, labels)
            assert all(any(group in label for label in labels) for group in groups), (script, labels)
        workshop.part_shot('.detail[data-stage="blocks.0.attn.pattern"]', f"scripts-axes-{script}")
        workshop.open(model="gpt2-bytes", text=text, zoom="blocks.0.attn:0:2")
        page.wait_for_selector('#overview .qk-view[data-query="2"][data-ready="1"]', state="attached")
        rows = workshop.texts("#overview .qk-view .qk-token")
        heads = workshop.texts("#overview .ov-head-map .hm-label")
        assert rows and heads and not any("\u27e8" in label for label in rows + heads), (script, rows, heads)
        workshop.part_shot("#overview", f"scripts-query-key-{script}")
    workshop.close()
