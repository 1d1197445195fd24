"""Training data: the token-file cache, the batchers' schema and invariants, resuming, tasks."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from glassformer.tokenizers.bpe_train import train_bpe
from glassformer.tokenizers.char import CharTokenizer
from glassformer.tokenizers.wordpiece import WordPiece
from glassformer.train.data import (
    IGNORE_INDEX,
    DecoderTaskBatches,
    LMBatches,
    MLMBatches,
    Seq2SeqBatches,
    eval_batches,
)
from glassformer.train.tasks import TASKS, make_task
from glassformer.train.token_files import token_file

TEXT = "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n" * 20


class CountingChars(CharTokenizer):
    """A char tokenizer that counts encode calls and can fail on a marker character."""

    def __init__(self, *args, fail_on: str | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls, self.fail_on = 0, fail_on

    def encode(self, text, **options):
        self.calls += 1
        if self.fail_on is not None and self.fail_on in text:
            raise RuntimeError("simulated crash while encoding")
        return super().encode(text, **options)


# -- token_file ---------------------------------------------------------------------------------


def test_token_file_holds_the_ids_read_only_with_a_sidecar(tmp_path):
    tok = CharTokenizer.from_text(TEXT)
    ids = token_file(TEXT, tok, tmp_path / "train.bin", chunk_chars=100)  # many chunks
    assert ids.dtype == np.uint16 and ids.tolist() == tok.encode(TEXT)
    with pytest.raises(ValueError):
        ids[0] = 1  # read-only
    meta = json.loads((tmp_path / "train.bin.json").read_text())
    assert meta["length"] == len(TEXT) and meta["dtype"] == "uint16"
    assert (tmp_path / "train.bin").stat().st_size == 2 * len(TEXT)
    batch = next(LMBatches(ids, context=8, batch_size=2))  # batchers read the memmap directly
    assert batch["input_ids"].dtype == torch.long and tok.decode(batch["input_ids"][0].tolist()) in TEXT


def test_token_file_is_reused_until_the_text_or_the_tokenizer_changes(tmp_path):
    path = tmp_path / "train.bin"
    tok = CountingChars(CharTokenizer.from_text(TEXT).chars)
    token_file(TEXT, tok, path)
    assert tok.calls == 1
    again = token_file(TEXT, tok, path)
    assert tok.calls == 1 and again.tolist() == tok.encode(TEXT)  # cache hit: no encoding

    changed_text = TEXT + "Speak, hear.\n"
    assert token_file(changed_text, tok, path).tolist() == tok.encode(changed_text)

    other = CharTokenizer.from_text(TEXT + "xyz")  # same text, different ids
    assert token_file(changed_text, other, path).tolist() == other.encode(changed_text)
    assert len(list(tmp_path.iterdir())) == 2  # the .bin and its .json, no leftovers


def test_token_file_rebuilds_when_the_bin_does_not_match_its_sidecar(tmp_path):
    path, tok = tmp_path / "train.bin", CountingChars(CharTokenizer.from_text(TEXT).chars)
    token_file(TEXT, tok, path)
    path.write_bytes(path.read_bytes()[:10])  # truncated behind the cache's back
    assert token_file(TEXT, tok, path).tolist() == tok.encode(TEXT) and tok.calls == 3


def test_a_crash_while_encoding_leaves_the_old_cache_and_no_partial_file(tmp_path):
    path = tmp_path / "train.bin"
    token_file(TEXT, CharTokenizer.from_text(TEXT + "#"), path)
    before = path.read_bytes()
    crashing = CountingChars(CharTokenizer.from_text(TEXT + "#").chars, fail_on="#")
    with pytest.raises(RuntimeError, match="simulated crash"):
        token_file(TEXT + "#", crashing, path, chunk_chars=100)
    assert crashing.calls > 1  # it did write some chunks first
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.bin", "train.bin.json"]
    assert path.read_bytes() == before
    with pytest.raises(RuntimeError):
        token_file(TEXT + "#", crashing, tmp_path / "fresh.bin", chunk_chars=100)
    assert not (tmp_path / "fresh.bin").exists()


def test_chunked_byte_bpe_encoding_equals_whole_and_special_text_is_plain(tmp_path):
    # " \n" is one piece before another newline (so BPE learns to merge it), two before a
    # word: a chunk that ended in "one \n" would wrongly read it as one piece
    text = "one \n\ntwo \nthree\n  indented\tline\n<|endoftext|> last.\n" * 30
    tok = train_bpe(text, vocab_size=280, special_tokens=["<|endoftext|>"], progress=False)
    whole = tok.encode(text, disallowed_special=())
    assert tok.special_tokens["<|endoftext|>"] not in whole
    for chunk_chars in range(5, 60, 6):
        assert token_file(text, tok, tmp_path / f"{chunk_chars}.bin", chunk_chars).tolist() == whole


def test_wordpiece_token_files_have_no_cls_sep_per_chunk(tmp_path):
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "[", "]", "mask", "."]
    tok = WordPiece(vocab)
    text = "the cat sat.\nthe [MASK] sat.\n" * 10
    ids = token_file(text, tok, tmp_path / "wp.bin", chunk_chars=20).tolist()
    assert ids == tok.encode(text, add_special_tokens=False, disallowed_special="none")
    assert not {tok.vocab[t] for t in ("[CLS]", "[SEP]", "[MASK]")} & set(ids)


def test_token_file_uses_uint32_for_big_vocabularies(tmp_path):
    chars = "".join(chr(c) for c in range(0x4E00, 0x4E00 + 70_000) if not 0xD800 <= c < 0xE000)
    tok = CharTokenizer(chars)
    text = chars[-5:] + chars[:5]
    ids = token_file(text, tok, tmp_path / "big.bin")
    assert ids.dtype == np.uint32 and ids.tolist() == tok.encode(text) and max(ids) >= 1 << 16


def test_token_file_rejects_an_empty_text(tmp_path):
    with pytest.raises(ValueError, match="empty"):
        token_file("", CharTokenizer("ab"), tmp_path / "x.bin")


# -- batchers -----------------------------------------------------------------------------------

PAIRS = [([3, 4, 5], [6, 9]), ([7], [8, 8, 8, 9]), ([5, 5], [9])]  # 9 = eos
PAD, BOS, SEP = 0, 1, 2


def make_batchers():
    ids = np.arange(500, dtype=np.uint16) % 50
    return {
        "lm": lambda seed=0: LMBatches(ids, context=16, batch_size=4, seed=seed),
        "mlm": lambda seed=0: MLMBatches(ids, 16, 4, seed, vocab_size=52, mask_token_id=51, special_ids=[0]),
        "seq2seq": lambda seed=0: Seq2SeqBatches(PAIRS, 4, seed, pad_id=PAD, bos_id=BOS),
        "decoder": lambda seed=0: DecoderTaskBatches(PAIRS, 4, seed, pad_id=PAD, sep_id=SEP),
    }


def same(a, b) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.parametrize("kind", ["lm", "mlm", "seq2seq", "decoder"])
def test_batchers_share_a_schema_and_are_deterministic(kind):
    make = make_batchers()[kind]
    batch = next(make())
    assert {"input_ids", "labels"} <= batch.keys()
    assert all(v.dtype == torch.long and v.ndim == 2 and v.shape[0] == 4 for v in batch.values())
    label_partner = "decoder_input_ids" if kind == "seq2seq" else "input_ids"
    assert batch["labels"].shape == batch[label_partner].shape
    first, second = make(seed=3), make(seed=3)
    assert all(same(next(first), next(second)) for _ in range(5))
    other = make(seed=4)
    assert not all(same(next(make(seed=3)), next(other)) for _ in range(3))


@pytest.mark.parametrize("kind", ["lm", "mlm", "seq2seq", "decoder"])
def test_resuming_from_a_state_dict_gives_the_uninterrupted_batches(kind, tmp_path):
    make = make_batchers()[kind]
    uninterrupted = make(seed=7)
    expected = [next(uninterrupted) for _ in range(8)]
    first = make(seed=7)
    for _ in range(3):
        next(first)
    torch.save(first.state_dict(), tmp_path / "state.pt")
    resumed = make(seed=0)  # the seed comes from the state
    resumed.load_state_dict(torch.load(tmp_path / "state.pt", weights_only=True))
    assert all(same(next(resumed), want) for want in expected[3:])


def test_load_state_dict_refuses_a_state_for_other_data_or_sizes():
    lm = make_batchers()["lm"]()
    state = lm.state_dict()
    with pytest.raises(ValueError, match="batch_size=4 but this batcher has batch_size=8"):
        LMBatches(lm.ids, context=16, batch_size=8).load_state_dict(state)
    with pytest.raises(ValueError, match="saved by LMBatches"):
        make_batchers()["seq2seq"]().load_state_dict(state)


@pytest.mark.parametrize("kind", ["lm", "mlm", "seq2seq", "decoder"])
def test_fixed_eval_batches_do_not_depend_on_the_training_position(kind):
    batches = make_batchers()[kind]()
    before = eval_batches(batches, 3, seed=1)
    for _ in range(5):
        next(batches)
    after = batches.fixed(3, seed=1)
    assert all(same(a, b) for a, b in zip(before, after, strict=True))
    assert not same(batches.fixed(1, seed=0)[0], next(make_batchers()[kind](seed=0)))  # own stream


def test_lm_windows_are_contiguous_and_labels_are_shifted_inputs():
    ids = np.arange(1000)
    batch = next(LMBatches(ids, context=32, batch_size=8, seed=0))
    x, y = batch["input_ids"], batch["labels"]
    assert torch.equal(x - x[:, :1], torch.arange(32).expand(8, 32))  # ids[i : i + t]
    assert torch.equal(y, x + 1) and "attention_mask" not in batch
    tight = LMBatches(ids[:33], context=32, batch_size=2, seed=0)  # one possible window
    assert torch.equal(next(tight)["input_ids"][1], torch.arange(32))


def test_data_shorter_than_a_window_is_a_clear_error():
    with pytest.raises(ValueError, match="the data has 32 tokens, fewer than the 33"):
        LMBatches(np.arange(32), context=32, batch_size=2)
    with pytest.raises(ValueError, match="has 0 tokens"):
        MLMBatches(np.zeros(0, dtype=np.int64), 8, 2, vocab_size=10, mask_token_id=9)
    with pytest.raises(ValueError, match="batch_size must be an int >= 1"):
        LMBatches(np.arange(100), context=8, batch_size=0)


def test_mlm_follows_the_bert_recipe():
    rng = np.random.default_rng(0)
    vocab, mask, specials = 1000, 2, [0, 1]
    ids = rng.integers(3, vocab, size=20_000)
    ids[rng.random(len(ids)) < 0.1] = 0  # specials appear often, and are never chosen
    ids[rng.random(len(ids)) < 0.05] = 1
    batcher = MLMBatches(ids, 128, 64, 0, vocab_size=vocab, mask_token_id=mask, special_ids=specials)
    originals, inputs, labels = [], [], []
    for _ in range(10):
        batch = next(batcher)
        inputs.append(batch["input_ids"])
        labels.append(batch["labels"])
        assert torch.equal(batch["attention_mask"], torch.ones(64, 128, dtype=torch.long))
        chosen = batch["labels"] != IGNORE_INDEX
        assert bool(chosen.any(dim=1).all())
        original = torch.where(chosen, batch["labels"], batch["input_ids"])  # unchosen are unchanged
        originals.append(original)
    original, inputs, labels = torch.cat(originals), torch.cat(inputs), torch.cat(labels)
    chosen, special = labels != IGNORE_INDEX, (original == 0) | (original == 1)
    assert not bool((chosen & special).any())
    assert abs(chosen.sum() / (~special).sum() - 0.15) < 0.005
    masked = (inputs[chosen] == mask).float().mean()
    kept = (inputs[chosen] == original[chosen]).float().mean()
    replaced = inputs[chosen][(inputs[chosen] != mask) & (inputs[chosen] != original[chosen])]
    assert abs(masked - 0.8) < 0.02 and abs(kept - 0.1) < 0.015
    assert abs(len(replaced) / chosen.sum() - 0.1) < 0.015
    assert not bool(torch.isin(replaced, torch.tensor([0, 1, mask])).any())


def test_mlm_scores_at_least_one_token_per_short_window():
    batch = next(MLMBatches(np.arange(3, 20), 4, 16, 0, vocab_size=20, mask_token_id=0))
    assert torch.equal((batch["labels"] != IGNORE_INDEX).sum(dim=1), torch.ones(16, dtype=torch.long))


def rows_by_pair(batch, key, pairs, mask_key):
    """For each row, the pair whose source is the row's unpadded ``key`` prefix."""
    found = []
    for row, mask in zip(batch[key].tolist(), batch[mask_key].tolist(), strict=True):
        found.append(next(p for p in pairs if row[: sum(mask)][: len(p[0])] == p[0]))
    return found


def test_seq2seq_shifts_the_target_and_masks_padding():
    batch = next(Seq2SeqBatches(PAIRS, 32, 0, pad_id=PAD, bos_id=BOS))
    assert batch["input_ids"].shape == (32, 3) and batch["labels"].shape == (32, 4)
    for i, (source, target) in enumerate(rows_by_pair(batch, "input_ids", PAIRS, "attention_mask")):
        n, m = len(source), len(target)
        assert batch["input_ids"][i].tolist() == source + [PAD] * (3 - n)
        assert batch["attention_mask"][i].tolist() == [1] * n + [0] * (3 - n)
        assert batch["decoder_input_ids"][i].tolist() == [BOS] + target[:-1] + [PAD] * (4 - m)
        assert batch["decoder_attention_mask"][i].tolist() == [1] * m + [0] * (4 - m)
        assert batch["labels"][i].tolist() == target + [IGNORE_INDEX] * (4 - m)


@pytest.mark.parametrize("sep_id", [SEP, None])
def test_decoder_tasks_score_only_the_target(sep_id):
    batch = next(DecoderTaskBatches(PAIRS, 32, 0, pad_id=PAD, sep_id=sep_id))
    joined = [0 if sep_id is None else 1]
    for i, (source, target) in enumerate(rows_by_pair(batch, "input_ids", PAIRS, "attention_mask")):
        prefix = source + ([] if sep_id is None else [sep_id])
        sequence, length = prefix + target, len(prefix) + len(target) - 1
        width = batch["input_ids"].shape[1]
        assert width == max(len(s) + len(t) for s, t in PAIRS) + joined[0] - 1
        assert batch["input_ids"][i].tolist() == sequence[:-1] + [PAD] * (width - length)
        assert batch["attention_mask"][i].tolist() == [1] * length + [0] * (width - length)
        unscored = [IGNORE_INDEX] * (len(prefix) - 1)
        assert batch["labels"][i].tolist() == unscored + target + [IGNORE_INDEX] * (width - length)


def test_task_batchers_reject_empty_pairs_and_targets():
    with pytest.raises(ValueError, match="pairs is empty"):
        Seq2SeqBatches([], 2, pad_id=PAD, bos_id=BOS)
    with pytest.raises(ValueError, match="pair 1 has an empty target"):
        DecoderTaskBatches([([1], [2]), ([1], [])], 2, pad_id=PAD, sep_id=SEP)
    with pytest.raises(ValueError, match="pair 0 has an empty source"):
        DecoderTaskBatches([([], [2])], 2, pad_id=PAD, sep_id=None)


# -- tasks ----------------------------------------------------------------------------------------


def test_task_examples_are_correct_and_readable():
    for name in TASKS:
        task = make_task(name)
        specials = set(task.tokenizer.special_tokens.values())
        assert len(specials) == 4 and task.vocab_size == len(task.symbols) + 4
        for source_ids, target_ids in task.pairs(100, seed=1):
            assert target_ids[-1] == task.eos_id and task.eos_id not in target_ids[:-1]
            source, target = task.decode(source_ids), task.decode(target_ids[:-1])
            assert task.encode(source) == source_ids and specials.isdisjoint(target_ids[:-1])
            if name == "copy":
                assert target == source
            elif name == "reverse":
                assert target == source[::-1]
            elif name == "sort":
                assert sorted(target) == sorted(source) and list(target) == sorted(target)
            elif name == "addition":
                a, b = source.removesuffix("=").split("+")
                assert source.endswith("=") and int(target) == int(a) + int(b)
            elif name == "induction":
                assert source == "<bos>" + target and len(target) == 16


def test_task_parameters_shape_the_examples():
    lengths = {len(s) for s, _ in make_task("copy", min_length=3, max_length=5).pairs(200)}
    assert lengths == {3, 4, 5}
    task = make_task("addition", digits=4, reverse_answer=True)
    for source, target in task.pairs(50, seed=2):
        a, b = task.decode(source)[:-1].split("+")
        assert task.decode(target[:-1]) == str(int(a) + int(b))[::-1] and max(len(a), len(b)) <= 4
    assert set(make_task("reverse", alphabet_size=3).symbols) == {"a", "b", "c"}


def test_task_pairs_and_batches_are_seeded():
    task = make_task("sort")
    assert task.pairs(20, seed=5) == task.pairs(20, seed=5) != task.pairs(20, seed=6)
    a, b = task.batches("decoder", 8, seed=1, n_pairs=50), task.batches("decoder", 8, seed=1, n_pairs=50)
    assert same(next(a), next(b))


@pytest.mark.parametrize("name", sorted(TASKS))
def test_max_seq_len_bounds_every_batch(name):
    task = make_task(name)
    for architecture in task.architectures:
        batches = task.batches(architecture, 64, n_pairs=300)
        for _ in range(3):
            batch = next(batches)
            longest = max(v.shape[1] for v in batch.values())
            assert longest <= task.max_seq_len(architecture)


def test_exact_match_judges_the_answer_up_to_eos():
    task = make_task("copy")
    target = task.encode("abc<eos>")
    assert task.exact_match(task.encode("abc<eos><pad><pad>"), target)
    assert task.exact_match(task.encode("<bos>abc<eos>ddd"), target)
    assert not task.exact_match(task.encode("abd<eos>"), target)
    assert not task.exact_match(task.encode("ab<eos>c"), target)
    assert task.exact_match(torch.tensor(target), target)


def test_task_errors_name_the_problem():
    with pytest.raises(ValueError, match="unknown task 'cpy'; known tasks: addition, copy"):
        make_task("cpy")
    with pytest.raises(ValueError, match="task 'sort' has no parameter 'lenght'; its parameters: alpha"):
        make_task("sort", lenght=3)
    with pytest.raises(ValueError, match="max_length must be an int >= 5"):
        make_task("copy", min_length=5, max_length=4)
    with pytest.raises(ValueError, match="alphabet_size must be an int between 1 and 62"):
        make_task("reverse", alphabet_size=100)
    with pytest.raises(ValueError, match="'induction' is for decoder models, not 'encoder-decoder'"):
        make_task("induction").batches("encoder-decoder", 4)
