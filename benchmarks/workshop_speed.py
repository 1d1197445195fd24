"""The workshop's walk for SmolLM2: time and size of /api/walk against a plain forward pass.

For prompts of 16 and 512 tokens, in one run, interleaved (ABAB...), medians:

* plain: ``lm.logits(ids)``, the forward pass alone (the baseline);
* walk: ``POST /api/walk`` through the app (Starlette's TestClient: routing, validation,
  the forward pass with a summarizing hook on every stage, the prediction pipeline over the
  whole vocabulary, JSON), and the size of its answer.

Then streaming: ``POST /api/generate`` of 64 greedy tokens read to the end, against
``lm.generate`` of the same 64 tokens (the baseline), interleaved.

Last, in Chromium: the time from opening a shared link to the walk drawn (the page's
``data-walks`` attribute), and to the logit lens drawn after it, for the same two prompts,
median of the repeats.

Goals (issue 11): the walk on screen <= 1.5 s for 16 tokens and <= 5 s for 512 (this
measures the server's share of it); streaming within 10% of ``lm.generate``'s tokens/s.

    python -m benchmarks.workshop_speed [--repeats 5]
"""

from __future__ import annotations

import argparse
import warnings

import glassformer as gf
from benchmarks.common import interleaved_medians

TEXT = "The quick brown fox jumps over the lazy dog, and the dog sleeps on in the warm afternoon sun. "


def main() -> None:
    warnings.filterwarnings("ignore")
    from glassformer.workshop.server import create_app
    from tests.conftest import workshop_client

    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    lm = gf.load("smollm2-135m-instruct")
    client = workshop_client(create_app({"smol": lm}))
    print("SmolLM2-135M-Instruct, fp32; medians of", args.repeats)
    texts = {}
    for n_tokens in (16, 512):
        ids = (lm.tokenizer.encode(TEXT) * 64)[:n_tokens]
        text = lm.tokenizer.decode(ids)
        n_tokens = len(lm.tokenizer.encode(text))
        texts[n_tokens] = text
        body = {"model": "smol", "text": text}
        size = len(client.post("/api/walk", json=body).content)
        times = interleaved_medians(
            {
                "plain": lambda ids=ids: lm.logits(ids),
                "walk": lambda body=body: client.post("/api/walk", json=body),
            },
            repeats=args.repeats,
        )
        print(
            f"{n_tokens:4d} tokens: plain forward {times['plain']:.2f} s, walk {times['walk']:.2f} s "
            f"({times['walk'] / times['plain']:.2f}x), answer {size / 1e6:.2f} MB"
        )
    stream_speed(lm, client, args.repeats)
    on_screen(lm, texts, args.repeats)


def stream_speed(lm, client, repeats: int, n: int = 64) -> None:
    prompt = "Once upon a time, in a small village by the sea,"
    body = {"model": "smol", "text": prompt, "max_new_tokens": n, "temperature": 0}
    ids = lm.tokenizer.encode(prompt)
    settings = dict(max_new_tokens=n, temperature=0)  # both stop at the same place: same greedy tokens
    times = interleaved_medians(
        {
            "generate": lambda: lm.generate(ids, **settings),
            "stream": lambda: client.post("/api/generate", json=body).text,
        },
        repeats=repeats,
    )
    print(
        f"{n} greedy tokens: lm.generate {n / times['generate']:.1f} tok/s, workshop stream "
        f"{n / times['stream']:.1f} tok/s ({times['generate'] / times['stream']:.2f}x)"
    )


def on_screen(lm, texts: dict[int, str], repeats: int) -> None:
    import statistics
    import time
    from urllib.parse import urlencode

    from playwright.sync_api import sync_playwright

    from glassformer.workshop.server import create_app
    from tests.workshop_server import log_in, serving

    with serving(create_app({"smol": lm})) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        log_in(page, url)
        for n_tokens, text in texts.items():
            walks, lenses = [], []
            for _ in range(repeats + 1):  # the first load warms the caches
                start = time.perf_counter()
                page.goto(f"{url}?{urlencode({'model': 'smol', 'text': text, 'level': 'intermediate'})}")
                page.wait_for_selector('body[data-walks="1"][data-state="ready"]', state="attached")
                walks.append(time.perf_counter() - start)
                # the lens comes after the walk; waiting for it keeps it out of the next load
                page.wait_for_selector('#lens[data-state="ready"]', state="attached")
                lenses.append(time.perf_counter() - start)
            walk, lens = statistics.median(walks[1:]), statistics.median(lenses[1:])
            drawn = f"link opened -> walk drawn in Chromium {walk:.2f} s, lens {lens:.2f} s"
            print(f"{n_tokens:4d} tokens: {drawn}")
        browser.close()


if __name__ == "__main__":
    main()
