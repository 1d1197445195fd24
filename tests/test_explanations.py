"""LIME, SHAP and the shared explanation parts on tiny models, against cases with known answers.

A classifier whose probability is additive in its words has known explanations: SHAP's
values are the words' own weights exactly (any efficient, symmetric attribution of an
additive game gives each player its own term), and LIME's linear fit recovers them up to
its ridge penalty. On a tiny language model: one score per token, the same scores for the
same seed, SHAP's additivity, and f(z) against the model run directly.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import glassformer as gf
from glassformer.inspect import (
    TextClassifier,
    explain_tokens,
    gradient_x_input,
    label_probability,
    lime_weights,
    masked_score,
    next_token_probability,
    occlusion,
    sentence_similarity,
    shap_values,
)
from glassformer.inspect.explain_methods import ASSUMPTIONS, METHODS, occlusion_of
from glassformer.tokenizers.char import CharTokenizer
from glassformer.tokenizers.wordpiece import WordPiece
from glassformer.workshop.reading.explanations import explain
from tests.conftest import tiny_model

CHARS = "abcdefghij "
TEXT = "abc dea"
WORDS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "on", "mat", "dog", "a"]
WEIGHTS = {"good": 0.2, "fine": 0.1, "bad": -0.05}  # an additive classifier's word weights


@pytest.fixture(scope="module")
def lm() -> gf.LanguageModel:
    """A tiny decoder whose bos token stands for a text with every token removed."""
    tokenizer = CharTokenizer.from_text(CHARS, special_tokens=("<s>",))
    return gf.LanguageModel(tiny_model(vocab_size=len(CHARS) + 1, bos_token_id=len(CHARS)), tokenizer)


def probability_of(lm, text_or_ids, token: str) -> float:
    """p(token | input) at the last position, computed directly."""
    logits = lm.logits(text_or_ids)[0, -1]
    return float(logits.softmax(-1)[lm.tokenizer.encode(token)[0]])


def additive(texts: list[str]) -> np.ndarray:
    """p(positive) = 0.3 + the weights of the words present: an additive game."""
    p = np.array([0.3 + sum(w for word, w in WEIGHTS.items() if word in t.split()) for t in texts])
    return np.stack([1 - p, p], axis=1)


CLASSIFIER = TextClassifier(additive, class_names=["negative", "positive"])
REVIEW = "a good and fine day , not bad"


# --- LIME ----------------------------------------------------------------------------------------
def test_lime_one_score_per_token_and_repeatable(lm):
    result = lime_weights(lm, TEXT, "e", samples=64, seed=3)
    assert result.tokens == list(TEXT) and result.scores.shape == (len(TEXT),)
    assert result.method == "LIME" and "probability of 'e'" in result.target
    assert result.extra["score"] == pytest.approx(probability_of(lm, TEXT, "e"), abs=1e-6)
    assert torch.equal(result.scores, lime_weights(lm, TEXT, "e", samples=64, seed=3).scores)
    assert not torch.equal(result.scores, lime_weights(lm, TEXT, "e", samples=64, seed=4).scores)
    kept = lime_weights(lm, TEXT, "e", samples=64, keep=[0])
    assert float(kept.scores[0]) == 0.0 and bool((kept.scores[1:] != 0).all())
    assert "R^2" in str(result)


def test_lime_recovers_an_additive_classifier():
    result = lime_weights(CLASSIFIER, REVIEW, "positive", samples=400, seed=0)
    words = [w.strip() for w in result.tokens]
    for word, weight in WEIGHTS.items():
        # Ridge (alpha = 1) over ~400 weighted samples shrinks a weight by well under 1%.
        assert float(result.scores[words.index(word)]) == pytest.approx(weight, abs=0.01)
    others = [float(s) for w, s in zip(words, result.scores, strict=True) if w not in WEIGHTS]
    assert max(abs(v) for v in others) < 0.01
    assert result.extra["r2"] > 0.99


# --- SHAP ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("algorithm", "evals"), [("partition", 40), ("partition", 200), ("kernel", 60)])
def test_shap_additivity_on_a_language_model(lm, algorithm, evals):
    result = shap_values(lm, TEXT, "e", algorithm=algorithm, max_evals=evals, seed=1)
    assert result.tokens == list(TEXT) and result.scores.shape == (len(TEXT),)
    full = probability_of(lm, TEXT, "e")
    empty = probability_of(lm, [len(CHARS)], "e")  # every token removed: the bos token alone
    assert result.extra["score"] == pytest.approx(full, abs=1e-6)
    assert result.extra["base_value"] == pytest.approx(empty, abs=1e-6)
    # additivity: base value + sum of the values = the model's output
    assert result.extra["base_value"] + float(result.scores.double().sum()) == pytest.approx(full, abs=1e-6)
    assert result.extra["additivity_error"] < 1e-6
    again = shap_values(lm, TEXT, "e", algorithm=algorithm, max_evals=evals, seed=1)
    assert torch.equal(result.scores, again.scores)


def test_shap_values_of_an_additive_classifier_are_its_weights():
    for algorithm in ("partition", "kernel"):
        result = shap_values(CLASSIFIER, REVIEW, "positive", algorithm=algorithm, max_evals=600)
        expected = [WEIGHTS.get(w.strip(), 0.0) for w in result.tokens]
        torch.testing.assert_close(result.scores, torch.tensor(expected), atol=1e-6, rtol=0)
        assert result.extra["base_value"] == pytest.approx(0.3)


def test_shap_keeps_fixed_tokens_out(lm):
    result = shap_values(lm, TEXT, "e", max_evals=60, keep=[0, 3])
    assert float(result.scores[0]) == 0.0 and float(result.scores[3]) == 0.0
    empty = probability_of(lm, "a ", "e")  # the base value: only the held tokens left
    assert result.extra["base_value"] == pytest.approx(empty, abs=1e-6)


# --- f(z): masking the model's own tokens --------------------------------------------------------
def test_masked_score_matches_direct_runs(lm):
    f = masked_score(lm, TEXT, "e")
    z = np.array([[1, 0, 1, 1, 1, 0, 1]])  # 'b' and 'e' removed
    assert f.rows(z) == [lm.tokenizer.encode("ac da")]
    assert float(f(z)[0]) == pytest.approx(probability_of(lm, "ac da", "e"), abs=1e-6)
    replaced = masked_score(lm, TEXT, "e", replacement=lm.tokenizer.encode("j")[0])
    assert float(replaced(z)[0]) == pytest.approx(probability_of(lm, "ajc dja", "e"), abs=1e-6)
    # many rows of several lengths, in one call, each scored as if run alone
    rows = np.random.default_rng(0).integers(0, 2, size=(16, len(TEXT)))
    direct = [probability_of(lm, r or [len(CHARS)], "e") for r in f.rows(rows)]
    np.testing.assert_allclose(f(rows), direct, atol=1e-6)


def test_masked_lm_keeps_specials_and_follows_the_mask():
    net = tiny_model(family="encoder", vocab_size=len(WORDS))
    lm = gf.LanguageModel(net, WordPiece(WORDS))
    text = "the cat [MASK] on the mat"
    f = masked_score(lm, text, "sat")
    assert [f.tokens[i] for i in f.fixed] == ["[CLS]", "[MASK]", "[SEP]"]
    z = np.ones((1, len(f.free)))
    z[0, f.free.index(2)] = 0  # remove "cat": the [MASK] moves one position left
    row = f.rows(z)[0]
    logits = lm.logits([row])[0]
    expected = float(logits[row.index(4)].softmax(-1)[WORDS.index("sat")])
    assert float(f(z)[0]) == pytest.approx(expected, abs=1e-6)
    tgt = next_token_probability(lm, "sat")
    assert "masked position" in tgt.label


def test_sentence_similarity_is_the_cosine_of_embeddings():
    lm = gf.LanguageModel(
        tiny_model(family="encoder", mlm_head=False, vocab_size=len(WORDS)), WordPiece(WORDS)
    )
    a, b = "the cat sat on the mat", "a dog sat"
    f = masked_score(lm, a, b)
    expected = float(torch.nn.functional.cosine_similarity(lm.embed(a), lm.embed(b))[0])
    assert f.full() == pytest.approx(expected, abs=1e-5)
    assert "cosine similarity" in f.what and f.tokens[0] == "[CLS]" and 0 in f.fixed
    result = shap_values(lm, a, b, max_evals=100)
    assert result.extra["additivity_error"] < 1e-6 and float(result.scores[0]) == 0.0
    with pytest.raises(ValueError, match="second sentence"):
        masked_score(lm, a, None)


# --- one entry point for every method ------------------------------------------------------------
@pytest.mark.parametrize("method", METHODS)
def test_explain_tokens_gives_one_score_per_token(lm, method):
    result = explain_tokens(lm, TEXT, method, "e", samples=40, keep_first=True)
    assert result.tokens == list(TEXT) and result.scores.shape == (len(TEXT),)
    assert float(result.scores[0]) == 0.0  # held fixed
    assert bool(torch.isfinite(result.scores).all())
    assert result.extra["notes"][-1] == ASSUMPTIONS[method]
    assert result.target == next_token_probability(lm, "e").label  # every method: the same F


def test_occlusion_of_masked_score_is_occlusion_by_removal(lm):
    ours = occlusion_of(masked_score(lm, TEXT, "e"))
    direct = occlusion(lm, TEXT, next_token_probability(lm, "e"), replacement="remove")
    torch.testing.assert_close(ours.scores, direct.scores, atol=1e-6, rtol=0)


def test_label_probability_reads_class_logits(lm):
    f = label_probability(1, "positive")
    logits = torch.tensor([[0.0, 0.0], [0.0, math.log(3.0)]])  # b c
    torch.testing.assert_close(f(logits, torch.zeros(2, 4)), torch.tensor([0.5, 0.75]))
    assert f.label == "probability of the label 'positive'"
    with pytest.raises(ValueError, match="class logits b c"):
        gradient_x_input(lm, TEXT, f)  # a language model's output is b t v


def test_a_model_with_a_classification_head_explains_its_label():
    if "n_classes" not in gf.ModelConfig.__dataclass_fields__:
        pytest.skip("this ModelConfig has no classification head")
    names = ("comedy", "history", "tragedy")
    net = tiny_model(vocab_size=len(CHARS) + 1, n_classes=3, class_names=names, bos_token_id=len(CHARS))
    lm = gf.LanguageModel(net, CharTokenizer.from_text(CHARS, special_tokens=("<s>",)))
    with torch.no_grad():
        p = float(lm.inputs.forward(lm.ids(TEXT))[0].softmax(-1)[1])
    for method in METHODS:
        result = explain_tokens(lm, TEXT, method, "history", samples=40)
        assert result.target == "probability of the label 'history'" and len(result.scores) == len(TEXT)
        if method in ("lime", "shap", "occlusion"):
            assert result.extra["score"] == pytest.approx(p, abs=1e-6)
    ig = explain_tokens(lm, TEXT, "ig", 1)
    assert ig.extra["relative_error"] < 0.01 and ig.extra["score"] == pytest.approx(p, abs=1e-6)
    with pytest.raises(ValueError, match="not a class"):
        explain_tokens(lm, TEXT, "lime", "romance")


def test_classifier_takes_perturbation_methods_only():
    for method in ("lime", "shap", "occlusion"):
        result = explain_tokens(CLASSIFIER, REVIEW, method, "positive", samples=80)
        assert len(result.scores) == len(REVIEW.split()) and "positive" in result.target
    occluded = explain_tokens(CLASSIFIER, REVIEW, "occlusion", None)  # None: the top class
    assert float(occluded.scores[1]) == pytest.approx(0.2)  # " good" removed: p drops by its weight
    with pytest.raises(ValueError, match="gradients"):
        explain_tokens(CLASSIFIER, REVIEW, "ig", "positive")


def test_workshop_explain_is_json(lm):
    found = explain(lm, TEXT, "occlusion", "e")
    assert set(found) >= {"tokens", "scores", "method", "what", "notes"}
    assert found["tokens"] == list(TEXT) and len(found["scores"]) == len(TEXT)
    assert found["method"] == "occlusion" and found["what"].startswith("probability of 'e'")
    assert found["assumes"] == ASSUMPTIONS["occlusion"] and ASSUMPTIONS["occlusion"] not in found["notes"]
    assert json.loads(json.dumps(found, allow_nan=False)) == found
    ig = explain(lm, TEXT, "ig", "e", keep_first=True)
    assert ig["scores"][0] == 0.0 and any("completeness" in n for n in ig["notes"])
    with pytest.raises(ValueError, match="method="):
        explain(lm, TEXT, "saliency")
    with pytest.raises(ValueError, match="empty"):
        explain(lm, "  ", "lime")


# --- bad input -----------------------------------------------------------------------------------
def test_bad_input_is_a_clear_error(lm):
    plain = gf.LanguageModel(tiny_model(vocab_size=len(CHARS)), CharTokenizer.from_text(CHARS))
    with pytest.raises(ValueError, match="no bos or eos token"):
        lime_weights(plain, TEXT, "e")  # removing every token would leave nothing to run
    assert len(lime_weights(plain, TEXT, "e", samples=8, keep=[0]).scores) == len(TEXT)
    with pytest.raises(ValueError, match="replacement="):
        shap_values(lm, TEXT, "e", replacement="blank")
    with pytest.raises(ValueError, match="keep="):
        lime_weights(lm, TEXT, "e", keep=[9])
    with pytest.raises(ValueError, match="nothing to perturb"):
        shap_values(lm, "ab", "e", keep=[0, 1])
    with pytest.raises(ValueError, match="samples=1"):
        lime_weights(lm, TEXT, "e", samples=1)
    with pytest.raises(ValueError, match="algorithm="):
        shap_values(lm, TEXT, "e", algorithm="exact")
    with pytest.raises(ValueError, match="is 2 tokens"):
        lime_weights(lm, TEXT, "ab")
    with pytest.raises(ValueError, match="sentence encoder"):
        sentence_similarity(lm, "abc")
    with pytest.raises(ValueError, match="method="):
        explain_tokens(lm, TEXT, "attention")
    with pytest.raises(ValueError, match="class names"):
        lime_weights(CLASSIFIER, REVIEW, "neutral")
    broken = TextClassifier(lambda texts: np.zeros(len(texts)))
    with pytest.raises(ValueError, match="n x classes"):
        shap_values(broken, REVIEW, 0)
