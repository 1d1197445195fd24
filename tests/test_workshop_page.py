"""The workshop's page in a real browser: Debian's Chromium driven by Playwright.

One server per module (`tests.workshop_server.serving`) holds three tiny models that read
characters: a Llama-style decoder (RoPE, grouped-query attention), an encoder and a
T5-style encoder-decoder. Each test opens the page from a URL, as a shared link would,
checks what it draws against the library (`lm.trace`, `prediction.next_token`), and ends
with the checks every page passes: no console errors and no request to another origin.
Screenshots go to the test's tmp dir, and for review to $GLASSFORMER_SCREENSHOTS when it
is set (`tests.screenshots.keep_screenshot`).
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import torch

import glassformer as gf
from glassformer.sampling import SAMPLING_DEFAULTS, generation_settings
from glassformer.tokenizers.char import CharTokenizer
from glassformer.workshop.server import create_app
from glassformer.workshop.walk.architecture import stages
from glassformer.workshop.walk.prediction import next_token
from tests.conftest import tiny_model
from tests.screenshots import keep_screenshot
from tests.workshop_server import log_in, serving, wait_until

CHARS = "abcdefghijklmnopqrstuvwxyz .,"
TEXT = "the cat sat on the mat"
MAX_SEQ_LEN = 80
LONG_TEXT = "the cat sat on the mat and the dog sat on the log, said the old man."  # > 64: no mean_pattern
TOO_LONG = "abcd " * 20  # 100 characters > max_seq_len
VIEWPORT = {"width": 1280, "height": 800}
WEIGHT_STEP = 1 / 255  # attention weights travel as bytes
SHOWN_WEIGHT = 5e-4  # the page prints weights with 3 decimals
ATTENTION_SHARPNESS = 15.0
BROWSER_400 = "Failed to load resource: the server responded with a status of 400 (Bad Request)"


# models and server ---------------------------------------------------------------------
def char_lm(max_seq_len: int = MAX_SEQ_LEN, **fields) -> gf.LanguageModel:
    """A tiny model that reads characters, its query/key/value weights scaled up: at init
    every head attends almost uniformly, and a test could not tell one head from another."""
    tokenizer = CharTokenizer.from_text(CHARS)
    net = tiny_model(vocab_size=tokenizer.vocab_size, max_seq_len=max_seq_len, **fields)
    with torch.no_grad():
        for name, weight in net.named_parameters():
            if re.search(r"attn\.(qkv|q|kv)_proj\.weight$", name):
                weight.mul_(ATTENTION_SHARPNESS)
    return gf.LanguageModel(net, tokenizer)


def distinctive_cell(weights: torch.Tensor) -> tuple[int, int, int]:
    """The (head, query, key) whose weight differs most from every other head's (h t s);
    never head 0, the one shown first, so a page that ignores the head selector fails."""
    gaps = torch.stack(
        [(torch.cat([weights[:h], weights[h + 1 :]]) - weights[h]).abs().amin(0) for h in range(len(weights))]
    )  # h t s
    gaps[0] = -1
    head, query, key = (int(i) for i in torch.unravel_index(gaps.argmax(), gaps.shape))
    return head, query, key


@pytest.fixture(scope="module")
def models() -> dict[str, gf.LanguageModel]:
    return {
        "tiny": char_lm(positions="rope", n_kv_heads=2, norm="rmsnorm", activation="swiglu"),
        "encoder": char_lm(family="encoder"),
        "seq2seq": char_lm(family="encoder_decoder", positions="t5_relative", decoder_start_token_id=0),
    }


@pytest.fixture(scope="module")
def server(models):
    with serving(create_app(models)) as url:
        yield url


class Workshop:
    """The page in one tab, with every request and console error it made."""

    def __init__(self, browser, base: str, tmp_path: Path) -> None:
        self.base, self.tmp_path = base, tmp_path
        self.page = browser.new_page(viewport=VIEWPORT)
        log_in(self.page, base)
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))

    def open(self, **query) -> None:
        """Load the page from a shared link and wait for its first walk (or its error)."""
        self.page.goto(f"{self.base}?{urlencode(query)}")
        self.page.wait_for_selector('body[data-walks="1"], body[data-state="error"]', state="attached")

    def wait_walks(self, n: int) -> None:
        self.page.wait_for_selector(f'body[data-walks="{n}"][data-state="ready"]', state="attached")

    def level(self, name: str) -> None:
        self.page.click(f"#level span:text-is('{name}')")
        self.page.wait_for_selector(f'body[data-level="{name}"]', state="attached")

    def query(self) -> dict[str, str]:
        return {key: values[0] for key, values in parse_qs(urlsplit(self.page.url).query).items()}

    def texts(self, selector: str) -> list[str]:
        return self.page.locator(selector).all_inner_texts()

    def shot(self, name: str, full_page: bool = True) -> None:
        if full_page:
            self.page.evaluate("window.scrollTo(0, 0)")
        path = self.tmp_path / f"workshop_{name}.png"
        self.page.screenshot(path=str(path), full_page=full_page)
        assert path.stat().st_size > 1000
        keep_screenshot(path)

    def part_shot(self, selector: str, name: str) -> None:
        """One part of the page, for a person to look at: the window made as tall as the page
        (the sticky header then covers nothing) and no hover tip."""
        path = self.tmp_path / f"workshop_{name}.png"
        self.page.mouse.move(0, 0)
        height = self.page.evaluate("document.documentElement.scrollHeight")
        self.page.set_viewport_size({**VIEWPORT, "height": height})
        self.page.locator(selector).screenshot(path=str(path))
        self.page.set_viewport_size(VIEWPORT)
        assert path.stat().st_size > 1000
        keep_screenshot(path)

    def close(self, allowed_errors: tuple[str, ...] = ()) -> None:
        """The checks every page passes: no errors, nothing asked of another origin."""
        self.page.close()
        errors = [e for e in self.errors if e not in allowed_errors]
        assert errors == [], errors
        foreign = [url for url in self.requests if not url.startswith(self.base)]
        assert foreign == [], f"the page asked other origins: {foreign}"


# what the page should show ---------------------------------------------------------------
def shown_token(text: str) -> str:
    """The page's spelling of a token: whitespace made visible."""
    return text.replace(" ", "\u2423").replace("\n", "\u21b5").replace("\t", "\u21e5")


def visible_stages(workshop: Workshop) -> list[str]:
    return workshop.page.locator(".step").evaluate_all("steps => steps.map(s => s.dataset.stage)")


def collapsed_blocks(workshop: Workshop) -> list[str]:
    return workshop.page.locator(".block-line").evaluate_all("lines => lines.map(b => b.dataset.group)")


def assert_walk_drawn(workshop: Workshop, lm) -> None:
    """Every step of the model's walk is drawn, in order, or folded into its block's line."""
    plan = stages(lm.net)
    folded = set(collapsed_blocks(workshop))
    assert visible_stages(workshop) == [s["id"] for s in plan if s["group"] not in folded]
    blocks = {s["group"] for s in plan if ".blocks." in f".{s['group']}"}
    assert folded < blocks and len(blocks - folded) == 1  # exactly one block is open


def sampling_disabled(workshop: Workshop) -> bool:
    return workshop.page.eval_on_selector("#temperature", "input => input.matches(':disabled')")


def expected_steps(lm, text: str, **sampling) -> tuple[list, int]:
    """The prediction pipeline as the library computes it for these settings."""
    ids = lm.inputs.single(text)
    logits = lm.trace(text, ["logits"])["logits"][0, -1]  # v
    return next_token(logits, ids, generation_settings(max_new_tokens=1, **sampling))


def assert_prediction_shown(workshop: Workshop, lm, text: str, decimals: int, **sampling) -> None:
    """Each step's bars show the probabilities next_token computes, to the shown precision."""
    steps, token = expected_steps(lm, text, **sampling)
    page = workshop.page
    assert page.locator(".pred-step").evaluate_all("s => s.map(e => e.dataset.step)") == [
        s.name for s in steps
    ]
    for step in steps:
        probs = torch.softmax(step.scores.float(), dim=-1)[0]  # v
        rows = page.locator(f'.pred-step[data-step="{step.name}"] .bar-row')
        kept = int(page.locator(f'.pred-step[data-step="{step.name}"]').get_attribute("data-kept"))
        assert kept == int(torch.isfinite(step.scores).sum())
        shown = []
        for i in range(rows.count()):
            row = rows.nth(i)
            token_id = int(row.get_attribute("data-id"))
            percent = float(row.locator(".bar-p").inner_text().rstrip("%"))
            assert abs(percent - 100 * float(probs[token_id])) <= 0.5 * 10**-decimals + 1e-6, (
                step.name,
                token_id,
            )
            assert row.locator(".bar-token").inner_text() == shown_token(lm.tokenizer.id_to_token(token_id))
            shown.append(float(probs[token_id]))
        assert rows.count() > 0 and shown == sorted(shown, reverse=True)
        assert shown[0] == pytest.approx(float(probs.max()))
    chosen = page.locator(".pred-token")
    assert int(chosen.get_attribute("data-id")) == token
    assert shown_token(lm.tokenizer.id_to_token(token)) in chosen.inner_text()


# tests ---------------------------------------------------------------------------------
def test_page_shows_the_tokens_and_every_stage(workshop, models):
    lm = models["tiny"]
    workshop.open(model="tiny", text=TEXT, level="intermediate")
    page = workshop.page
    assert workshop.texts("#tokens .chip-text") == [shown_token(c) for c in TEXT]
    ids = lm.tokenizer.encode(TEXT)
    assert page.locator("#tokens .chip").nth(4).get_attribute("title") == f"token 4: id {ids[4]}"
    assert_walk_drawn(workshop, lm)
    assert collapsed_blocks(workshop) == ["blocks.1"]  # block 0 open, block 1 one line
    q = page.locator('[data-stage="blocks.0.attn.q"] .step-shape').inner_text()
    assert q == f"h t e \u2192 [4, {len(TEXT)}, 8]"
    assert (
        page.locator('[data-stage="blocks.0.attn.k"] .step-shape').inner_text()
        == f"g s e \u2192 [2, {len(TEXT)}, 8]"
    )

    page.click('.block-line[data-group="blocks.1"]')  # open block 1: block 0 folds
    page.wait_for_selector('[data-stage="blocks.1.ffn.act"]')
    assert collapsed_blocks(workshop) == ["blocks.0"]
    assert_walk_drawn(workshop, lm)
    assert workshop.query()["text"] == TEXT and workshop.query()["model"] == "tiny"
    workshop.shot("intermediate_block1")


def test_the_tokenizer_explains_each_token(workshop, models):
    page, lm = workshop.page, models["tiny"]
    workshop.open(model="tiny", text=TEXT, level="intermediate")
    page.click("#tokens .tokenization summary")
    page.wait_for_selector('#tokens .tokenization[data-state="ready"]', state="attached")
    pieces = page.locator("#tokens .tk-piece")
    assert pieces.count() == len(TEXT)
    shown = page.locator("#tokens .tk-token small").all_inner_texts()
    assert [int(i) for i in shown] == lm.tokenizer.encode(TEXT)
    assert "U+0020 SPACE" in pieces.nth(3).inner_text()
    workshop.level("beginner")
    assert page.locator("#tokens .tokenization").count() == 0  # few numbers for beginners


def test_each_level_renders(workshop, models):
    lm = models["tiny"]
    workshop.open(model="tiny", text=TEXT, level="beginner")
    page = workshop.page
    # beginner: which words look at which, the prediction, plain words and no trace names
    page.wait_for_selector('#lines[data-ready="1"] line', state="attached")
    mean = lm.trace(TEXT, ["blocks.0.attn.pattern"])["blocks.0.attn.pattern"][0].mean(dim=0)  # t s
    lines = page.locator("#lines line")
    assert lines.count() > len(TEXT)  # every token looks at one token at least
    for i in range(0, lines.count(), 7):
        line = lines.nth(i)
        query, key = int(line.get_attribute("data-query")), int(line.get_attribute("data-key"))
        assert key <= query  # causal: no line to a later token
        assert abs(float(line.get_attribute("data-weight")) - float(mean[query, key])) <= WEIGHT_STEP
    assert page.locator(".pred-step").count() >= 1 and page.locator(".pred-token").is_visible()
    explained = page.locator(".step").evaluate_all(
        "steps => steps.map(s => Boolean(s.querySelector('.step-explain')))"
    )
    assert explained and all(explained)  # every stop of the tour says what it means
    assert page.locator(".step-trace").count() == 0 and page.locator(".step-eq").count() == 0
    workshop.shot("beginner")
    page.locator(".lines-layer").fill("1")  # the layer slider: layer 1's pattern
    page.wait_for_selector('#lines[data-ready="1"][data-layer="1"]', state="attached")
    assert workshop.query()["layer"] == "1"

    workshop.level("intermediate")  # equations with this input's numbers, norms, heads
    assert not page.locator("#lines-panel").is_visible()
    scores = page.locator('[data-stage="blocks.0.attn.scores"] .step-eq').inner_text()
    assert "\u221a8" in scores and "scores from" in scores  # d_head = 32 / 4
    assert "GQA: 2 key/value heads" in page.locator("#architecture").inner_text()
    assert page.locator(".layer-chart rect").count() == 1 + lm.config.n_layers
    assert workshop.query()["level"] == "intermediate"
    workshop.shot("intermediate")

    workshop.level("advanced")  # trace names, code locations, token ids
    traces = workshop.texts(".step-trace")
    assert "blocks.0.attn.pattern" in traces and "embed.tokens" in traces
    assert (
        "glassformer/nn/attention.py"
        in page.locator('[data-stage="blocks.0.attn.pattern"] .step-code').inner_text()
    )
    assert workshop.texts("#tokens .chip-id")[:3] == [str(i) for i in lm.tokenizer.encode(TEXT)[:3]]
    workshop.shot("advanced")


def test_attention_heatmap_hover_shows_the_traced_weight(workshop, models):
    lm = models["tiny"]
    workshop.open(model="tiny", text=TEXT, level="advanced")
    page = workshop.page
    page.click('.block-line[data-group="blocks.1"]')
    page.click('[data-stage="blocks.1.attn.pattern"] > .step-head')
    page.wait_for_selector('.detail[data-ready="1"] .hm-canvas')
    assert workshop.query()["stage"] == "blocks.1.attn.pattern"
    weights = lm.trace(TEXT, ["blocks.1.attn.pattern"])["blocks.1.attn.pattern"][0]  # h t s
    head, query, key = distinctive_cell(weights)
    others = torch.cat([weights[:head], weights[head + 1 :]])[:, query, key]
    assert (others - weights[head, query, key]).abs().min() > 4 * WEIGHT_STEP  # the cell tells heads apart
    page.click(f'.head-button[data-head="{head}"]')
    page.wait_for_selector(f'.detail[data-head="{head}"][data-ready="1"] .hm-canvas')
    detail = page.locator(".detail")
    assert detail.locator(".hm-rows .hm-label").count() == len(TEXT)  # queries
    assert detail.locator(".hm-cols .hm-label").count() == len(TEXT)  # keys
    canvas = detail.locator(".hm-canvas")
    canvas.evaluate("c => c.scrollIntoView({block: 'center'})")
    box = canvas.bounding_box()
    cell_w, cell_h = box["width"] / len(TEXT), box["height"] / len(TEXT)
    canvas.hover(position={"x": (key + 0.5) * cell_w, "y": (query + 0.5) * cell_h})
    tip = detail.locator(".hm-tip")
    tip.wait_for(state="visible")
    expected = float(weights[head, query, key])
    assert (tip.get_attribute("data-row"), tip.get_attribute("data-col")) == (str(query), str(key))
    text = tip.inner_text()
    assert text.startswith(f"head {head}: query \u2018{shown_token(TEXT[query])}\u2019 ({query})")
    assert f"key \u2018{shown_token(TEXT[key])}\u2019 ({key})" in text
    shown = float(re.search(r"weight ([0-9.]+)$", text).group(1))
    assert abs(shown - expected) <= WEIGHT_STEP + SHOWN_WEIGHT
    assert abs(float(tip.get_attribute("data-value")) - expected) <= WEIGHT_STEP
    workshop.shot("attention_heatmap", full_page=False)

    workshop.open(model="tiny", text=TEXT, level="advanced", stage="blocks.1.attn.pattern")  # the shared link
    page.wait_for_selector('.detail[data-stage="blocks.1.attn.pattern"][data-ready="1"] .hm-canvas')
    assert collapsed_blocks(workshop) == ["blocks.0"]  # the open step's block is the open one


def test_sampling_controls_update_the_prediction(workshop, models):
    lm = models["tiny"]
    workshop.open(model="tiny", text=TEXT, level="intermediate", temperature=0.8)
    page = workshop.page
    assert_prediction_shown(workshop, lm, TEXT, decimals=2, temperature=0.8)

    page.fill("#temperature", "1.7")  # one debounced walk request
    page.wait_for_selector('#prediction[data-temperature="1.7"]', state="attached")
    workshop.wait_walks(2)
    assert_prediction_shown(workshop, lm, TEXT, decimals=2, temperature=1.7)
    page.fill("#top_k", "5")
    page.wait_for_selector('#prediction[data-top-k="5"]', state="attached")
    assert_prediction_shown(workshop, lm, TEXT, decimals=2, temperature=1.7, top_k=5)
    assert page.locator('.pred-step[data-step="top_k"]').get_attribute("data-kept") == "5"
    assert workshop.query()["temperature"] == "1.7" and workshop.query()["top_k"] == "5"

    # the same link opened anew: greedy, with a repetition penalty
    workshop.open(model="tiny", text=TEXT, level="beginner", temperature=0, repetition_penalty=1.5)
    assert_prediction_shown(workshop, lm, TEXT, decimals=1, temperature=0, repetition_penalty=1.5)
    assert "greedy" in page.locator(".pred-token").inner_text()
    workshop.shot("greedy_prediction")


def test_a_link_without_sampling_settings_opens_on_the_library_s_defaults(workshop, models, monkeypatch):
    """The form shows `sampling.SAMPLING_DEFAULTS` (sent with /api/models: the page keeps no
    copy), and the prediction is the one lm.generate's defaults make."""
    workshop.open(model="tiny", text=TEXT, level="intermediate")
    page = workshop.page
    assert {key: float(page.input_value(f"#{key}")) for key in SAMPLING_DEFAULTS} == SAMPLING_DEFAULTS
    assert_prediction_shown(workshop, models["tiny"], TEXT, decimals=2)
    wait_until(page, "new URLSearchParams(window.location.search).has('temperature')")
    assert {key: float(workshop.query()[key]) for key in SAMPLING_DEFAULTS} == SAMPLING_DEFAULTS

    other = {"temperature": 1.3, "top_p": 0.5}  # the server's answer is what the page follows
    monkeypatch.setattr("glassformer.workshop.model_routes.SAMPLING_DEFAULTS", other)
    workshop.open(model="tiny", text=TEXT, level="intermediate")
    assert {key: float(page.input_value(f"#{key}")) for key in other} == other
    assert_prediction_shown(workshop, models["tiny"], TEXT, decimals=2, **other)
    workshop.close()


def test_encoder_and_encoder_decoder_draw_their_own_stages(workshop, models):
    page = workshop.page
    workshop.open(model="encoder", text=TEXT, level="intermediate")
    assert_walk_drawn(workshop, models["encoder"])
    assert page.locator(".pred-token").count() == 0  # no next token: the words its MLM head reads
    assert page.locator("#prediction .masked-position").count() == len(TEXT)
    assert page.inner_text("#prediction-title") == "What an encoder predicts"  # not "The next token"
    assert sampling_disabled(workshop)
    assert page.locator('[data-stage="blocks.0.attn.mask"]').count() == 0  # bidirectional: no mask step
    workshop.shot("encoder")

    workshop.open(model="seq2seq", text=TEXT, level="advanced")
    lm = models["seq2seq"]
    assert page.locator('.stack[data-stack="encoder"]').count() == 1
    assert page.locator('.stack[data-stack="decoder"]').count() == 1
    assert len(workshop.texts("#tokens .token-row")) == 2  # encoder input, decoder input
    page.click('.block-line[data-group="decoder.blocks.0"]')
    page.wait_for_selector('[data-stage="decoder.blocks.0.cross_attn.pattern"]')
    assert_walk_drawn(workshop, lm)
    assert page.locator(".pred-step").count() >= 1 and not sampling_disabled(workshop)
    page.click('[data-stage="decoder.blocks.0.cross_attn.pattern"] > .step-head')
    page.wait_for_selector('.detail[data-ready="1"] .hm-canvas')
    detail = page.locator(".detail")
    assert detail.locator(".hm-rows .hm-label").count() == 1  # queries: the decoder's start token
    assert detail.locator(".hm-cols .hm-label").count() == len(TEXT)  # keys: the encoder's tokens
    workshop.shot("encoder_decoder")


def test_a_too_long_text_shows_the_servers_error(workshop):
    page = workshop.page
    workshop.open(model="tiny", text=TOO_LONG)
    message = page.locator("#message")
    assert message.is_visible()
    assert f"more than max_seq_len={MAX_SEQ_LEN}" in message.inner_text()
    workshop.shot("error", full_page=False)
    page.fill("#text", TEXT)
    page.press("#text", "Enter")  # Enter runs the text
    workshop.wait_walks(1)
    assert not message.is_visible()
    assert len(workshop.texts("#tokens .chip")) == len(TEXT)
    workshop.close(allowed_errors=(BROWSER_400,))  # Chromium's own line for the 400 answer


def test_a_long_text_fetches_the_pattern_for_the_lines(workshop, models):
    lm = models["tiny"]
    workshop.open(model="tiny", text=LONG_TEXT, level="beginner", layer=1)
    page = workshop.page
    page.wait_for_selector('#lines[data-ready="1"][data-layer="1"] line', state="attached")
    assert any(url.endswith("/api/stage") for url in workshop.requests)
    mean = lm.trace(LONG_TEXT, ["blocks.1.attn.pattern"])["blocks.1.attn.pattern"][0].mean(dim=0)  # t s
    line = page.locator("#lines line").last
    query, key = int(line.get_attribute("data-query")), int(line.get_attribute("data-key"))
    assert abs(float(line.get_attribute("data-weight")) - float(mean[query, key])) <= WEIGHT_STEP


def test_the_view_links_open_the_notebook_views_of_the_current_text(workshop, browser):
    page = workshop.page
    workshop.open(model="tiny", text=TEXT, level="advanced", layer=1)
    links = page.locator("#views a")
    views = ["head", "model", "neuron", "tokens", "lens", "embeddings"]
    assert [a.get_attribute("data-view") for a in links.all()] == views
    with page.context.expect_page() as opened:
        page.click('#views a[data-view="head"]')
    view = opened.value
    errors = []
    view.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    view.wait_for_load_state()
    assert "layer=1" in view.url and parse_qs(urlsplit(view.url).query)["text"] == [TEXT]
    view.wait_for_selector("[data-ready]", state="attached")
    assert errors == []
    view.close()
    for name, drawn in (("lens", "svg"), ("embeddings", ".plot-container")):  # figure pages
        with page.context.expect_page() as opened:
            page.click(f'#views a[data-view="{name}"]')
        view, asked = opened.value, []
        view.on("request", lambda request, asked=asked: asked.append(request.url))
        view.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        view.wait_for_selector(drawn, state="attached")
        assert errors == [] and all(url.startswith(workshop.base) or url.startswith("data:") for url in asked)
        view.close()


def test_generate_streams_the_reply_lm_generate_makes(workshop, models):
    page = workshop.page
    workshop.open(model="tiny", text=TEXT, level="beginner", temperature=0.8, seed=4)
    page.fill("#generate .gen-count", "10")
    page.click("#generate .gen-start")
    page.wait_for_selector('#generate[data-state="done"]', state="attached")
    lm = models["tiny"]
    expected = lm.generate(lm.tokenizer.encode(TEXT), max_new_tokens=10, temperature=0.8, seed=4)
    titles = [t.get_attribute("title") for t in page.locator("#generate .gen-token").all()]
    assert [int(title.split()[1].rstrip(",")) for title in titles] == expected
    assert "10 tokens in" in page.locator("#generate .gen-info").inner_text()
    workshop.shot("generate", full_page=False)


def test_ablating_a_head_updates_the_prediction_as_the_library_does(workshop, models):
    from glassformer.inspect.interventions import head_ablation_hook

    page, lm = workshop.page, models["tiny"]
    workshop.open(model="tiny", text=TEXT, level="advanced", temperature=0, intervene="1.2.zero")
    assert workshop.texts("#interventions .iv-item") == ["layer 1, head 2: zeroed restore"]
    with lm.net.hooks({"blocks.1.attn.z": head_ablation_hook([2], "zero")}):
        steps, token = expected_steps(lm, TEXT, temperature=0)
    assert int(page.locator(".pred-token").get_attribute("data-id")) == token
    top = page.locator('.pred-step[data-step="logits"] .bar-row').first
    expected = torch.softmax(steps[0].scores, -1).max().item()
    assert abs(float(top.locator(".bar-p").inner_text().rstrip("%")) - 100 * expected) < 0.01
    page.fill("#interventions .iv-layer", "0")
    page.fill("#interventions .iv-head", "1")
    page.click("#interventions .iv-add")
    workshop.wait_walks(2)
    assert workshop.query()["intervene"] == "1.2.zero,0.1.zero"
    page.locator("#interventions .iv-remove").first.click()
    page.locator("#interventions .iv-remove").first.click()
    workshop.wait_walks(4)
    assert "intervene" not in workshop.query()
    assert_prediction_shown(workshop, lm, TEXT, decimals=2, temperature=0)
    workshop.shot("interventions", full_page=False)


def test_an_encoder_decoder_takes_a_decoder_text(workshop, models):
    page = workshop.page
    workshop.open(model="seq2seq", text=TEXT, level="advanced")
    assert page.locator("#decoder-row").is_visible()
    page.fill("#decoder_text", "the")
    page.press("#decoder_text", "Enter")
    workshop.wait_walks(2)
    assert workshop.query()["decoder_text"] == "the"
    lm = models["seq2seq"]
    assert len(workshop.texts("#tokens .chip")) == len(TEXT) + 1 + len("the")  # source, start, "the"
    page.select_option("#model", "tiny")
    workshop.wait_walks(3)
    assert not page.locator("#decoder-row").is_visible() and "decoder_text" not in workshop.query()
    assert lm.config.family == "encoder_decoder"


def shown_steps(workshop: Workshop) -> list[str]:
    """The steps of the walk a reader sees (teaching mode hides those not yet revealed)."""
    return workshop.page.locator(".step:visible").evaluate_all("steps => steps.map(s => s.dataset.stage)")


def test_teaching_mode_locks_the_form_and_reveals_the_walk_step_by_step(workshop, models):
    lm = models["tiny"]
    plan = [s["id"] for s in stages(lm.net)]
    workshop.open(model="tiny", text=TEXT, lock="1", level="intermediate")  # the full walk
    page = workshop.page
    assert workshop.query()["lock"] == "1"
    # the form is locked: no text, model, sampling or Run; the level switch and a badge stay
    assert not page.locator("#text").is_visible() and not page.locator("#text").is_editable()
    assert not page.locator("#run").is_visible() and not page.locator("#model").is_visible()
    assert not page.locator("#temperature").is_visible()
    badge = page.locator("#lock-badge")
    assert badge.is_visible() and badge.inner_text() == "teaching mode"
    assert page.locator("#level").is_visible()
    counter = page.locator(".reveal-count")
    # one step at first; Next three times: four, in the walk's order, block 0 opened for the fourth
    assert shown_steps(workshop) == plan[:1]
    assert counter.inner_text() == f"step 1 of {len(plan)}"
    assert not page.locator("#prediction").is_visible() and not page.locator("#generate").is_visible()
    for _ in range(3):
        page.click(".reveal-next")
    assert shown_steps(workshop) == plan[:4]
    assert counter.inner_text() == f"step 4 of {len(plan)}"
    assert page.locator('.group.open[data-group="blocks.0"]').is_visible()
    page.keyboard.press("ArrowLeft")
    assert shown_steps(workshop) == plan[:3]
    page.keyboard.press("ArrowRight")
    assert shown_steps(workshop) == plan[:4]
    # the prediction waits for the last step (the logits)
    shown = 4
    while shown < len(plan):
        assert not page.locator("#prediction").is_visible(), plan[shown - 1]
        page.click(".reveal-next")
        shown += 1
        assert shown_steps(workshop)[-1] == plan[shown - 1]
    assert plan[-1] == "logits" and counter.inner_text() == f"step {len(plan)} of {len(plan)}"
    assert page.locator("#prediction").is_visible() and page.locator(".pred-token").is_visible()
    assert page.locator(".reveal-next").is_disabled()
    assert collapsed_blocks(workshop) == ["blocks.0"]  # the blocks passed fold; the last one is open
    page.keyboard.press("ArrowLeft")
    assert not page.locator("#prediction").is_visible()
    page.keyboard.press("ArrowRight")
    # the level can still change, and the reveal survives it
    workshop.level("advanced")
    assert shown_steps(workshop)[-1] == "logits" and page.locator("#prediction").is_visible()
    assert workshop.query()["lock"] == "1"
    workshop.shot("teaching_mode")


def test_the_logit_lens_panel_follows_the_final_choice(workshop, models):
    page, lm = workshop.page, models["tiny"]
    workshop.open(model="tiny", text=TEXT, level="intermediate")
    page.wait_for_selector('#lens[data-state="ready"]', state="attached")
    rows = page.locator("#lens .lens-row")
    assert rows.count() == lm.config.n_layers + 1  # the embeddings, then after each block
    final = int(lm.logits(TEXT)[0, -1].argmax())
    last = rows.nth(rows.count() - 1)
    assert last.get_attribute("data-rank") == "1"
    assert int(last.locator(".lens-token").first.get_attribute("data-id")) == final
    workshop.level("beginner")
    assert not page.locator("#lens-panel").is_visible()


def test_back_and_forward_return_to_the_runs_before(workshop):
    """Each run is a history entry: Back shows the text before, Forward the one after, and
    the first Back after opening a link does not leave the workshop."""
    page = workshop.page
    workshop.open(model="tiny", text="the cat")
    for n, text in enumerate(["the dog sat", "a mat"], start=2):
        page.fill("#text", text)
        page.press("#text", "Enter")
        workshop.wait_walks(n)
    assert page.input_value("#text") == "a mat"
    page.go_back()
    workshop.wait_walks(4)
    assert page.input_value("#text") == "the dog sat" and "text=the+dog+sat" in page.url
    assert len(workshop.texts("#tokens .chip")) == len("the dog sat")
    page.go_back()
    workshop.wait_walks(5)
    assert page.input_value("#text") == "the cat"
    page.go_forward()
    workshop.wait_walks(6)
    assert page.input_value("#text") == "the dog sat"
    workshop.close()


PROJECTOR_TEXT_PX = 20  # the floor for body text in teaching mode


def rendered_px(page, selector: str) -> float:
    """The size text under ``selector`` is drawn at: its font size times the zoom applied."""
    return page.evaluate(
        "(s) => { const e = document.querySelector(s);"
        " return parseFloat(getComputedStyle(e).fontSize) * e.currentCSSZoom; }",
        selector,
    )


def test_teaching_mode_is_driven_by_presenter_keys_on_a_projector(workshop, models):
    """At 1280x720: Space / arrows / Home / End / a block's number move the reveal, the current
    step is marked and in view, the text is at least 20 px, the prompt is shown, and the
    attention-lines panel waits for the first attention weights."""
    workshop.page.set_viewport_size({"width": 1280, "height": 720})
    workshop.open(model="tiny", text=TEXT, lock="1", level="beginner")
    page = workshop.page
    plan = page.locator(".step").evaluate_all("steps => steps.map(s => s.dataset.stage)")  # hidden ones too
    assert plan[0] == "tokens" and plan[-1] == "tour.sample" and len(plan) <= 20  # the tour's stops
    current = page.locator('.step[aria-current="step"]')
    assert current.get_attribute("data-stage") == plan[0]
    assert page.inner_text("#prompt-shown") == TEXT and page.locator("#prompt-shown").is_visible()
    assert rendered_px(page, ".step .step-title") >= PROJECTOR_TEXT_PX
    assert rendered_px(page, "#prompt-shown") >= PROJECTOR_TEXT_PX
    assert not page.locator("#lines-panel").is_visible()  # no attention shown before its step
    page.keyboard.press(" ")
    assert shown_steps(workshop) == plan[:2] and current.get_attribute("data-stage") == plan[1]
    page.keyboard.press("0")  # block 0's first stop
    first_of_block_0 = next(i for i, s in enumerate(plan) if s.startswith("blocks.0."))
    assert page.locator(".reveal-count").inner_text() == f"step {first_of_block_0 + 1} of {len(plan)}"
    assert current.get_attribute("data-stage") == plan[first_of_block_0]
    assert not page.locator("#lines-panel").is_visible()  # its attention weights are not out yet
    for _ in range(plan.index("blocks.0.attn.pattern") - first_of_block_0):
        page.keyboard.press("ArrowRight")
    assert current.get_attribute("data-stage") == "blocks.0.attn.pattern"
    box = current.bounding_box()
    assert 0 <= box["y"] and box["y"] + box["height"] <= 720  # scrolled into view
    assert page.locator("#lines-panel").is_visible()  # block 0's attention weights are out
    page.keyboard.press("End")
    assert page.locator(".reveal-count").inner_text() == f"step {len(plan)} of {len(plan)}"
    assert page.locator("#prediction").is_visible()
    page.keyboard.press("Home")
    assert shown_steps(workshop) == plan[:1]
    options = page.locator(".reveal-jump option").all_inner_texts()
    assert options[1:5] == ["the tokens", "embeddings", "block 0", "the other blocks"]
    assert "the output" in options
    page.select_option(".reveal-jump", label="block 0")
    assert current.get_attribute("data-stage") == next(s for s in plan if s.startswith("blocks.0."))
    workshop.shot("teaching-projector", full_page=False)
    # a shared link's opened step: the reveal starts there, and the step stays in the link
    workshop.open(model="tiny", text=TEXT, lock="1", level="beginner", stage="blocks.0.attn.scores")
    assert current.get_attribute("data-stage") == "blocks.0.attn.scores"
    at = plan.index("blocks.0.attn.scores") + 1
    assert page.locator(".reveal-count").inner_text() == f"step {at} of {len(plan)}"
    assert workshop.query()["stage"] == "blocks.0.attn.scores"
    workshop.close()


def test_teach_this_opens_the_walk_in_teaching_mode(workshop):
    workshop.open(model="tiny", text=TEXT, level="beginner")
    page = workshop.page
    with page.expect_navigation(url=lambda url: "/teach?" in url):  # the link, shown to the teacher
        page.click("#teach")
    link = page.input_value("#teach-link")
    assert "lock=1" in link and "token=" in link  # a class's fresh browsers need the token
    with page.expect_navigation(url=lambda url: "lock=1" in url and "/teach" not in url):  # past the redirect
        page.click("#teach-open")
    page.wait_for_selector('body[data-walks="1"]', state="attached")
    query = workshop.query()
    assert query["lock"] == "1" and query["text"] == TEXT and "token" not in query  # the cookie holds it
    assert page.locator("#lock-badge").is_visible() and page.locator(".reveal-count").is_visible()
    assert not page.locator("#teach").is_visible()
    workshop.close()


def test_the_keyboard_opens_and_closes_steps_and_keeps_its_place(workshop):
    """Enter opens a step and focus stays on it (it once fell to the page's body); Escape
    closes it, focus still there; a block opened from the keyboard takes the focus in."""
    workshop.open(model="tiny", text=TEXT, level="intermediate")
    page = workshop.page
    head = '[data-stage="blocks.0.attn.pattern"] > .step-head'
    page.focus(head)
    page.keyboard.press("Enter")
    page.wait_for_selector('[data-stage="blocks.0.attn.pattern"] .detail-body', state="attached")
    focused = "document.activeElement.closest('.step')?.dataset.stage ?? document.activeElement.tagName"
    assert page.evaluate(focused) == "blocks.0.attn.pattern"
    assert workshop.query()["stage"] == "blocks.0.attn.pattern"
    page.keyboard.press("Escape")
    assert page.locator('[data-stage="blocks.0.attn.pattern"] .detail-body').count() == 0
    assert page.evaluate(focused) == "blocks.0.attn.pattern" and "stage" not in workshop.query()
    page.focus('.block-line[data-group="blocks.1"]')
    page.keyboard.press("Enter")
    assert page.evaluate(focused).startswith("blocks.1.")
    workshop.close()


def test_a_slow_walk_counts_its_seconds(workshop, models):
    """A long input's pass takes seconds: the status says it is under way, not only "running…"."""
    lm = models["tiny"]

    def slow(x, name):  # 1.6 s for one forward pass
        time.sleep(1.6)

    workshop.open(model="tiny", text=TEXT)
    page = workshop.page
    with lm.net.hooks({"logits": slow}):
        page.fill("#text", "the mat")
        page.press("#text", "Enter")
        wait_until(page, "document.querySelector('#status').textContent.startsWith('running… 1 s')")
        workshop.wait_walks(2)
    assert "running" not in page.inner_text("#status")
    workshop.close()
