"""SmolLM2-135M from its GGUF: ours vs HF transformers and llama.cpp, same file, same run.

* load time from the GGUF file (ours, HF, llama.cpp);
* greedy decoding tokens/s for 128 new tokens, every decoder in turn, several rounds:
  HF (float32), ours with float32 weights and with each quantized kind (`fast_decode`: int8
  per row, llama.cpp's Q8_0, Q4_0, Q4_1, each used only where it measures faster, as it says),
  llama.cpp on the registry's file (Q4_1 blocks, a Q8_0 head) and on a Q8_0 file written here
  from the same weights (`gguf.quants`, as llama.cpp's converter makes Q8_0);
* what each quantized kind does to the next-token distribution against float32 on 20
  prompts, teacher-forced;
* prefill time of a 512-token prompt (ours, HF);
* the memory-bandwidth bound of float32 decoding (bytes of weights / read bandwidth).

llama.cpp comes from llama-cpp-python (`llama_cpp_reference`: ``pip install '.[bench]'``);
without it, its rows say so and the rest runs.

    python -m benchmarks.pretrained_speed [--new-tokens 128 --prefill 512 --rounds 3]
"""

from __future__ import annotations

import argparse
import copy
import functools
import statistics
import tempfile
import time
import warnings
from pathlib import Path

import torch

import glassformer as gf
from benchmarks.common import cpu_name, interleaved_medians, interleaved_times, median_seconds
from benchmarks.llama_cpp_reference import greedy_runner, write_gguf_as
from glassformer import fast_decode
from glassformer.formats.registry import resolve
from glassformer.generate import GenerationSettings, generate_ids

KINDS = ("int8", "q8_0", "q4_0", "q4_1")


def read_bandwidth_gb_s(megabytes: int = 1024) -> float:
    """GB/s of a streaming read (a sum over a tensor much larger than the caches)."""
    data = torch.ones(megabytes * 2**20 // 4)
    seconds = median_seconds(lambda: data.sum(), repeats=5)
    return data.numel() * 4 / seconds / 1e9


def main() -> None:
    warnings.filterwarnings("ignore")
    import transformers

    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--prefill", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3, help="decoding runs of each decoder, in turn")
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
    text = "Once upon a time, in a small village by the sea,"
    prompt_ids = lm.tokenizer.encode(text)
    prompt, n = torch.tensor([prompt_ids]), args.new_tokens
    scratch = tempfile.TemporaryDirectory()
    q8_path = Path(scratch.name) / "SmolLM2-135M-Instruct.Q8_0.gguf"
    write_gguf_as(path, q8_path, "q8_0")
    llama = {name: greedy_runner(file) for name, file in (("q4_1", path), ("q8_0", q8_path))}
    loads = [f"ours {ours_load:.2f} s", f"HF {hf_load:.2f} s"]
    loads += [f"llama.cpp {loaded:.2f} s" for run, loaded in [llama["q4_1"]] if run is not None]
    print("load from GGUF: " + ", ".join(loads))

    settings = GenerationSettings(max_new_tokens=n, min_new_tokens=n, greedy=True)
    nets = {kind: lm.net if kind == "float32" else copy.deepcopy(lm.net) for kind in ("float32", *KINDS)}
    steps = {}
    decoders = {
        "HF float32": lambda: hf.generate(prompt, max_new_tokens=n, min_new_tokens=n, do_sample=False)
    }
    for kind, net in nets.items():  # a copy each: a net keeps one decode layout
        fast_decode.use_weights(net, kind)
        steps[kind] = fast_decode.step_for(net)  # laid out (and chosen) before the timing
        decoders[f"ours {kind}"] = functools.partial(lambda net: generate_ids(net, prompt, settings)[0], net)
    for kind, (run, _) in llama.items():
        if run is not None:
            decoders[f"llama.cpp {kind}"] = functools.partial(run, prompt_ids, n)
    with torch.inference_mode():
        seconds = interleaved_times(decoders, args.rounds)
        ours_text = decoders["ours float32"]()
        hf_text = decoders["HF float32"]()[0, prompt.shape[1] :].tolist()
    print(f"greedy decoding, {n} new tokens ({args.rounds} rounds in turn; median, min-max tok/s):")
    hf_s = statistics.median(seconds["HF float32"])
    for name, times in seconds.items():
        rate, slow, fast = n / statistics.median(times), n / max(times), n / min(times)
        kind = name.split()[-1]
        notes = [f"{hf_s / statistics.median(times):.2f}x HF"]
        if name.startswith("ours") and kind in KINDS:
            notes.append(f"{steps[kind].weights}: {steps[kind].reason}")
        if name.startswith("ours") and f"llama.cpp {kind}" in seconds:
            notes.append(
                f"{statistics.median(seconds[f'llama.cpp {kind}']) / statistics.median(times):.2f}x llama.cpp"
            )
        print(f"  {name:<16} {rate:6.1f} ({slow:.1f}-{fast:.1f})  " + "; ".join(notes))
    for kind, (run, why) in llama.items():
        if run is None:
            print(f"  llama.cpp {kind}: not run: {why}")
    print(f"  the same {n} tokens as HF: ours float32 {ours_text == hf_text}")
    quality(lm)
    prefill_and_bound(lm, hf, args.prefill, n / statistics.median(seconds["ours float32"]))


def quality(lm: gf.LanguageModel) -> None:
    """Each quantized kind against float32, teacher-forced on 20 prompts x 8 positions."""
    starts = ["Once upon a time", "The capital of", "def f(x):", "In 1969", "Water boils at"]
    prompts = [lm.tokenizer.encode(f"{start} {i}") for i, start in enumerate(starts * 4)]
    print("against float32, 20 prompts x 8 positions, teacher-forced (the kernel's rounding included):")
    for kind in KINDS:
        agree, kl = fast_decode.compare_weights(lm.net, prompts, kind, new_tokens=8)
        print(f"  {kind:<5} top-1 agreement {agree:.1%}, mean KL {kl:.5f} nats")


def prefill_and_bound(lm: gf.LanguageModel, hf, tokens: int, float32_rate: float) -> None:
    long = torch.randint(0, lm.config.vocab_size, (1, tokens))
    with torch.inference_mode():
        prefill = interleaved_medians({"ours": lambda: lm.net(long), "hf": lambda: hf(long)}, repeats=5)
    print(
        f"prefill {tokens} tokens: ours {prefill['ours']:.2f} s, HF {prefill['hf']:.2f} s "
        f"(ours / HF = {prefill['ours'] / prefill['hf']:.2f})"
    )
    weight_bytes = sum(p.numel() * p.element_size() for p in lm.net.parameters())
    bandwidth = read_bandwidth_gb_s()
    bound = bandwidth * 1e9 / weight_bytes
    print(
        f"float32 bandwidth bound: {weight_bytes / 1e6:.0f} MB of weights per token at {bandwidth:.1f} GB/s "
        f"-> at most {bound:.0f} tok/s; ours reaches {float32_rate / bound:.0%} of it"
    )


if __name__ == "__main__":
    main()
