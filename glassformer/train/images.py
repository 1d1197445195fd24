"""Image classification: scikit-learn's handwritten digits, split once, in batches of pixels.

The digits (``sklearn.datasets.load_digits``; the UCI "Optical Recognition of Handwritten
Digits" test set, shipped inside scikit-learn, so nothing is downloaded) are 1,797 images of
8 x 8 pixels, one channel, each pixel a count 0..16, in 10 nearly equal classes (174 to 183
images each). Pixels are scaled to [0, 1] (x / 16) and not otherwise normalized: what a
trained model is given by `glassformer.lm.LanguageModel.logits` must be scaled the same way.

The split is stratified (every digit in the same proportion on both sides) and fixed by
``split_seed``: ``test_fraction`` of the images are held out, and the trainer's evaluation,
`glassformer eval` and the logistic-regression baseline of ``benchmarks/vit_digits.py`` all
score the same held-out images.

Batches follow the trainer's schema (`glassformer.train.data`) with pixels in place of ids::

    pixel_values   b C H W  float   the images (C = 1, H = W = 8)
    labels         b        long    the digit of each image

Training batches draw images uniformly with replacement (the classes are balanced already);
the held-out batches hold every test image once, in order.

>>> split = digits_split(test_fraction=0.25, split_seed=0)
>>> tuple(split.train_images.shape), tuple(split.test_images.shape), float(split.train_images.max())
((1347, 1, 8, 8), (450, 1, 8, 8), 1.0)
>>> batch = next(ImageBatches(split.train_images, split.train_labels, batch_size=4, seed=0))
>>> tuple(batch["pixel_values"].shape), tuple(batch["labels"].shape)
((4, 1, 8, 8), (4,))
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from glassformer.config import ModelConfig
from glassformer.models import TransformerModel
from glassformer.nn.patches import NO_VOCABULARY
from glassformer.train.classification import predict
from glassformer.train.data import Batch, Batches

DIGITS_CORPUS = "digits"  # data.corpus of an image run (data.objective = "classify")
DIGITS = tuple("0123456789")  # the class names
DIGITS_IMAGE = {"image_size": 8, "n_channels": 1}  # what the data fixes in the model's config
PIXEL_MAX = 16.0  # the digits' pixels count 0..16 (4 x 4 blocks of a 32 x 32 bitmap)


@dataclass(frozen=True)
class ImageSplit:
    """Training and held-out images (n C H W float) with their labels (n long)."""

    train_images: torch.Tensor = field(repr=False)
    train_labels: torch.Tensor = field(repr=False)
    test_images: torch.Tensor = field(repr=False)
    test_labels: torch.Tensor = field(repr=False)


def digits_split(test_fraction: float = 0.25, split_seed: int = 0) -> ImageSplit:
    """The 8 x 8 digits, pixels scaled to [0, 1], split stratified by digit with ``split_seed``."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    if not isinstance(test_fraction, float) or not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be a number in (0, 1), such as 0.25; got {test_fraction!r}")
    if isinstance(split_seed, bool) or not isinstance(split_seed, int) or split_seed < 0:
        raise ValueError(f"split_seed must be a non-negative integer, got {split_seed!r}")
    digits = load_digits()
    images = digits.images.astype(np.float32)[:, None] / PIXEL_MAX  # n 1 8 8, in [0, 1]
    train_x, test_x, train_y, test_y = train_test_split(
        images, digits.target, test_size=test_fraction, random_state=split_seed, stratify=digits.target
    )
    tensors = [torch.from_numpy(a) for a in (train_x, train_y, test_x, test_y)]
    return ImageSplit(tensors[0], tensors[1].long(), tensors[2], tensors[3].long())


def digits_task(**params: Any) -> ImageSplit:
    """`digits_split` for a preset's ``data.task`` table (``test_fraction``, ``split_seed``)."""
    known = ("test_fraction", "split_seed")
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise ValueError(f"unknown digits task parameter(s) {', '.join(unknown)}; known: {', '.join(known)}")
    return digits_split(**params)


def digits_config(run: Any) -> ModelConfig:
    """The ModelConfig a digits run (a `RunConfig`) trains: its ``[model]`` fields, with what the
    data fixes: one 8 x 8 channel, ten classes, the patches and [CLS] as the sequence, no vocabulary."""
    fixed: dict[str, Any] = {
        **DIGITS_IMAGE,
        "mlm_head": False,
        "n_classes": len(DIGITS),
        "class_names": DIGITS,
    }
    patch = run.model.get("patch_size", ModelConfig.patch_size)
    if isinstance(patch, int) and patch > 0:  # else ModelConfig names the bad patch_size
        fixed["max_seq_len"] = (DIGITS_IMAGE["image_size"] // patch) ** 2 + 1  # n patches + [CLS]
    return run.model_config(NO_VOCABULARY, **fixed)


class ImageBatches(Batches):
    """Batches of (image, class) drawn uniformly with replacement: b C H W pixels, b labels."""

    def __init__(self, images: torch.Tensor, labels: torch.Tensor, batch_size: int, seed: int = 0):
        super().__init__(batch_size, seed)
        if images.dim() != 4 or len(images) == 0 or len(images) != len(labels):
            raise ValueError(
                f"need images n C H W and one label each: images {tuple(images.shape)}, {len(labels)} labels"
            )
        self.images, self.labels = images, labels

    def _config(self) -> dict[str, int]:
        return {"batch_size": self.batch_size, "n_examples": len(self.images)}

    def _make(self, rng: np.random.Generator) -> Batch:
        chosen = torch.from_numpy(rng.integers(0, len(self.images), size=self.batch_size))  # b
        return {"pixel_values": self.images[chosen], "labels": self.labels[chosen]}


def in_order(images: torch.Tensor, labels: torch.Tensor, batch_size: int) -> list[Batch]:
    """Every image once, in order, ``batch_size`` to a batch (the last may be smaller)."""
    return [
        {"pixel_values": images[i : i + batch_size], "labels": labels[i : i + batch_size]}
        for i in range(0, len(images), batch_size)
    ]


def sampler(
    batches: list[Batch], class_names: Sequence[str], shown: int = 3
) -> Callable[[TransformerModel], str]:
    """A line of predictions on ``shown`` held-out images (the first of each class in turn):
    ``true -> predicted p``, what the trainer prints at each evaluation."""
    labels = torch.cat([batch["labels"] for batch in batches])
    images = torch.cat([batch["pixel_values"] for batch in batches])
    picks = [int(torch.nonzero(labels == k)[0]) for k in range(len(class_names)) if bool((labels == k).any())]
    picks = picks[:shown]
    chosen = [{"pixel_values": images[picks], "labels": labels[picks]}]

    def sample(net: TransformerModel) -> str:
        logits, _ = predict(net, chosen)
        probs = torch.softmax(logits, dim=-1)  # shown c
        lines = []
        for i, p in zip(picks, probs, strict=True):
            k = int(p.argmax())
            lines.append(f"image {i}: {class_names[int(labels[i])]} -> {class_names[k]} {float(p[k]):.2f}")
        return " | ".join(lines)

    return sample
