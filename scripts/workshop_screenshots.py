"""The workshop's screenshots in docs/screenshots/, taken on SmolLM2 in headless Chromium.

Serves the workshop with SmolLM2-135M-Instruct and MiniLM on a free local port and drives
the page as a user would: the overview zoomed to a block and a head, the beginner's tour,
teaching mode on a projector, a phone's width, a sentence vector, a 1,000-token attention map,
each level, the tokenizer's merges, an opened attention step (the query·key view), an opened
feed-forward step (its most active neurons), a generation's timeline scrubbed to a step,
the compare view of the model beside itself with a head scaled, two explanations of the
prediction side by side, what the model costs, and a lesson (its equations, a code link,
its outputs after a run). With ``runs/genre-minilm`` trained (``glassformer train --preset
genre-minilm --out runs/genre-minilm``), also the classifier's label and what fine-tuning
changed against MiniLM. Run from the repository root, after `make setup`:

    .venv/bin/python -m scripts.workshop_screenshots [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
from pathlib import Path
from urllib.parse import urlencode

TEXT = "The capital of France is Paris, and the capital of Italy is"
VIEWPORT = {"width": 1280, "height": 900}
TIMEOUT_MS = 60_000


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--out", type=Path, default=Path("docs/screenshots"), help="where the PNGs go")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    from playwright.sync_api import sync_playwright

    import glassformer as gf
    from glassformer.workshop.server import create_app
    from tests.workshop_server import log_in, serving

    models = {"smollm2": gf.load("smollm2-135m-instruct"), "minilm-l6": gf.load("minilm-l6")}
    classifier = Path("runs/genre-minilm")
    if (classifier / "model.safetensors").exists():
        models |= {"genre-minilm": gf.load(classifier)}
    app = create_app(models, origins={"genre-minilm": "minilm-l6"})
    with serving(app) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page(viewport=VIEWPORT)
        log_in(page, url)
        page.set_default_timeout(TIMEOUT_MS)

        def open_(**query) -> None:
            page.goto(f"{url}?{urlencode({'model': 'smollm2', 'text': TEXT, **query})}")  # or as given
            page.wait_for_selector('body[data-walks="1"][data-state="ready"]', state="attached")

        def shot(name: str, locator=None) -> None:
            """The viewport, or one panel: the window then as tall as the page, so the sticky
            header covers none of it."""
            path = args.out / f"workshop-{name}.png"
            if locator is not None:
                height = page.evaluate("document.documentElement.scrollHeight")
                page.set_viewport_size({"width": VIEWPORT["width"], "height": height})
                page.evaluate("window.scrollTo(0, 0)")
            (locator or page).screenshot(path=str(path))
            page.set_viewport_size(VIEWPORT)
            print("wrote", path)

        open_(level="beginner", temperature=0.8)
        page.wait_for_selector('#lines[data-ready="1"]', state="attached")
        shot("beginner")
        shot("overview", page.locator("#overview-panel"))
        shot("tour", page.locator("#walk").locator(".."))
        open_(level="beginner", zoom="blocks.3")
        page.wait_for_selector("#overview .ov-head canvas", state="attached")
        shot("overview-block", page.locator("#overview-panel"))
        open_(level="intermediate", zoom="blocks.3.attn:2:8")
        page.wait_for_selector('#overview .qk-view[data-ready="1"]', state="attached")
        shot("overview-head", page.locator("#overview-panel"))

        for width, height in ((1920, 1080), (1280, 720)):  # a projector, a small one
            page.set_viewport_size({"width": width, "height": height})
            page.goto(
                f"{url}?{urlencode({'model': 'smollm2', 'text': TEXT, 'level': 'beginner', 'lock': 1})}"
            )
            page.wait_for_selector('body[data-walks="1"][data-state="ready"]', state="attached")
            for _ in range(7):
                page.keyboard.press("ArrowRight")
            path = args.out / f"workshop-teaching-{width}.png"
            page.screenshot(path=str(path))
            print("wrote", path)
        page.set_viewport_size({"width": 390, "height": 844})  # a phone
        open_(level="beginner")
        path = args.out / "workshop-phone.png"
        page.screenshot(path=str(path))
        print("wrote", path)
        page.set_viewport_size(VIEWPORT)

        page.goto(
            f"{url}?{urlencode({'model': 'minilm-l6', 'text': 'A cat sat on the mat.', 'level': 'beginner'})}"
        )
        page.wait_for_selector('#prediction .similarity[data-state="ready"]', state="attached")
        shot("sentence-vector", page.locator("#prediction-panel"))

        long_text = " ".join(["The old sailor watched the grey sea roll in under the morning fog."] * 70)
        open_(text=long_text, level="intermediate", stage="blocks.0.attn.pattern")
        page.wait_for_selector(
            '.detail[data-stage="blocks.0.attn.pattern"][data-ready="1"]', state="attached"
        )
        shot("long-attention", page.locator(".detail"))

        open_(level="advanced")
        page.click("#tokens .tokenization summary")
        page.wait_for_selector('#tokens .tokenization[data-state="ready"]', state="attached")
        shot("tokenization", page.locator("#tokens").locator(".."))

        open_(level="intermediate", stage="blocks.0.attn.scores")
        page.wait_for_selector('.detail[data-ready="1"]', state="attached")
        page.locator('[data-stage="blocks.0.attn.q"]').scroll_into_view_if_needed()
        shot("intermediate")

        open_(level="advanced", stage="blocks.5.attn.pattern")
        page.click('.detail .head-button[data-head="3"]')
        page.wait_for_selector('.detail[data-head="3"][data-ready="1"] .qk-view, .detail[data-ready="1"]')
        shot("advanced")
        page.wait_for_selector(".detail-view [data-ready='1']", state="attached")
        shot("query-key", page.locator(".detail"))

        open_(level="advanced", stage="blocks.5.ffn.act")
        page.wait_for_selector(".detail-view [data-ready='1']", state="attached")
        shot("ffn-neurons", page.locator(".detail"))

        open_(level="intermediate", temperature=0)
        page.fill("#generate .gen-count", "24")
        page.click("#generate .gen-start")
        page.wait_for_selector("#generate .tl-step", state="attached")
        page.locator('.tl-step[data-step="9"]').click()
        page.wait_for_selector('body[data-walks="2"][data-state="ready"]', state="attached")
        shot("timeline", page.locator("#generate-panel"))

        open_(level="advanced", intervene="5.3.scale*4,7.1.zero", compare="smollm2")
        page.wait_for_selector('#compare[data-state="ready"]', state="attached")
        shot("compare", page.locator("#compare-panel"))

        open_(level="intermediate")
        page.select_option("#explain .xp-method >> nth=0", "ig")
        page.select_option("#explain .xp-method >> nth=1", "occlusion")
        page.check("#explain .xp-keep")  # SmolLM2's first token is its attention sink
        page.click("#explain .xp-go")
        page.wait_for_selector('#explain[data-state="ready"]', state="attached")
        shot("explain", page.locator("#explain-panel"))
        page.click("#costs summary")
        page.wait_for_selector('#costs[data-state="ready"]', state="attached")
        shot("costs", page.locator("#model-panel"))

        page.goto(f"{url}lessons?lesson=3")
        page.wait_for_selector('body[data-state="ready"]', state="attached")
        page.locator(".code-link >> nth=0").click()
        page.wait_for_selector("#code-panel:not([hidden])")
        shot("lesson")
        page.click("#run-lesson")
        page.wait_for_selector('#lesson[data-run="done"]', state="attached")
        page.locator(".output-text >> nth=0").scroll_into_view_if_needed()
        shot("lesson-run")

        if "genre-minilm" in models:
            passage = "Now is the winter of our discontent made glorious summer by this sun of York"
            page.goto(
                f"{url}?{urlencode({'model': 'genre-minilm', 'text': passage, 'level': 'intermediate'})}"
            )
            page.wait_for_selector('body[data-walks="1"][data-state="ready"]', state="attached")
            shot("classifier")
            page.click(".change-go")
            page.wait_for_selector('#change[data-state="ready"]', state="attached")
            shot("fine-tuning-changed", page.locator("#change-panel"))
        browser.close()


if __name__ == "__main__":
    main()
