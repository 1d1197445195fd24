"""Sequence classification: the head and its pooling, a pretrained body under a new head, the
metrics (against scikit-learn), the genre task's split by play, training, run directories,
`glassformer eval`, and how far fine-tuning moved each head's attention."""

import json

import numpy as np
import pytest
import torch
from scipy.spatial.distance import jensenshannon
from sklearn.metrics import confusion_matrix as sk_confusion
from sklearn.metrics import f1_score

import glassformer as gf
from glassformer import cli
from glassformer.inputs import left_pad, right_pad
from glassformer.inspect.film import read_film
from glassformer.inspect.fine_tuning import attention_shift, row_distance
from glassformer.models import with_classifier
from glassformer.train import metrics
from glassformer.train.classification import ClassificationBatches, in_order, predict, report
from glassformer.train.genres import FOLIO_GENRES, GENRES, LEFT_OUT, genre_split, passages, play_body
from glassformer.train.settings import RunConfig, apply_overrides, load_preset
from glassformer.train.trainer import Trainer
from tests.conftest import tiny


def classifier(**overrides):
    torch.manual_seed(0)
    return gf.build(tiny(n_classes=3, **overrides)).eval()


# the head ------------------------------------------------------------------------------
def test_cls_head_reads_the_first_token_and_is_a_hook_point():
    net = classifier(family="encoder", mlm_head=False)
    lm = gf.LanguageModel(net)
    ids = torch.tensor([[5, 6, 7, 8], [9, 10, 11, 12]])
    assert net.classify(ids).shape == (2, 3)  # b c
    assert lm.activation_names()[-2:] == ["classifier.pooled", "classifier.logits"]
    trace = lm.trace(ids[:1], ["final_norm", "classifier.*"])
    assert torch.equal(trace["classifier.pooled"], trace["final_norm"][:, 0])
    assert torch.allclose(trace["classifier.logits"], net.classify(ids[:1]))
    assert torch.equal(trace.output, trace["classifier.logits"])  # a classifier's output: b c


def test_mean_pooling_leaves_padding_out():
    net = classifier(family="encoder", mlm_head=False, classifier_pooling="mean")
    rows = [[5, 6, 7, 8, 9], [10, 11]]
    ids, mask = right_pad(rows, pad_id=0)
    batch = net.classify(ids, mask)
    alone = torch.cat([net.classify(torch.tensor([row])) for row in rows])
    assert torch.allclose(batch, alone, atol=1e-5)
    padded_as_tokens = net.classify(ids)  # without the mask the pads count: a different answer
    assert not torch.allclose(padded_as_tokens[1], alone[1], atol=1e-3)


@pytest.mark.parametrize("pad", [left_pad, right_pad], ids=["left", "right"])
def test_last_token_pooling_finds_the_last_real_token_on_either_side(pad):
    net = classifier(positions="rope")  # a decoder: pooling "last" by default
    assert net.config.classifier_pooling == "last"
    rows = [[5, 6, 7, 8, 9], [10, 11]]
    ids, mask = pad(rows, pad_id=0)
    alone = torch.cat([net.classify(torch.tensor([row])) for row in rows])
    assert torch.allclose(net.classify(ids, mask), alone, atol=1e-5)


def test_pooler_pooling_is_berts_tanh_pooler():
    net = classifier(family="encoder", mlm_head=False, pooler=True, classifier_pooling="pooler")
    trace = gf.LanguageModel(net).trace([5, 6, 7], ["final_norm", "classifier.pooled"])
    expected = torch.tanh(net.pooler(trace["final_norm"][:, 0]))
    assert torch.allclose(trace["classifier.pooled"], expected)


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(n_classes=1), "n_classes=1 must be 0 (no classification head) or an integer >= 2"),
        (dict(n_classes=3, classifier_pooling="cls"), "does not suit a decoder"),
        (dict(n_classes=3, family="encoder", classifier_pooling="last"), "'last' is for decoders"),
        (dict(n_classes=3, family="encoder", classifier_pooling="pooler"), "needs BERT's pooler"),
        (dict(n_classes=3, family="encoder", classifier_pooling="max"), "classifier_pooling='max' is not"),
        (dict(n_classes=2, class_names=("a", "b", "c")), "must name each of the n_classes=2 classes once"),
        (dict(n_classes=2, family="encoder_decoder"), "sits on an encoder or a decoder"),
    ],
)
def test_bad_classifier_configs_name_the_field(fields, message):
    with pytest.raises(ValueError) as error:
        tiny(**fields)
    assert message in str(error.value)


def test_classify_needs_a_head():
    with pytest.raises(ValueError, match="no classification head"):
        gf.build(tiny()).classify(torch.tensor([[1, 2]]))


def test_a_new_head_on_a_pretrained_body_keeps_every_body_weight():
    torch.manual_seed(0)
    body = gf.build(tiny(family="encoder"))
    net = with_classifier(body, 3, pooling="mean", class_names=GENRES, resid_dropout=0.1)
    assert (net.config.n_classes, net.config.class_names, net.config.resid_dropout) == (3, GENRES, 0.1)
    ours = net.state_dict()
    assert all(torch.equal(ours[k], v) for k, v in body.state_dict().items())
    new = sorted(set(ours) - set(body.state_dict()))
    assert new == ["classifier.out_proj.bias", "classifier.out_proj.weight"]
    with pytest.raises(ValueError, match="alter pretrained weights' shapes"):
        with_classifier(body, 3, d_ff=64)


def test_minilm_is_the_body_of_a_classifier_and_mean_pooling_is_its_sentence_embedding():
    minilm = gf.load("minilm-l6")
    lm = gf.LanguageModel(with_classifier(minilm.net, 3, pooling="mean").eval(), minilm.tokenizer)
    sentences = ["To be, or not to be.", "Now is the winter of our discontent"]
    probabilities = lm.classify(sentences)
    assert probabilities.shape == (2, 3) and torch.allclose(probabilities.sum(-1), torch.ones(2))
    trace = lm.trace(sentences[0], "classifier.pooled")
    expected = minilm.embed(sentences[:1], normalize=False)
    assert torch.allclose(trace["classifier.pooled"], expected, atol=1e-5)


# metrics -------------------------------------------------------------------------------
def test_macro_f1_and_confusion_matrix_equal_scikit_learns():
    rng = np.random.default_rng(0)
    for _ in range(20):
        labels, predictions = rng.integers(0, 4, 50), rng.integers(0, 4, 50)
        predictions[:10] = 3
        labels[labels == 2] = 1  # a class that is never the truth, only predicted
        expected_f1 = f1_score(labels, predictions, average="macro")
        assert metrics.macro_f1(labels, predictions) == pytest.approx(expected_f1)
        expected = sk_confusion(labels, predictions, labels=range(4))
        assert metrics.confusion_matrix(labels, predictions, 4).tolist() == expected.tolist()
    scored = torch.tensor([0, -100, 1, 1])
    assert metrics.macro_f1(scored, torch.tensor([0, 2, 1, 0])) == pytest.approx(
        f1_score([0, 1, 1], [0, 1, 0], average="macro")
    )
    with pytest.raises(ValueError, match="outside the classes 0..1"):
        metrics.confusion_matrix([0, 2], [0, 1], n_classes=2)


def test_report_gives_what_a_classifier_is_judged_by():
    logits = torch.tensor([[3.0, 0.0, 0.0], [0.0, 3.0, 0.0], [0.0, 3.0, 0.0]])
    figures = report(logits, torch.tensor([0, 1, 2]))
    assert figures["accuracy"] == pytest.approx(2 / 3)
    assert figures["confusion_matrix"] == [[1, 0, 0], [0, 1, 0], [0, 1, 0]]
    assert figures["macro_f1"] == pytest.approx(f1_score([0, 1, 2], [0, 1, 1], average="macro"), abs=1e-5)
    assert 0 < figures["ece"] < 1


# the genre task ------------------------------------------------------------------------
CUES = {"comedy": "jest merry wedding", "history": "king crown england", "tragedy": "death blood grave"}


def fake_texts(words_per_play: int = 160) -> dict[str, str]:
    """Every file of the corpus: a title and persons (to be dropped), then an act of cue words."""
    texts = {}
    for play, genre in FOLIO_GENRES.items():
        cue = CUES[genre].split()
        body = " ".join(cue[i % 3] if i % 2 else "thou" for i in range(words_per_play))
        texts[play] = f"THE {genre.upper()} OF {play}\n\nPERSONS REPRESENTED.\n\nACT I.\n{body}\n"
    texts.update({name: "O sonnet\n" for name in LEFT_OUT})
    return texts


def test_the_folio_table_holds_its_36_plays_and_leaves_out_pericles_and_the_poems():
    genres = list(FOLIO_GENRES.values())
    assert [genres.count(g) for g in GENRES] == [14, 10, 12]
    assert "pericles_gut.txt" in LEFT_OUT and not set(LEFT_OUT) & set(FOLIO_GENRES)
    assert len(FOLIO_GENRES) + len(LEFT_OUT) == 42  # every text of the corpus is accounted for


def test_the_split_is_by_play_stratified_and_fixed_by_its_seed():
    texts = fake_texts()
    split = genre_split(texts, passage_words=8, val_plays_per_genre=2, val_passages_per_play=5)
    assert not set(split.train_plays) & set(split.val_plays)
    assert {p.play for p in split.train} == set(split.train_plays)
    assert {p.play for p in split.val} == set(split.val_plays)
    assert [sum(FOLIO_GENRES[p] == g for p in split.val_plays) for g in GENRES] == [2, 2, 2]
    assert [sum(p.genre == g for p in split.val) for g in GENRES] == [10, 10, 10]  # balanced
    again = genre_split(texts, passage_words=8, val_plays_per_genre=2, val_passages_per_play=5)
    assert again.val_plays == split.val_plays
    other = genre_split(texts, passage_words=8, val_plays_per_genre=2, split_seed=1)
    assert other.val_plays != split.val_plays
    assert all("PERSONS" not in p.text and "THE " not in p.text for p in split.train)  # no title
    with pytest.raises(ValueError, match="each genre needs plays on both sides"):
        genre_split(texts, val_plays_per_genre=10)


def test_passages_keep_their_line_breaks_and_drop_the_rest():
    assert passages("a b\nc d e", 2) == ["a b", "c d"]
    assert play_body("HAMLET\nPERSONS\nACT I.\nScene I.") == "ACT I.\nScene I."
    with pytest.raises(ValueError, match="no first act heading"):
        play_body("A LOVER'S COMPLAINT\nFrom off a hill")


def test_training_batches_are_balanced_and_resume_exactly():
    rows, labels = [[1, 2, 3]] * 90 + [[4, 5]] * 10, [0] * 90 + [1] * 10
    batches = ClassificationBatches(rows, labels, batch_size=64, seed=3, pad_id=0, n_classes=2)
    drawn = torch.cat([next(batches)["labels"] for _ in range(20)])
    assert 0.4 < drawn.float().mean() < 0.6  # the 10% class fills half of every batch
    state = batches.state_dict()
    expected = next(batches)
    again = ClassificationBatches(rows, labels, batch_size=64, seed=3, pad_id=0, n_classes=2)
    again.load_state_dict(state)
    assert all(torch.equal(expected[k], v) for k, v in next(again).items())
    with pytest.raises(ValueError, match=r"classes \[2\] have no training example"):
        ClassificationBatches(rows, labels, batch_size=4, pad_id=0, n_classes=3)


# training, run directories, the command line -------------------------------------------
def tiny_settings(**train) -> RunConfig:
    return RunConfig.from_dict(
        {
            "name": "tiny-classifier",
            "data": {"corpus": "shakespeare-genre", "objective": "classify", "tokenizer": "char"},
            "model": {"family": "encoder", "mlm_head": False, "n_layers": 1, "n_heads": 2, "d_model": 32},
            "train": {"steps": 30, "batch_size": 16, "lr": 3e-3, "warmup_steps": 3, "eval_interval": 30,
                      "tensorboard": False, "context": 16, "dtype": "float32", **train},  # not auto: a
        }  # busy machine's measurement may pick bf16, whose evaluation is not float32's
    )  # fmt: skip


def test_a_tiny_classifier_learns_a_separable_task_and_its_run_directory_round_trips(tmp_path):
    rng = np.random.default_rng(0)
    rows = [list(rng.integers(1 + 10 * (k % 2), 11 + 10 * (k % 2), rng.integers(3, 9))) for k in range(200)]
    labels = [k % 2 for k in range(200)]  # class 0: tokens 1..10, class 1: tokens 11..20
    settings = tiny_settings()
    torch.manual_seed(0)
    net = gf.build(settings.model_config(21, n_classes=2, class_names=("low", "high"), pad_token_id=0))
    train = ClassificationBatches(rows[:150], labels[:150], 16, seed=0, pad_id=0, n_classes=2)
    val = in_order(rows[150:], labels[150:], 16, pad_id=0)
    trainer = Trainer(settings, net, None, train, val, tmp_path / "run", log=lambda _: None)
    assert trainer.evaluate().accuracy < 0.8
    trainer.fit()
    result = trainer.evaluate()
    assert result.accuracy == 1.0
    pooled = report(*predict(trainer.net, val))  # the ECE of all 50 rows, not a mean of batches'
    assert result.ece == pytest.approx(pooled["ece"], abs=1e-6) and result.tokens == 50
    loaded = gf.load(tmp_path / "run")
    assert loaded.config.class_names == ("low", "high") and loaded.net.classifier is not None
    batch = val[0]
    with torch.no_grad():
        expected = trainer.net.eval().classify(batch["input_ids"], batch["attention_mask"])
    assert torch.allclose(loaded.logits(batch["input_ids"], attention_mask=batch["attention_mask"]), expected)


def test_glassformer_train_and_eval_a_genre_run(tmp_path, capsys):
    data = tmp_path / "data"
    for name, text in fake_texts().items():
        (data / "shakespeare" / "texts").mkdir(parents=True, exist_ok=True)
        (data / "shakespeare" / "texts" / name).write_text(text)
    out = tmp_path / "runs" / "genre"
    sets = ["data.tokenizer=char", "model.n_layers=1", "model.d_model=32", "model.n_heads=2",
            "train.steps=4", "train.eval_interval=4", "train.warmup_steps=1", "train.batch_size=8",
            "train.tensorboard=false", "train.context=48", "train.dtype=float32",
            "data.task={passage_words=8, val_plays_per_genre=1, val_passages_per_play=4}"]  # fmt: skip
    args = ["train", "--preset", "genre-scratch", "--out", str(out), "--data-dir", str(data)]
    assert cli.main([*args, *(x for s in sets for x in ("--set", s))]) == 0
    line = json.loads((out / "metrics.jsonl").read_text().splitlines()[-1])
    assert {"val_accuracy", "val_ece", "macro_f1", "confusion_matrix"} <= set(line)
    assert sum(map(sum, line["confusion_matrix"])) == 12  # 3 validation plays x 4 passages
    (frame,) = read_film(out)  # the film of a classifier: attention and roles, no lens to read
    assert frame["step"] == 4 and frame["lens"] is None and frame["induction"] is None
    assert frame["patterns"]["shape"][:2] == [1, 2] and frame["text"] == "".join(frame["tokens"])
    assert frame["classes"]["names"] == list(GENRES) and abs(sum(frame["classes"]["p"]) - 1) < 1e-3
    capsys.readouterr()
    assert cli.main(["eval", str(out), "--data-dir", str(data)]) == 0
    shown = capsys.readouterr().out
    assert "accuracy" in shown and "macro_f1" in shown and "calibration error" in shown
    assert "confusion matrix (rows: true class" in shown and "tragedy" in shown


def test_a_pretrained_start_needs_its_own_tokenizer(tmp_path):
    settings = RunConfig.from_dict(
        {**tiny_settings().to_dict(), "train": {"init_from": "minilm-l6"}}, name="x"
    )
    for name, text in fake_texts().items():
        (tmp_path / "shakespeare" / "texts").mkdir(parents=True, exist_ok=True)
        (tmp_path / "shakespeare" / "texts" / name).write_text(text)
    from glassformer.train.runs import prepare

    with pytest.raises(ValueError, match="set data.tokenizer='pretrained'"):
        prepare(settings, tmp_path, log=lambda _: None)
    language_model = apply_overrides(load_preset("induction"), ["train.init_from=minilm-l6"])
    with pytest.raises(ValueError, match="data.objective='task' trains from scratch"):
        prepare(language_model, tmp_path, log=lambda _: None)


# what fine-tuning changed ----------------------------------------------------------------
def test_row_distance_is_scipys_jensen_shannon_and_total_variation():
    rng = np.random.default_rng(0)
    p, q = rng.dirichlet(np.ones(6), size=4), rng.dirichlet(np.ones(6), size=4)
    p[0, :3] = 0
    p[0] /= p[0].sum()
    js = row_distance(torch.tensor(p), torch.tensor(q)).numpy()
    assert np.allclose(js, jensenshannon(p, q, base=2, axis=-1) ** 2)
    assert np.allclose(row_distance(torch.tensor(p), torch.tensor(q), "l1").numpy(), 0.5 * abs(p - q).sum(-1))


def test_attention_shift_ranks_the_head_fine_tuning_moved_first():
    torch.manual_seed(0)
    before = gf.LanguageModel(gf.build(tiny(family="encoder", mlm_head=False)).eval())
    tuned = with_classifier(before.net, 2).eval()
    d, e = tuned.config.d_model, tuned.config.d_head
    with torch.no_grad():  # layer 1, head 2: its queries change, nothing else does
        tuned.stack.blocks[1].attn.qkv_proj.weight[2 * e : 3 * e] *= 8.0
    shift = attention_shift(before, gf.LanguageModel(tuned), [3, 9, 4, 12, 30, 5], measure="js")
    (layer, head, value), *rest = shift.ranked()
    assert (layer, head) == (1, 2) and 0 < value <= 1
    assert all(v == pytest.approx(0.0, abs=1e-6) for _, _, v in rest)
    old, new = shift.patterns(1, 2)
    assert old.shape == new.shape == (6, 6) and torch.allclose(new.sum(-1), torch.ones(6))
    assert "layer 1 head 2" in str(shift).splitlines()[1]
    assert d == 32
    other = gf.LanguageModel(gf.build(tiny(family="encoder", n_layers=1)))
    with pytest.raises(ValueError, match="differ in shape"):
        attention_shift(before, other, [1, 2])
