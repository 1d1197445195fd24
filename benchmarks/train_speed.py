"""Training throughput: our trainer on the shakespeare-char preset vs a nanoGPT-equivalent loop.

Both train on the same Shakespeare character ids at nanoGPT's CPU sizes (4 layers,
4 heads, d_model 128, context 64, batch 12). Rounds alternate (ours, baseline, ours,
...) so machine noise hits both alike; we print median tokens/s and the ratio, and the
model FLOPs utilisation (MFU) against this machine's matmul peak measured in the same
run (fp32 and bf16, the best of a few GEMM shapes).

The preset has nanoGPT's architecture; ours runs side by side in fp32, in bf16 autocast and
in the preset's ``dtype = "auto"`` (bf16 only where this CPU runs it faster: measured once,
`glassformer.train.precision`), so the gain from bf16 and auto's choice can be judged on the
CPU named in the first line. Two more fp32 rows, as a CPU without bf16 trains: ``train.compile``
(torch.compile of the forward, and so the backward; its compile time is printed apart) and
AdamW's fused CPU kernel (one kernel for every parameter's update). The MFU column says how
far any of them could go: at the same FLOPs, x1.5 the baseline needs 1.5 times its MFU.
``--full`` also trains both for the whole 2,000 steps and compares validation loss.

    python -m benchmarks.train_speed [--rounds 3 --steps 200] [--full]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from benchmarks.nanogpt_baseline import PlainGPT, train_plain
from glassformer.train import metrics
from glassformer.train.precision import machine_name
from glassformer.train.runs import prepare
from glassformer.train.settings import apply_overrides, load_preset
from glassformer.train.trainer import Trainer

FP32 = ['train.dtype="float32"']
BF16 = ['train.dtype="bfloat16"']
VARIANTS = [  # (label, overrides, fused AdamW)
    ("ours (fp32)", FP32, False),
    ("ours (fp32, compiled)", [*FP32, "train.compile=true"], False),
    ("ours (fp32, fused AdamW)", FP32, True),
    ("ours (bf16)", BF16, False),
    ("ours (preset, auto)", [], False),
]


def matmul_peak(dtype: torch.dtype) -> float:
    """Best GFLOP/s over a few GEMM shapes (the model's own and a square one)."""
    best = 0.0
    for m, k, n in [(768, 128, 512), (768, 512, 128), (1024, 1024, 1024)]:
        a, b = torch.randn(m, k, dtype=dtype), torch.randn(k, n, dtype=dtype)
        for _ in range(3):
            a @ b
        start = time.perf_counter()
        for _ in range(20):
            a @ b
        best = max(best, 2 * m * k * n * 20 / (time.perf_counter() - start) / 1e9)
    return best


def flops_per_token(n_params: int, n_layers: int, d_model: int, context: int) -> float:
    """6N for the weights (forward + backward) + 12 L d T for attention scores (PaLM, App. B)."""
    return 6 * n_params + 12 * n_layers * d_model * context


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200, help="training steps per round")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument(
        "--full", action="store_true", help="also train both 2,000 steps and compare val loss"
    )
    args = parser.parse_args()
    torch.set_flush_denormal(True)

    trainers = {}
    for label, overrides, fused in VARIANTS:
        run = apply_overrides(load_preset("shakespeare-char"), ["train.tensorboard=false", *overrides])
        prepared = prepare(run, args.data_dir, log=lambda _: None)
        trainers[label] = trainer = prepared.trainer(run, "/tmp/gf-bench-run")
        for group in trainer.optimizer.param_groups if fused else []:  # torch's fused CPU AdamW
            group.update(fused=True, foreach=False)
        start = time.perf_counter()
        trainer.train_step()  # the first step: a compiled model compiles here
        if "compiled" in label:
            print(f"{label}: its first step (the compile) took {time.perf_counter() - start:.1f} s")
    auto = trainers["ours (preset, auto)"]
    print(f"{machine_name(torch.device('cpu'))}, torch {torch.__version__}: {auto.precision.describe()}")
    first = next(iter(trainers.values()))
    run, vocab = first.run, first.tokenizer.vocab_size
    train_ids = np.asarray(first.train_batches.ids)
    tokens_per_step = run.train.batch_size * run.train.context
    print(
        f"shakespeare-char sizes: {first.net.config.n_layers} layers, d_model {first.net.config.d_model}, "
        f"context {run.train.context}, batch {run.train.batch_size}; vocab {vocab}; "
        f"torch threads {torch.get_num_threads()}"
    )

    def plain_round() -> float:
        start = time.perf_counter()
        train_plain(train_ids, vocab, args.steps)
        return args.steps * tokens_per_step / (time.perf_counter() - start)

    def ours_round(trainer: Trainer) -> float:
        start = time.perf_counter()
        for _ in range(args.steps):
            trainer.train_step()
        return args.steps * tokens_per_step / (time.perf_counter() - start)

    speeds: dict[str, list[float]] = {"nanoGPT-equivalent loop (fp32)": [], **{k: [] for k in trainers}}
    for _ in range(args.rounds):
        speeds["nanoGPT-equivalent loop (fp32)"].append(plain_round())
        for label, trainer in trainers.items():
            speeds[label].append(ours_round(trainer))
    medians = {k: statistics.median(v) for k, v in speeds.items()}
    base = medians["nanoGPT-equivalent loop (fp32)"]
    peak32, peak16 = matmul_peak(torch.float32), matmul_peak(torch.bfloat16)
    baseline_params = sum(p.numel() for p in PlainGPT(vocab, run.train.context, 128, 4, 4).parameters())
    print(f"matmul peak measured now: fp32 {peak32:.0f} GFLOP/s, bf16 {peak16:.0f} GFLOP/s")
    for label, tokens_per_s in medians.items():
        trainer = trainers.get(label)
        n_params = trainer.net.num_parameters() if trainer else baseline_params
        achieved = tokens_per_s * flops_per_token(n_params, 4, 128, run.train.context) / 1e9
        bf16 = trainer is not None and trainer.precision.chosen == "bfloat16"
        peak, kind = (peak16, "bf16") if bf16 else (peak32, "fp32")
        print(
            f"{label:<32} {tokens_per_s:9,.0f} tokens/s  x{tokens_per_s / base:4.2f} baseline   "
            f"{achieved:5.1f} GFLOP/s = MFU {achieved / peak:5.1%} of the {kind} peak"
        )
    print(f"goal: ours (preset) >= 1.2x baseline: {medians['ours (preset, auto)'] / base:.2f}x")
    best = max(("ours (fp32)", "ours (bf16)"), key=medians.__getitem__)
    print(
        f"auto chose {auto.precision.chosen}: {medians['ours (preset, auto)'] / medians[best]:.2f}x "
        f"the faster of fp32 and bf16 here ({best})"
    )

    if args.full:
        full_comparison(args, train_ids, vocab)


def full_comparison(args, train_ids: np.ndarray, vocab: int) -> None:
    """Train both recipes 2,000 steps; compare validation loss on the same windows."""
    run = apply_overrides(load_preset("shakespeare-char"), ["train.tensorboard=false"])
    prepared = prepare(run, args.data_dir, log=lambda _: None)
    trainer = prepared.trainer(
        run,
        "/tmp/gf-bench-full",
        log=lambda _: None,
    )
    start = time.perf_counter()
    trainer.fit()
    ours_s = time.perf_counter() - start
    ours_loss = trainer.evaluate().loss

    torch.manual_seed(1337)
    start = time.perf_counter()
    model = train_plain(train_ids, vocab, run.train.steps, return_model=True)
    plain_s = time.perf_counter() - start
    with torch.no_grad():
        losses = [model(b["input_ids"], b["labels"]).item() for b in prepared.val_batches]
    print(
        f"2,000 steps: ours val loss {ours_loss:.4f} in {ours_s:.0f} s; "
        f"nanoGPT-equivalent val loss {statistics.mean(losses):.4f} in {plain_s:.0f} s (same val windows)"
    )
    print(f"cross-check: {metrics.perplexity(ours_loss):.3f} perplexity")


if __name__ == "__main__":
    main()
