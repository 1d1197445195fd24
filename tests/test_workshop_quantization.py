"""A quantized model in the workshop (`--quantize`, `/api/quantization`, the page's panel): its
label, each matrix's errors within their bounds, answers bounded whatever the matrix, inputs
checked, and in Chromium the panel that follows the step opened."""

from __future__ import annotations

import pytest
import torch

import glassformer as gf
from glassformer.block_quant import BLOCK
from glassformer.quantized_model import quantize_model
from glassformer.tokenizers.char import CharTokenizer
from glassformer.workshop.model_quantization import MAP_COLS, MAP_ROWS, WINDOW_BLOCKS, WINDOW_ROWS
from glassformer.workshop.server import create_app
from glassformer.workshop.walk.arrays import unpack
from tests.conftest import tiny_model, workshop_client
from tests.screenshots import keep_screenshot
from tests.test_workshop_page import Workshop
from tests.workshop_server import serving, wait_until

CHARS = "abcdefghijklmnopqrstuvwxyz .,今天气很好"


def char_lm(**fields) -> gf.LanguageModel:
    tokenizer = CharTokenizer.from_text(CHARS)
    net = tiny_model(vocab_size=tokenizer.vocab_size, d_model=64, d_ff=128, max_seq_len=64, **fields)
    return gf.LanguageModel(net, tokenizer)


@pytest.fixture(scope="module")
def models():
    quantized, plain = char_lm(positions="rope", norm="rmsnorm", activation="swiglu"), char_lm()
    before = quantized.net.stack.blocks[0].ffn.up_proj.weight.detach().clone()
    facts = quantize_model(quantized.net, "q4_0")
    grid = char_lm()  # already on Q4_1 grids, as the registry's SmolLM2's blocks are
    quantize_model(grid.net, "q4_1")
    on_grid = quantize_model(grid.net, "q4_1")
    return {"tiny": quantized, "plain": plain, "grid": grid}, {"tiny": facts, "grid": on_grid}, before


@pytest.fixture(scope="module")
def app(models):
    held, quantized, _ = models
    return create_app(held, quantized=quantized)


def test_the_models_are_labelled_with_their_kind(client):
    described = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    assert described["tiny"]["label"] == "tiny · Q4_0"
    quantization = described["tiny"]["quantization"]
    assert {k: quantization[k] for k in ("kind", "label")} == {"kind": "q4_0", "label": "Q4_0"}
    assert 4.5 < quantization["bits"] < 8.5  # Q4_0's 4.5 bits, the head's Q8_0 8.5
    assert described["plain"]["label"] == "plain" and described["plain"]["quantization"] is None


def test_the_summary_places_each_matrix(client, models):
    summary = client.get("/api/quantization", params={"model": "tiny"}).json()
    facts = models[1]["tiny"]
    assert summary["bytes_before"] == facts.bytes_before and summary["bytes_after"] == facts.bytes_after
    placed = {m["name"]: (m["stack"], m["layer"], m["cross"], m["sublayer"]) for m in summary["matrices"]}
    assert placed["blocks.1.ffn.down_proj"] == ("", 1, False, "ffn")
    assert placed["blocks.0.attn.qkv_proj"] == ("", 0, False, "attn")
    assert placed["lm_head"] == ("", None, False, None)
    assert all(0 < m["max_error"] <= m["bound"] for m in summary["matrices"])


def test_a_matrix_s_view_is_its_blocks_errors_and_its_weights_now(client, models):
    held, quantized, before = models
    view = client.get("/api/quantization", params={"model": "tiny", "matrix": "blocks.0.ffn.up_proj"}).json()
    matrix = quantized["tiny"].matrix("blocks.0.ffn.up_proj")
    out, inner = matrix.shape
    errors = unpack(view["errors"])
    assert view["errors"]["pool"] == [1, 1] and tuple(errors.shape) == (out, inner // BLOCK)
    assert torch.allclose(errors, matrix.max_error, atol=float(matrix.max_error.max()) / 500)
    worst = view["worst"][0]
    assert worst["max_error"] == float(matrix.max_error.max()) and worst["max_error"] <= worst["bound"]
    assert [worst["row"], worst["block"]] == view["window"]["chosen"]
    window = view["window"]
    weights = unpack(window["weights"])
    blocks = min(WINDOW_BLOCKS, inner // BLOCK)  # a row of 64 weights is 2 blocks
    assert tuple(weights.shape) == (WINDOW_ROWS, blocks * BLOCK)
    now = held["tiny"].net.stack.blocks[0].ffn.up_proj.weight.detach()
    rows = slice(window["row"], window["row"] + WINDOW_ROWS)
    cols = slice(window["block"] * BLOCK, (window["block"] + blocks) * BLOCK)
    assert torch.equal(weights, now[rows, cols]) and not torch.equal(now, before)
    steps = unpack(window["steps"]).repeat_interleave(BLOCK, dim=1)  # each weight a whole number of steps
    levels = weights / steps
    assert torch.allclose(levels, levels.round(), atol=1e-4)


def test_a_window_is_asked_for_by_row_and_block(client):
    view = client.get(
        "/api/quantization",
        params={"model": "tiny", "matrix": "blocks.1.ffn.down_proj", "row": 63, "block": 3},
    ).json()
    assert view["window"]["chosen"] == [63, 3] and view["window"]["row"] == 64 - WINDOW_ROWS


def test_a_large_matrix_s_answer_is_bounded():
    tokenizer = CharTokenizer.from_text(CHARS)
    lm = gf.LanguageModel(tiny_model(vocab_size=4000, d_model=64, d_ff=4096, n_layers=1), tokenizer)
    facts = quantize_model(lm.net, "q8_0")
    api = workshop_client(create_app({"wide": lm}, quantized={"wide": facts}))
    for name in ("blocks.0.ffn.down_proj", "lm_head"):
        answer = api.get("/api/quantization", params={"model": "wide", "matrix": name})
        assert answer.status_code == 200 and len(answer.content) < 200_000
        rows, cols = answer.json()["errors"]["shape"]
        assert rows <= MAP_ROWS and cols <= MAP_COLS
        largest = float(facts.matrix(name).max_error.max())
        assert unpack(answer.json()["errors"]).max() == pytest.approx(
            largest, rel=1e-6
        )  # pooling keeps the largest


@pytest.mark.parametrize(
    ("params", "status", "says"),
    [
        ({"model": "plain"}, 400, "is not quantized here"),
        ({"model": "nope"}, 404, "no model 'nope'"),
        (
            {"model": "tiny", "matrix": "blocks.9.ffn.up_proj"},
            400,
            "no quantized matrix 'blocks.9.ffn.up_proj'",
        ),
        ({"model": "tiny", "matrix": "lm_head.weight"}, 400, "the matrices are blocks.0.attn.qkv_proj"),
        (
            {"model": "tiny", "matrix": "blocks.0.ffn.up_proj", "row": 9999, "block": 0},
            400,
            "row 9999 is past",
        ),
        ({"model": "tiny", "matrix": "blocks.0.ffn.up_proj", "row": 0, "block": 2}, 400, "block 2 is past"),
        ({"model": "tiny", "matrix": "blocks.0.ffn.up_proj", "row": 0}, 400, "give both row and block"),
        ({"model": "tiny", "block": 0}, 400, "name the matrix too"),
        ({"model": "tiny", "row": -1, "matrix": "lm_head", "block": 0}, 400, "row"),
        ({"model": "tiny", "colour": "red"}, 400, "colour"),
        ({"model": "tiny", "matrix": "<b>x</b>"}, 400, "no quantized matrix"),
    ],
)
def test_requests_are_checked(client, params, status, says):
    answer = client.get("/api/quantization", params=params)
    assert answer.status_code == status and says in answer.json()["error"]


def test_the_workshop_command_quantizes_what_it_loads(monkeypatch, capsys, tmp_path):
    from glassformer.cli import main
    from glassformer.commands import workshop as command

    monkeypatch.chdir(tmp_path)  # the lab's runs/ is the working directory's
    monkeypatch.delenv(command.TOKEN_VARIABLE, raising=False)
    lm = char_lm()
    made = {}
    monkeypatch.setattr(command, "load_models", lambda named: {"tiny": lm})
    monkeypatch.setattr(command, "serve", lambda app, host, port: made.update(app=app))
    assert main(["workshop", "tiny", "--quantize", "q8_0", "--no-browser", "--port", "8123"]) == 0
    assert "quantized to Q8_0: 9 matrices" in capsys.readouterr().out
    assert made["app"].state.workshop.quantized["tiny"].kind == "q8_0"
    with pytest.raises(SystemExit):
        main(["workshop", "tiny", "--quantize", "q5_0"])
    assert "invalid choice: 'q5_0'" in capsys.readouterr().err


# the page -------------------------------------------------------------------------------------
def test_the_page_shows_a_quantized_model_s_blocks(browser, models, tmp_path):
    held, quantized, _ = models
    with serving(create_app(held, quantized=quantized)) as url:
        workshop = Workshop(browser, url, tmp_path)
        workshop.open(model="tiny", text="今天天气很好", level="advanced")
        page = workshop.page
        assert "tiny · Q4_0" in page.locator("#model option:checked").inner_text()
        wait_until(page, "document.querySelector('#quant').dataset.matrix")
        assert page.locator("#quant-panel").is_visible()
        words = page.locator("#quant").inner_text()
        assert "Each block of 32 weights in a row shares one scale" in words
        assert "sets its step" in words and "moved by at most" in words and "the stated bound is" in words
        first = page.locator("#quant").get_attribute("data-matrix")
        assert first == "blocks.0.attn.qkv_proj"
        page.click('.block-line[data-group="blocks.1"]')  # open block 1, then its FFN's output
        page.click('[data-stage="blocks.1.ffn.out"] > .step-head')
        wait_until(page, "document.querySelector('#quant').dataset.matrix.startsWith('blocks.1.ffn.')")
        page.locator(".quant-look").first.click()
        wait_until(page, "document.querySelector('#quant-matrix .quant-weights .hm-canvas') !== null")
        workshop.part_shot("#quant-panel", "quantized_panel")
        page.locator("#quant-matrix .quant-weights .hm-canvas").hover(position={"x": 5, "y": 5})
        assert " × " in page.locator(".quant-weights .hm-tip").inner_text()  # a whole number of steps
        cols, lines = page.evaluate(
            """() => {
              const canvas = document.querySelector('#quant-matrix .quant-weights .hm-canvas');
              const box = canvas.getBoundingClientRect(), cell = box.width / canvas.width;
              const lines = [...document.querySelectorAll('#quant-matrix .quant-weights .hm-group-line')];
              const at = (line) => (line.getBoundingClientRect().left - box.left) / cell;
              return [canvas.width, lines.map((line) => [+line.dataset.col, at(line)])];
            }"""
        )
        assert lines and [col for col, _ in lines] == list(range(32, cols, 32))  # where each block ends
        assert all(abs(x - col) < 1 for col, x in lines)  # drawn at its column, in cells
        page.set_viewport_size({"width": 390, "height": 800})  # a phone: the panel never scrolls sideways
        page.mouse.move(0, 0)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        narrow = tmp_path / "workshop_quantized_panel_390.png"
        page.locator("#quant-panel").screenshot(path=str(narrow))
        keep_screenshot(narrow)
        page.set_viewport_size({"width": 1280, "height": 800})
        workshop.open(model="grid", text="今天")  # nothing moved: said, with one block as the example
        wait_until(page, "document.querySelector('#quant-matrix .quant-worst') !== null")
        words = page.locator("#quant").inner_text()
        assert "Not one weight moved: its weights were already on their blocks' grids" in words
        assert page.locator("#quant-matrix .quant-worst li").count() == 1 and "did not move at all" in words
        assert page.locator("#quant-matrix .quant-errors").count() == 0
        workshop.open(model="plain", text="the cat")
        assert page.locator("#quant-panel").is_hidden()
        workshop.close()
