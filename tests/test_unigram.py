"""Unigram (T5, ALBERT, XLM-R): Viterbi over the pieces' log-probabilities, against HF
`tokenizers` on a Unigram tokenizer.json that its own UnigramTrainer makes from a small text
(written under tmp_path), and against brute force on a toy vocabulary."""

from __future__ import annotations

import itertools
import json
import math

import pytest

from glassformer.tokenizers.hf_json import from_hf_json
from glassformer.tokenizers.hf_json_export import to_hf_json
from glassformer.tokenizers.hf_pretokenizers import Metaspace, PreTokenizer
from glassformer.tokenizers.loading import from_our_json
from glassformer.tokenizers.unigram import UNKNOWN_PENALTY, Unigram
from tests.test_tokenizer_json_kinds import TEXTS, mismatches_with_hf, random_texts

tokenizers = pytest.importorskip("tokenizers")

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "A unigram language model scores every segmentation of a word.",
    "Tokenization splits text into pieces; the best path has the highest score.",
    "中文分词测试，这是一个句子。日本語のテキスト。",
    "مرحبا بالعالم. नमस्ते दुनिया. Привет, мир!",
    "def f(x):\n    return x ** 2\n",
    "Numbers 12345 and 3.14159 and 2024.",
] * 20


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A Unigram tokenizer.json trained by HF (Metaspace pre-tokenizer and decoder, <unk>)."""
    from tokenizers import decoders, models, pre_tokenizers, trainers

    hf = tokenizers.Tokenizer(models.Unigram())
    hf.pre_tokenizer = pre_tokenizers.Metaspace()
    hf.decoder = decoders.Metaspace()
    trainer = trainers.UnigramTrainer(
        vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"], unk_token="<unk>", show_progress=False
    )
    hf.train_from_iterator(CORPUS, trainer)
    path = tmp_path_factory.mktemp("unigram") / "tokenizer.json"
    hf.save(str(path))
    return from_hf_json(path), tokenizers.Tokenizer.from_file(str(path)), path


def test_trained_unigram_matches_hf(trained):
    ours, hf, _ = trained
    assert isinstance(ours, Unigram) and ours.unk_id == 0
    texts = TEXTS + random_texts(300, seed=11)  # many characters are unknown to this small vocabulary
    assert mismatches_with_hf(ours, hf, texts) == []


def test_unigram_writes_back_and_saves(trained, tmp_path):
    ours, hf, _ = trained
    to_hf_json(ours, tmp_path / "tokenizer.json")
    hf_back = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    ours.save(tmp_path / "ours.json")
    saved = from_our_json(json.loads((tmp_path / "ours.json").read_text(encoding="utf-8")))
    for text in TEXTS + random_texts(50, seed=12):
        expected = hf.encode(text, add_special_tokens=False).ids
        assert hf_back.encode(text, add_special_tokens=False).ids == expected
        assert saved.encode(text, allowed_special="all") == expected


def _toy() -> Unigram:
    scored = [("<unk>", 0.0), ("▁", -1.0), ("a", -2.0), ("b", -2.5), ("ab", -3.0), ("▁a", -2.2), ("ba", -2.9)]
    return Unigram(scored, unk_id=0, pre_tokenizer=PreTokenizer((Metaspace(),)))


def test_viterbi_is_the_best_of_all_segmentations():
    tok = _toy()
    scores = {piece: tok.scores[i] for piece, i in tok.pieces.items() if piece != "<unk>"}
    for length in range(1, 7):
        for letters in itertools.product("ab", repeat=length):
            piece = "▁" + "".join(letters)
            best = -math.inf
            for cuts in itertools.product([False, True], repeat=len(piece) - 1):
                words, start = [], 0
                for i, cut in enumerate(cuts, start=1):
                    if cut:
                        words.append(piece[start:i])
                        start = i
                words.append(piece[start:])
                if all(w in scores for w in words):
                    best = max(best, sum(scores[w] for w in words))
            path, score = tok.best_path(piece)
            assert math.isclose(score, best) and "".join(n["piece"] for n in path) == piece


def test_explanation_shows_the_lattice_and_the_best_path():
    tok = _toy()
    (entry,) = tok.explain("ab")
    assert entry["text"] == "▁ab" and entry["parts"] == ["▁", "ab"]  # -1 - 3 beats "▁a" + "b": -2.2 - 2.5
    assert entry["score"] == pytest.approx(-4.0)
    lattice = {(step["at"], step["piece"]): step["best"] for step in entry["steps"]}
    assert lattice == {(0, "▁"): True, (0, "▁a"): False, (1, "a"): False, (1, "ab"): True, (2, "b"): False}


def test_unknown_characters_are_fused_into_one_unknown_token():
    tok = _toy()
    assert tok.encode("a€€b") == [5, 0, 3]
    assert tok.offsets("a€€b") == [(0, 1), (1, 3), (3, 4)]
    unknown = [step for step in tok.explain("€")[0]["steps"] if step.get("unknown")]
    assert unknown[0]["score"] == min(tok.scores) - UNKNOWN_PENALTY


def test_the_workshop_shows_the_lattice():
    from types import SimpleNamespace

    from glassformer.workshop.reading.tokenization import explain

    tok = _toy()
    labels = lambda ids: [tok.id_to_token(i) for i in ids]  # noqa: E731
    answer = explain(SimpleNamespace(tokenizer=tok, inputs=SimpleNamespace(labels=labels)), "ab a")
    assert answer["kind"] == "unigram" and answer["ids"] == tok.encode("ab a")
    assert [piece["tokens"] for piece in answer["pieces"]] == [[" ", "ab"], [" a"]]
    assert json.loads(json.dumps(answer)) == answer


def test_the_page_draws_the_lattice_as_a_reader_sees_it(trained, browser):
    """In the workshop, a Unigram's pieces show "▁" as the visible space ␣ everywhere (tokens,
    lattice, best path), as byte-level tokens do."""
    from urllib.parse import urlencode

    import glassformer as gf
    from glassformer.workshop.server import create_app
    from tests.conftest import tiny_model
    from tests.workshop_server import log_in, serving

    ours, _, _ = trained
    lm = gf.LanguageModel(tiny_model(vocab_size=ours.vocab_size), ours)
    with serving(create_app({"uni": lm})) as url:
        page = browser.new_page()
        log_in(page, url)
        page.goto(f"{url}?{urlencode({'model': 'uni', 'text': 'The fox 中文', 'level': 'intermediate'})}")
        page.wait_for_selector('body[data-walks="1"]', state="attached")
        page.click("#tokens .tokenization summary")
        page.wait_for_selector('#tokens .tokenization[data-state="ready"]', state="attached")
        drawn = page.locator("#tokens .tokenization").inner_text()
        assert "Viterbi" in drawn and "best path: ␣" in drawn and "\u2581" not in drawn
        assert page.locator("#tokens .tk-text").first.inner_text() == "\u2018␣The\u2019"
        page.close()
