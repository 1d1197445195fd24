"""SmolLM2-135M from its GGUF: ours vs HF transformers, same weights (fp32), same run.

* load time from the GGUF file;
* greedy decoding tokens/s for 128 new tokens (both with their KV caches);
* prefill time of a 512-token prompt;
* the memory-bandwidth bound of decoding: every new token reads every weight once, so
  tokens/s <= read bandwidth / bytes of weights (bandwidth measured here, now);
* int8 decode weights (`glassformer.fast_int8`, where they measure faster): tokens/s, and what
  they do to the next-token distribution against float32 on 20 prompts, teacher-forced.

    python -m benchmarks.pretrained_speed [--new-tokens 128 --prefill 512]
"""

from __future__ import annotations

import argparse
import time
import warnings

import torch

import glassformer as gf
from benchmarks.common import cpu_name, interleaved_medians, median_seconds
from glassformer import fast_decode
from glassformer.formats.registry import resolve
from glassformer.generate import GenerationSettings, generate_ids


def read_bandwidth_gb_s(megabytes: int = 1024) -> float:
    """GB/s of a streaming read (a sum over a tensor much larger than the caches)."""
    data = torch.ones(megabytes * 2**20 // 4)
    seconds = median_seconds(lambda: data.sum(), repeats=5)
    return data.numel() * 4 / seconds / 1e9


def main() -> None:
    warnings.filterwarnings("ignore")
    import transformers

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--prefill", type=int, default=512)
    args = parser.parse_args()
    path = resolve("smollm2-135m-instruct")
    print(f"machine: {cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}")

    start = time.perf_counter()
    lm = gf.load("smollm2-135m-instruct")
    ours_load = time.perf_counter() - start
    start = time.perf_counter()
    hf = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32
    )
    hf_load = time.perf_counter() - start
    hf.eval()
    print(f"load from GGUF: ours {ours_load:.1f} s, HF {hf_load:.1f} s ({hf_load / ours_load:.1f}x)")

    prompt = torch.tensor([lm.tokenizer.encode("Once upon a time, in a small village by the sea,")])
    n = args.new_tokens
    settings = GenerationSettings(max_new_tokens=n, min_new_tokens=n, greedy=True)
    with torch.inference_mode():
        ours_s = median_seconds(lambda: generate_ids(lm.net, prompt, settings), repeats=3)
        hf_s = median_seconds(
            lambda: hf.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False), repeats=3
        )
        same = (
            generate_ids(lm.net, prompt, settings)[0]
            == hf.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False)[
                0, prompt.shape[1] :
            ].tolist()
        )
        plain_s = None
        if hasattr(gf, "fast"):  # the plain nn.Linear path, without glassformer.fast
            gf.fast.disable(lm.net)
            plain_s = median_seconds(lambda: generate_ids(lm.net, prompt, settings), repeats=3)
            gf.fast.enable(lm.net)
        fast_decode.use_weights(lm.net, "int8")
        int8_step = fast_decode.step_for(lm.net)
        int8_s = median_seconds(lambda: generate_ids(lm.net, prompt, settings), repeats=3)
        fast_decode.use_weights(lm.net, "float32")
        starts = ["Once upon a time", "The capital of", "def f(x):", "In 1969", "Water boils at"]
        texts = [f"{start} {i}" for i, start in enumerate(starts * 4)]
        agree, kl = fast_decode.compare_weights(lm.net, [lm.tokenizer.encode(t) for t in texts], new_tokens=8)
        long = torch.randint(0, lm.config.vocab_size, (1, args.prefill))
        prefill = interleaved_medians({"ours": lambda: lm.net(long), "hf": lambda: hf(long)}, repeats=5)
        ours_prefill, hf_prefill = prefill["ours"], prefill["hf"]
    print(
        f"greedy decoding, {n} new tokens: ours {n / ours_s:.1f} tok/s, HF {n / hf_s:.1f} tok/s "
        f"({hf_s / ours_s:.2f}x); identical tokens: {same}"
    )
    if plain_s is not None:
        print(
            f"  without glassformer.fast (plain nn.Linear): {n / plain_s:.1f} tok/s "
            f"({hf_s / plain_s:.2f}x HF; the fast path gives {plain_s / ours_s:.2f}x)"
        )
    print(
        f"  int8 decode weights ({int8_step.weights}: {int8_step.reason}): {n / int8_s:.1f} tok/s "
        f"({hf_s / int8_s:.2f}x HF); against float32 on 20 prompts x 8 positions, teacher-forced: "
        f"top-1 agreement {agree:.1%}, mean KL {kl:.4f} nats"
    )
    print(
        f"prefill {args.prefill} tokens: ours {ours_prefill:.2f} s, HF {hf_prefill:.2f} s "
        f"(ours / HF = {ours_prefill / hf_prefill:.2f})"
    )
    weight_bytes = sum(p.numel() * p.element_size() for p in lm.net.parameters())
    bandwidth = read_bandwidth_gb_s()
    bound = bandwidth * 1e9 / weight_bytes
    print(
        f"bandwidth bound: {weight_bytes / 1e6:.0f} MB of weights per token at {bandwidth:.1f} GB/s "
        f"-> at most {bound:.0f} tok/s; ours reaches {n / ours_s / bound:.0%} of it"
    )


if __name__ == "__main__":
    main()
