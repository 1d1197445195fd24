"""A vision transformer against logistic regression on scikit-learn's 8 x 8 digits, one split.

    python -m benchmarks.vit_digits                  # trains the vit-digits preset (~1 min on 2 cores)
    python -m benchmarks.vit_digits --out runs/vit-digits-bench    # keep the run directory

The preset ``vit-digits`` is trained by the project's own trainer (`Trainer.fit`: its
evaluations and checkpoints included; the data's preparation is timed apart), then scored on
the held-out images. In the same run, on the same split (`glassformer.train.images.digits_split`
with the preset's ``data.task``: the same training images, the same held-out images, pixels in
[0, 1]), scikit-learn's ``LogisticRegression`` (multinomial, L2, C = 1, its defaults; ``max_iter``
raised so that it converges) is fitted on the 64 pixels of each training image. Prints both
accuracies, macro-F1 and ECE, the seconds each took to train, its parameters, and the CPU.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

from benchmarks.common import cpu_name
from glassformer.train.classification import predict, report
from glassformer.train.images import digits_task
from glassformer.train.runs import prepare
from glassformer.train.settings import load_preset

PRESET = "vit-digits"


def train_vit(out: Path) -> dict:
    """Train the preset into ``out``; its figures on the held-out images."""
    settings = load_preset(PRESET)
    start = time.perf_counter()
    prepared = prepare(settings, log=lambda _: None)
    prepare_s = time.perf_counter() - start
    trainer = prepared.trainer(
        settings,
        out,
        sample=prepared.sample,
        extra_eval=prepared.extra_eval,
        log=lambda line: print(f"  [{PRESET}] {line}", flush=True),
    )
    start = time.perf_counter()
    trainer.fit()
    fit_s = time.perf_counter() - start
    logits, labels = predict(trainer.net, prepared.val_batches, settings.train.dtype == "bfloat16")
    return {
        **report(logits, labels),
        "fit_s": fit_s,
        "prepare_s": prepare_s,
        "labels": labels,
        "parameters": trainer.net.num_parameters(),
    }


def logistic_regression(task: dict) -> dict:
    """Logistic regression on the same split's pixels, fitted and scored."""
    from sklearn.linear_model import LogisticRegression

    split = digits_task(**task)
    start = time.perf_counter()
    model = LogisticRegression(max_iter=5000).fit(split.train_images.flatten(1).numpy(), split.train_labels)
    fit_s = time.perf_counter() - start
    probabilities = torch.tensor(model.predict_proba(split.test_images.flatten(1).numpy()))
    logits = torch.log(probabilities.clamp(min=1e-12)).float()
    return {
        **report(logits, split.test_labels),
        "fit_s": fit_s,
        "prepare_s": 0.0,
        "labels": split.test_labels,
        "parameters": model.coef_.size + model.intercept_.size,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=None, help="the run directory (default: a temporary one)")
    args = parser.parse_args()
    task = load_preset(PRESET).data.task
    split = digits_task(**task)
    print(f"CPU: {cpu_name()}; torch threads: {torch.get_num_threads()}")
    print(f"images: {len(split.train_labels):,} training, {len(split.test_labels):,} held out ({task})")
    with tempfile.TemporaryDirectory(prefix="vit-digits-") as folder:
        out = Path(args.out) if args.out else Path(folder) / PRESET
        results = {f"ViT ({PRESET})": train_vit(out)}
    results["logistic regression (pixels)"] = logistic_regression(task)
    reference = results["logistic regression (pixels)"]["labels"]
    for name, figures in results.items():
        if not torch.equal(figures["labels"], reference):
            raise SystemExit(f"{name} was scored on other images than the baseline")

    print(f"\n{'model':<30} {'accuracy':>9} {'macro-F1':>9} {'ECE':>7} {'train s':>8} {'parameters':>11}")
    for name, f in results.items():
        print(
            f"{name:<30} {f['accuracy']:>9.4f} {f['macro_f1']:>9.4f} {f['ece']:>7.3f} {f['fit_s']:>8.1f} "
            f"{f['parameters']:>11,}"
        )
    print(f"(the same {len(reference)} held-out images for both; chance: accuracy 0.100)")


if __name__ == "__main__":
    main()
