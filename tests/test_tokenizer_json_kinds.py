"""Published tokenizer.json files of every kind we read, against HF `tokenizers` reading the same
file: Llama 3 (ignore_merges), Qwen 3 (NFC), DeepSeek-V3 (an empty normalizer, three Splits),
GPT-4o's o200k (Split Removed + invert), Llama 2 (Prepend/Replace, byte fallback) and Gemma 3
(Replace, a String Split, byte fallback). The same ids (HF: ``add_special_tokens=False``, so no
template; ours: every added token allowed, as HF matches them all) and the same decoded text.

Each file is loaded once per module (`loaded`); the files come from `make setup`
(scripts/fetch_reference.sh), and a missing one fails the test that needs it.
"""

from __future__ import annotations

import random

import pytest

from glassformer.tokenizers.bpe import ByteBPE
from glassformer.tokenizers.hf_json import from_hf_json
from glassformer.tokenizers.sentencepiece_bpe import SentencePieceBPE
from tests.reference import HF_TOKENIZER_JSON_NAMES, hf_tokenizer_json

tokenizers = pytest.importorskip("tokenizers")

TEXTS = [
    "Hello world",
    " leading space",
    "   three leading spaces",
    "trailing spaces   ",
    "The quick brown fox jumps over the lazy dog. It's 3:45pm; isn't it? They'll've said I'M sure.",
    "中文分词测试：这是一个句子，包含标点。北京欢迎你！",
    "日本語のテキストとカタカナ、ひらがな。",
    "한국어 문장입니다.",
    "مرحبا بالعالم، هذه جملة عربية.",
    "नमस्ते दुनिया, यह हिंदी का वाक्य है।",
    "Привет, мир! Ёлка.",
    "Emoji: 😀🥰👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️",
    "def f(x):\n    return x**2  # square\n\n\nclass A(B):\n\tpass\n",
    'for (int i = 0; i < n; ++i) { a[i] = "x\\n"; }  // C',
    "year 2024, pi=3.14159, 1,234,567.89 and   123 456 -7 +8e10 ½ ² ٣٤ ①",
    "tabs\t\tand\r\nCRLF\r\n",
    "\n\n\n",
    "a\n \n  \nb",
    " ",
    "",
    "e\u0301 vs \u00e9, A\u030a vs \u00c5, \ufb01 ligature, \u1100\u1161 jamo",
    "x1y22z333 a   1",
    "<s>hi</s> <|endoftext|>x<|begin_of_text|>",
    "\u2581 already a metaspace \u2581\u2581",
    "<0x0A> spelled like a byte token",
]
PARTS = list("ab c1 2\n\t'sé😀日,.!?-_()ع्न한") + [
    " 12",
    "'ll",
    "  ",
    "\n\n",
    "\xa0",
    "٣",
    "Ÿ",
    "\u2581",
    "\u0301",
]


def mismatches_with_hf(ours, hf, texts: list[str]) -> list[str]:
    """The texts whose ids differ from HF ``tokenizers``' (``hf``); decoding HF's ids must give HF's
    text for every one."""
    mismatches = []
    for text, reference in zip(texts, hf.encode_batch(texts, add_special_tokens=False), strict=True):
        if ours.encode(text, allowed_special="all") != reference.ids:
            mismatches.append(text)
        assert ours.decode(reference.ids) == hf.decode(reference.ids, skip_special_tokens=False), repr(text)
    return mismatches


def random_texts(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PARTS) for _ in range(rng.randint(0, 25))) for _ in range(count)]


@pytest.fixture(scope="module")
def loaded():
    """name -> (ours, HF's), each file read once for the module."""
    cache: dict[str, tuple] = {}

    def load(name: str):
        if name not in cache:
            path = hf_tokenizer_json(name)
            cache[name] = (from_hf_json(path), tokenizers.Tokenizer.from_file(str(path)))
        return cache[name]

    return load


EXPECTED_KIND = {
    "llama3": ByteBPE,
    "qwen3": ByteBPE,
    "deepseek_v3": ByteBPE,
    "gpt4o": ByteBPE,
    "llama2": SentencePieceBPE,
    "gemma3": SentencePieceBPE,
}


@pytest.mark.parametrize("name", HF_TOKENIZER_JSON_NAMES)
def test_published_tokenizer_json_matches_hf(name, loaded):
    ours, hf = loaded(name)
    assert isinstance(ours, EXPECTED_KIND[name])
    texts = TEXTS + random_texts(300, seed=len(name))
    assert mismatches_with_hf(ours, hf, texts) == []
    assert len(ours.offsets(TEXTS[5], allowed_special="all")) == len(ours.encode(TEXTS[5]))


@pytest.mark.parametrize("name", ["llama3", "qwen3", "llama2"])
def test_published_files_write_back_to_what_both_readers_read(name, loaded, tmp_path):
    from glassformer.tokenizers.hf_json_export import to_hf_json

    ours, hf = loaded(name)
    to_hf_json(ours, tmp_path / "tokenizer.json")
    back, hf_back = (
        from_hf_json(tmp_path / "tokenizer.json"),
        tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json")),
    )
    for text in TEXTS + random_texts(100, seed=7):
        expected = hf.encode(text, add_special_tokens=False).ids
        assert back.encode(text, allowed_special="all") == expected, repr(text)
        assert hf_back.encode(text, add_special_tokens=False).ids == expected, repr(text)


def test_sentencepiece_tokens_read_as_text_and_bytes(loaded):
    llama2, _ = loaded("llama2")
    assert llama2.tokens(" Hello") == [" ", " Hello"]  # "▁" shown as the space it stands for
    rare = "\U0001d518"  # 𝔘, not in the vocabulary: four byte-fallback tokens
    ids = llama2.encode(f"a{rare}")
    assert llama2.tokens(f"a{rare}") == [
        " a",
        "\u27e8F0\u27e9",
        "\u27e89D\u27e9",
        "\u27e894\u27e9",
        "\u27e898\u27e9",
    ]
    assert b"".join(llama2.token_bytes(i) for i in ids) == f" a{rare}".encode()
    assert llama2.offsets(f"a{rare}") == [(0, 1)] + [(1, 2)] * 4
    explained = llama2.explain("Hello")
    assert explained[0]["steps"] and explained[0]["parts"] == [" ", "H", "e", "l", "l", "o"]


def test_llama3_takes_a_piece_in_the_vocabulary_whole(loaded):
    llama3, hf = loaded("llama3")
    assert llama3.ignore_merges and llama3.merges is not None
    word = " tokenization"
    assert llama3.encode(word) == hf.encode(word, add_special_tokens=False).ids


def test_qwen3_normalizes_to_nfc_and_offsets_point_into_the_raw_text(loaded):
    qwen3, hf = loaded("qwen3")
    decomposed = "Cafe\u0301!"
    assert qwen3.encode(decomposed) == qwen3.encode("Caf\u00e9!")
    offsets = qwen3.offsets(decomposed)
    assert offsets[0][0] == 0 and offsets[-1] == (5, 6)
