"""f(z): a score as a function of which of the model's own tokens are present.

LIME, SHAP and occlusion treat the model as a black box over its tokens:

    f(z) = F(the input with token i removed, or replaced, wherever z_i = 0),   z in {0, 1}^m

over the m free positions (F: `glassformer.inspect.explanations`). `MaskedScore` is that f.
It never re-tokenizes: a perturbed input is the model's own ids with some dropped (or
replaced), so there is one score per token the model saw. Tokens that are not text
(``[CLS]``, ``[SEP]``, ``[MASK]``, chat markers: the tokenizer's special tokens) and the
positions in ``keep`` are never perturbed; their scores are 0.

>>> import glassformer as gf
>>> from glassformer.tokenizers.char import CharTokenizer
>>> _ = torch.manual_seed(0)
>>> lm = gf.LanguageModel(gf.build(gf.ModelConfig(vocab_size=9, d_model=16, n_layers=1, n_heads=2)),
...                       CharTokenizer.from_text("abcdefgh "))
>>> f = masked_score(lm, "abc d", "e", keep=[0])  # token 0 always there
>>> f.what, f.free
("probability of 'e' (id 5) at the last position", [1, 2, 3, 4])
>>> lm.ids("abc d").tolist(), f.rows(np.array([[0, 1, 1, 0]]))  # tokens 1 and 4 removed
([[1, 2, 3, 0, 4]], [[1, 3, 0]])
>>> f(np.array([[1, 1, 1, 1], [0, 0, 0, 0]])).shape  # f(1), f(0): the text, its first token alone
(2,)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import torch

from glassformer.inspect.explanations import TextClassifier, is_classifier, lm_target
from glassformer.inspect.targets import TargetSpec, special_id
from glassformer.models import EncoderModel
from glassformer.nn.trace import evaluating

if TYPE_CHECKING:  # annotations only: the facade sits above the analyses
    from glassformer.lm import LanguageModel

REPLACEMENTS = ("remove", "pad", "unk", "mask")
TOKENS_PER_PASS = 512  # inputs per forward pass: about this many tokens at a time


class MaskedScore:
    """f(z) for masks z (n x m, over the m free positions): the score of the input with each
    free token i removed (``replacement=None``) or replaced by the id ``replacement`` where
    z_i = 0. Fixed positions are always present."""

    def __init__(
        self,
        tokens: list[str],
        ids: list[int],
        what: str,
        evaluate: Callable[[list[list[int]], list[int] | None], np.ndarray],
        *,
        fixed: Sequence[int] = (),
        replacement: int | None = None,
        anchor: int | None = None,
    ) -> None:
        self.tokens, self.ids, self.what = tokens, ids, what
        self.fixed = sorted(set(fixed))
        self.free = [i for i in range(len(ids)) if i not in self.fixed]
        if not self.free:
            raise ValueError(f"nothing to perturb: every one of the {len(ids)} tokens is held fixed")
        self.replacement, self.anchor = replacement, anchor
        self._evaluate = evaluate  # rows of ids, where each reads its score (or None) -> n

    def rows(self, z: np.ndarray) -> list[list[int]]:
        """The perturbed inputs: one list of ids per mask (rows may differ in length)."""
        return [self._row(present)[0] for present in self._present(z)]

    def __call__(self, z: np.ndarray) -> np.ndarray:
        rows, anchors = zip(*(self._row(p) for p in self._present(z)), strict=True)
        return self._evaluate(list(rows), None if self.anchor is None else list(anchors))

    def full(self) -> float:
        """f(1): the score of the whole input."""
        return float(self(np.ones((1, len(self.free))))[0])

    def spread(self, values: Sequence[float]) -> torch.Tensor:
        """Per-free-position values -> one score per token (0 at the fixed positions): t."""
        scores = torch.zeros(len(self.ids))
        scores[self.free] = torch.as_tensor(np.asarray(values, dtype=np.float64), dtype=torch.float32)
        return scores

    def _present(self, z: np.ndarray) -> np.ndarray:
        z = np.asarray(z)
        if z.ndim != 2 or z.shape[1] != len(self.free):
            raise ValueError(f"masks must be n x {len(self.free)} (one column per free token), got {z.shape}")
        present = np.ones((len(z), len(self.ids)), dtype=bool)
        present[:, self.free] = z > 0.5
        return present

    def _row(self, present: np.ndarray) -> tuple[list[int], int]:
        """The ids of one perturbed input, and where the anchor token now stands."""
        if self.replacement is not None:
            row = [t if keep else self.replacement for t, keep in zip(self.ids, present, strict=True)]
            return row, self.anchor or 0
        anchor = int(present[: self.anchor].sum()) if self.anchor is not None else 0
        return [t for t, keep in zip(self.ids, present, strict=True) if keep], anchor


def masked_score(
    model: LanguageModel | TextClassifier,
    text: str,
    target: TargetSpec = None,
    *,
    replacement: str | int = "remove",
    keep: Sequence[int] = (),
) -> MaskedScore:
    """f(z) for ``model`` on ``text``: the `Target` of `lm_target` for a language model, the
    probability of the label ``target`` for a `TextClassifier`. ``replacement``: ``remove``
    (drop the token; later tokens move one position left), ``pad``, ``unk``, ``mask`` (the
    tokenizer's token) or a token id. ``keep``: positions never perturbed."""
    if isinstance(model, TextClassifier):
        return _classifier_score(model, text, target, replacement, keep)
    return _model_score(model, text, target, replacement, keep)


def _check_keep(keep: Sequence[int], t: int) -> list[int]:
    kept = list(keep)
    if any(not isinstance(i, int) or not 0 <= i < t for i in kept):
        raise ValueError(f"keep={kept} must hold positions 0..{t - 1} of the text")
    return kept


def _model_score(lm, text, target, replacement, keep) -> MaskedScore:
    inputs = lm.inputs
    ids = inputs.single(text)  # 1 t
    tgt = lm_target(lm, target, ids)
    row = ids[0].tolist()
    special = set(lm.tokenizer.special_tokens.values()) if lm.tokenizer is not None else set()
    fixed = _check_keep(keep, len(row)) + [i for i, token in enumerate(row) if token in special]
    if replacement == "remove":
        new = None
    elif isinstance(replacement, str):
        if replacement not in REPLACEMENTS:
            raise ValueError(f"replacement={replacement!r}; allowed: {', '.join(REPLACEMENTS)} or a token id")
        new = special_id(lm, replacement)
    else:
        new = inputs.token_id(replacement, "replacement")
    masked_lm = isinstance(lm.net, EncoderModel) and lm.net.mlm_head is not None and not is_classifier(lm)
    # An encoder's score is read at the text's [MASK]: follow that token as others are removed.
    anchor = row.index(special_id(lm, "mask")) if masked_lm and not callable(target) else None
    empty = _empty_row(lm) if new is None and not fixed else None

    def evaluate(rows: list[list[int]], anchors: list[int] | None) -> np.ndarray:
        scores = np.empty(len(rows))
        by_length: dict[int, list[int]] = {}
        for n, r in enumerate(rows):
            by_length.setdefault(len(r), []).append(n)
        with torch.no_grad(), evaluating(lm.net):
            for length, members in by_length.items():
                size = max(1, TOKENS_PER_PASS // max(length, 1))
                for start in range(0, len(members), size):
                    chunk = members[start : start + size]
                    batch = torch.tensor(
                        [rows[n] if length else empty for n in chunk], dtype=torch.long, device=ids.device
                    )  # b t
                    at = (
                        None
                        if anchors is None
                        else torch.tensor([anchors[n] for n in chunk], device=ids.device)
                    )
                    output = inputs.forward(batch)  # an encoder-decoder's: its start token
                    scores[chunk] = tgt(output, batch, at).float().cpu().numpy()
        return scores

    if new is None and not fixed and empty is None:
        raise ValueError(
            "removing every token leaves an empty input, and this model has no bos or eos token "
            "to stand for it; hold a token fixed (keep=[0]) or replace tokens instead of removing "
            "them (replacement='pad', 'unk' or a token id)"
        )
    return MaskedScore(
        inputs.labels(ids), row, tgt.label, evaluate, fixed=fixed, replacement=new, anchor=anchor
    )


def _empty_row(lm) -> list[int] | None:
    """What stands for a text with every token removed: the bos token alone (else eos,
    GPT-2's <|endoftext|>), the start of a text the model has seen in training."""
    for token in (lm.config.bos_token_id, lm.config.eos_token_id):
        if token is not None:
            return [token]
    return None


def _classifier_score(clf: TextClassifier, text, target, replacement, keep) -> MaskedScore:
    if replacement != "remove":
        raise ValueError("a TextClassifier's tokens are removed from its text (replacement='remove')")
    ids, labels = clf.tokens(text)
    if not ids:
        raise ValueError("the text has no tokens to explain")
    column = clf.label(target, text)

    def evaluate(rows: list[list[int]], anchors: list[int] | None) -> np.ndarray:
        return clf.probabilities(clf.texts(rows, text))[:, column]

    what = f"probability of the label {clf.label_name(column)!r}"
    return MaskedScore(labels, ids, what, evaluate, fixed=_check_keep(keep, len(ids)))


def describe(f: MaskedScore) -> str:
    """How the tokens were perturbed, for a result's notes."""
    how = "removed" if f.replacement is None else f"replaced by token id {f.replacement}"
    fixed = f", positions {f.fixed} held fixed (score 0)" if f.fixed else ""
    return f"absent tokens {how}{fixed}"
