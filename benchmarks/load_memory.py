"""Peak resident memory while loading a pretrained model: ours vs HF transformers.

Each load runs in a fresh Python process: it imports its libraries, starts torch up (a
tiny model's forward pass: thread pools, kernels), notes its resident set (VmRSS),
resets the kernel's peak counter (``/proc/self/clear_refs``), loads the model, and
reports the new peak (VmHWM). The growth, peak - before, is compared with the model's
fp32 weight bytes; the goal is <= 1.5x (one copy of the weights plus what streaming
needs).

    python -m benchmarks.load_memory
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

LOADS = {
    "ours  SmolLM2 GGUF -> fp32": "ours-smollm2",
    "ours  SmolLM2 GGUF -> bf16": "ours-smollm2-bf16",
    "HF    SmolLM2 GGUF -> fp32": "hf-smollm2",
    "ours  MiniLM safetensors -> fp32": "ours-minilm",
    "HF    MiniLM safetensors -> fp32": "hf-minilm",
}


def _status(field: str) -> int:
    """A /proc/self/status value in bytes (VmRSS: resident now, VmHWM: peak)."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"/proc/self/status has no {field}")


def child(which: str) -> None:
    import warnings

    warnings.filterwarnings("ignore")
    import torch

    import glassformer as gf
    from glassformer.formats.registry import resolve

    if which.startswith("hf"):
        import transformers
    # one-time library start-up (thread pools, kernels, the meta device) is not loading
    tiny = gf.build(gf.ModelConfig(vocab_size=16, d_model=8, n_layers=1, n_heads=2), initialize=False)
    tiny(torch.zeros(1, 4, dtype=torch.long))
    before = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as handle:
        handle.write("5")  # reset VmHWM to the current resident set
    start = time.perf_counter()
    if which == "ours-smollm2":
        net = gf.load("smollm2-135m-instruct").net
    elif which == "ours-smollm2-bf16":
        net = gf.load("smollm2-135m-instruct", "bfloat16").net
    elif which == "ours-minilm":
        net = gf.load("minilm-l6").net
    elif which == "hf-smollm2":
        path = resolve("smollm2-135m-instruct")
        net = transformers.AutoModelForCausalLM.from_pretrained(
            str(path.parent), gguf_file=path.name, dtype=torch.float32
        )
    else:
        net = transformers.BertModel.from_pretrained(str(resolve("minilm-l6")), dtype=torch.float32)
    seconds = time.perf_counter() - start
    fp32 = sum(p.numel() for p in net.parameters()) * 4
    print(json.dumps({"before": before, "peak": _status("VmHWM"), "fp32": fp32, "seconds": seconds}))


def main() -> None:
    print(f"{'load':<34} {'fp32 weights':>12} {'peak growth':>12} {'ratio':>6} {'time':>7}")
    for label, which in LOADS.items():
        done = subprocess.run(
            [sys.executable, "-m", "benchmarks.load_memory", "--child", which],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        growth = result["peak"] - result["before"]
        print(
            f"{label:<34} {result['fp32'] / 1e6:>9.0f} MB {growth / 1e6:>9.0f} MB "
            f"{growth / result['fp32']:>5.2f}x {result['seconds']:>6.1f}s"
        )


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--child":
        child(sys.argv[2])
    else:
        main()
