"""Reading a Hugging Face checkpoint directory, per family: ours (`gf.from_hf(dir)`) against
transformers' own `from_pretrained(dir)`, side by side in one run.

Each family's checkpoint is the parity tests' tiny random model, scaled up (``--width``,
``--layers``) so that reading weights is part of the time, and saved with
``save_pretrained`` into a temporary directory. Both loaders run alternately (ours, HF,
ours, ...), ``--rounds`` times each after one warm-up; we print the median of each, their
ratio, and the parameters, with the CPU.

    python -m benchmarks.hf_conversion [--width 256 --layers 4 --rounds 5]
"""

from __future__ import annotations

import argparse
import tempfile
import warnings
from pathlib import Path

import torch

import glassformer as gf
from benchmarks.common import cpu_name, interleaved_medians

warnings.filterwarnings("ignore")

# the fields that set a checkpoint's width and depth, under each family's own names
WIDTH_FIELDS = ("hidden_size", "n_embd", "d_model", "dim", "word_embed_proj_dim")
DEPTH_FIELDS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "encoder_layers", "decoder_layers")
FFN_FIELDS = (
    "intermediate_size",
    "n_inner",
    "d_ff",
    "ffn_dim",
    "hidden_dim",
    "encoder_ffn_dim",
    "decoder_ffn_dim",
)


def builders() -> dict:
    """name -> a function making the tiny HF model (the parity tests' builders)."""
    from tests import test_hf_parity, test_hf_parity_gemma2_olmo2, test_moe, test_vit

    out = dict(test_hf_parity.BUILDERS)
    out |= {name: build for name, (build, _) in test_hf_parity_gemma2_olmo2.BUILDERS.items()}
    out |= {name: build for name, build in test_moe.BUILDERS.items() if name != "mixtral-window"}
    out["vit"] = test_vit.hf_classifier
    return out


def scaled(model, width: int, layers: int):
    """The same family at ``width`` x ``layers`` (heads kept, so each head grows), random weights."""
    config = model.config.to_dict()
    for field in WIDTH_FIELDS:
        if field in config:
            config[field] = width
    for field in DEPTH_FIELDS:
        if field in config:
            config[field] = layers
    for field in FFN_FIELDS:
        if field in config and config[field]:
            config[field] = 4 * width
    if config.get("layer_types"):  # a per-layer pattern (sliding or full attention): repeated
        pattern = config["layer_types"]
        config["layer_types"] = [pattern[i % len(pattern)] for i in range(layers)]
    if config.get("head_dim"):
        config["head_dim"] = width // config.get("num_attention_heads", 4)
    return type(model)(type(model.config).from_dict(config)).eval()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    import transformers

    print(
        f"CPU: {cpu_name()}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
        f"transformers {transformers.__version__}"
    )
    print(f"\n{'family':<16}{'parameters':>12}{'ours ms':>10}{'HF ms':>10}{'HF / ours':>11}")
    with tempfile.TemporaryDirectory() as root:
        for name, build in builders().items():
            torch.manual_seed(0)
            model = scaled(build(), args.width, args.layers)
            folder = Path(root) / name
            model.save_pretrained(folder)
            hf_class = type(model)
            loaders = {
                "ours": lambda folder=folder: gf.from_hf(folder),
                "hf": lambda folder=folder, hf_class=hf_class: hf_class.from_pretrained(folder),
            }
            times = interleaved_medians(loaders, repeats=args.rounds)
            n = sum(p.numel() for p in model.parameters())
            print(
                f"{name:<16}{n:>12,}{1e3 * times['ours']:>10.1f}{1e3 * times['hf']:>10.1f}"
                f"{times['hf'] / times['ours']:>10.2f}x"
            )


if __name__ == "__main__":
    main()
