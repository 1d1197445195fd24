"""Byte-level BPE against tiktoken and GPT-2's own files, plus the invariants of encode/decode,
offsets, explain, saving and training."""

from __future__ import annotations

import base64
import functools
import json
import re
import unicodedata
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glassformer.tokenizers.bpe import ByteBPE
from glassformer.tokenizers.bpe_merge import PARTS_RECORDED, SINGLE_BYTES, merge_with_heap
from glassformer.tokenizers.bpe_train import merge_pair, train_bpe, train_bpe_naive
from glassformer.tokenizers.pretokenize import pretokenize, split
from tests.reference import gpt2_files, js_tiktoken_ranks, require, tiktoken_encoding

REPO = Path(__file__).resolve().parents[1]

CORPUS = [
    "The cat sat on the mat.",
    "Hello, world! It's 2024; we've seen 1,234,567.89 and 3.14159 and 0x1F and 10e-9.",
    "I'll say they'd DON'T WON'T, y'all. 'tis O'Neil's.",
    "    four spaces, then\ttab\t\ttabs\n\nnewlines\r\n crlf \n\n\n   \n end   ",
    "def f(x):\n    return {'a': [1, 2, 3]}  # comment\n\n\nclass A:\n\tpass\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }  // C++\n#include <stdio.h>",
    "Привет, мир! Ελληνικά. עברית. العربية. हिन्दी. 日本語のテキスト。中文字符。한국어 텍스트.",
    "Emoji: 😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ and 🤖🚀✨",
    "Combining marks: e\u0301 a\u0300\u0323 n\u0303 — Zalgo: Z\u0351\u034b\u0352a\u0358l\u0360go",
    "Numbers: 1 12 123 1234 12345 123456 ١٢٣ ४५६ Ⅻ ½ ²",
    "   leading and trailing   ",
    "\u00a0non-breaking\u2003em\u3000ideographic\u200bzero-width\ufeffbom",
    "URLs: https://example.com/path?q=1&r=2#frag user@example.org",
    "''' \"\"\" ``` --- *** ___ === +++ ~~~ ||| \\\\ //",
    "",
    " ",
    "\n",
    "a",
    "CamelCaseWord snake_case_word kebab-case-word SCREAMING_CASE",
]
SPECIAL_TEXTS = [
    "Hello<|endoftext|>world",
    "<|endoftext|><|endoftext|> twice",
    "end <|endoftext|>",
    "<|fim_prefix|>def f(<|fim_suffix|>):<|fim_middle|> <|endofprompt|>",
]


def assigned_text(**kwargs):
    """Text of characters assigned in this Python's Unicode tables (category != Cn): newer
    characters are letters for one regex engine and unknown to another (a different Unicode)."""
    chars = st.characters(exclude_categories=("Cs", "Cn"))
    return st.text(chars, **kwargs).filter(lambda s: all(unicodedata.category(c) != "Cn" for c in s))


@functools.cache
def gpt2() -> ByteBPE:
    return ByteBPE.from_gpt2_files(*gpt2_files())


@functools.cache
def gpt2_js() -> ByteBPE:
    return ByteBPE.from_js_tiktoken(js_tiktoken_ranks("gpt2"))


@functools.cache
def cl100k() -> ByteBPE:
    return ByteBPE.from_js_tiktoken(js_tiktoken_ranks("cl100k_base"))


@functools.cache
def trained() -> ByteBPE:
    return train_bpe("\n".join(CORPUS) * 3, vocab_size=400, special_tokens=["<|endoftext|>"], progress=False)


TOKENIZERS = {"gpt2": gpt2, "gpt2_js": gpt2_js, "cl100k": cl100k}
REFERENCE = {"gpt2": "gpt2", "gpt2_js": "gpt2", "cl100k": "cl100k_base"}


# --- parity with the references ---------------------------------------------------------------


def test_the_cat_sat_on_with_gpt2_files():
    assert gpt2().encode("The cat sat on") == [464, 3797, 3332, 319]
    assert gpt2().special_tokens == {"<|endoftext|>": 50256} and gpt2().vocab_size == 50257


@pytest.mark.parametrize("name", TOKENIZERS)
def test_corpus_matches_tiktoken(name):
    tok, ref = TOKENIZERS[name](), tiktoken_encoding(REFERENCE[name])
    for text in CORPUS:
        assert tok.encode(text) == ref.encode(text), text
    for text in SPECIAL_TEXTS:
        for options in ({"allowed_special": "all"}, {"disallowed_special": ()}):
            assert tok.encode(text, **options) == ref.encode(text, **options), (text, options)


def test_gpt2_files_js_and_tiktoken_agree_on_source_files():
    files, js = gpt2(), gpt2_js()
    assert files.vocab == js.vocab and files.special_tokens == js.special_tokens
    text = "\n".join(
        path.read_text(encoding="utf-8") for path in sorted((REPO / "glassformer").rglob("*.py"))
    )
    ids = files.encode(text, disallowed_special=())
    assert ids == js.encode(text, disallowed_special=()) == tiktoken_encoding("gpt2").encode_ordinary(text)


def test_named_cl100k_pattern_matches_tiktoken():
    """Our "cl100k" is tiktoken's official regex; the js file spells the same regex differently."""
    js = cl100k()
    named = ByteBPE(js.vocab, pattern="cl100k", special_tokens=js.special_tokens)
    for text in CORPUS:
        assert named.encode(text) == tiktoken_encoding("cl100k_base").encode(text), text


@settings(max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(text=assigned_text())
def test_random_text_matches_tiktoken(text):
    for name in ("gpt2", "cl100k"):
        assert TOKENIZERS[name]().encode(text, disallowed_special=()) == tiktoken_encoding(
            REFERENCE[name]
        ).encode_ordinary(text)


def test_long_pieces_match_tiktoken():
    """Pieces past LONG_PIECE bytes take the heap path."""
    texts = ["ab" * 3000, " " * 5000 + "x", "🙂" * 700, "-=" * 2000, "9" * 1000]
    for name in ("gpt2", "cl100k"):
        tok, ref = TOKENIZERS[name](), tiktoken_encoding(REFERENCE[name])
        for text in texts:
            assert tok.encode(text) == ref.encode(text), (name, text[:10])


@settings(max_examples=100, deadline=None, derandomize=True)
@given(data=st.binary(min_size=2, max_size=400))
def test_heap_merge_equals_list_merge(data):
    for tok in (gpt2(), cl100k()):
        parts = list(map(SINGLE_BYTES.__getitem__, data))
        assert merge_with_heap(list(parts), tok.pair_rank) == tok.merge(list(parts), steps=[])


# --- invariants -------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(text=st.text())
def test_decode_encode_round_trip(text):
    for name in ("gpt2", "cl100k"):
        tok = TOKENIZERS[name]()
        assert tok.decode(tok.encode(text, disallowed_special=())) == text


@settings(max_examples=50, deadline=None)
@given(text=st.text(max_size=40))
def test_trained_tokenizer_round_trip(text):
    tok = trained()
    assert tok.decode(tok.encode(text, disallowed_special=())) == text


def test_lone_surrogate_is_an_error():
    for method in (gpt2().encode, gpt2().offsets, gpt2().explain, trained().encode):
        with pytest.raises(ValueError, match=r"lone surrogate '\\ud800' at character 2"):
            method("ab\ud800c")
    with pytest.raises(TypeError, match="decode it first"):
        gpt2().encode(b"bytes")


def test_special_token_policy_is_tiktokens():
    tok, ref = cl100k(), tiktoken_encoding("cl100k_base")
    text = "a<|endoftext|>b<|fim_prefix|>"
    for reference_call in (
        lambda: ref.encode(text),
        lambda: ref.encode(text, allowed_special={"<|endoftext|>"}),
    ):
        with pytest.raises(ValueError):  # tiktoken raises on these ...
            reference_call()
    with pytest.raises(ValueError, match=r"allowed_special=\{'<\|endoftext\|>'\}.*disallowed_special='none'"):
        tok.encode(text)  # ... and so do we, saying both ways out
    with pytest.raises(ValueError, match="fim_prefix"):  # only the allowed one is allowed
        tok.encode(text, allowed_special={"<|endoftext|>"})
    for options in (
        {"allowed_special": {"<|endoftext|>"}, "disallowed_special": ()},
        {"allowed_special": "all"},
        {"disallowed_special": ()},
        {"disallowed_special": {"<|endofprompt|>"}},  # neither allowed nor disallowed: text
        {"allowed_special": {"<|fim_prefix|>"}, "disallowed_special": set()},
    ):
        assert tok.encode(text, **options) == ref.encode(text, **options), options
    assert tok.encode(text, allowed_special="all")[1] == 100257
    assert tok.encode(text, disallowed_special="none") == ref.encode(text, disallowed_special=())


def test_special_token_options_we_refuse():
    """tiktoken ignores these or fails obscurely; we name the mistake (see special.py)."""
    tok = cl100k()
    with pytest.raises(ValueError, match="one string; pass 'all', 'none' or a collection"):
        tok.encode("a", allowed_special="<|endoftext|>")
    with pytest.raises(ValueError, match="not special tokens of this tokenizer"):
        tok.encode("a", allowed_special={"<|nope|>"})
    with pytest.raises(ValueError, match="both name"):
        tok.encode("a", allowed_special={"<|endoftext|>"}, disallowed_special={"<|endoftext|>"})


def test_decode_errors_and_replacement():
    tok = gpt2()
    with pytest.raises(ValueError, match="unknown token id 50257"):
        tok.decode([464, 50257])
    with pytest.raises(ValueError, match="unknown token id 99999"):
        tok.id_to_token(99_999)
    half = tok.encode("😀")[:1]
    assert (
        tok.decode(half) == "\ufffd" and tok.decode_bytes(half) == "😀".encode()[: len(tok.decoder[half[0]])]
    )
    assert tok.id_to_token(464) == "The" and tok.id_to_token(half[0]) == "⟨F0 9F 98⟩"  # never "ðŁĺ"


def test_constructor_and_pattern_errors():
    base = {bytes([b]): b for b in range(256)}
    with pytest.raises(ValueError, match="unknown pattern name 'gtp2'"):
        ByteBPE(base, pattern="gtp2")
    with pytest.raises(ValueError, match="not a valid regex"):
        ByteBPE(base, pattern="(unclosed")
    with pytest.raises(ValueError, match="skips characters"):
        ByteBPE(base, pattern=r"\w+").encode("a-b")
    without_ff = ByteBPE({bytes([b]): b for b in range(255)})  # SmolLM2-like: a byte has no token
    assert without_ff.encode("abc") == [97, 98, 99]
    with pytest.raises(ValueError, match=r"needs the byte b'\\xc3', which has no token"):
        ByteBPE({bytes([b]): b for b in range(256) if b != 0xC3}).encode("é")
    with pytest.raises(ValueError, match="merge 0 .* not in vocab"):
        ByteBPE(base, merges=[(b"a", b"b")])
    with pytest.raises(ValueError, match="clash"):
        ByteBPE(base, special_tokens={"<|end|>": 7})
    with pytest.raises(ValueError, match="pad_token_id=300"):
        ByteBPE(base, pad_token_id=300)


def test_from_tiktoken_file(tmp_path):
    js = gpt2_js()
    lines = [f"{base64.b64encode(token).decode()} {rank}" for token, rank in js.vocab.items()]
    (tmp_path / "gpt2.tiktoken").write_text("\n".join(lines) + "\n", encoding="ascii")
    tok = ByteBPE.from_tiktoken(tmp_path / "gpt2.tiktoken", "gpt2", special_tokens=js.special_tokens)
    assert tok.vocab == js.vocab and tok.encode("The cat sat on") == [464, 3797, 3332, 319]
    (tmp_path / "bad.tiktoken").write_text("IQ== 0\nnot-base64!\n", encoding="ascii")
    with pytest.raises(ValueError, match="bad.tiktoken:2: expected 'base64-token rank'"):
        ByteBPE.from_tiktoken(tmp_path / "bad.tiktoken", "gpt2")


def test_a_missing_reference_file_fails_with_the_fix(tmp_path):
    with pytest.raises(pytest.fail.Exception, match="run `make setup`"):
        require(tmp_path / "encoder.json")


@functools.cache
def hf_smollm_pretokenizer():
    from tokenizers import pre_tokenizers

    return pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )


def test_smollm_pattern_equals_hf_digits_then_bytelevel():
    for text in CORPUS + ["a   1", "x 12  y", "9 \n 9"]:
        hf_spans = [span for _, span in hf_smollm_pretokenizer().pre_tokenize_str(text)]
        assert hf_spans == [(s, e) for _, s, e in pretokenize(text, "smollm")]
    assert split("year 2024", "smollm") == ["year", " ", "2", "0", "2", "4"]


@settings(max_examples=300, deadline=None, derandomize=True)
@given(text=assigned_text())
def test_smollm_pattern_equals_hf_on_random_text(text):
    hf_spans = [span for _, span in hf_smollm_pretokenizer().pre_tokenize_str(text)]
    assert hf_spans == [(s, e) for _, s, e in pretokenize(text, "smollm")]


@pytest.mark.parametrize("name", ["gpt2", "cl100k"])
def test_offsets_cover_text_and_slice_to_tokens(name):
    tok = TOKENIZERS[name]()
    for text in CORPUS + SPECIAL_TEXTS[:1]:
        ids, spans = tok.encode(text, allowed_special="all"), tok.offsets(text, allowed_special="all")
        assert len(spans) == len(ids)
        covered = set()
        for token_id, (start, end) in zip(ids, spans, strict=True):
            data = tok.decoder[token_id]
            assert data in text[start:end].encode(), (text, token_id)  # its bytes lie in its span
            try:
                assert text[start:end] == data.decode("utf-8")  # whole characters: exactly its text
            except UnicodeDecodeError:
                pass  # part of a character: the span is that whole character
            covered.update(range(start, end))
        assert covered == set(range(len(text))) and spans == sorted(spans)


def test_offsets_of_a_split_character_overlap():
    tok = gpt2()
    assert tok.tokens("a 🤖") == ["a", " ⟨F0 9F⟩", "⟨A4⟩", "⟨96⟩"]  # b" \xf0\x9f", b"\xa4", b"\x96"
    assert tok.offsets("a 🤖") == [(0, 1), (1, 3), (2, 3), (2, 3)]  # " 🤖", "🤖", "🤖"


@pytest.mark.parametrize("name", ["gpt2", "cl100k"])
def test_explain_steps_reproduce_the_ids(name):
    tok = TOKENIZERS[name]()
    long_piece = "🌊" * 100 + " " + "x" * 300  # pieces past PARTS_RECORDED and LONG_PIECE parts
    for text in [*CORPUS, *SPECIAL_TEXTS[:1], long_piece]:
        explained = json.loads(json.dumps(tok.explain(text, allowed_special="all")))
        for entry in explained:
            parts = [readable_to_bytes(part) for part in entry["parts"]]
            for step in entry["steps"]:
                merged = [readable_to_bytes(part) for part in step["merge"]]
                width = len(merged)  # 2, or all parts for a whole-piece lookup
                starts = [sum(map(len, parts[:i])) for i in range(len(parts))]  # byte offsets
                i = starts.index(step["at"])
                assert parts[i : i + width] == merged
                parts = parts[:i] + [b"".join(merged)] + parts[i + width :]
                if "parts" in step:
                    assert parts == [readable_to_bytes(part) for part in step["parts"]]
                assert ("parts" in step) == (len(entry["parts"]) <= PARTS_RECORDED)
                rank = tok.vocab[parts[i]] if tok.merges is None else step["rank"]
                assert step["rank"] == rank
            if not entry["special"]:
                assert [tok.vocab[part] for part in parts] == entry["ids"]
            assert text[entry["start"] : entry["end"]] == entry["text"]
        assert [i for entry in explained for i in entry["ids"]] == tok.encode(text, allowed_special="all")


def test_tiktoken_takes_a_piece_that_is_a_token_whole():
    """A token that no chain of merges reaches: tiktoken's rule takes it whole, a merge list doesn't."""
    vocab = {bytes([b]): b for b in range(256)} | {b"abcd": 256}
    tok = ByteBPE(vocab)
    assert tok.encode("abcd") == [256] and ByteBPE(vocab, merges=[]).encode("abcd") == [97, 98, 99, 100]
    (entry,) = tok.explain("abcd")
    assert entry["ids"] == [256] and entry["steps"] == [
        {"merge": ["a", "b", "c", "d"], "rank": 256, "at": 0, "parts": ["abcd"], "whole_piece": True}
    ]


@pytest.mark.parametrize("make", [gpt2, gpt2_js, trained])
def test_save_and_load_give_identical_ids(make, tmp_path):
    tok = make()
    tok.save(tmp_path / "tok.json")
    data = json.loads((tmp_path / "tok.json").read_text(encoding="utf-8"))
    assert data["type"] == "bpe"
    loaded = ByteBPE.from_dict(data)
    assert loaded.vocab == tok.vocab and loaded.merges == tok.merges and loaded.pattern == tok.pattern
    for text in CORPUS + SPECIAL_TEXTS:
        assert loaded.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all")


# --- training ---------------------------------------------------------------------------------


def test_training_is_deterministic_and_equals_the_naive_trainer():
    text = "\n".join(CORPUS) + (REPO / "glassformer" / "tokenizers" / "base.py").read_text(encoding="utf-8")
    fast = train_bpe(text, vocab_size=420, progress=False)
    assert fast.merges == train_bpe(text, vocab_size=420, progress=False).merges
    assert fast.merges == train_bpe_naive(text, vocab_size=420).merges
    assert fast.vocab_size == 420


@settings(max_examples=60, deadline=None, derandomize=True)
@given(text=st.text(alphabet="ab c\n", max_size=80))
def test_fast_and_naive_trainers_agree_on_small_texts(text):
    """Tiny alphabets make ties and re-made byte strings common."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short texts run out of pairs before 290 tokens
        fast = train_bpe(text, vocab_size=290, progress=False)
        naive = train_bpe_naive(text, vocab_size=290)
    assert fast.merges == naive.merges and fast.vocab == naive.vocab


def test_training_layout_specials_and_errors():
    tok = trained()
    assert all(tok.vocab[bytes([b])] == b for b in range(256))
    assert tok.special_tokens == {"<|endoftext|>": 399} and tok.vocab_size == 400
    assert tok.encode("x<|endoftext|>", allowed_special="all")[-1] == 399
    with pytest.raises(ValueError, match="at least 257"):
        train_bpe("abc", vocab_size=256, special_tokens=["<|endoftext|>"], progress=False)
    with pytest.warns(UserWarning, match="ran out of pairs"):
        train_bpe("ab", vocab_size=300, progress=False)
    assert merge_pair([1, 2, 1, 2, 2], (1, 2), 7) == [7, 7, 2]


def test_an_explanation_grows_linearly_with_the_text():
    """20,000 emoji once made the account quadratic (every step listed every part: 12 GB)."""

    def size(text: str) -> int:
        return len(json.dumps(gpt2().explain(text)))

    short, long = size("🌊⛵" * 500), size("🌊⛵" * 1000)
    assert long < 2.2 * short


def readable_to_bytes(text: str) -> bytes:
    """The bytes a readable spelling stands for (`readable.readable_bytes` read back)."""
    out = bytearray()
    for i, chunk in enumerate(re.split("[\u27e8\u27e9]", text)):
        out += bytes.fromhex(chunk) if i % 2 else chunk.encode()
    return bytes(out)


def test_no_token_is_spelled_with_the_byte_map():
    """Chinese, Arabic, Hindi and emoji, cut into bytes: every token and every explained part
    is its characters or ⟨hex⟩ bytes, never GPT-2's byte-to-unicode stand-ins."""
    tok = gpt2()
    for text in ("水手望着大海", "البحار ينظر إلى البحر", "नाविक समुद्र को देखता है", "The sailor 🌊⛵ looked"):
        labels = tok.tokens(text)
        assert b"".join(readable_to_bytes(label) for label in labels) == text.encode()
        assert not any(c in label for label in labels for c in "ĠðŁÃĬ")
        parts = [p for entry in tok.explain(text) for p in entry["parts"]]
        assert b"".join(readable_to_bytes(p) for p in parts) == text.encode()
