"""``glassformer eval RUN``: recompute a run's validation figures."""

from __future__ import annotations

import argparse


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "eval",
        help="evaluate a run on its validation data",
        description="Recompute validation loss, perplexity, accuracy and calibration (and a classifier's "
        "macro-F1 and confusion matrix).",
    )
    parser.add_argument("run_dir", metavar="run", help="a run directory")
    parser.add_argument("--data-dir", default=None)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from glassformer.train import checkpoint
    from glassformer.train.runs import prepare
    from glassformer.train.settings import RunConfig
    from glassformer.train.trainer import Trainer

    saved = checkpoint.read_train_config(args.run_dir)
    settings = RunConfig.from_dict(saved, name=saved.get("name", "run"))
    prepared = prepare(settings, args.data_dir)
    net, tokenizer = checkpoint.load_model(args.run_dir)
    trainer = Trainer(
        settings,
        net,
        tokenizer,
        prepared.train_batches,
        prepared.val_batches,
        args.run_dir,
        extra_eval=prepared.extra_eval,
    )
    result = trainer.evaluate()
    print(
        f"step {checkpoint.checkpoint_step(args.run_dir)}: val_loss {result.loss:.4f}, perplexity "
        f"{result.perplexity:.3f}, accuracy {result.accuracy:.4f}, calibration error {result.ece:.4f}"
    )
    if prepared.extra_eval is not None:
        extra = prepared.extra_eval(net)
        matrix = extra.pop("confusion_matrix", None)
        print(", ".join(f"{k} {v}" for k, v in extra.items()))
        if matrix is not None:
            print(confusion_table(matrix, net.config.class_names))
    return 0


def confusion_table(matrix: list[list[int]], names: tuple[str, ...] = ()) -> str:
    """The confusion matrix as text: a row per true class, a column per predicted class."""
    names = names or tuple(str(k) for k in range(len(matrix)))
    width = max(len(n) for n in [*names, *(str(c) for row in matrix for c in row)]) + 2
    lines = ["confusion matrix (rows: true class, columns: predicted)"]
    lines.append(" " * width + "".join(n.rjust(width) for n in names))
    lines += [
        n.rjust(width) + "".join(str(c).rjust(width) for c in row)
        for n, row in zip(names, matrix, strict=True)
    ]
    return "\n".join(lines)
