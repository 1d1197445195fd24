"""``glassformer runs [--root runs]``: every run in a folder and its best validation loss."""

from __future__ import annotations

import argparse
from pathlib import Path

RUNS_ROOT = Path("runs")  # where `glassformer train` puts runs and `glassformer runs` looks


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "runs",
        help="list training runs with their best validation loss",
        description="List the run directories in a folder: the last step logged, the best validation "
        "loss and where each run is. Reads, never writes.",
    )
    parser.add_argument("--root", default=str(RUNS_ROOT), help="where runs live (default: runs)")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from glassformer.train.run_list import list_runs

    summaries = list_runs(args.root)
    if not summaries:
        print(f"no runs under {args.root}")
        return 0
    print(f"{'run':<32} {'step':>7} {'best val loss':>14}  path")
    for s in summaries:
        best = f"{s.best_val_loss:.4f}" if s.best_val_loss is not None else "-"
        print(f"{s.name:<32} {s.step if s.step is not None else '-':>7} {best:>14}  {s.path}")
    return 0
