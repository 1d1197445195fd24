"""What a token explanation explains: the score F, one number per input.

* (a) a language model's **next-token probability** p(token | text), read where the model
  predicts (a decoder's last position, an encoder's ``[MASK]``): `next_token_probability`;
* (b) a sentence encoder's **cosine similarity** between the text and a second sentence,
  cos(mean_t h_t(text), e(other)) with the mean-pooled embeddings of ``lm.embed``:
  `sentence_similarity`;
* (c) a classifier's **label probability**: of a model with a classification head
  (``config.n_classes``; `label_probability`), or of any ``predict_proba(texts) -> n x
  classes`` (scikit-learn's convention), seen only from outside: `TextClassifier`.

The scores of a model are `Target`s (`lm_target` picks one from what the user passes), so
the gradient methods of `glassformer.inspect.attribution` (integrated gradients, gradient x
input) and occlusion take them as they are. LIME and SHAP see F as a function of which
tokens are present: `glassformer.inspect.masked_score`.

>>> import glassformer as gf
>>> from glassformer.tokenizers.char import CharTokenizer
>>> _ = torch.manual_seed(0)
>>> lm = gf.LanguageModel(gf.build(gf.ModelConfig(vocab_size=9, d_model=16, n_layers=1, n_heads=2)),
...                       CharTokenizer.from_text("abcdefgh "))
>>> ids = lm.ids("abc d")
>>> F = lm_target(lm, "e", ids)
>>> F.label
"probability of 'e' (id 5) at the last position"
>>> logits = lm.logits(ids)  # 1 t v
>>> bool(abs(F(logits, ids)[0] - logits[0, -1].softmax(-1)[5]) < 1e-6)
True
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from glassformer.inspect.targets import Target, TargetSpec, make_target
from glassformer.models import EncoderModel
from glassformer.nn.trace import evaluating

if TYPE_CHECKING:  # annotations only: the facade sits above the analyses
    from glassformer.lm import LanguageModel


# --- scores of a model we can differentiate: (a), (b), and (c) with a classification head ------


def next_token_probability(
    lm: LanguageModel, token: str | int | None, ids: torch.Tensor | None = None
) -> Target:
    """F = p(token | text) = softmax(logits)[token] where the model predicts: a decoder's last
    position, an encoder's ``[MASK]``. ``None``: the model's own top prediction for ``ids``."""
    logit = make_target(lm, token, ids)  # checks the token, the model and the [MASK]

    def probability(output: torch.Tensor, ids: torch.Tensor, at: torch.Tensor | None = None) -> torch.Tensor:
        # The logit target reads one entry of the row it is given: give it probabilities.
        return logit(output.float().softmax(-1), ids, at)  # b

    return Target(logit.label.replace("logit of", "probability of", 1), probability)


def sentence_similarity(lm: LanguageModel, other: str) -> Target:
    """F = cos(mean_t h_t, e_other): the cosine similarity of the input's mean-pooled hidden
    states (what ``lm.embed`` returns, before normalizing) and the embedding of ``other``."""
    config = lm.config
    if not config.sentence_encoder:
        kind = "a masked-LM encoder" if config.masked_lm else f"of family {config.family!r}"
        raise ValueError(
            "sentence similarity needs a sentence encoder (an encoder without a masked-LM head, "
            f"e.g. minilm-l6); this model is {kind}"
        )
    if not isinstance(other, str) or not other.strip():
        raise ValueError(
            "sentence similarity compares the text with a second sentence: pass it as the target"
        )
    reference = lm.embed(other, normalize=False)[0]  # d

    def cosine(hidden: torch.Tensor, ids: torch.Tensor, at: torch.Tensor | None = None) -> torch.Tensor:
        pooled = lm.net.pool(hidden, None, "mean")  # b d: no padding inside a row
        return torch.nn.functional.cosine_similarity(pooled.float(), reference.float()[None], dim=-1)  # b

    return Target(f"cosine similarity of the mean-pooled embedding to {other!r}", cosine)


def label_probability(label: int, name: str | None = None) -> Target:
    """F = softmax(logits)[label] for a model whose output is class logits b c (a sequence
    classifier run through ``lm.inputs``): pass it as the ``target`` of any method."""

    def probability(output: torch.Tensor, ids: torch.Tensor, at: torch.Tensor | None = None) -> torch.Tensor:
        if output.dim() != 2:
            raise ValueError(
                f"label_probability reads class logits b c; this model returns {output.dim()}-d output"
            )
        return output.float().softmax(-1)[:, label]  # b

    return Target(f"probability of the label {name or label!r}", probability)


def lm_target(lm: LanguageModel, target: TargetSpec, ids: torch.Tensor) -> Target:
    """The score explained for a model: a `Target` or a function as given; else the probability
    of the token ``target`` (None: the top prediction); for a sentence encoder the similarity
    to the sentence ``target``; for a classifier (``config.n_classes``) the probability of the
    label ``target`` (a class name or index; None: the top class)."""
    if isinstance(target, Target):
        return target
    if callable(target):
        return make_target(lm, target, ids)
    if is_classifier(lm):
        return _class_target(lm, target, ids)
    if isinstance(lm.net, EncoderModel) and lm.net.mlm_head is None:
        return sentence_similarity(lm, target)  # type: ignore[arg-type]
    return next_token_probability(lm, target, ids)  # type: ignore[arg-type]


def is_classifier(lm: LanguageModel) -> bool:
    """Whether ``lm.inputs.forward`` returns class logits b c (a classification head)."""
    return bool(getattr(lm.config, "n_classes", 0))


def _class_target(lm: LanguageModel, label: Any, ids: torch.Tensor) -> Target:
    names = list(getattr(lm.config, "class_names", ()))
    n = lm.config.n_classes
    if label is None:
        with torch.no_grad(), evaluating(lm.net):
            label = int(lm.inputs.forward(ids)[0].argmax())
    elif isinstance(label, str) and label in names:
        label = names.index(label)
    elif isinstance(label, str) and label.isdigit():
        label = int(label)
    if isinstance(label, str) or not isinstance(label, int) or not 0 <= label < n:
        known = f"the class names {names} or " if names else ""
        raise ValueError(
            f"label {label!r} is not a class of this classifier: pass {known}an index 0..{n - 1}"
        )
    return label_probability(label, names[label] if names else None)


# --- (c): a classifier we can only call --------------------------------------------------------


class TextClassifier:
    """A classifier as the explanations see it: ``predict_proba(texts) -> n x classes`` (any
    callable: a scikit-learn pipeline's ``predict_proba``, a fine-tuned model's) and the
    tokenizer whose tokens are explained (anything with ``encode`` / ``decode`` /
    ``id_to_token``; ``None``: words, each with the whitespace before it).

    >>> clf = TextClassifier(lambda texts: np.array([[0.2, 0.8]] * len(texts)), class_names=["neg", "pos"])
    >>> clf.words("a fine  day")
    ['a', ' fine', '  day']
    >>> clf.label("pos"), clf.label(0)
    (1, 0)
    """

    def __init__(
        self,
        predict_proba: Callable[[list[str]], Any],
        tokenizer: Any | None = None,
        class_names: Sequence[str] | None = None,
    ) -> None:
        if not callable(predict_proba):
            raise TypeError("predict_proba must be a function texts -> n x classes probabilities")
        self.predict_proba, self.tokenizer = predict_proba, tokenizer
        self.class_names = list(class_names) if class_names is not None else None

    @staticmethod
    def words(text: str) -> list[str]:
        return re.findall(r"\s*\S+", text)

    def tokens(self, text: str) -> tuple[list[int], list[str]]:
        """The ids and labels of the text's tokens (words: their positions and the words)."""
        if self.tokenizer is None:
            words = self.words(text)
            return list(range(len(words))), words
        ids = list(self.tokenizer.encode(text))
        return ids, [self.tokenizer.id_to_token(i) for i in ids]

    def texts(self, rows: list[list[int]], text: str) -> list[str]:
        """Each row of ids (or word positions) back to a text for ``predict_proba``."""
        if self.tokenizer is None:
            words = self.words(text)
            return ["".join(words[i] for i in row).strip() for row in rows]
        return [self.tokenizer.decode(row) for row in rows]

    def probabilities(self, texts: list[str]) -> np.ndarray:
        out = np.asarray(self.predict_proba(texts), dtype=np.float64)
        if out.ndim != 2 or len(out) != len(texts):
            raise ValueError(
                f"predict_proba returned shape {out.shape} for {len(texts)} texts; expected n x classes"
            )
        return out

    def label(self, label: str | int | None, text: str | None = None) -> int:
        """The column of ``label`` (a class name or index; None: the top class for ``text``)."""
        if label is None:
            return int(self.probabilities([text or ""])[0].argmax())
        if isinstance(label, str) and not label.lstrip("-").isdigit():
            if self.class_names is None or label not in self.class_names:
                raise ValueError(f"label {label!r} is not one of the class names {self.class_names}")
            return self.class_names.index(label)
        index = int(label)
        n = len(self.class_names) if self.class_names is not None else None
        if index < 0 or (n is not None and index >= n):
            raise ValueError(f"label {index} is out of range for {n} classes")
        return index

    def label_name(self, index: int) -> str:
        return self.class_names[index] if self.class_names is not None else str(index)
