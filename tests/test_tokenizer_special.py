"""One rule for special-token text (special.py): the same options give the same results and the
same errors in the character tokenizer, byte-level BPE and WordPiece.

The three toy tokenizers share the special tokens ``<a>``, ``<a>b`` and ``[UNK]``; their ids
differ, so results are compared as the spans of the tokens that are special tokens. The toy
WordPiece has no [CLS] / [SEP] to put around a text: it encodes with add_special_tokens=False.
"""

from __future__ import annotations

import pytest

from glassformer.tokenizers.bpe import ByteBPE
from glassformer.tokenizers.char import CharTokenizer
from glassformer.tokenizers.special import SpecialPolicy, resolve_special, split_special
from glassformer.tokenizers.wordpiece import WordPiece

SPECIALS = ["<a>", "<a>b", "[UNK]"]
TEXT = "x<a>y<a>bz"  # "<a>b" must win over "<a>" where both start


def char() -> CharTokenizer:
    return CharTokenizer.from_text("<>[]abxyzUNK ", special_tokens=SPECIALS)


def bpe() -> ByteBPE:
    vocab = {bytes([b]): b for b in range(256)}
    return ByteBPE(vocab, special_tokens={token: 256 + i for i, token in enumerate(SPECIALS)})


def wordpiece() -> WordPiece:
    vocab = ["[UNK]", "<a>", "<a>b", "<", ">", "[", "]", "a", "b", "x", "y", "z", "unk", "##b", "##y", "##z"]
    roles = dict(cls_token=None, sep_token=None, pad_token=None, mask_token=None)
    return WordPiece(vocab, do_lower_case=False, additional_special_tokens=SPECIALS[:2], **roles)


KINDS = {"char": char, "bpe": bpe, "wordpiece": wordpiece}


def frameless(tok) -> dict:
    return {"add_special_tokens": False} if isinstance(tok, WordPiece) else {}


def special_spans(tok, text: str, **options) -> list[tuple[str, int, int]]:
    """(special token, start, end) of each token of ``text`` that is a special token."""
    options |= frameless(tok)
    ids, spans = tok.encode(text, **options), tok.offsets(text, **options)
    assert len(ids) == len(spans)
    specials = set(tok.special_tokens.values())
    return [(tok.id_to_token(i), a, b) for i, (a, b) in zip(ids, spans, strict=True) if i in specials]


def outcome(method, *args, **options):
    """What a call gives: ("ok", result) or (exception type name, message)."""
    try:
        return "ok", method(*args, **options)
    except (ValueError, TypeError) as error:
        return type(error).__name__, str(error)


def test_toy_tokenizers_share_the_special_tokens():
    for make in KINDS.values():
        assert set(make().special_tokens) == set(SPECIALS)


@pytest.mark.parametrize(
    "options, expected",
    [
        ({"allowed_special": "all"}, [("<a>", 1, 4), ("<a>b", 5, 9)]),
        ({"allowed_special": {"<a>"}, "disallowed_special": "none"}, [("<a>", 1, 4), ("<a>", 5, 8)]),
        ({"allowed_special": {"<a>b"}, "disallowed_special": ()}, [("<a>b", 5, 9)]),
        ({"disallowed_special": "none"}, []),
        ({"disallowed_special": ()}, []),
        ({"allowed_special": "none", "disallowed_special": ["[UNK]"]}, []),
    ],
)
def test_same_options_same_special_tokens(options, expected):
    for name, make in KINDS.items():
        assert special_spans(make(), TEXT, **options) == expected, name


@pytest.mark.parametrize(
    "text, options",
    [
        (TEXT, {}),  # the default: special-token text is an error
        (TEXT, {"allowed_special": "none"}),
        (TEXT, {"allowed_special": {"<a>"}}),  # "<a>b" is still disallowed
        ("x[UNK]", {"allowed_special": {"<a>", "<a>b"}}),
        ("x", {"allowed_special": "<a>"}),  # one string, not a collection
        ("x", {"allowed_special": {"<nope>"}}),
        ("x", {"disallowed_special": ["<nope>", "[UNK]"]}),
        ("x", {"allowed_special": None}),
        ("x", {"disallowed_special": 3}),
        ("x", {"allowed_special": "every"}),
        ("x", {"allowed_special": {"<a>"}, "disallowed_special": {"<a>", "[UNK]"}}),
        (b"x<a>", {}),
    ],
)
def test_same_bad_input_same_error(text, options):
    outcomes = {}
    for name, make in KINDS.items():
        tok = make()
        for method in (tok.encode, tok.offsets, tok.explain, tok.tokens):
            outcomes[name, method.__name__] = outcome(method, text, **options)
    kinds = {kind for kind, _ in outcomes.values()}
    messages = {message for _, message in outcomes.values()}
    assert kinds <= {"ValueError", "TypeError"} and len(kinds) == 1, outcomes
    assert len(messages) == 1, outcomes


def test_the_default_error_says_both_ways_out():
    for make in KINDS.values():
        with pytest.raises(ValueError) as caught:
            make().encode("ab<a>b")
        assert str(caught.value) == (
            "the text contains '<a>b' (at character 2), the spelling of a special token; to encode it "
            "as that special token pass allowed_special={'<a>b'} (or allowed_special='all'), to encode "
            "it as ordinary text pass disallowed_special='none'"
        )


def test_text_without_special_tokens_is_the_same_under_every_option():
    for make in KINDS.values():
        tok = make()
        plain = tok.encode("xyz ab", **frameless(tok))
        for options in (
            {"allowed_special": "all"},
            {"disallowed_special": "none"},
            {"allowed_special": ["<a>"]},
        ):
            assert tok.encode("xyz ab", **options, **frameless(tok)) == plain


def test_plain_special_text_round_trips_where_decoding_can():
    for make in (char, bpe):
        tok = make()
        for options in ({"allowed_special": "all"}, {"disallowed_special": "none"}):
            assert tok.decode(tok.encode(TEXT, **options)) == TEXT


def test_resolver_and_splitter():
    tokens = {"<a>": 0, "<a>b": 1, "[UNK]": 2}
    assert resolve_special(tokens) == SpecialPolicy(frozenset(), frozenset(tokens))
    assert resolve_special(tokens, "all") == SpecialPolicy(frozenset(tokens), frozenset())
    assert resolve_special(tokens, {"<a>"}, "none") == SpecialPolicy(frozenset({"<a>"}), frozenset())
    assert resolve_special(tokens, (), ()) == resolve_special(tokens, "none", "none")
    policy = resolve_special(tokens, "all")
    assert split_special("", policy) == []
    assert split_special("<a><a>b", policy) == [(0, 3, True), (3, 7, True)]
    assert split_special(TEXT, policy) == [
        (0, 1, False),
        (1, 4, True),
        (4, 5, False),
        (5, 9, True),
        (9, 10, False),
    ]
