"""`glassformer demo`: build a Llama-style model, teach it to copy, and look inside.

The task is the classic induction setup: a random sequence shown twice. The first copy
is unpredictable; the second can be predicted perfectly by a head that finds the
previous occurrence of the current token and copies the token that followed it. A few
hundred steps on a CPU are enough for such an *induction head* to form, and the trace
finds it.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import torch
from tqdm import tqdm

import glassformer as gf
from glassformer.config import llama_style
from glassformer.nn.hooks import hook_name
from glassformer.train.denormals import flush_denormal

BOS = 1


def demo_config(**overrides) -> gf.ModelConfig:
    """A small Llama-style decoder (`glassformer.config.llama_style`: RoPE, RMSNorm
    pre-norm, SwiGLU, no biases) with grouped-query attention."""
    sizes = dict(vocab_size=64, d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=128, max_seq_len=512)
    return llama_style(**{**sizes, "bos_token_id": BOS, **overrides})


def repeated_sequences(batch: int, length: int, vocab: int, generator: torch.Generator) -> torch.Tensor:
    """[BOS, r_1..r_L, r_1..r_L] with r uniform over the non-special ids.  -> batch x (2L+1)."""
    r = torch.randint(2, vocab, (batch, length), generator=generator)
    return torch.cat([torch.full((batch, 1), BOS), r, r], dim=1)


def train_induction(net: torch.nn.Module, steps: int, length: int, seed: int) -> list[float]:
    """Next-token cross-entropy on repeated sequences with AdamW; returns the losses."""
    generator = torch.Generator().manual_seed(seed)
    optimizer = torch.optim.AdamW(net.parameters(), lr=3e-3, weight_decay=0.0)
    losses = []
    net.train()
    bar = tqdm(range(steps), desc="training", unit="step", leave=False, disable=None)  # None: TTY only
    with flush_denormal():  # tiny gradients late in training are denormals: 100x slower
        for _ in bar:
            x = repeated_sequences(32, length, net.config.vocab_size, generator)
            logits = net(x[:, :-1])  # b t v
            loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            bar.set_postfix(loss=f"{loss.item():.3f}")
    net.eval()
    return losses


@torch.no_grad()
def second_copy_loss(net: torch.nn.Module, length: int, seed: int) -> float:
    """Cross-entropy of predicting the second copy (the predictable half) on fresh data."""
    x = repeated_sequences(64, length, net.config.vocab_size, torch.Generator().manual_seed(seed + 7))
    logits = net(x[:, :-1])[:, length + 1 :]  # predictions for the second copy's tokens 2..L
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), x[:, length + 2 :].flatten()).item()


def induction_scores(trace: gf.Trace, length: int) -> torch.Tensor:
    """Mean attention from each second-copy token to the token after its first occurrence.

    Query at position L + 1 + i (second copy of r_i) -> key at position 2 + i (r_{i+1}).
    -> layers x heads.
    """
    patterns = trace.stack(hook_name("attn.pattern", "*"))[:, 0]  # layers h t s
    queries = torch.arange(length + 1, 2 * length)
    keys = queries - length + 1
    return patterns[:, :, queries, keys].mean(-1)


def copied_right(new: list[int], expected: list[int]) -> float:
    """The fraction of ``expected`` that ``new`` reproduces, position by position; a
    continuation that stops short counts its missing tokens as wrong.

    >>> copied_right([5, 6, 9], [5, 6, 7, 8])
    0.5
    """
    if not expected:
        raise ValueError("there is no expected continuation to compare with")
    return sum(a == b for a, b in zip(new, expected, strict=False)) / len(expected)


def continuation_line(fraction: float, n_tokens: int) -> str:
    """The demo's line about the greedy continuation; ``fraction`` from `copied_right`.

    >>> continuation_line(0.95, 20)
    'greedy continuation of a new sequence: 95% of 20 tokens copied right'
    """
    return f"greedy continuation of a new sequence: {fraction:.0%} of {n_tokens} tokens copied right"


def run(steps: int = 200, length: int = 24, seed: int = 0, out: Callable[[str], None] = print) -> dict:
    """The whole demo; returns the figures it printed (used by the tests)."""
    torch.manual_seed(seed)
    config = demo_config()
    lm = gf.LanguageModel(gf.build(config))
    out(f"Glassformer {gf.__version__} demo")
    out(
        f"  model: {config.family}, {lm.net.num_parameters():,} parameters, {config.n_layers} layers, "
        f"d_model={config.d_model}, {config.n_heads} heads / {config.n_kv_heads} kv heads, "
        f"{config.positions}, {config.norm} {config.norm_placement}-norm, {config.activation}"
    )
    out(f"  task: a random sequence of {length} tokens, then the same sequence again")
    losses, after = _train(lm.net, steps, length, seed, out)
    generator = torch.Generator().manual_seed(seed + 1)
    sequence = repeated_sequences(1, length, config.vocab_size, generator)[0].tolist()
    accuracy = _continue(lm, sequence, length, out)
    induction = _find_induction_head(lm, sequence, length, out)
    long_prompt = repeated_sequences(1, length, config.vocab_size, generator)[0].tolist()
    cache_identical = _time_the_cache(lm, long_prompt, out)
    return {
        "losses": losses,
        "second_copy_loss": after,
        "accuracy": accuracy,
        "induction": induction,
        "cache_identical": cache_identical,
    }


def _train(net, steps: int, length: int, seed: int, out: Callable[[str], None]) -> tuple[list[float], float]:
    start = time.perf_counter()
    before = second_copy_loss(net, length, seed)
    losses = train_induction(net, steps, length, seed)
    seconds = time.perf_counter() - start
    after = second_copy_loss(net, length, seed)
    vocab = net.config.vocab_size
    out(
        f"  trained {steps} steps in {seconds:.1f} s: loss on the second copy {before:.2f} -> {after:.3f} "
        f"(the first copy is random: ln {vocab - 2} = {math.log(vocab - 2):.2f} at best)"
    )
    return losses, after


def _continue(lm: gf.LanguageModel, sequence: list[int], length: int, out: Callable[[str], None]) -> float:
    """Show the first copy and a few tokens of the second; the model must continue the copy."""
    shown = 1 + length + min(4, length - 1)  # BOS, the first copy, up to 4 tokens of the second
    prompt, expected = sequence[:shown], sequence[shown:]
    new = lm.generate(prompt, max_new_tokens=len(expected), temperature=0)
    accuracy = copied_right(new, expected)
    out("  " + continuation_line(accuracy, len(expected)))
    return accuracy


def _find_induction_head(
    lm: gf.LanguageModel, sequence: list[int], length: int, out: Callable[[str], None]
) -> float:
    names = ["embed.out", hook_name("attn.pattern", "*"), hook_name("resid_post", "*"), "logits"]
    trace = lm.trace(sequence[:-1], names=names)
    scores = induction_scores(trace, length)
    layer, head = divmod(int(scores.argmax()), lm.config.n_heads)
    out(
        f"  induction head: layer {layer} head {head} puts {scores[layer, head]:.0%} of its attention "
        "on the token after the previous occurrence"
    )
    out("  traced activations:")
    for name, shape in trace.shapes().items():
        out(f"    {name:<28} {shape}")
    return float(scores.max())


def _time_the_cache(lm: gf.LanguageModel, prompt: list[int], out: Callable[[str], None]) -> bool:
    timings = {}
    for use_cache in (True, False):
        begin = time.perf_counter()
        tokens = lm.generate(prompt, max_new_tokens=256, temperature=0, use_cache=use_cache)
        timings[use_cache] = (time.perf_counter() - begin, tokens)
    (cached_s, cached), (plain_s, plain) = timings[True], timings[False]
    out(
        f"  256 new tokens: KV cache {256 / cached_s:,.0f} tok/s, no cache {256 / plain_s:,.0f} tok/s "
        f"({plain_s / cached_s:.1f}x), identical tokens: {cached == plain}"
    )
    return cached == plain
