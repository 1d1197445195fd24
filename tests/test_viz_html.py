"""The HTML views in a real browser: Debian's Chromium driven by Playwright, offline.

Each view is saved, opened from a file:// URL and checked: it drew (its data-ready flag,
no console or page errors), it reacts to one interaction, and the page made no request
but the file itself. Screenshots go to the test's tmp dir, and for review to
$GLASSFORMER_SCREENSHOTS when it is set (`tests.screenshots.keep_screenshot`).
"""

from __future__ import annotations

import base64
import json
import math
import re
import warnings
import zlib
from pathlib import Path

import pytest
import torch

import glassformer as gf
from glassformer.tokenizers.bpe_train import train_bpe
from glassformer.viz import HeadView, ModelView, NeuronView, TokenView
from glassformer.viz.html import decode_weights
from glassformer.viz.modules import inlined
from tests.screenshots import keep_screenshot

TEXT = "the cat sat on the mat. the dog sat on the log."
SOURCE = "a cat saw the dog."
TARGET = "the dog saw a cat."


# models ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer():
    corpus = "the cat sat on the mat. the dog sat on the log. a cat saw the dog. " * 6
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the corpus runs out of pairs before vocab_size: fine
        return train_bpe(corpus, vocab_size=300, progress=False)


def tiny_lm(tokenizer, **fields) -> gf.LanguageModel:
    config = dict(vocab_size=tokenizer.vocab_size, d_model=32, n_layers=2, n_heads=4, d_ff=48, max_seq_len=48)
    config.update(fields)
    torch.manual_seed(0)
    return gf.LanguageModel(gf.build(gf.ModelConfig(**config)).eval(), tokenizer)


@pytest.fixture(scope="module")
def decoder(tokenizer):  # Llama-style, grouped-query attention: 4 query heads share 2 key heads
    return tiny_lm(tokenizer, positions="rope", n_kv_heads=2, norm="rmsnorm", activation="swiglu")


@pytest.fixture(scope="module")
def encoder(tokenizer):
    return tiny_lm(tokenizer, family="encoder")


@pytest.fixture(scope="module")
def seq2seq(tokenizer):  # T5-style: a relative position bias is added to the scores
    return tiny_lm(tokenizer, family="encoder_decoder", positions="t5_relative", decoder_start_token_id=0)


# the browser -------------------------------------------------------------------------
class Opened:
    """A view's file open in a page, with every request and error the page made."""

    def __init__(self, browser, html: Path, tmp_path: Path, name: str) -> None:
        self.url, self.tmp_path, self.name = html.resolve().as_uri(), tmp_path, name
        self.page = browser.new_page(viewport={"width": 1000, "height": 760})
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.goto(self.url)
        self.page.wait_for_selector(".gfv[data-ready]", state="attached", timeout=20_000)

    def attribute(self, selector: str, name: str, nth: int = 0) -> str | None:
        return self.page.locator(selector).nth(nth).get_attribute(name)

    def classes(self, selector: str, nth: int = 0) -> list[str]:
        return (self.attribute(selector, "class", nth) or "").split()

    def close(self) -> None:
        """Screenshot, then the checks every view passes: no errors, no network."""
        shot = self.tmp_path / f"{self.name}.png"
        self.page.screenshot(path=str(shot), full_page=True)
        keep_screenshot(shot)
        assert shot.stat().st_size > 1000
        self.page.close()
        assert self.errors == [], self.errors
        assert self.requests == [self.url], f"the page made requests: {self.requests}"


def open_view(browser, view, tmp_path: Path, name: str) -> Opened:
    return Opened(browser, view.save(tmp_path / f"{name}.html"), tmp_path, name)


def canvas_data(opened: Opened, selector: str) -> str:
    return opened.page.eval_on_selector(selector, "canvas => canvas.toDataURL()")


# head view ---------------------------------------------------------------------------
def test_head_view_decoder_hover_toggle_and_layers(browser, decoder, tmp_path):
    view = HeadView.from_lm(decoder, TEXT, layer=1)
    n = len(decoder.tokenizer.encode(TEXT))
    opened = open_view(browser, view, tmp_path, "head_decoder")
    page = opened.page
    assert page.locator(".gfv-col-left .gfv-tok").count() == n
    assert page.locator(".gfv-col-right .gfv-tok").count() == n
    assert page.locator(".gfv-swatch").count() == 4
    assert opened.attribute(".gfv", "data-layer") == "1"
    assert "causal self-attention" in page.inner_text(".gfv-title")
    full = canvas_data(opened, ".gfv-lines canvas")

    page.hover(".gfv-col-left .gfv-tok >> nth=6")  # a query: only its lines, its keys shaded
    assert "gfv-focus" in opened.classes(".gfv-col-left .gfv-tok", 6)
    assert "gfv-dim" in opened.classes(".gfv-col-left .gfv-tok", 0)
    focused = canvas_data(opened, ".gfv-lines canvas")
    assert focused != full
    shaded = [opened.attribute(".gfv-col-right .gfv-tok", "style", j) or "" for j in range(n)]
    assert all("background" in shaded[j] for j in range(7))  # causal: keys 0..6 get weight
    assert not any("background" in s for s in shaded[7:])  # later keys are masked
    opened.page.screenshot(path=str(tmp_path / "head_decoder_hover.png"))
    keep_screenshot(tmp_path / "head_decoder_hover.png")

    page.mouse.move(900, 700)  # leave: the full picture again
    assert "gfv-focus" not in opened.classes(".gfv-col-left .gfv-tok", 6)
    assert canvas_data(opened, ".gfv-lines canvas") == full

    page.click(".gfv-swatch >> nth=2")  # hide head 2
    assert "gfv-off" in opened.classes(".gfv-swatch", 2)
    assert opened.attribute(".gfv-swatch", "aria-pressed", 2) == "false"
    assert canvas_data(opened, ".gfv-lines canvas") != full
    page.dblclick(".gfv-swatch >> nth=0")  # head 0 alone
    assert [("gfv-off" in opened.classes(".gfv-swatch", h)) for h in range(4)] == [False, True, True, True]

    page.select_option(".gfv-select", "0")
    page.wait_for_selector('.gfv[data-layer="0"]', state="attached")
    opened.close()


def test_head_view_encoder_hover_key(browser, encoder, tmp_path):
    view = HeadView.from_lm(encoder, TEXT)
    assert view.title.startswith("self-attention")
    opened = open_view(browser, view, tmp_path, "head_encoder")
    opened.page.hover(".gfv-col-right .gfv-tok >> nth=2")  # a key: the queries that read it
    assert "gfv-focus" in opened.classes(".gfv-col-right .gfv-tok", 2)
    n = opened.page.locator(".gfv-col-left .gfv-tok").count()
    styles = [opened.attribute(".gfv-col-left .gfv-tok", "style", i) or "" for i in range(n)]
    assert all("background" in s for s in styles)  # bidirectional: every query reads key 2
    opened.close()


def test_head_view_cross_attention(browser, seq2seq, tmp_path):
    view = HeadView.from_lm(seq2seq, SOURCE, decoder_input=TARGET)
    source = seq2seq.tokenizer.encode(SOURCE)
    target = seq2seq.tokenizer.encode(TARGET)
    assert view.shape == (2, 4, len(target) + 1, len(source))  # + the decoder start token
    opened = open_view(browser, view, tmp_path, "head_cross")
    page = opened.page
    assert "cross-attention" in page.inner_text(".gfv-title")
    assert page.locator(".gfv-col-left .gfv-tok").count() == len(target) + 1  # queries: decoder
    assert page.locator(".gfv-col-right .gfv-tok").count() == len(source)  # keys: encoder
    assert page.inner_text(".gfv-col-right .gfv-tok >> nth=1") == seq2seq.tokenizer.id_to_token(source[1])
    assert page.inner_text(".gfv-col-left .gfv-tok >> nth=0") == "<0x00>"  # the start token: byte 0
    page.hover(".gfv-col-left .gfv-tok >> nth=3")
    assert "gfv-focus" in opened.classes(".gfv-col-left .gfv-tok", 3)
    opened.close()


def test_head_view_decoder_side_of_seq2seq_is_causal(seq2seq):
    view = HeadView.from_lm(seq2seq, SOURCE, attention="decoder", decoder_input=TARGET)
    assert view.causal and view.key_tokens is None
    weights = decode_weights(view.payload()["layers"][0]["attention"])  # h t t
    assert (weights[:, 0, 1:] == 0).all()  # the first query sees only itself
    encoder_view = HeadView.from_lm(seq2seq, SOURCE, attention="encoder")
    assert not encoder_view.causal and encoder_view.shape[2] == len(seq2seq.tokenizer.encode(SOURCE))


# model view --------------------------------------------------------------------------
def test_model_view_thumbnails_and_enlarge(browser, decoder, tmp_path):
    view = ModelView.from_lm(decoder, TEXT)
    opened = open_view(browser, view, tmp_path, "model_decoder")
    page = opened.page
    assert page.locator(".gfv-thumb").count() == 2 * 4
    assert not page.is_visible(".gfv-panel")
    # causal: the top-right pixel of a thumbnail is the grey of masked cells
    corner = page.eval_on_selector(
        ".gfv-thumb",
        "c => Array.from(c.getContext('2d').getImageData(c.width - 1, 0, 1, 1).data)",
    )
    assert corner == [228, 230, 233, 255]
    page.click(".gfv-thumb >> nth=6")  # layer 1, head 2
    assert page.is_visible(".gfv-panel")
    assert page.inner_text(".gfv-panel-title") == "layer 1, head 2"
    assert opened.attribute(".gfv", "data-open") == "1,2"
    assert "gfv-selected" in opened.classes(".gfv-thumb", 6)
    page.hover(".gfv-panel canvas")
    assert page.is_visible(".gfv-tip")
    opened.close()


def test_model_view_of_smollm2_at_256_tokens(browser, tmp_path):
    try:
        lm = gf.load("smollm2-135m-instruct")
    except (FileNotFoundError, ModuleNotFoundError, ValueError) as error:
        pytest.skip(f"SmolLM2 is not installed: {error}")
    ids = torch.randint(0, lm.config.vocab_size, (256,), generator=torch.Generator().manual_seed(0))
    view = ModelView.from_lm(lm, ids.tolist())
    assert view.shape == (30, 9, 256, 256)
    opened = open_view(browser, view, tmp_path, "model_smollm2_256")
    size = (tmp_path / "model_smollm2_256.html").stat().st_size
    assert size < 40e6, f"{size / 1e6:.1f} MB"
    page = opened.page
    assert page.locator(".gfv-thumb").count() == 30 * 9
    page.click(".gfv-thumb >> nth=100")  # layer 11, head 1
    assert page.inner_text(".gfv-panel-title") == "layer 11, head 1"
    opened.close()


# neuron view -------------------------------------------------------------------------
def test_neuron_view_gqa_and_query_choice(browser, decoder, tmp_path):
    view = NeuronView.from_lm(decoder, TEXT, layer=1, head=3, query=4)
    names = [f"blocks.1.attn.{what}" for what in ("q", "k", "scores")]
    trace = decoder.trace(TEXT, names=names)
    assert torch.equal(view.k, trace["blocks.1.attn.k"][0, 1])  # query head 3 reads key head 3 // 2
    assert torch.allclose(view.scaled, view.scores, atol=1e-5) and view.bias is None  # RoPE: no bias
    assert "key head 1 of 2" in view.title

    opened = open_view(browser, view, tmp_path, "neuron_decoder")
    page = opened.page
    assert opened.attribute(".gfv", "data-query") == "4"
    assert "gfv-current" in opened.classes(".gfv-chip", 4)
    headings = page.locator(".gfv-neuron-head").all_inner_texts()
    assert headings[:3] == ["key", "k (8 dims)", "q \u2299 k"] and "+ bias" not in headings
    masked = page.locator(".gfv-bar-cell em").all_inner_texts()
    assert masked[4] != "masked" and masked[5] == "masked"  # causal: keys after the query
    page.click(".gfv-chip >> nth=7")
    assert opened.attribute(".gfv", "data-query") == "7"
    assert "gfv-current" in opened.classes(".gfv-chip", 7)
    assert "gfv-current" not in opened.classes(".gfv-chip", 4)
    assert page.locator(".gfv-bar-cell em").nth(5).inner_text() != "masked"
    page.hover(".gfv-neuron canvas >> nth=1", position={"x": 10, "y": 20})  # k of key 1
    assert "k = " in page.inner_text(".gfv-tip") and 'key #1 "' in page.inner_text(".gfv-tip")
    opened.close()


def test_neuron_view_shows_the_position_bias(browser, seq2seq, tmp_path):
    view = NeuronView.from_lm(seq2seq, SOURCE, layer=0, head=1, attention="encoder")
    assert view.bias is not None
    assert torch.allclose(view.scaled + view.bias, view.scores, atol=1e-5)
    opened = open_view(browser, view, tmp_path, "neuron_t5_bias")
    assert "+ bias" in opened.page.locator(".gfv-neuron-head").all_inner_texts()
    assert "position bias" in opened.page.inner_text(".gfv-formula")
    opened.close()


# token view --------------------------------------------------------------------------
def test_token_view_scores_and_hover(browser, decoder, tmp_path):
    view = TokenView.from_lm(decoder, TEXT)
    scores = view.payload()["scores"]
    assert [s["name"] for s in scores] == ["surprisal (bits)", "entropy (bits)"]
    assert torch.isnan(view.scores["surprisal (bits)"][0])  # the first token has no context
    logits = decoder.logits(TEXT)[0]  # t v
    ids = decoder.tokenizer.encode(TEXT)
    reference = torch.distributions.Categorical(logits=logits)
    assert torch.allclose(view.scores["entropy (bits)"], reference.entropy() / math.log(2), atol=1e-4)
    next_token = torch.distributions.Categorical(logits=logits[:-1])  # position i predicts token i + 1
    surprisal = -next_token.log_prob(torch.tensor(ids[1:])) / math.log(2)
    assert torch.allclose(view.scores["surprisal (bits)"][1:], surprisal, atol=1e-4)
    opened = open_view(browser, view, tmp_path, "token_decoder")
    page = opened.page
    n = len(decoder.tokenizer.encode(TEXT))
    assert page.locator(".gfv-word").count() == n
    assert "background" not in (opened.attribute(".gfv-word", "style", 0) or "")  # NaN: no colour
    assert "background" in (opened.attribute(".gfv-word", "style", 3) or "")
    page.hover(".gfv-word >> nth=3")
    assert "gfv-focus" in opened.classes(".gfv-word", 3)
    tip = page.inner_text(".gfv-tip")
    assert "surprisal (bits) = " in tip
    value = float(tip.rsplit("= ", 1)[1])
    assert value == pytest.approx(float(view.scores["surprisal (bits)"][3]), abs=1e-3)
    page.select_option(".gfv-select", "1")
    assert opened.attribute(".gfv", "data-score") == "entropy (bits)"
    opened.close()


def test_token_view_diverging_scale(browser, tmp_path):
    tokens = ["Attribution", " is", " signed", ":", " red", " helps", ",", " blue", " hurts", "\n", "end"]
    values = [0.1, -0.2, 0.5, 0.0, 0.9, 0.6, 0.0, -0.9, -0.6, 0.0, 0.3]
    view = TokenView(tokens, values, label="attribution", title="A diverging scale")
    assert view.payload()["scores"][0]["scale"] == "diverging"
    opened = open_view(browser, view, tmp_path, "token_diverging")
    colour = opened.page.eval_on_selector_all(".gfv-word", "words => words.map(w => w.style.background)")
    assert colour[4] != colour[7]  # red vs blue
    assert opened.page.inner_text(".gfv-word >> nth=9") == "\u21b5"  # a newline shows
    opened.close()


# several views on one page -----------------------------------------------------------
def test_two_views_in_one_page_do_not_collide(browser, decoder, encoder, tmp_path):
    first, second = HeadView.from_lm(decoder, TEXT), HeadView.from_lm(encoder, TEXT)
    fragments = [first._repr_html_(), second._repr_html_(), TokenView(["a", "b"], [1.0, 2.0])._repr_html_()]
    ids = [re.search(r'id="(gfv-[0-9a-f]{12})"', f).group(1) for f in fragments]
    assert len(set(ids)) == 3
    page_file = tmp_path / "notebook.html"
    page_file.write_text("<!doctype html><meta charset=utf-8><body>" + "\n".join(fragments) + "</body>")
    opened = Opened(browser, page_file, tmp_path, "notebook")
    page = opened.page
    page.wait_for_function("document.querySelectorAll('.gfv[data-ready]').length === 3")
    assert page.locator(".gfv-lines").count() == 2
    page.click(f"#{ids[1]} .gfv-swatch >> nth=1")  # only the second view changes
    assert "gfv-off" in opened.classes(f"#{ids[1]} .gfv-swatch", 1)
    assert "gfv-off" not in opened.classes(f"#{ids[0]} .gfv-swatch", 1)
    opened.close()


# Python side: payload, files, errors --------------------------------------------------
def test_payload_is_compact_and_close_to_the_weights():
    weights = torch.softmax(torch.randn(3, 4, 20, 20) * 3, dim=-1)
    view = HeadView(weights, [f"t{i}" for i in range(20)])
    payload = view.payload()
    assert (payload["format"], payload["version"], payload["view"]) == ("glassformer-view", 1, "head")
    assert payload["layers"][0]["attention"]["dtype"] == "uint8"
    restored = torch.stack(
        [torch.from_numpy(decode_weights(layer["attention"]).copy()) for layer in payload["layers"]]
    )
    assert (restored.float() / 255 - weights).abs().max() <= 1 / 510 + 1e-6  # w ≈ q / 255
    text = view.html()
    assert not re.search(r"\[\s*-?\d+\.\d+\s*,", text)  # no JSON lists of floats
    block = payload["layers"][1]["attention"]
    assert len(zlib.decompress(base64.b64decode(block["data"]))) == 4 * 20 * 20


def test_save_is_atomic_and_self_contained(tmp_path):
    view = TokenView(["a", "</script><b>x"], [0.5, 1.0])
    path = view.save(tmp_path / "sub" / "view.html")
    view.save(path)  # overwrite in place
    assert [p.name for p in path.parent.iterdir()] == ["view.html"]  # no temp file left
    text = path.read_text()
    assert text.startswith("<!doctype html>") and "http://" not in text and "https://" not in text
    # data, token_view.js and what it imports (each once), start: the token is escaped
    assert text.count("</script>") == 1 + len(inlined("token_view.js")) + 1
    data = re.search(r'<script type="application/json" id="gfv-\w+-data">(.*?)</script>', text).group(1)
    assert json.loads(data)["tokens"][1] == "</script><b>x"


def test_clear_errors(decoder, encoder, seq2seq):
    with pytest.raises(ValueError, match=r"layer 2 is out of range: .* has 2 layers \(0\.\.1\)"):
        HeadView.from_lm(decoder, TEXT, layers=[0, 2])
    with pytest.raises(ValueError, match=r"head 4 is out of range: layer 0 has 4 heads \(0\.\.3\)"):
        NeuronView.from_lm(decoder, TEXT, layer=0, head=4)
    with pytest.raises(ValueError, match="needs an encoder-decoder model, but this model has one stack"):
        ModelView.from_lm(decoder, TEXT, attention="cross")
    with pytest.raises(ValueError, match="pass decoder_input"):
        HeadView.from_lm(seq2seq, SOURCE)
    with pytest.raises(ValueError, match="three kinds of attention"):
        HeadView.from_lm(seq2seq, SOURCE, attention="self", decoder_input=TARGET)
    with pytest.raises(ValueError, match=r"60 tokens, more than max_seq_len=48"):
        HeadView.from_lm(decoder, list(range(60)))
    with pytest.raises(ValueError, match="surprisal needs a decoder"):
        TokenView.from_lm(encoder, TEXT, score="surprisal")
    with pytest.raises(ValueError, match="did you pass the scores"):
        HeadView(torch.randn(4, 3, 3), ["a", "b", "c"])
    with pytest.raises(ValueError, match="cross-attention needs key_tokens"):
        HeadView(torch.full((4, 2, 3), 1 / 3), ["a", "b"])
    with pytest.raises(ValueError, match=r"layer 5 is out of range: this view holds 1 layers"):
        HeadView(torch.full((4, 3, 3), 1 / 3), ["a", "b", "c"], layer=5)
    with pytest.raises(ValueError, match="stay interactive"):
        ModelView(torch.zeros(1).expand(1, 1, 9000, 9000), ["x"] * 9000)  # refused before any work


def test_html_views_do_not_load_matplotlib_or_plotly():
    import subprocess
    import sys

    code = (
        "import sys, glassformer.viz as viz; viz.HeadView; "
        "assert 'matplotlib' not in sys.modules and 'plotly' not in sys.modules; "
        "viz.attention_heatmap; assert 'matplotlib' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
