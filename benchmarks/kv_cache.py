"""Decode speed with and without the KV cache, same model, same prompt, same run.

A 6-layer, d_model=384, 6-head GPT-2-style decoder (nanoGPT's Shakespeare-character
shape: vocabulary 65) generates 256 new tokens greedily from a 16-token prompt. Without
a cache every step reruns the whole sequence (cost grows with its length); with the
preallocated cache each step runs one token. Both must give the same tokens.
Goal: cached >= 5x faster.

    python -m benchmarks.kv_cache [--new-tokens 256] [--vocab 65]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import glassformer as gf
from glassformer.generate import GenerationSettings, generate_ids


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=3, help="alternating runs of each path (median)")
    parser.add_argument("--vocab", type=int, default=65, help="vocabulary size (default: 65, characters)")
    args = parser.parse_args()
    torch.manual_seed(0)
    config = gf.ModelConfig(vocab_size=args.vocab, d_model=384, n_layers=6, n_heads=6, max_seq_len=512)
    net = gf.build(config).eval()
    prompt = torch.randint(0, config.vocab_size, (1, 16)).tolist()
    settings = GenerationSettings(max_new_tokens=args.new_tokens, min_new_tokens=args.new_tokens, greedy=True)
    print(f"model: {net.num_parameters():,} parameters, torch threads: {torch.get_num_threads()}")

    results: dict[bool, tuple[float, list[int]]] = {}
    for use_cache in (True, False):  # warm up both paths
        generate_ids(net, prompt, GenerationSettings(max_new_tokens=4, greedy=True), use_cache=use_cache)
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.repeats):  # alternate the two paths so machine noise hits both
        for use_cache in (True, False):
            start = time.perf_counter()
            tokens = generate_ids(net, prompt, settings, use_cache=use_cache)[0]
            times[use_cache].append(time.perf_counter() - start)
            results[use_cache] = (statistics.median(times[use_cache]), tokens)
    (cached_s, cached), (plain_s, plain) = results[True], results[False]
    print(f"KV cache:  {len(cached) / cached_s:8.1f} tokens/s ({cached_s:.2f} s, median of {args.repeats})")
    print(f"no cache:  {len(plain) / plain_s:8.1f} tokens/s ({plain_s:.2f} s)")
    print(f"speed-up (cached / uncached tokens/s): {plain_s / cached_s:.2f}x  (goal >= 5x)")
    print(f"identical tokens: {cached == plain}")


if __name__ == "__main__":
    main()
