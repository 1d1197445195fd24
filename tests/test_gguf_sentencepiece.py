"""GGUF SentencePiece vocabularies read by `gguf_vocab`: ``"llama"`` (SentencePiece BPE) and ``"t5"``
(Unigram + precompiled_charsmap), each written with `gguf.GGUFWriter` under tmp_path as llama.cpp's
converter writes them, then read by us and compared with HF `tokenizers` reading the tokenizer.json
the vocabulary came from: the same ids, the same decoded text.

* "llama": the real Llama 2 vocabulary (its published tokenizer.json, `tests.reference`): pieces in
  id order, types from its added tokens, ``<0x..>`` byte pieces and ``<unk>``; no merges (GGUF's
  SentencePiece files carry none: they follow from the scores). Scores as a real Llama 2 GGUF
  holds them (llama.cpp copies tokenizer.model's): ``-id``, but -1e9 for the 14 pieces that are
  runs of "▁", which merge last. With ``-id`` for every piece (what a converter that sees only a
  tokenizer.json can write) exactly the texts that use a run of "▁" come out differently.
* "t5": the Unigram model `tests.test_precompiled` trains with sentencepiece (nmt_nfkc), its
  scores, types and charsmap; compared with transformers' T5 converter's tokenizer.json.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from glassformer.tokenizers.gguf_vocab import from_gguf, read_gguf_tokenizer
from glassformer.tokenizers.sentencepiece_bpe import SentencePieceBPE
from glassformer.tokenizers.unigram import Unigram
from tests.reference import hf_tokenizer_json
from tests.test_precompiled import CORPUS, NORMALIZED_TEXTS, t5_tokenizer_json, trained  # noqa: F401 (fixture)
from tests.test_tokenizer_json_kinds import TEXTS, mismatches_with_hf, random_texts

gguf = pytest.importorskip("gguf")
tokenizers = pytest.importorskip("tokenizers")

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, BYTE = 1, 2, 3, 4, 6
BYTE_PIECE = re.compile(r"<0x[0-9A-Fa-f]{2}>")


def write_gguf(path, architecture: str = "llama", **fields) -> str:
    """A GGUF file holding only metadata (no tensors): ``fields`` name GGUFWriter's add_* methods."""
    writer = gguf.GGUFWriter(str(path), architecture)
    for name, value in fields.items():
        getattr(writer, f"add_{name}")(value)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return str(path)


def write_vocabulary(path, kind: str, tokens, scores, types, **ids_and_flags) -> str:
    """A tokenizer-only GGUF file, as llama.cpp writes its keys."""
    return write_gguf(
        path, "llama" if kind == "llama" else "t5", tokenizer_model=kind, token_list=tokens,
        token_scores=scores, token_types=types, **ids_and_flags,
    )  # fmt: skip


def llama_cpp_vocabulary(
    data: dict, space_runs_last: bool = True
) -> tuple[list[str], list[float], list[int]]:
    """(tokens, scores, types) of a SentencePiece BPE tokenizer.json as llama.cpp's converter
    makes them: id order, score -id (runs of "▁" -1e9, as Llama 2's tokenizer.model scores
    them, with ``space_runs_last``), special added tokens control, <unk> unknown, <0x..> bytes."""
    by_id = {i: token for token, i in data["model"]["vocab"].items()}
    added = {entry["id"]: entry for entry in data["added_tokens"]}
    by_id.update({i: entry["content"] for i, entry in added.items()})
    tokens = [by_id[i] for i in range(len(by_id))]
    types = []
    for i, token in enumerate(tokens):
        if token == data["model"].get("unk_token"):
            types.append(UNKNOWN)
        elif i in added:
            types.append(CONTROL if added[i].get("special") else USER_DEFINED)
        else:
            types.append(BYTE if BYTE_PIECE.fullmatch(token) else NORMAL)
    scores = [
        -1e9 if space_runs_last and is_space_run(token) else float(-i) for i, token in enumerate(tokens)
    ]
    return tokens, scores, types


def is_space_run(token: str) -> bool:
    return len(token) > 1 and set(token) == {"\u2581"}


def many_script_texts() -> list[str]:
    return TEXTS + NORMALIZED_TEXTS + CORPUS + random_texts(300, seed=30)


@pytest.fixture(scope="module")
def llama2_json():
    source = hf_tokenizer_json("llama2")
    return json.loads(source.read_text(encoding="utf-8")), tokenizers.Tokenizer.from_file(str(source))


@pytest.fixture(scope="module")
def llama2_gguf(llama2_json, tmp_path_factory):
    tokens, scores, types = llama_cpp_vocabulary(llama2_json[0])
    path = write_vocabulary(
        tmp_path_factory.mktemp("gguf") / "llama2-vocab.gguf", "llama", tokens, scores, types,
        bos_token_id=1, eos_token_id=2, unk_token_id=0, add_bos_token=True, add_space_prefix=True,
    )  # fmt: skip
    return path, llama2_json[1]


def test_llama2_vocabulary_matches_its_tokenizer_json(llama2_gguf):
    path, hf = llama2_gguf
    started = time.perf_counter()
    ours = from_gguf(path)
    seconds = time.perf_counter() - started
    assert isinstance(ours, SentencePieceBPE) and ours.vocab_size == 32000
    assert seconds < 5, f"reading Llama 2's GGUF vocabulary took {seconds:.1f} s"
    assert ours.byte_fallback and ours.unk_token == "<unk>"
    assert ours.special_tokens == {"<unk>": 0, "<s>": 1, "</s>": 2}
    assert mismatches_with_hf(ours, hf, many_script_texts()) == []
    info = read_gguf_tokenizer(path)
    assert (info.model, info.bos_token_id, info.add_bos_token, info.add_space_prefix) == (
        "llama",
        1,
        True,
        True,
    )


def test_scores_of_minus_id_differ_only_at_runs_of_spaces(llama2_json, tmp_path):
    tokens, scores, types = llama_cpp_vocabulary(llama2_json[0], space_runs_last=False)
    ours = from_gguf(write_vocabulary(tmp_path / "v.gguf", "llama", tokens, scores, types, unk_token_id=0))
    mismatches = mismatches_with_hf(ours, llama2_json[1], many_script_texts())
    space_runs = {i for i, token in enumerate(tokens) if is_space_run(token)}
    assert mismatches
    assert all(space_runs & set(ours.encode(text, allowed_special="all")) for text in mismatches)


def test_llama_without_space_prefix_is_gemma_style(tmp_path):
    """add_space_prefix false (Gemma): no "▁" before the text, none stripped when decoding."""
    tokens = ["<unk>", "<s>", "</s>", "▁", "a", "b", "▁a", "ab", "▁ab"]
    types = [UNKNOWN, CONTROL, CONTROL] + [NORMAL] * 6
    scores = [0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -1.5, -2.5, -0.5]
    path = write_vocabulary(tmp_path / "v.gguf", "llama", tokens, scores, types, add_space_prefix=False)
    ours = from_gguf(path)
    assert ours.tokens("ab ab") == ["ab", " ab"]
    assert ours.decode(ours.encode("ab ab")) == "ab ab"
    assert ours.merges[0] == ("▁", "ab")  # "▁ab" scores best


@pytest.fixture(scope="module")
def t5_gguf(trained, tmp_path_factory):  # noqa: F811 (the fixture imported above)
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    with open(trained["nmt_nfkc"], "rb") as handle:
        proto.ParseFromString(handle.read())
    tokens = [piece.piece for piece in proto.pieces]
    scores = [piece.score for piece in proto.pieces]
    types = [piece.type for piece in proto.pieces]  # SentencePiece's types are GGUF's
    path = write_vocabulary(
        tmp_path_factory.mktemp("gguf") / "t5-vocab.gguf", "t5", tokens, scores, types,
        unk_token_id=proto.trainer_spec.unk_id, eos_token_id=proto.trainer_spec.eos_id,
        precompiled_charsmap=proto.normalizer_spec.precompiled_charsmap, add_space_prefix=True,
        remove_extra_whitespaces=True,
    )  # fmt: skip
    data = t5_tokenizer_json(trained["nmt_nfkc"], extra_ids=0)
    return path, tokenizers.Tokenizer.from_str(json.dumps(data))


def test_t5_vocabulary_matches_its_tokenizer_json(t5_gguf):
    path, hf = t5_gguf
    ours = from_gguf(path)
    assert isinstance(ours, Unigram) and ours.unk_id == 0
    assert [kind for kind, *_ in ours.normalizer.steps] == ["Precompiled", "Strip", "ReplaceRegex"]
    assert mismatches_with_hf(ours, hf, many_script_texts()) == []


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(tokenizer_model="bert"), "tokenizer.ggml.model='bert' is not supported"),
        (dict(token_scores=[0.0]), "4 tokens but 1 values in tokenizer.ggml.scores"),
        (dict(token_types=[1, 1, 1, 9]), "unknown types"),
        (dict(token_list=["a", "b", "a", "c"]), "repeats token 0"),
        (dict(unk_token_id=7), "unk_token_id=7"),
        (dict(tokenizer_model="t5", precompiled_charsmap=b"\x09\x00"), "precompiled_charsmap is damaged"),
    ],
)
def test_inconsistent_vocabulary_is_refused_by_name(tmp_path, change, message):
    fields = dict(
        tokenizer_model="llama", token_list=["<unk>", "▁", "a", "▁a"], token_scores=[0.0, -1.0, -2.0, -0.5],
        token_types=[UNKNOWN, NORMAL, NORMAL, NORMAL],
    ) | change  # fmt: skip
    path = write_gguf(tmp_path / "bad.gguf", **fields)
    with pytest.raises(ValueError, match=message) as error:
        from_gguf(path)
    assert "bad.gguf" in str(error.value) or "bert" in message
