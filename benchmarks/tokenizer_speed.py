"""Byte-level BPE speed, side by side in one run, single thread.

1. GPT-2 encoding throughput (MB of UTF-8 per second): glassformer's ByteBPE against tiktoken
   (Rust), on the same text, with a check that the ids are identical. "cold" is a fresh
   tokenizer (its piece -> ids cache empty, as on a first pass over a corpus); "warm" is the
   second pass. Goal: cold >= 1/3 of tiktoken.
2. BPE training time to --vocab tokens on the same corpus with `train_bpe`. The naive trainer
   (all pairs recounted every merge) runs on a small slice only; its time on the whole corpus
   is an extrapolation, labeled as such. Goal: Shakespeare (~5 MB) to 4,096 in <= 60 s.

The corpus: --corpus FILE, else every *.txt under --corpus-dir (default: the Shakespeare
corpus that `glassformer train` caches), else the README and .py files of this repository.

    .venv/bin/python -m benchmarks.tokenizer_speed [--corpus FILE | --corpus-dir DIR] [--vocab 4096]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from glassformer.tokenizers.bpe import ByteBPE
from glassformer.tokenizers.bpe_train import train_bpe, train_bpe_naive
from tests.reference import gpt2_files, js_tiktoken_ranks, tiktoken_encoding

REPO = Path(__file__).resolve().parents[1]


def default_corpus_dir() -> Path:
    try:
        from glassformer.train.corpus import default_data_dir
    except ImportError:
        return REPO / "no-corpus-dir"
    return default_data_dir() / "shakespeare"


def read_corpus(args: argparse.Namespace) -> tuple[str, str]:
    """(text, where it came from)."""
    if args.corpus:
        return Path(args.corpus).read_text(encoding="utf-8"), args.corpus
    files = sorted(Path(args.corpus_dir).rglob("*.txt")) if Path(args.corpus_dir).is_dir() else []
    source = f"{len(files)} .txt files under {args.corpus_dir}"
    if not files:
        files = [REPO / "README.md", *sorted((REPO / "glassformer").rglob("*.py"))]
        source = f"no .txt under {args.corpus_dir}: the README and {len(files) - 1} .py files of the repo"
    return "\n".join(path.read_text(encoding="utf-8") for path in files), source


def timed(fn):
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def encoding_speed(text: str, repeats: int) -> None:
    megabytes = len(text.encode("utf-8")) / 1e6
    reference = tiktoken_encoding("gpt2")
    makers = {
        "ours, tiktoken ranks": lambda: ByteBPE.from_js_tiktoken(js_tiktoken_ranks("gpt2")),
        "ours, GPT-2 merges": lambda: ByteBPE.from_gpt2_files(*gpt2_files()),
    }
    tiktoken_s = []
    ours: dict[str, dict[str, list[float]]] = {name: {"cold": [], "warm": []} for name in makers}
    expected = reference.encode(text, disallowed_special=())  # special-token text as text
    identical = True
    for _ in range(repeats):  # interleaved, so drift hits all alike
        seconds, ids = timed(lambda: reference.encode(text, disallowed_special=()))
        tiktoken_s.append(seconds)
        for name, make in makers.items():
            tok = make()
            for state in ("cold", "warm"):
                seconds, ids = timed(lambda tok=tok: tok.encode(text, disallowed_special=()))
                ours[name][state].append(seconds)
                identical &= ids == expected
    base = megabytes / statistics.median(tiktoken_s)
    print(f"1. GPT-2 encoding, {megabytes:.2f} MB, {len(expected):,} tokens, median of {repeats}, one thread")
    print(f"   {'tiktoken (Rust)':<34} {base:6.2f} MB/s")
    for name, states in ours.items():
        for state, seconds in states.items():
            speed = megabytes / statistics.median(seconds)
            print(f"   {name + ', ' + state:<34} {speed:6.2f} MB/s   {speed / base:.2f}x tiktoken")
    print(f"   identical ids: {identical}   (goal: ours cold >= 0.33x tiktoken)")


def training_time(text: str, vocab: int, naive_chars: int) -> None:
    megabytes = len(text.encode("utf-8")) / 1e6
    print(f"2. BPE training to {vocab:,} tokens (gpt2 pattern)")
    seconds, tok = timed(lambda: train_bpe(text, vocab, progress=False))
    print(
        f"   train_bpe on the whole corpus ({megabytes:.2f} MB): {seconds:6.1f} s   (goal <= 60 s for 5 MB)"
    )
    piece = text[:naive_chars]
    slice_vocab = min(vocab, 512)
    fast_s, fast = timed(lambda: train_bpe(piece, slice_vocab, progress=False))
    naive_s, naive = timed(lambda: train_bpe_naive(piece, slice_vocab))
    print(f"   on a {len(piece):,}-character slice to {slice_vocab} tokens (measured):")
    same = fast.merges == naive.merges
    print(f"     train_bpe {fast_s:6.2f} s   train_bpe_naive {naive_s:6.2f} s   same merges: {same}")
    # the naive trainer's cost grows with (corpus size) x (number of merges)
    estimate = naive_s * (len(text) / len(piece)) * ((vocab - 256) / max(1, len(naive.merges)))
    print(
        f"   train_bpe_naive on the whole corpus: ~{estimate:,.0f} s (EXTRAPOLATED from the slice, not run)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", help="one text file")
    parser.add_argument("--corpus-dir", default=str(default_corpus_dir()), help="a directory of .txt files")
    parser.add_argument("--vocab", type=int, default=4096, help="training vocabulary size (default: 4096)")
    parser.add_argument("--repeats", type=int, default=3, help="encoding runs (median; default: 3)")
    parser.add_argument("--naive-chars", type=int, default=50_000, help="slice for the naive trainer")
    args = parser.parse_args()
    text, source = read_corpus(args)
    print(f"corpus: {source}: {len(text):,} characters")
    encoding_speed(text, args.repeats)
    training_time(text, args.vocab, args.naive_chars)


if __name__ == "__main__":
    main()
