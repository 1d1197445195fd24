"""One short GPU check, for the few minutes an accelerator is lent: MFU, decode speed, parity.

On CUDA, in one run:

1. MFU of training a GPT-2-124M-shaped decoder (12 x 768, 12 heads, vocab 50,257, context
   1,024) the way the trainer does on CUDA: bf16 autocast, SDPA's flash / memory-efficient
   kernels (our fused attention path), fused AdamW, ``torch.compile``. MFU = tokens/s x
   training FLOPs per token (`glassformer.inspect.costs.flops_per_token`, 3 x forward) / the
   card's dense bf16 peak (table below, or ``--peak-tflops``). Goal: >= 45%.
2. Decode tokens/s: greedy generation over the KV cache, batch 1 and batch 8.
3. Parity: the same weights' logits on the device (float32, and under bf16 autocast) against
   the CPU in float32.

Without CUDA it says so, skips 1, and runs 2 and 3 on a tiny model on the CPU, so the script
itself is tested (tests/test_gpu_check.py runs ``--tiny``); ``--tiny`` on a GPU does the
same with the tiny model on the GPU, a smoke test before the real check.

    python -m benchmarks.gpu_check [--tiny] [--steps 20] [--batch 8] [--no-compile]
"""

from __future__ import annotations

import argparse
import time

import torch
import torch.nn.functional as F

from glassformer.config import ModelConfig
from glassformer.generate import generate_ids
from glassformer.inspect.costs import flops_per_token
from glassformer.models import build
from glassformer.sampling import GenerationSettings
from glassformer.train import device as devices
from glassformer.train.optim import make_optimizer
from glassformer.train.precision import machine_name

GPT2 = ModelConfig(vocab_size=50257, d_model=768, n_layers=12, n_heads=12, max_seq_len=1024)
TINY = ModelConfig(vocab_size=256, d_model=64, n_layers=2, n_heads=4, max_seq_len=64)
PEAK_BF16_TFLOPS = {"H100": 989.0, "H200": 989.0, "GH200": 989.0, "A100": 312.0, "L4": 121.0, "A10": 125.0}


def peak_tflops(name: str, given: float | None) -> float | None:
    """The card's dense bf16 peak in TFLOP/s: ``given``, else from its name (None if unknown)."""
    if given:
        return given
    return next((peak for key, peak in PEAK_BF16_TFLOPS.items() if key in name), None)


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def mfu(config: ModelConfig, device: torch.device, batch: int, steps: int, compile: bool, peak: float | None):
    """Train ``steps`` timed steps (after 3 warm-up steps, which compile); print tokens/s and MFU."""
    torch.manual_seed(0)
    net = build(config).to(device).train()
    optimizer = make_optimizer(net, lr=3e-4, fused=device.type == "cuda")
    forward = torch.compile(net) if compile else net
    t = config.max_seq_len
    ids = torch.randint(0, config.vocab_size, (batch, t + 1), device=device)

    def step() -> float:
        with torch.autocast(device.type, dtype=torch.bfloat16):
            logits = forward(ids[:, :-1])  # b t v
        loss = F.cross_entropy(logits.float().flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss.detach()

    start = time.perf_counter()
    for _ in range(3):
        step()
    sync(device)
    print(f"  warm-up (3 steps{', compiling' if compile else ''}): {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    for _ in range(steps):
        loss = step()
    sync(device)
    seconds = (time.perf_counter() - start) / steps
    tokens_per_s = batch * t / seconds
    flops = flops_per_token(config, t).training * tokens_per_s
    print(
        f"  {seconds * 1000:.1f} ms/step, {tokens_per_s:,.0f} tokens/s, {flops / 1e12:.1f} TFLOP/s achieved, "
        f"loss {loss.item():.3f}"
    )
    if peak is None:
        print("  MFU: unknown peak for this card; pass --peak-tflops (dense bf16)")
        return None
    print(f"  MFU {flops / 1e12 / peak:.1%} of {peak:.0f} TFLOP/s dense bf16 (goal >= 45%)")
    return flops / 1e12 / peak


def decode(net, device: torch.device, prompt_len: int, new_tokens: int) -> dict[int, float]:
    """Greedy tokens/s over the KV cache for batch 1 and batch 8."""
    speeds = {}
    for batch in (1, 8):
        prompts = torch.randint(0, net.config.vocab_size, (batch, prompt_len), device=device)
        settings = GenerationSettings(max_new_tokens=new_tokens, temperature=0.0, stop_token_ids=())
        generate_ids(net, prompts, GenerationSettings(max_new_tokens=2, temperature=0.0, stop_token_ids=()))
        sync(device)
        start = time.perf_counter()
        out = generate_ids(net, prompts, settings)
        sync(device)
        speeds[batch] = sum(map(len, out)) / (time.perf_counter() - start)
        print(
            f"  decode batch {batch}: {speeds[batch]:,.0f} tokens/s "
            f"({new_tokens} new tokens after {prompt_len})"
        )
    return speeds


def parity(config: ModelConfig, device: torch.device) -> dict[str, float]:
    """Max |logits - CPU float32 logits| on the device in float32 and under bf16 autocast, and the
    share of positions whose top token agrees."""
    torch.manual_seed(0)
    reference_net = build(config).eval()
    ids = torch.randint(0, config.vocab_size, (2, min(config.max_seq_len, 128)))
    with torch.no_grad():
        reference = reference_net(ids)  # b t v
        net = build(config).to(device).eval()
        net.load_state_dict(reference_net.state_dict())
        results = {}
        for label, autocast in (("float32", None), ("bf16 autocast", torch.bfloat16)):
            with (
                torch.autocast(device.type, dtype=autocast)
                if autocast
                else torch.autocast(device.type, enabled=False)
            ):
                logits = net(ids.to(device)).float().cpu()
            diff = (logits - reference).abs().max().item()
            agree = (logits.argmax(-1) == reference.argmax(-1)).float().mean().item()
            results[label] = diff
            print(
                f"  {label} on {device} vs float32 on the CPU: max |diff| {diff:.2e}, "
                f"top-1 agrees {agree:.1%}"
            )
    return results


def main(argv: list[str] | None = None) -> dict[str, object]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--tiny", action="store_true", help="a tiny model everywhere: a smoke test in seconds"
    )
    parser.add_argument("--steps", type=int, default=20, help="timed training steps for the MFU")
    parser.add_argument("--batch", type=int, default=8, help="sequences of 1,024 tokens per training step")
    parser.add_argument("--no-compile", action="store_true", help="train eagerly (no torch.compile)")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the card's dense bf16 peak")
    args = parser.parse_args(argv)
    device = devices.resolve("auto")
    name = machine_name(device)
    print(f"{devices.describe('auto', device)}; {name}; torch {torch.__version__}")
    cuda = device.type == "cuda"
    config = TINY if args.tiny or not cuda else GPT2
    report: dict[str, object] = {"device": str(device)}
    if cuda:
        print(
            f"flash SDPA {torch.backends.cuda.flash_sdp_enabled()}, memory-efficient SDPA "
            f"{torch.backends.cuda.mem_efficient_sdp_enabled()}; bf16 {torch.cuda.is_bf16_supported()}"
        )
        print(
            f"1. MFU, {config.n_layers} x {config.d_model} decoder, context {config.max_seq_len}, "
            f"batch {args.batch}, bf16 autocast, fused AdamW, compile {not args.no_compile}:"
        )
        report["mfu"] = mfu(
            config, device, args.batch, args.steps, not args.no_compile, peak_tflops(name, args.peak_tflops)
        )
    else:
        print(
            "1. MFU: skipped, no CUDA GPU here (it is measured on a GPT-2-124M shape on CUDA only); "
            "2 and 3 run on a tiny model on the CPU"
        )
    print(f"2. decode, {config.n_layers} x {config.d_model}:")
    torch.manual_seed(0)
    net = build(config).to(device).eval()
    report["decode"] = decode(net, device, prompt_len=16, new_tokens=32 if config is TINY else 128)
    print(f"3. parity of logits with the CPU, {config.n_layers} x {config.d_model}:")
    report["parity"] = parity(config, device)
    return report


if __name__ == "__main__":
    main()
