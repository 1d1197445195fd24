"""Flag types and flag groups that several commands share."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from glassformer.formats.hub import HUB_ID_FORM
from glassformer.sampling import SAMPLING_DEFAULTS

DECODE_WEIGHTS = ("float32", "int8", "q8_0", "q4_0", "q4_1")  # fast_decode.WEIGHTS, without importing torch
QUANTIZE = ("q8_0", "q4_0", "q4_1")  # block_quant.KINDS, without importing torch

# the end of every MODEL argument's help: how it names a model on the Hugging Face Hub
# (gf.load's rule: a registry name, then an existing path, then a Hub id; glassformer.formats.hub)
HUB_ID_HELP = (
    f"or a Hugging Face Hub id {HUB_ID_FORM}, e.g. Qwen/Qwen3-0.6B or Qwen/Qwen3-0.6B@main (a branch, "
    "tag or commit after '@'): its config, tokenizer and safetensors files, never pickled weights, "
    "fetched into huggingface_hub's cache ($HF_HOME); HF_HUB_OFFLINE=1 reads only the cache. "
    "An existing local path of that shape is that path"
)

# LanguageModel.stream's arguments that the generate and chat commands expose
GENERATION_FLAGS = ("max_new_tokens", "temperature", "top_k", "top_p", "seed")


def at_least(least: int) -> Callable[[str], int]:
    """An argparse ``type``: an integer >= ``least``, else a usage error naming the bound."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"must be >= {least}, got {value}")
        return value

    parse.__name__ = "int"
    return parse


def add_generation_flags(parser: argparse.ArgumentParser, max_new_tokens: int | None = None) -> None:
    """--max-new-tokens, --temperature, --top-k, --top-p, --seed. A flag left out stays None
    and is not passed on (`chosen_generation_options`), so `LanguageModel.stream`'s own
    default applies; ``max_new_tokens`` gives that flag a default of the command's."""
    group = parser.add_argument_group("generation (a flag left out leaves LanguageModel.stream's default)")
    group.add_argument(
        "--max-new-tokens",
        type=at_least(1),
        default=max_new_tokens,
        help=f"most tokens to generate (default: {max_new_tokens or 64})",
    )
    group.add_argument(
        "--temperature",
        type=float,
        default=None,
        help=f"0 = greedy (default: {SAMPLING_DEFAULTS['temperature']})",
    )
    group.add_argument(
        "--top-k",
        type=at_least(1),
        default=None,
        help="keep the k likeliest tokens (default: no top-k filter)",
    )
    group.add_argument(
        "--top-p",
        type=float,
        default=None,
        help=f"keep the smallest nucleus of mass p; 1 = off (default: {SAMPLING_DEFAULTS['top_p']})",
    )
    group.add_argument("--seed", type=int, default=None, help="random seed of the sampling (default: 0)")


def chosen_generation_options(args: argparse.Namespace) -> dict[str, Any]:
    """The generation flags that were given (or have a command default), as keyword arguments."""
    return {name: getattr(args, name) for name in GENERATION_FLAGS if getattr(args, name) is not None}


def add_decode_weights_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--decode-weights",
        choices=DECODE_WEIGHTS,
        default="float32",
        help="the weights each new token reads: float32 (default; the same tokens as the plain "
        "modules), int8 copies with a scale per row (a quarter of the bytes), or llama.cpp's block "
        "formats q8_0, q4_0, q4_1 (a scale per 32 weights; 8.5, 4.5, 5 bits a weight). Quantized "
        "weights are an approximation with a stated bound (glassformer.fast_int8, fast_blocks), "
        "used only where they measure faster on this CPU",
    )


def use_decode_weights(lm: Any, weights: str, say: Callable[[str], None]) -> None:
    """Ask for ``weights`` when ``lm`` decodes, and ``say`` what was chosen (int8 may be declined)."""
    from glassformer import fast_decode

    if weights == "float32":
        return
    fast_decode.use_weights(lm.net, weights)
    step = fast_decode.step_for(lm.net)  # laid out now, so that the choice is known
    if step is None:
        reason = fast_decode.unsupported(lm.net) or "a hook is attached"
        say(f"decode weights: float32 ({weights} needs glassformer.fast_decode's step: {reason})")
    else:
        say(f"decode weights: {step.weights} ({step.reason})")


def add_quantize_flag(parser: argparse.ArgumentParser, where: str = "") -> None:
    """--quantize KIND: the model's matrices replaced by llama.cpp's blocks after loading."""
    parser.add_argument(
        "--quantize",
        choices=QUANTIZE,
        default=None,
        help="after loading, replace every block's and the output head's matrix by the values of its "
        "llama.cpp blocks (a scale per 32 weights of a row; q8_0, q4_0, q4_1: 8.5, 4.5, 5 bits a "
        "weight; the head at q8_0 beside the 4-bit kinds, as llama.cpp keeps it), so the model runs as "
        "that quantized model does. The weights stay float32 numbers on the blocks' grid, and each "
        f"block's error is kept{where} (glassformer.quantized_model). A model read from a GGUF file is "
        "already on its file's grids: q4_1 leaves the registry's SmolLM2 (Q4_1 blocks, a Q8_0 head) "
        "as it is. Default: the weights as loaded",
    )


def quantize_weights(lm: Any, kind: str | None, say: Callable[[str], None]) -> Any:
    """``lm``'s matrices quantized to ``kind`` in place (None: left as they are), ``say`` told
    what changed; the `quantized_model.Quantization`, or None."""
    if kind is None:
        return None
    from glassformer.quantized_model import quantize_model

    dtype = next(lm.net.parameters()).dtype
    if str(dtype) != "torch.float32":
        raise ValueError(
            f"--quantize writes the blocks' values as float32 weights; this model's are {dtype}: "
            "load it with --dtype float32"
        )
    facts = quantize_model(lm.net, kind)
    errors = [m.summary()["max_error"] for m in facts.matrices]
    say(
        f"quantized to {facts.label}: {len(facts.matrices)} matrices, "
        f"{facts.bytes_before / 2**20:.1f} MiB in float32 -> {facts.bytes_after / 2**20:.1f} MiB as blocks "
        f"({facts.bits_per_weight:.3g} bits a weight); largest change of a weight {max(errors):.3g}"
    )
    return facts
