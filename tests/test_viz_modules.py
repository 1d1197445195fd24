"""One front-end library: the notebook views and the workshop run the same ES modules
(``glassformer/viz/assets``): the workshop imports them from static/viz/, the notebook views
inline them as classic scripts (`glassformer.viz.modules`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from glassformer.viz import HeadView, ModelView, NeuronView, TokenView
from glassformer.viz.modules import SHARED, asset, classic_script, imports, inlined

STATIC_JS = Path(__file__).resolve().parents[1] / "glassformer" / "workshop" / "static" / "js"
ASSETS = Path(__file__).resolve().parents[1] / "glassformer" / "viz" / "assets"
VIEWS = ("head_view.js", "model_view.js", "neuron_view.js", "token_view.js")


def exported(name: str) -> list[str]:
    text = asset(name)
    listed = [
        n.strip() for match in re.findall(r"^export \{([^}]*)\};$", text, re.M) for n in match.split(",")
    ]
    return re.findall(r"^export (?:async )?(?:function|const|let|class) (\w+)", text, re.M) + listed


def test_every_asset_is_an_es_module_that_inlines_with_every_export():
    for path in sorted(ASSETS.glob("*.js")):
        names = exported(path.name)
        script = classic_script(path.name)
        assert names, path.name  # every asset exports: no classic script left among them
        assert not re.search(r"^\s*(?:import|export)\b", script, re.M), path.name
        assert f'modules["{path.name}"] = Object.freeze({{ {", ".join(names)} }});' in script
        assert "window.glassformerViews =" not in path.read_text(), path.name  # no self-installing IIFE


def test_the_views_inline_their_imports_once_in_dependency_order():
    for view in VIEWS:
        order = [name for name, _ in inlined(view)]
        assert order[-1] == view and len(order) == len(set(order))
        for n, name in enumerate(order):
            assert set(imports(name)) <= set(order[:n]), name  # each after what it imports
    assert [name for name, _ in inlined("head_view.js")][:3] == ["blocks.js", "colours.js", "paint.js"]
    assert "lines.js" in dict(inlined("head_view.js"))
    assert "query_key_terms.js" in dict(inlined("neuron_view.js"))


def test_the_workshop_shares_only_modules_that_need_no_view():
    """What the workshop imports from static/viz/ (SHARED) imports only SHARED modules, so its
    page preloads exactly those."""
    for name in SHARED:
        assert set(imports(name)) <= set(SHARED), name


@pytest.mark.parametrize("view", [HeadView, ModelView, NeuronView, TokenView])
def test_the_notebook_html_inlines_every_module_with_no_import_or_export_left(view, decoder_views):
    text = decoder_views[view].html()
    scripts = re.findall(r"<script>(.*?)</script>", text, re.S)
    kind = decoder_views[view].kind
    for name, _ in inlined(f"{kind}_view.js"):
        assert sum(f'if (modules["{name}"]) return;' in s for s in scripts) == 1, name
    for script in scripts:
        assert not re.search(r"^\s*(?:import|export)\b", script, re.M)
        assert not re.search(r"\bimport\s*\(", script)  # no dynamic import either: no network
    assert 'type="module"' not in text and "src=" not in text


@pytest.fixture(scope="module")
def decoder_views():
    import torch

    torch.manual_seed(0)
    weights = torch.softmax(torch.randn(2, 2, 5, 5), dim=-1)
    tokens = list("abcde")
    vectors = torch.randn(5, 4)
    scores = vectors @ vectors.T / 2
    return {
        HeadView: HeadView(weights, tokens),
        ModelView: ModelView(weights, tokens),
        NeuronView: NeuronView(vectors, vectors, scores, torch.softmax(scores, dim=-1), tokens),
        TokenView: TokenView(tokens, [0.1, 0.2, 0.3, 0.4, 0.5]),
    }


def test_the_workshop_draws_with_the_views_modules():
    """The workshop's lines and its q · k view import the code the head and neuron views draw
    with, instead of keeping their own copy."""
    lines = (STATIC_JS / "views" / "attention_lines.js").read_text()
    assert re.search(r'^import \{[^}]*\beachLine\b[^}]*\} from "\.\./\.\./viz/lines\.js";$', lines, re.M)
    assert "for (let j = 0; j < s; j += 1)" not in lines  # the pattern is walked by eachLine
    query_key = (STATIC_JS / "views" / "query_key.js").read_text()
    assert re.search(
        r'^import \{[^}]*\bqueryKeyTerms\b[^}]*\} from "\.\./\.\./viz/query_key_terms\.js";$', query_key, re.M
    )
    assert "function largest(" not in query_key and ".reduce((sum, value) => sum + value, 0)" not in query_key
    head, neuron = asset("head_view.js"), asset("neuron_view.js")
    assert "new Path2D()" not in head and "strokeLines" in head  # the canvas lines live in lines.js
    assert "queryKeyTerms" in neuron


def test_nothing_is_decoded_or_coloured_twice():
    """The workshop's scripts and the views import the shared modules instead of keeping their
    own base64 decoder, colour ramps or pixel painter."""
    for script in [*STATIC_JS.rglob("*.js"), ASSETS / "core.js", *ASSETS.glob("*_view.js")]:
        text = script.read_text()
        assert "atob(" not in text and "DecompressionStream" not in text, script.name
        assert "new ImageData(" not in text, script.name
        assert not re.search(r"\[\s*8, 48, 107\]|\[33, 102, 172\]", text), script.name  # ramp stops
    assert not any(STATIC_JS.rglob("colours.js"))


def test_the_views_read_the_inlined_modules(browser):
    """The inlined modules run as classic scripts: they decode deflated weights, colour, and a
    second copy of the library on the page changes nothing."""
    import torch

    from glassformer.viz.html import encode_weights

    block = encode_weights(torch.tensor([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0]]))
    page = browser.new_page()
    page.set_content("<body></body>")
    for _ in range(2):
        for _, script in inlined("core.js"):
            page.add_script_tag(content=script)
        page.evaluate("window.first = window.first || window.glassformerViews.modules['core.js']")
    assert page.evaluate("window.first === window.glassformerViews.modules['core.js']")
    inflate = "b => window.glassformerViews.modules['blocks.js'].inflateBlock(b).then(a => Array.from(a))"
    assert page.evaluate(inflate, block) == [128, 64, 64, 255, 0, 0]
    assert page.evaluate("window.glassformerViews.modules['colours.js'].unitColour(1)") == [8, 48, 107]
    page.close()


def test_the_views_run_as_es_modules_over_http(browser, decoder_views):
    """The assets as the workshop serves them (static/viz/): the browser imports the view and
    core.js natively, and the view draws from its payload with no inlining."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles

    from glassformer.viz.html import _json_for_script
    from tests.workshop_server import serving

    data = _json_for_script(decoder_views[HeadView].payload())
    page_html = (
        '<!doctype html><meta charset="utf-8"><body><div id="gfv-es" class="gfv gfv-head"></div>'
        f'<script type="application/json" id="gfv-es-data">{data}</script>'
        '<script type="module">import { start } from "./viz/core.js";'
        ' import * as head from "./viz/head_view.js";'
        ' start(document.getElementById("gfv-es"), head);</script></body>'
    )
    app = Starlette(
        routes=[
            Route("/", lambda request: HTMLResponse(page_html)),
            Mount("/viz", StaticFiles(directory=ASSETS)),
        ]
    )
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    with serving(app) as url:
        page.goto(url)
        page.wait_for_selector(".gfv[data-ready]", state="attached", timeout=20_000)
        assert page.get_attribute(".gfv", "data-error") is None and errors == []
        assert page.get_attribute(".gfv", "data-min-weight") == "2"  # the overview drew its lines
        assert page.evaluate("window.glassformerViews") is None  # nothing installed on window
    page.close()
