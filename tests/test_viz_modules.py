"""One decoder, one colour scale per quantity and one heatmap painter, shared by the workshop
(ES modules it imports from static/viz/) and the notebook views (the same files inlined as
classic scripts, `glassformer.viz.modules`)."""

from __future__ import annotations

import re
from pathlib import Path

from glassformer.viz.modules import SHARED, asset, classic_script

STATIC_JS = Path(__file__).resolve().parents[1] / "glassformer" / "workshop" / "static" / "js"
ASSETS = Path(__file__).resolve().parents[1] / "glassformer" / "viz" / "assets"


def test_each_shared_module_inlines_with_every_export():
    for name in SHARED:
        exported = re.findall(r"^export (?:async )?(?:function|const) (\w+)", asset(name), re.M)
        script = classic_script(name)
        assert exported and "export " not in script and "import " not in script
        assert f"Object.assign(shared, {{ {', '.join(exported)} }})" in script


def test_nothing_is_decoded_or_coloured_twice():
    """The workshop's scripts and the views' core import the shared modules instead of
    keeping their own base64 decoder, colour ramps or pixel painter."""
    for script in [*STATIC_JS.glob("*.js"), ASSETS / "core.js", *ASSETS.glob("*_view.js")]:
        text = script.read_text()
        assert "atob(" not in text and "DecompressionStream" not in text, script.name
        assert "new ImageData(" not in text, script.name
        assert not re.search(r"\[\s*8, 48, 107\]|\[33, 102, 172\]", text), script.name  # ramp stops
    assert not (STATIC_JS / "colours.js").exists()


def test_the_views_read_the_shared_modules(browser, tmp_path):
    """A saved view runs on the inlined modules: it decodes its deflated weights and paints."""
    import torch

    from glassformer.viz.html import encode_weights
    from glassformer.viz.modules import shared_scripts

    weights = torch.tensor([[0.5, 0.25, 0.25], [1.0, 0.0, 0.0]])
    block = encode_weights(weights)
    page = browser.new_page()
    page.set_content("<body></body>")
    for script in shared_scripts():
        page.add_script_tag(content=script)
    inflate = "b => window.glassformerViews.shared.inflateBlock(b).then(a => Array.from(a))"
    decoded = page.evaluate(inflate, block)
    assert decoded == [128, 64, 64, 255, 0, 0]
    colour = page.evaluate("window.glassformerViews.shared.unitColour(1)")
    assert colour == [8, 48, 107]
    page.close()
