"""HTML attention views of SmolLM2-135M (30 layers x 9 heads): size and opening time.

Head views of 128, 512 and 1024 tokens and the model view of 256 tokens, all layers. For
each view:

* the HTML file's size, and how many bytes the same attention takes the way BertViz embeds
  it (JSON nested lists of floats, ``len(json.dumps(attn.tolist()))``; for inputs over 256
  tokens measured on ``--bertviz-layers`` evenly spaced layers and scaled to all 30, since
  one layer of 1024 tokens is a ~190 MB string);
* the time to the first drawing in Chromium: the view's ``data-ready`` attribute, set when
  drawing is done, in ms since navigation started (median of ``--repeats`` fresh pages),
  with the first contentful paint and DOMContentLoaded beside it;
* one interaction: the head view's hover redraw and layer switch, the model view's
  enlarging of a thumbnail; and the JS heap in use after opening.

The texts are an English paragraph cut at n tokens; 1024 tokens are random ids (within
SmolLM2's 8,192-token context).

    python -m benchmarks.view_payload [--repeats 3 --bertviz-layers 3 --out /tmp/view-bench]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

import glassformer as gf
from glassformer.viz import HeadView, ModelView

PARAGRAPH = (
    "The old lighthouse keeper climbed the stairs every evening, counting the steps as his father "
    "had taught him. From the top he could see the harbour, the fishing boats coming home, and the "
    "long grey line of the cliffs where the gulls nested. Nobody in the village remembered a night "
    "when the lamp had not been lit, and the keeper meant to keep it that way. "
)


def bertviz_json_bytes(weights: torch.Tensor, sample_layers: int) -> tuple[int, bool]:
    """Bytes of ``json.dumps(w.tolist())`` for weights layers h t s; (bytes, estimated?)."""
    n_layers, _, t, _ = weights.shape
    if t <= 256 or sample_layers >= n_layers:
        return sum(len(json.dumps(weights[i].tolist())) for i in range(n_layers)), False
    picked = torch.linspace(0, n_layers - 1, sample_layers).round().long().tolist()
    sampled = sum(len(json.dumps(weights[i].tolist())) for i in picked)
    return round(sampled * n_layers / len(picked)), True


def open_in_chromium(browser, path: Path, kind: str, repeats: int) -> dict[str, float]:
    """Median opening times (ms) over fresh pages, and one interaction timed in the page."""
    ready, paint, loaded = [], [], []
    for _ in range(repeats):
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(path.resolve().as_uri())
        page.wait_for_selector(".gfv[data-ready]", timeout=60_000)
        ready.append(float(page.get_attribute(".gfv", "data-ready")))
        timing = page.evaluate(
            """() => ({
                paint: (performance.getEntriesByName("first-contentful-paint")[0] || {}).startTime || NaN,
                loaded: performance.getEntriesByType("navigation")[0].domContentLoadedEventEnd,
                heap: performance.memory ? performance.memory.usedJSHeapSize : NaN,
            })"""
        )
        paint.append(timing["paint"])
        loaded.append(timing["loaded"])
        heap = timing["heap"]
        last = page
        if _ < repeats - 1:
            page.close()
    result = {
        "ready_ms": statistics.median(ready),
        "paint_ms": statistics.median(paint),
        "loaded_ms": statistics.median(loaded),
        "heap_mb": heap / 1e6,
    }
    if kind == "head":
        result["hover_ms"] = last.evaluate(
            """() => {
                const token = document.querySelectorAll(".gfv-col-left .gfv-tok")[5];
                const start = performance.now();
                token.dispatchEvent(new MouseEvent("mouseover", {bubbles: true}));
                const hover = performance.now() - start;
                token.parentElement.parentElement.dispatchEvent(new MouseEvent("mouseleave"));
                return hover;
            }"""
        )
        result["layer_switch_ms"] = last.evaluate(
            """() => new Promise((done) => {
                const root = document.querySelector(".gfv");
                const select = root.querySelector("select");
                const start = performance.now();
                new MutationObserver((_, observer) => {
                    observer.disconnect();
                    done(performance.now() - start);
                }).observe(root, {attributes: true, attributeFilter: ["data-layer"]});
                select.value = String(select.options.length - 1);
                select.dispatchEvent(new Event("change"));
            })"""
        )
    else:
        result["enlarge_ms"] = last.evaluate(
            """() => {
                const thumbs = document.querySelectorAll(".gfv-thumb");
                const start = performance.now();
                thumbs[thumbs.length - 1].click();
                return performance.now() - start;
            }"""
        )
    last.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=3, help="fresh page loads per view (median)")
    parser.add_argument("--bertviz-layers", type=int, default=3, help="layers measured for BertViz's JSON")
    parser.add_argument("--out", type=Path, default=None, help="folder for the HTML files (default: temp)")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    out = args.out or Path(tempfile.mkdtemp(prefix="view-bench-"))
    lm = gf.load("smollm2-135m-instruct")
    text_ids = lm.tokenizer.encode(PARAGRAPH * 20)
    generator = torch.Generator().manual_seed(0)
    cases = [("head", 128), ("head", 512), ("head", 1024), ("model", 256)]
    rows = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        for kind, n in cases:
            if n <= len(text_ids) and n < 1024:
                ids = text_ids[:n]
            else:
                ids = torch.randint(0, lm.config.vocab_size, (n,), generator=generator).tolist()
            trace = lm.trace(ids, names="blocks.*.attn.pattern")
            weights = trace.stack("blocks.*.attn.pattern")[:, 0]  # layers h t s
            start = time.perf_counter()
            view = (HeadView if kind == "head" else ModelView)(weights, trace.tokens, causal=True)
            path = view.save(out / f"{kind}_{n}.html")
            build_s = time.perf_counter() - start
            bertviz, estimated = bertviz_json_bytes(weights, args.bertviz_layers)
            timing = open_in_chromium(browser, path, kind, args.repeats)
            size = path.stat().st_size
            rows.append((kind, n, size, bertviz, estimated, build_s, timing))
            del trace, weights, view
        browser.close()

    print(
        f"SmolLM2-135M, {lm.config.n_layers} layers x {lm.config.n_heads} heads; "
        f"Chromium, median of {args.repeats} page loads"
    )
    print(f"files in {out}\n")
    print(
        "view    tokens   HTML MB  BertViz JSON MB  ratio  build s  ready ms  FCP ms  DCL ms  heap MB", end=""
    )
    print("  interaction")
    for kind, n, size, bertviz, estimated, build_s, timing in rows:
        if kind == "head":
            action = f"hover {timing['hover_ms']:.0f} ms, layer switch {timing['layer_switch_ms']:.0f} ms"
        else:
            action = f"enlarge {timing['enlarge_ms']:.0f} ms"
        mark = "~" if estimated else " "
        print(
            f"{kind:<7} {n:>6} {size / 1e6:>9.2f} {mark}{bertviz / 1e6:>15.1f} {bertviz / size:>6.0f}x"
            f" {build_s:>8.2f} {timing['ready_ms']:>9.0f} {timing['paint_ms']:>7.0f}"
            f" {timing['loaded_ms']:>7.0f} {timing['heap_mb']:>8.0f}  {action}"
        )
    print("\n~ : estimated from", args.bertviz_layers, "evenly spaced layers, scaled to all layers")
    print("ready: the view's data-ready attribute (first drawing done), ms since navigation start")


if __name__ == "__main__":
    main()
