"""What recording the film costs, and when the induction head forms.

The `induction` preset trained for ``--steps`` steps, with and without the film (a frame
at every evaluation: glassformer.inspect.film), in turn (ABAB...), in one run: wall time of
the whole training, training tokens per second of wall time, and the time per frame. Then,
from one filmed run, the step at which an induction head forms: the first frame where a
head's induction score passes 0.5 (random attention over the t positions scores ~1/t).

    python -m benchmarks.film_overhead [--steps 200] [--repeats 2]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings
from pathlib import Path

FORMED = 0.5


def train(steps: int, film: bool, out: Path) -> tuple[float, int, list[dict], float]:
    """(wall seconds, training tokens, frames, seconds spent recording them) of one run of the
    induction preset."""
    from glassformer.inspect.film import FilmRecorder, read_film
    from glassformer.train.runs import prepare
    from glassformer.train.settings import apply_overrides, load_preset

    settings = apply_overrides(load_preset("induction"), [f"train.steps={steps}", "train.sample_tokens=0"])
    prepared = prepare(settings, None)
    probe = prepared.val_batches[0]["input_ids"][0]
    recorder = FilmRecorder(out, probe, prepared.tokenizer) if film else None
    recording = [0.0]

    def timed(net, step) -> None:  # the recorder, its own time summed
        start = time.perf_counter()
        recorder(net, step)
        recording[0] += time.perf_counter() - start

    trainer = prepared.trainer(
        settings,
        out,
        extra_eval=None,
        log=lambda line: None,
        on_eval=timed if film else None,
    )
    start = time.perf_counter()
    trainer.fit()
    seconds = time.perf_counter() - start
    tokens = steps * prepared.val_batches[0]["input_ids"].numel()  # induction batches: one shape
    return seconds, tokens, read_film(out) if film else [], recording[0]


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    times: dict[bool, list[float]] = {False: [], True: []}
    frames: list[dict] = []
    tokens, recorded_s = 0, []
    with tempfile.TemporaryDirectory() as folder:
        for repeat in range(args.repeats):
            for film in (False, True):
                run = Path(folder) / f"{film}-{repeat}"
                seconds, tokens, recorded, recording = train(args.steps, film, run)
                times[film].append(seconds)
                frames = recorded or frames
                if film:
                    recorded_s.append(recording / max(len(recorded), 1))
    plain, filmed = statistics.median(times[False]), statistics.median(times[True])
    print(f"induction preset, {args.steps} steps, {len(frames)} evaluations; medians of {args.repeats}")
    print(f"  without the film: {plain:.2f} s ({tokens / plain:,.0f} training tokens/s of wall time)")
    print(
        f"  with the film:    {filmed:.2f} s ({tokens / filmed:,.0f} tokens/s): "
        f"{filmed / plain:.3f}x the time"
    )
    per_frame = statistics.median(recorded_s)
    share = per_frame * len(frames) / filmed
    print(f"  recording one frame: {per_frame * 1000:.0f} ms, {share:.1%} of the filmed run's time")
    formed = next((f["step"] for f in frames if max(max(row) for row in f["induction"]) > FORMED), None)
    scores = ", ".join(f"{f['step']}: {max(max(row) for row in f['induction']):.2f}" for f in frames)
    print(f"  best induction score per frame: {scores}")
    print(f"  an induction head formed (score > {FORMED}) by step {formed}")


if __name__ == "__main__":
    main()
