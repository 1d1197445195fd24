"""A mixture of experts against the dense model of equal active parameters, on Shakespeare.

``moe-shakespeare`` is ``shakespeare-char`` with each FFN replaced by 8 experts of half the
width, 2 per token: a token passes through as many FFN parameters as in the dense model,
while the model holds 4x as many. Both train here in float32 on the same data, in one
run, and we print:

* validation loss at **equal steps** (both ``--steps``);
* validation loss at **equal wall time**: the dense model trained again for as many steps
  as fit in the time the mixture took (its schedule set to those steps);
* tokens/s of each, total and active parameters, and the CPU.

    python -m benchmarks.moe_vs_dense [--steps 600]
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch

from benchmarks.common import cpu_name
from glassformer.models.size import active_parameters
from glassformer.train.runs import prepare
from glassformer.train.settings import apply_overrides, load_preset


def train(preset: str, steps: int, data_dir: str | None) -> dict:
    """Train ``preset`` for ``steps`` in float32; its final validation loss, time and sizes."""
    warmup = min(100, steps // 10)
    overrides = ["train.tensorboard=false", 'train.dtype="float32"', f"train.steps={steps}"]
    overrides += [f"train.warmup_steps={warmup}", f"train.eval_interval={steps}", "train.sample_tokens=1"]
    run = apply_overrides(load_preset(preset), overrides)
    prepared = prepare(run, data_dir, log=lambda _: None)
    with tempfile.TemporaryDirectory() as out:
        trainer = prepared.trainer(run, out, log=lambda _: None)
        start = time.perf_counter()
        last = trainer.fit()
        seconds = time.perf_counter() - start
    config = trainer.net.config
    return {
        "preset": preset,
        "steps": steps,
        "val_loss": last["val_loss"],
        "seconds": seconds,
        "tokens_per_s": steps * run.train.batch_size * run.train.context / seconds,
        "total": sum(p.numel() for p in trainer.net.parameters()),
        "active": active_parameters(config),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=600, help="training steps of each model (preset: 2,000)")
    parser.add_argument("--data-dir", default=None)
    args = parser.parse_args()
    torch.set_flush_denormal(True)
    print(f"CPU: {cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}")
    dense = train("shakespeare-char", args.steps, args.data_dir)
    moe = train("moe-shakespeare", args.steps, args.data_dir)
    equal_time_steps = max(1, round(args.steps * moe["seconds"] / dense["seconds"]))
    dense_timed = train("shakespeare-char", equal_time_steps, args.data_dir)
    print(
        f"\n{'model':<34}{'steps':>7}{'val loss':>10}{'seconds':>9}{'tok/s':>9}{'params':>11}{'active':>11}"
    )
    rows = [("dense (shakespeare-char)", dense), ("MoE 8 experts, top-2", moe)]
    rows.append(("dense, the MoE's wall time", dense_timed))
    for label, r in rows:
        print(
            f"{label:<34}{r['steps']:>7}{r['val_loss']:>10.4f}{r['seconds']:>9.1f}"
            f"{r['tokens_per_s']:>9,.0f}{r['total']:>11,}{r['active']:>11,}"
        )
    print(
        f"\nequal steps: MoE - dense = {moe['val_loss'] - dense['val_loss']:+.4f} val loss; "
        f"equal time: MoE - dense = {moe['val_loss'] - dense_timed['val_loss']:+.4f}; "
        f"the MoE's tokens/s are {moe['tokens_per_s'] / dense['tokens_per_s']:.2f}x the dense model's"
    )


if __name__ == "__main__":
    main()
