"""`glassformer inspect ... --view tokens --method`: each method's HTML view, and two methods
side by side in the token view, drawn in Debian's Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch

import glassformer as gf
from glassformer import cli
from glassformer.inspect.explain_methods import METHODS, NAMES
from glassformer.tokenizers.bpe_train import train_bpe
from glassformer.viz import TokenView
from tests.test_viz_html import Opened

TEXT = "the cat sat on the mat. the dog sat on the log."
PROMPT = "the cat sat on the"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A tiny GPT-2-style model with a byte-level BPE tokenizer, as an HF directory. Its eos
    token (byte 0 here, as GPT-2's <|endoftext|>) stands for a text with every token removed."""
    tokenizer = train_bpe(TEXT * 4, vocab_size=272, progress=False)
    config = gf.ModelConfig(
        vocab_size=tokenizer.vocab_size, d_model=32, n_layers=2, n_heads=4, max_seq_len=64, eos_token_id=0
    )
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("explain") / "tiny"
    gf.LanguageModel(gf.build(config), tokenizer).save_hf(out)
    return str(out)


def payload_of(path: Path) -> dict:
    data = re.search(
        r'<script type="application/json" id="gfv-[0-9a-f]+-data">(.*?)</script>', path.read_text(), re.S
    )
    return json.loads(data.group(1))


def run_inspect(model_dir, out: Path, *options: str) -> int:
    return cli.main(["inspect", model_dir, PROMPT, "--view", "tokens", *options, "--out", str(out)])


@pytest.mark.parametrize("method", METHODS)
def test_each_method_writes_a_token_view(model_dir, tmp_path, capsys, method):
    out = tmp_path / f"{method}.html"
    assert run_inspect(model_dir, out, "--method", method, "--target", " the", "--samples", "40") == 0
    captured = capsys.readouterr()
    assert captured.out.strip() == str(out)
    name = "SHAP (partition)" if method == "shap" else NAMES[method]
    if method != "gxi":  # the notes (completeness, additivity, fit) go to stderr; gxi has none
        assert captured.err.startswith(f"{name}: ")
    payload = payload_of(out)
    assert (payload["view"], payload["layout"]) == ("token", "rows")
    assert [s["name"] for s in payload["scores"]] == [name]
    assert len(payload["tokens"]) == 5 and "probability of ' the'" in payload["title"]


def test_two_methods_side_by_side_in_chromium(browser, model_dir, tmp_path, capsys):
    out = tmp_path / "lime_ig.html"
    assert run_inspect(model_dir, out, "--method", "lime,ig", "--keep-first", "--samples", "60") == 0
    capsys.readouterr()
    payload = payload_of(out)
    assert [s["name"] for s in payload["scores"]] == ["LIME", "integrated gradients"]
    assert all(s["scale"] == "diverging" for s in payload["scores"])
    opened = Opened(browser, out, tmp_path, "token_two_methods")
    page = opened.page
    assert page.locator(".gfv-token-row").count() == 2
    t = len(payload["tokens"])
    assert page.locator(".gfv-word").count() == 2 * t
    assert page.locator(".gfv-legend strong").all_inner_texts() == ["LIME:", "integrated gradients:"]
    # the first token is held fixed: score 0, white on a diverging scale, in both rows
    colours = page.eval_on_selector_all(".gfv-word", "words => words.map(w => w.style.background)")
    assert colours[0] == colours[t] == "rgb(255, 255, 255)"  # the shared diverging scale's zero
    page.hover(".gfv-token-row >> nth=1 >> .gfv-word >> nth=2")
    focused = page.eval_on_selector_all(".gfv-word", "ws => ws.map(w => w.classList.contains('gfv-focus'))")
    assert [i for i, f in enumerate(focused) if f] == [2, t + 2]  # the same token in both rows
    tip = page.inner_text(".gfv-tip")
    assert "LIME = " in tip and "integrated gradients = " in tip
    opened.close()


def test_select_layout_is_unchanged(browser, tmp_path):
    view = TokenView(["a", "b", "c"], {"one": [1.0, 0.0, -1.0], "two": [0.5, 0.5, 0.0]})
    assert view.payload()["layout"] == "select"
    opened = Opened(browser, view.save(tmp_path / "select.html"), tmp_path, "token_select")
    assert opened.page.locator(".gfv-token-row").count() == 0
    assert opened.page.locator(".gfv-word").count() == 3
    opened.page.select_option(".gfv-select", "1")
    assert opened.attribute(".gfv", "data-score") == "two"
    opened.close()


def test_bad_requests_are_explained(model_dir, tmp_path, capsys):
    with pytest.raises(SystemExit):
        run_inspect(model_dir, tmp_path / "x.html", "--method", "saliency")
    assert "choose from lime, shap, ig, gxi, occlusion" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        run_inspect(model_dir, tmp_path / "x.html", "--method", "lime,lime")
    out = tmp_path / "head.html"
    code = cli.main(["inspect", model_dir, PROMPT, "--view", "head", "--method", "lime", "--out", str(out)])
    assert code == 2 and "add --view tokens" in capsys.readouterr().err
    a, b = (gf.inspect.Attribution(["a", "b"], torch.zeros(2), m, "F") for m in ("x", "y"))
    b.target = "G"
    with pytest.raises(ValueError, match="same prediction"):
        TokenView.from_attributions([a, b])
    with pytest.raises(ValueError, match="layout="):
        TokenView(["a"], [1.0], layout="grid")
