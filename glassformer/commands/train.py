"""``glassformer train --preset NAME [--out runs/NAME] [--set TABLE.FIELD=VALUE] [--resume]``."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import TYPE_CHECKING

from glassformer.commands.runs import RUNS_ROOT

if TYPE_CHECKING:
    from glassformer.train.settings import RunConfig


def register(commands: argparse._SubParsersAction) -> None:
    from glassformer.train.settings import preset_names

    parser = commands.add_parser(
        "train",
        help="train a model from a preset",
        description="Train a model described by a preset (TOML shipped with Glassformer), with a progress "
        "bar, periodic evaluation, samples, metrics.jsonl, TensorBoard logs and resumable checkpoints. "
        "Ctrl-C saves a checkpoint; --resume continues exactly where it stopped. "
        "On several processes, launch it with torchrun: `torchrun --standalone --nproc-per-node 2 -m "
        "glassformer train --preset shakespeare-char`; train.batch_size stays the global batch (each "
        "process takes its rows of it: the same loss curve on 1, 2 or N processes), rank 0 alone writes "
        "the logs, checkpoints resume on any number of processes; --set train.parallel=fsdp shards the "
        "model (FSDP2) instead of replicating it (DDP). Several machines: torchrun's --nnodes and "
        "--rdzv-endpoint; restarts after a failure: torchrun's --max-restarts N with --resume.",
    )
    parser.add_argument("--preset", required=True, help=f"one of: {', '.join(preset_names())}")
    parser.add_argument("--out", default=None, help="run directory (default: runs/PRESET)")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="TABLE.FIELD=VALUE",
        help="override a preset field, e.g. --set train.steps=500 --set model.n_layers=6",
    )
    start = parser.add_mutually_exclusive_group()
    start.add_argument(
        "--resume", action="store_true", help="continue the run in --out from its last checkpoint"
    )
    start.add_argument(
        "--overwrite",
        action="store_true",
        help="delete the run already in --out and start anew (refused if --out holds anything but a "
        "run's own files, or while another trainer writes there)",
    )
    parser.add_argument(
        "--data-dir", default=None, help="corpus cache directory (default: ~/.cache/glassformer)"
    )
    parser.add_argument(
        "--no-film",
        action="store_true",
        help="do not record film.jsonl (at each evaluation: a probe's attention, head roles, logit lens, "
        "embedding projection; what the workshop's training lab scrubs through)",
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from glassformer.train import distributed
    from glassformer.train.run_lock import acquire

    out = Path(args.out) if args.out else RUNS_ROOT / args.preset
    if not distributed.launched():
        with acquire(out):  # one trainer per run directory: taken before --overwrite deletes anything
            return _train(args, out)
    # torchrun's ranks: one job, one trainer. Rank 0 holds the lock (its pid is the one the lab
    # and `glassformer runs` see); the others wait for it, and stop with its error if it fails.
    with distributed.process_group(_timeout(args)):
        locks = []
        distributed.on_main(lambda: locks.append(acquire(out)))
        try:
            return _train(args, out)
        finally:
            for lock in locks:
                lock.release()


def _timeout(args: argparse.Namespace) -> float:
    """train.distributed_timeout_s of the run about to start (read without touching ``out``)."""
    from glassformer.train.checkpoint import read_train_config
    from glassformer.train.settings import RunConfig, apply_overrides, load_preset

    out = Path(args.out) if args.out else RUNS_ROOT / args.preset
    settings = RunConfig.from_dict(read_train_config(out)) if args.resume else load_preset(args.preset)
    return apply_overrides(settings, args.overrides).train.distributed_timeout_s


def _train(args: argparse.Namespace, out: Path) -> int:
    """The run, while this process holds ``out``'s lock."""
    from glassformer.train import distributed
    from glassformer.train.runs import prepare

    settings = distributed.on_main(lambda: _settings(args, out))  # rank 0 checks --out, tells the rest
    say = print if distributed.is_main() else lambda *_: None
    if settings.train.threads:
        import torch

        torch.set_num_threads(settings.train.threads)
    prepared = prepare(settings, args.data_dir)
    trainer = prepared.trainer(
        settings,
        out,
        sample=prepared.sample if settings.train.sample_tokens else None,
        extra_eval=prepared.extra_eval,
        on_eval=None if args.no_film else _film(out, prepared),
    )
    n_parameters = prepared.net.num_parameters()
    world = distributed.world_size()
    processes = f" on {world} processes ({settings.train.parallel})" if world > 1 else ""
    say(f"{settings.name}: {n_parameters:,} parameters, {settings.train.steps:,} steps{processes} -> {out}")
    try:
        last = trainer.fit(resume=args.resume)
    except KeyboardInterrupt:
        return 130
    if prepared.val_chars_per_token:
        bits = last["val_loss"] / prepared.val_chars_per_token / math.log(2)
        say(f"validation: {bits:.3f} bits per character")
    if prepared.net.config.n_classes:  # a classifier labels text or images; it does not continue it
        say(f"done: {out} (glassformer eval {out}: accuracy, macro-F1, confusion matrix)")
    else:
        say(f'done: {out} (glassformer generate {out} "prompt")')
    return 0


def _film(out: Path, prepared):
    """The film recorder, its probe the first row of the first validation batch (no padding);
    None for an image run: the film's probe is a text (its tokens, attention, logit lens)."""
    from glassformer.inspect.film import FilmRecorder

    batch = prepared.val_batches[0]
    if "input_ids" not in batch:
        print("no film.jsonl: the film records a text probe, and this run reads images")
        return None
    ids = batch["input_ids"][0]
    mask = batch.get("attention_mask")
    if mask is not None:
        ids = ids[mask[0].bool()]
    return FilmRecorder(out, ids, prepared.tokenizer)


def _settings(args: argparse.Namespace, out: Path) -> RunConfig:
    """The preset with --set applied; on --resume, the run's saved settings instead. A new
    run never writes into a directory that already holds files: --overwrite deletes an old
    run first, and only a directory holding nothing but a run's own files (its lock, which
    this process holds, stays), and only once the settings are known to train: a schedule the
    trainer would refuse is refused before anything is deleted."""
    from glassformer.formats.run_directory import LOCK
    from glassformer.train.schedules import check_schedule
    from glassformer.train.settings import RunConfig, apply_overrides, load_preset

    if args.resume:
        from glassformer.train.checkpoint import read_train_config

        saved = read_train_config(out)
        return apply_overrides(
            RunConfig.from_dict(saved, name=saved.get("name", args.preset)), args.overrides
        )
    settings = apply_overrides(load_preset(args.preset), args.overrides)
    t = settings.train  # the trainer's own check (`make_scheduler`), before --overwrite deletes
    check_schedule(t.schedule, t.warmup_steps, t.steps, t.min_lr_ratio)
    if args.overwrite:
        from glassformer.atomic import delete_owned_directory
        from glassformer.formats.run_directory import ADAPTER, DISTRIBUTED, RUN_FILES, TENSORBOARD

        owned = {TENSORBOARD, DISTRIBUTED, ADAPTER}  # DISTRIBUTED: several processes' DCP checkpoints
        delete_owned_directory(out, RUN_FILES, owned_folders=owned, keep={LOCK})  # ours: held
    if out.exists() and any(path.name != LOCK for path in out.iterdir()):
        raise ValueError(
            f"{out} already holds a run: pass --resume to continue it, --overwrite to start it anew, "
            "or --out for a new directory"
        )
    return settings
