"""SentencePiece's compiled normalization rules (``Precompiled``) against the references: a Unigram
model trained by `sentencepiece` under tmp_path with the rules ``nmt_nfkc`` and ``nmt_nfkc_cf``
(case folding), made into a T5-style ``tokenizer.json`` by transformers' own converter
(``T5Converter``: Precompiled, Strip, a Regex Replace, Metaspace), read by us and by HF `tokenizers`:
the same normalized text, the same ids, the same decoded text; our SentencePiece-style rule
against `sentencepiece`'s own normalizer."""

from __future__ import annotations

import base64
import json
import random
import time
import types

import pytest

from glassformer.tokenizers.hf_json import from_hf_dict
from glassformer.tokenizers.hf_json_export import to_hf_dict
from glassformer.tokenizers.normalizers import Normalizer
from glassformer.tokenizers.precompiled import Precompiled
from glassformer.tokenizers.unigram import Unigram
from tests.test_tokenizer_json_kinds import TEXTS, mismatches_with_hf, random_texts

tokenizers = pytest.importorskip("tokenizers")
spm = pytest.importorskip("sentencepiece")
pytest.importorskip("google.protobuf")

RULES = ("nmt_nfkc", "nmt_nfkc_cf")
# what the rules rewrite: full-width forms, ligatures, circled and Roman numerals, units, composed
# and decomposed accents, odd spaces and controls, half-width katakana, jamo, case
NORMALIZED_TEXTS = [
    "ＡＢＣ１２３ full width, ｶﾞｷﾞ half-width katakana, ガ",
    "ﬁ ﬂ ﬀ ﬃ ligatures; ① ② ⑳ circled; Ⅻ ⅳ Roman; ㎏ ㈱ ™ ℃ ½ units",
    "e\u0301 vs \u00e9; A\u030a vs \u00c5; \u212b angstrom; ǅ; ᾈ; \ufb01\u0301",
    "zero\u200bwidth, no\u00a0break, ideographic\u3000space, en\u2002space, bell\x07, \x1f unit sep",
    "\u1100\u1161 jamo, 가 syllable; ‐ – — dashes; “quotes” ‘single’",
    "HELLO World ÉCOLE Straße İstanbul ΣΊΣΥΦΟΣ",
    "  runs   of    spaces\t\ttabs\n\nnewlines\r\nCRLF  ",
]
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "Full-width ＡＢＣ１２３ and ligatures ﬁ ﬂ, circled ① ② ③, Café naïve résumé façade Ångström.",
    "中文分词测试，这是一个句子。日本語のテキスト、カタカナ。한국어 문장입니다.",
    "مرحبا بالعالم، هذه جملة عربية. नमस्ते दुनिया, यह हिंदी का वाक्य है। Привет, мир! Ёлка.",
    "Emoji 😀🥰👍🏽 ❤️ 🇫🇷; def f(x):\n    return x ** 2; Numbers 12345 and 3.14159",
]


def all_texts() -> list[str]:
    return TEXTS + NORMALIZED_TEXTS + CORPUS + random_texts(200, seed=28)


def random_code_points(count: int, seed: int) -> list[str]:
    """Short strings of code points where the rules and the grapheme clusters are busiest: marks,
    Indic scripts (viramas), compatibility forms, emoji, ZWJ and variation selectors."""
    rng = random.Random(seed)
    ranges = [(0x20, 0x3000), (0x300, 0x370), (0x900, 0xD80), (0xFB00, 0xFFF0), (0x1F300, 0x1FA00)]
    pick = [lambda a=a, b=b: rng.randrange(a, b) for a, b in ranges] + [lambda: 0x200D, lambda: 0xFE0F]
    return ["".join(chr(rng.choice(pick)()) for _ in range(rng.randrange(1, 12))) for _ in range(count)]


def t5_tokenizer_json(model_file: str, extra_ids: int = 3) -> dict:
    """The tokenizer.json transformers makes of a SentencePiece Unigram model, as for T5."""
    from transformers.convert_slow_tokenizer import T5Converter

    slow = types.SimpleNamespace(
        vocab_file=model_file, _extra_ids=extra_ids, legacy=True, add_prefix_space=True
    )
    slow.convert_tokens_to_ids = lambda token: 2  # </s>, for the post-processor only
    return json.loads(T5Converter(slow).converted().to_str())


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> dict[str, str]:
    """rule name -> the path of a SentencePiece Unigram model trained with that rule."""
    folder = tmp_path_factory.mktemp("spm")
    lines = [f"{line} {i}" for i in range(40) for line in CORPUS + NORMALIZED_TEXTS]
    models = {}
    for rule in RULES:
        prefix = str(folder / rule)
        spm.SentencePieceTrainer.train(
            sentence_iterator=iter(lines), model_prefix=prefix, vocab_size=400, model_type="unigram",
            normalization_rule_name=rule, character_coverage=1.0, hard_vocab_limit=False, minloglevel=2,
        )  # fmt: skip
        models[rule] = prefix + ".model"
    return models


def charsmap(model_file: str) -> bytes:
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    with open(model_file, "rb") as handle:
        proto.ParseFromString(handle.read())
    return proto.normalizer_spec.precompiled_charsmap


@pytest.mark.parametrize("rule", RULES)
def test_charsmap_normalizes_as_hf(trained, rule):
    blob = charsmap(trained[rule])
    started = time.perf_counter()
    ours = Precompiled(blob)
    assert time.perf_counter() - started < 0.5  # ~2 ms: a few tens of thousands of units
    hf = tokenizers.normalizers.Precompiled(blob)
    texts = all_texts() + random_code_points(2000, seed=29)
    assert [ours.normalize(t) for t in texts] == [hf.normalize_str(t) for t in texts]
    folded = rule == "nmt_nfkc_cf"
    assert ours.normalize("ﬁ①ＡＢ ÉCOLE") == ("fi1ab école" if folded else "fi1AB ÉCOLE")


@pytest.mark.parametrize("rule", RULES)
def test_sentencepiece_rule_as_sentencepiece(trained, rule):
    """The longest-match rule against sentencepiece's normalizer, its whitespace handling off."""
    ours = Precompiled(charsmap(trained[rule]))
    reference = spm.SentencePieceNormalizer(
        model_file=trained[rule],
        add_dummy_prefix=False,
        escape_whitespaces=False,
        remove_extra_whitespaces=False,
    )
    texts = all_texts()
    assert [ours.normalize_sentencepiece(t) for t in texts] == [reference.normalize(t) for t in texts]
    # where the two rules differ: HF replaces a short grapheme cluster by its first character's rule
    assert (ours.normalize("\ufb01\u0301"), ours.normalize_sentencepiece("\ufb01\u0301")) == (
        "fi",
        "fi\u0301",
    )


@pytest.mark.parametrize("rule", RULES)
def test_t5_style_tokenizer_json_matches_hf(trained, rule):
    data = t5_tokenizer_json(trained[rule])
    kinds = [step["type"] for step in data["normalizer"]["normalizers"]]
    assert kinds == ["Precompiled", "Strip", "Replace"]  # the shape of T5's own tokenizer.json
    started = time.perf_counter()
    ours = from_hf_dict(data)
    assert time.perf_counter() - started < 1.0
    hf = tokenizers.Tokenizer.from_str(json.dumps(data))
    assert isinstance(ours, Unigram)
    texts = all_texts()
    assert mismatches_with_hf(ours, hf, texts) == []
    # written back, HF reads the same tokenizer
    back = tokenizers.Tokenizer.from_str(json.dumps(to_hf_dict(ours)))
    for text in texts[:40]:
        assert (
            back.encode(text, add_special_tokens=False).ids == hf.encode(text, add_special_tokens=False).ids
        )


def test_offsets_point_into_the_original_text(trained):
    ours = from_hf_dict(t5_tokenizer_json(trained["nmt_nfkc"]))
    text = "ﬁx ①  Ａ"
    spans = [text[a:b] for a, b in ours.offsets(text)]
    assert "".join(spans).replace(" ", "") == text.replace(" ", "")
    normalized, where = ours.normalizer.aligned(text)
    assert normalized == "fix 1▁A" and where[:3] == [(0, 1), (0, 1), (1, 2)]


def test_rules_built_by_hand_read_back():
    rules = {"a": "A", "ab": "X", "ﬁ": "fi", "é": "e"}
    ours = Precompiled.from_rules(rules)
    assert ours.prefix_matches(b"abc") == [(1, 0), (2, 2)]  # (length, byte offset of the replacement)
    assert ours.normalize_sentencepiece("abac") == "XAc"  # the longest key wins
    assert ours.normalize("abac") == "AbAc"  # HF: each character alone ("ab" is two clusters)
    hf = tokenizers.normalizers.Precompiled(ours.blob)
    for text in ["abac", "ﬁé", "éa\u0301", "zzz", ""]:
        assert ours.normalize(text) == hf.normalize_str(text)


@pytest.mark.parametrize(
    "blob, message",
    [
        (b"\x01", "4-byte trie size"),
        (b"\x08\x00\x00\x00\x00", "does not fit"),
        (b"\x03\x00\x00\x00abcd", "does not fit"),
    ],
)
def test_damaged_charsmap_is_refused_by_name(blob, message):
    with pytest.raises(ValueError, match=message):
        Precompiled(blob)
    spec = {"type": "Precompiled", "precompiled_charsmap": base64.b64encode(blob).decode()}
    with pytest.raises(ValueError, match="Precompiled"):
        Normalizer.from_hf(spec)
    with pytest.raises(ValueError, match="not base64"):
        Normalizer.from_hf({"type": "Precompiled", "precompiled_charsmap": "@@"})
