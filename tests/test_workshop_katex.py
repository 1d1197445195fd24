"""The workshop's equations, typeset by the KaTeX vendored under static/vendor/katex.

The vendored files are package data and match the pinned version. In Chromium, at the
intermediate level, every step's equation is typeset (no `.katex-error`), the numbers in
it are the library's for the same input, and KaTeX's fonts come from the workshop's own
server. Every branch of `levels.js` is typeset for the architectures of a set of configs,
and a formula KaTeX cannot read shows as an error and reaches the console.
"""

from __future__ import annotations

import fnmatch
import math
import re
import tomllib
from pathlib import Path

import pytest

from glassformer.workshop.architecture import stages, summary
from glassformer.workshop.server import create_app
from tests.conftest import tiny
from tests.test_workshop_page import TEXT, Workshop, char_lm
from tests.workshop_server import serving

ROOT = Path(__file__).resolve().parent.parent
WORKSHOP = ROOT / "glassformer" / "workshop"
KATEX = WORKSHOP / "static" / "vendor" / "katex"
SCRIPT = ROOT / "scripts" / "vendor_katex.sh"
SIGNIFICANT = 4  # format.js `number`: 4 significant digits


def shown(value: float) -> str:
    """A value as the page prints it (format.js `number`), for values in 1e-3 .. 1e5."""
    return f"{float(f'{value:.{SIGNIFICANT}g}'):g}".replace("-", "\u2212")


# the vendored package ------------------------------------------------------------------
def pinned(name: str) -> str:
    return re.search(rf"^{name}=(\S+)$", SCRIPT.read_text(), re.M).group(1)


def test_the_vendored_katex_is_the_pinned_version_with_its_licence():
    version = pinned("VERSION")
    assert re.search(rf'var version = "{re.escape(version)}"', (KATEX / "katex.mjs").read_text())
    readme = (KATEX / "README.md").read_text()
    assert f"katex@{version}" in readme and pinned("INTEGRITY") in readme
    assert "MIT License" in (KATEX / "LICENSE").read_text()
    css = (KATEX / "katex.min.css").read_text()
    woff2 = re.findall(r"url\((fonts/[^)]+\.woff2)\)", css)
    assert len(woff2) == css.count("@font-face") > 10  # each face names its woff2 first
    assert sorted(p.relative_to(KATEX).as_posix() for p in (KATEX / "fonts").iterdir()) == sorted(woff2)


def glob_matches(path: str, pattern: str) -> bool:
    """A package-data glob as setuptools reads it: "*" does not cross a "/"."""
    return path.count("/") == pattern.count("/") and fnmatch.fnmatch(path, pattern)


def test_the_vendored_files_are_package_data():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    patterns = globs["glassformer.workshop"]
    files = [p.relative_to(WORKSHOP).as_posix() for p in KATEX.rglob("*") if p.is_file()]
    assert len(files) > 20
    uncovered = [f for f in files if not any(glob_matches(f, g) for g in patterns)]
    assert uncovered == []


# the page ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def models():
    return {
        "llama": char_lm(positions="rope", n_kv_heads=2, norm="rmsnorm", activation="swiglu"),
        "classic": char_lm(positions="sinusoidal", norm_placement="post", activation="relu"),
        "seq2seq": char_lm(family="encoder_decoder", positions="t5_relative", decoder_start_token_id=0),
    }


@pytest.fixture(scope="module")
def server(models):
    with serving(create_app(models)) as url:
        yield url


@pytest.fixture
def workshop(browser, server, tmp_path):
    opened = Workshop(browser, server, tmp_path)
    failed: list[str] = []
    opened.page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
    yield opened
    if not opened.page.is_closed():
        opened.close()
    assert failed == [], f"requests that failed: {failed}"


def equation_texts(workshop: Workshop, stage: str) -> list[str]:
    """The numbers KaTeX typeset in one step's equation (its `\\htmlClass{num}` parts)."""
    return workshop.texts(f'[data-stage="{stage}"] .step-eq .katex-html .num')


def range_texts(workshop: Workshop, stage: str) -> list[str]:
    return workshop.texts(f'[data-stage="{stage}"] .step-eq .range .num')


def assert_every_equation_typeset(workshop: Workshop) -> None:
    page = workshop.page
    steps = page.locator(".step").count()
    assert steps > 10 and page.locator(".step-eq").count() == steps
    untyped = page.locator(".step-eq:not(:has(.katex .katex-html))").evaluate_all(
        "eqs => eqs.map(e => e.closest('.step').dataset.stage)"
    )
    assert untyped == []
    assert page.locator(".katex-error").count() == 0


@pytest.mark.parametrize("name", ["llama", "classic", "seq2seq"])
def test_every_equation_is_typeset_by_katex(workshop, name):
    workshop.open(model=name, text=TEXT, level="intermediate")
    assert_every_equation_typeset(workshop)
    workshop.close()


def test_the_equations_show_the_librarys_numbers(workshop, models):
    lm = models["llama"]
    config = lm.config
    workshop.open(model="llama", text=TEXT, level="intermediate")
    # the attention scale: d_head and its square root
    assert equation_texts(workshop, "blocks.0.attn.scores") == [
        str(config.d_head),
        shown(math.sqrt(config.d_head)),
    ]
    # RMSNorm's mean is over d_model features; grouped-query heads read value head h // 2
    assert equation_texts(workshop, "blocks.0.attn.in") == [str(config.d_model)]
    groups = config.n_heads // config.n_kv_heads
    assert equation_texts(workshop, "blocks.0.attn.z") == [str(groups), str(config.n_heads - 1)]
    ids = lm.tokenizer.encode(TEXT)
    assert equation_texts(workshop, "tokens") == [str(len(ids)), str(config.vocab_size - 1)]
    # the range of this input's values, from lm.trace
    trace = lm.trace(TEXT, ["blocks.0.attn.in", "blocks.0.attn.scores"])
    for stage in ("blocks.0.attn.in", "blocks.0.attn.scores"):
        x = trace[stage]
        assert range_texts(workshop, stage) == [shown(float(x.min())), shown(float(x.max()))]
    workshop.close()


def test_katex_fonts_load_from_the_workshop(workshop, tmp_path):
    workshop.open(model="llama", text=TEXT, level="intermediate")
    page = workshop.page
    page.evaluate("document.fonts.ready")
    loaded = page.evaluate(
        "[...document.fonts].filter(f => f.status === 'loaded').map(f => f.family.replace(/\"/g, ''))"
    )
    assert {"KaTeX_Main", "KaTeX_Math"} <= set(loaded)
    fonts = [url for url in workshop.requests if "/vendor/katex/fonts/" in url]
    assert fonts and all(url.endswith(".woff2") for url in fonts)
    assert any(url.endswith("/static/vendor/katex/katex.mjs") for url in workshop.requests)
    page.locator('[data-stage="blocks.0.attn.scores"]').scroll_into_view_if_needed()
    workshop.shot("katex_intermediate", full_page=False)
    workshop.close()  # no console errors, nothing asked of another origin


# every branch of levels.js, for the architectures of several configs ---------------------
CONFIGS = {
    "gpt2": dict(),
    "llama": dict(positions="rope", n_kv_heads=2, norm="rmsnorm", activation="swiglu"),
    "mqa-window": dict(positions="alibi", n_kv_heads=1, activation="geglu_tanh", attn_window=4),
    "post-norm": dict(positions="sinusoidal", norm_placement="post", activation="relu", attn_scale=0.5),
    "bert": dict(family="encoder", activation="gelu", attn_window=3),
    "t5": dict(family="encoder_decoder", positions="t5_relative", norm="rmsnorm", activation="geglu"),
    "silu": dict(positions="none", activation="silu"),
}

RENDER_ALL = """async ({arch, plan}) => {
  const levels = await import("./static/js/levels.js");
  const { parseStage } = await import("./static/js/stages.js");
  const payload = { tokens: [0, 1, 2, 3, 4], architecture: arch };
  const box = document.createElement("div");
  document.body.append(box);
  const out = {};
  for (const stage of plan) {
    const { kind, cross } = parseStage(stage.id);
    const shape = stage.shape.split(" ").map((_, i) => 5 - i);
    const value = stage.id === "tokens" ? null : { shape, min: -1.5e-4, max: 123456 };
    stage.value = value;
    const ctx = { stage, value, arch, cross, sizes: levels.letterSizes(stage, payload) };
    box.innerHTML = levels.equation(kind, ctx);
    out[stage.id] = {
      typeset: box.querySelectorAll(".katex .katex-html").length,
      errors: box.querySelectorAll(".katex-error").length,
      text: box.innerText,
    };
  }
  box.remove();
  return out;
}"""


def test_every_branch_of_the_equations_is_typeset(workshop):
    workshop.open(model="llama", text=TEXT, level="intermediate")
    for name, fields in CONFIGS.items():
        config = tiny(**fields)
        drawn = workshop.page.evaluate(RENDER_ALL, {"arch": summary(config), "plan": stages(config)})
        assert drawn.keys() == {s["id"] for s in stages(config)}
        bad = {stage: d for stage, d in drawn.items() if d["typeset"] != 1 or d["errors"]}
        assert bad == {}, f"{name}: {bad}"
    # a sliding window hides the keys `window` or more places back; causal also the later ones
    for name, hidden in [("mqa-window", "after its query; a key 4 or more"), ("bert", "a key 3 or more")]:
        config = tiny(**CONFIGS[name])
        drawn = workshop.page.evaluate(RENDER_ALL, {"arch": summary(config), "plan": stages(config)})
        assert hidden in drawn["blocks.0.attn.mask"]["text"]
    workshop.close()


def test_numbers_become_tex_and_a_bad_formula_shows_an_error(workshop):
    workshop.open(model="llama", text=TEXT, level="intermediate")
    page = workshop.page
    numbers = page.evaluate(
        """async () => {
          const { texNumber } = await import("./static/js/levels.js");
          return [1.23456e-5, -2.5, -Infinity, 123456789, 0].map((v) => texNumber(v));
        }"""
    )
    assert numbers == ["1.235 \\times 10^{-5}", "-2.5", "-\\infty", "1.235 \\times 10^{8}", "0"]
    broken = page.evaluate(
        """async () => {
          const { tex } = await import("./static/js/tex.js");
          const node = tex("\\\\frac{1}{");
          document.body.append(node);
          return { error: node.querySelectorAll(".katex-error").length, text: node.innerText };
        }"""
    )
    assert broken == {"error": 1, "text": "\\frac{1}{"}
    assert any("KaTeX could not typeset" in e for e in workshop.errors)
    workshop.close(allowed_errors=tuple(e for e in workshop.errors if "KaTeX could not typeset" in e))
