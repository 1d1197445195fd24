"""The genre of a Shakespeare passage: fine-tuned MiniLM, a small encoder from scratch, and
TF-IDF + logistic regression, scored on the same validation passages in one run.

    python -m benchmarks.genre_classifier                  # trains both presets (~10 min on 2 cores)
    python -m benchmarks.genre_classifier --reuse          # reads runs/genre-* if they are complete

Both presets must describe the same task (passages, split); the baseline is fitted on the
training passages of that split and scored on its validation passages, the ones the
trainer evaluates on. Prints accuracy, macro-F1, ECE, the confusion matrices and how long
each model took to train (the trainer's ``fit``, evaluations included; preparation, i.e.
reading and tokenizing the passages and loading MiniLM, is timed apart).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from glassformer.commands.evaluate import confusion_table
from glassformer.train import checkpoint
from glassformer.train.baseline import tfidf_baseline
from glassformer.train.classification import predict, report
from glassformer.train.genres import GENRES, shakespeare_genres
from glassformer.train.runs import prepare
from glassformer.train.settings import load_preset

PRESETS = ("genre-minilm", "genre-scratch")


def train_or_read(preset: str, out: Path, reuse: bool, data_dir: str | None) -> dict:
    """Train ``preset`` into ``out`` (or read it there with ``reuse``); score it on its validation set."""
    settings = load_preset(preset)
    start = time.perf_counter()
    prepared = prepare(settings, data_dir, log=lambda _: None)
    prepare_s = time.perf_counter() - start
    done = reuse and checkpoint.checkpoint_step(out) == settings.train.steps
    fit_s = None
    if done:
        net, _ = checkpoint.load_model(out)
    else:
        if out.exists():
            from glassformer.atomic import delete_owned_directory
            from glassformer.formats.run_directory import RUN_FILES, TENSORBOARD

            delete_owned_directory(out, RUN_FILES, owned_folders={TENSORBOARD})
        trainer = prepared.trainer(
            settings,
            out,
            sample=prepared.sample,
            extra_eval=prepared.extra_eval,
            log=lambda line: print(f"  [{preset}] {line}", flush=True),
        )
        start = time.perf_counter()
        trainer.fit()
        fit_s = time.perf_counter() - start
        net = trainer.net
    logits, labels = predict(net, prepared.val_batches, settings.train.dtype == "bfloat16")
    figures = report(logits, labels)
    figures.update(prepare_s=prepare_s, fit_s=fit_s, parameters=net.num_parameters(), labels=labels)
    figures["steps"] = settings.train.steps
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", default="runs", help="where the two runs go (runs/genre-minilm, ...)")
    parser.add_argument("--reuse", action="store_true", help="read complete runs instead of training")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    tasks = {preset: load_preset(preset).data.task for preset in PRESETS}
    if len({repr(sorted(t.items())) for t in tasks.values()}) != 1:
        raise SystemExit(f"the presets describe different tasks, so their figures would not compare: {tasks}")
    split = shakespeare_genres(args.data_dir, **tasks[PRESETS[0]])
    print(f"threads: {torch.get_num_threads()}; validation plays: {', '.join(split.val_plays)}")
    print(f"passages: {len(split.train):,} training, {len(split.val):,} validation")

    results = {}
    for preset in PRESETS:
        print(f"{preset} ...", flush=True)
        results[preset] = train_or_read(preset, Path(args.runs) / preset, args.reuse, args.data_dir)

    start = time.perf_counter()
    baseline = tfidf_baseline([p.text for p in split.train], [p.label for p in split.train])
    fit_s = time.perf_counter() - start
    probabilities = torch.tensor(baseline.predict_proba([p.text for p in split.val]))
    labels = torch.tensor([p.label for p in split.val])
    results["tf-idf + logistic regression"] = {
        **report(torch.log(probabilities.clamp(min=1e-12)), labels),
        "fit_s": fit_s, "prepare_s": 0.0, "labels": labels, "steps": None,
        "parameters": baseline[-1].coef_.size + baseline[-1].intercept_.size,
    }  # fmt: skip
    for name, figures in results.items():
        if not torch.equal(figures["labels"], labels):
            raise SystemExit(f"{name} was scored on other validation passages than the baseline")

    print(f"\n{'model':<30} {'accuracy':>9} {'macro-F1':>9} {'ECE':>7} {'train s':>8} {'parameters':>11}")
    for name, f in results.items():
        trained = "read" if f["fit_s"] is None else f"{f['fit_s']:.0f}"
        print(
            f"{name:<30} {f['accuracy']:>9.3f} {f['macro_f1']:>9.3f} {f['ece']:>7.3f} {trained:>8} "
            f"{f['parameters']:>11,}"
        )
    print(f"(chance: accuracy {1 / len(GENRES):.3f}; the same {len(labels)} validation passages for all)")
    for name, f in results.items():
        print(f"\n{name}\n{confusion_table(f['confusion_matrix'], GENRES)}")


if __name__ == "__main__":
    main()
