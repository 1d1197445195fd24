"""The workshop's equations, typeset by the KaTeX vendored under static/vendor/katex.

The vendored files are package data and match the pinned version. In Chromium, at the
intermediate level, every step's equation is typeset (no `.katex-error`), the numbers in
it are the library's for the same input, and KaTeX's fonts come from the workshop's own
server. Every branch of `equations.js` is typeset for the architectures of a set of
configs, and a formula KaTeX cannot read shows as an error and reaches the console. Each
equation is the model's own (`architecture.summary`): its bias terms only where the
config has them, its ε, embedding scale and norm, RoPE base, sinusoid layout, sliding
window and head, with the config's values in the typeset TeX.
"""

from __future__ import annotations

import fnmatch
import math
import re
import tomllib
from pathlib import Path

import pytest
import torch

import glassformer as gf
from glassformer.config import llama_style
from glassformer.nn.positions import RotaryEmbedding, alibi_slopes
from glassformer.workshop.server import create_app
from glassformer.workshop.walk.architecture import stages, summary
from tests.conftest import tiny, tiny_model
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


def constant(value: float, tex: bool = False) -> str:
    """A model's constant as its equations print it: an integer exactly (grouped by thousands),
    anything else to float32's 7 significant digits (equations.js `num`)."""
    v = float(f"{value:.7g}")
    if v.is_integer():
        return f"{int(v):,}".replace(",", "{,}" if tex else ",")
    return repr(v)


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
LLAMA = dict(
    positions="rope",
    n_kv_heads=2,
    norm="rmsnorm",
    activation="swiglu",
    qkv_bias=False,
    out_bias=False,
    ffn_bias=False,
)


@pytest.fixture(scope="module")
def models():
    return {
        "llama": char_lm(**LLAMA, norm_eps=1e-6, rope_base=500000.0),
        "classic": char_lm(positions="sinusoidal", norm_placement="post", activation="relu", norm_eps=1e-12),
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


def equation_tex(workshop: Workshop, stage: str) -> str:
    """The TeX KaTeX typeset for one step (its MathML annotation holds the source)."""
    return workshop.page.locator(f'[data-stage="{stage}"] .step-eq annotation').text_content()


NUMBER = re.compile(r"\\htmlClass\{num\}\{((?:[^{}]|\{[^{}]*\})*)\}")


def tex_numbers(tex: str) -> list[str]:
    """The TeX of each number taken from the model or the input: \\htmlClass{num}{10^{-5}}."""
    return NUMBER.findall(tex)


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
        constant(math.sqrt(config.d_head)),
    ]
    # RMSNorm's mean is over d_model features, its ε the config's; grouped-query heads read
    # value head h // 2
    assert tex_numbers(equation_tex(workshop, "blocks.0.attn.in")) == [str(config.d_model), "10^{-6}"]
    groups = config.n_heads // config.n_kv_heads
    assert equation_texts(workshop, "blocks.0.attn.z") == [str(groups), str(config.n_heads - 1)]
    ids = lm.tokenizer.encode(TEXT)
    assert equation_texts(workshop, "tokens") == [str(len(ids)), str(config.vocab_size - 1)]
    # the range of this input's values, from lm.trace
    trace = lm.trace(TEXT, ["blocks.0.attn.in", "blocks.0.attn.scores"])
    for stage in ("blocks.0.attn.in", "blocks.0.attn.scores"):
        x = trace[stage]
        assert range_texts(workshop, stage) == [shown(float(x.min())), shown(float(x.max()))]
    # the model's own constants, from the payload's architecture: no bias anywhere, its RoPE base
    drawn = workshop.page.locator(".step-eq annotation").all_text_contents()
    assert len(drawn) > 10 and not any("b_{" in tex for tex in drawn)
    assert r"\theta_i = \htmlClass{num}{500{,}000}^{-2i/\htmlClass{num}{8}}" in equation_tex(
        workshop, "blocks.0.attn.q"
    )
    workshop.close()


def test_a_post_norm_model_shows_its_biases_and_its_epsilon(workshop, models):
    assert models["classic"].config.norm_eps == 1e-12
    workshop.open(model="classic", text=TEXT, level="intermediate")
    assert r"\hat{x}\, W_{Q} + b_{Q}" in equation_tex(workshop, "blocks.0.attn.q")
    assert r"W_O + b_{O}" in equation_tex(workshop, "blocks.0.attn.out")
    residual = equation_tex(workshop, "blocks.0.resid_post")
    assert r"x \gets \mathrm{LayerNorm}(u), \quad u = x + y" in residual
    assert tex_numbers(residual) == ["10^{-12}"]
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


# every branch of equations.js, for the architectures of several configs ------------------
CONFIGS = {
    "gpt2": dict(),
    "llama": dict(**LLAMA, norm_eps=1e-6, rope_base=500000.0, tie_embeddings=False),
    "qwen": dict(positions="rope", norm="rmsnorm", activation="swiglu", out_bias=False, ffn_bias=False),
    "qwen3": dict(positions="rope", norm="rmsnorm", activation="swiglu", qkv_bias=False, qk_norm=True),
    "ntk": dict(positions="rope", rope_style="interleaved", rope_scaling="ntk", rope_scaling_factor=4.0),
    "mixtral": dict(**LLAMA, n_experts=4, experts_per_token=2, expert_d_ff=16),
    "qwen2-moe": dict(
        **LLAMA, n_experts=4, router="sigmoid", normalize_expert_weights=False, shared_expert_d_ff=24
    ),
    "linear": dict(positions="rope", rope_scaling="linear", rope_scaling_factor=2.0),
    "mqa-window": dict(positions="alibi", n_kv_heads=1, activation="geglu_tanh", attn_window=4),
    "post-norm": dict(positions="sinusoidal", norm_placement="post", activation="relu", attn_scale=0.5),
    "bert": dict(
        family="encoder",
        norm_placement="post",
        activation="gelu",
        attn_window=3,
        embed_norm=True,
        type_vocab_size=2,
        norm_eps=1e-12,
    ),
    "t5": dict(
        family="encoder_decoder",
        positions="t5_relative",
        norm="rmsnorm",
        activation="geglu",
        qkv_bias=False,
        out_bias=False,
        ffn_bias=False,
        attn_scale=1.0,
        norm_eps=1e-6,
        lm_head_input_scale=32**-0.5,
    ),
    "original": dict(
        family="encoder_decoder",
        positions="sinusoidal",
        sinusoidal_style="halved",
        embed_scale=True,
        norm_placement="post",
        activation="relu",
        tie_embeddings=False,
        lm_head_bias=True,
        attn_window=2,
    ),
    "silu": dict(positions="none", activation="silu", lm_head_input_scale=0.5),
    "gemma2": dict(
        **LLAMA,
        norm_placement="sandwich",
        embed_scale=True,
        attn_window=4,
        global_every=2,
        attn_softcap=50.0,
        logit_softcap=30.0,
        qk_norm=True,
        rope_local_base=100.0,
        rope_scaling="linear",
        rope_scaling_factor=8.0,
    ),
    "olmo2": dict(**LLAMA, norm_placement="output", qk_norm=True, qk_norm_scope="all"),
}

RENDER_ALL = """async ({arch, plan}) => {
  const levels = await import("./static/js/walk/levels.js");
  const payload = { tokens: [0, 1, 2, 3, 4], architecture: arch };
  const box = document.createElement("div");
  document.body.append(box);
  const out = {};
  for (const stage of plan) {
    const { kind, cross } = stage; // architecture.stages says both
    const shape = stage.shape.split(" ").map((_, i) => 5 - i);
    const value = stage.id === "tokens" ? null : { shape, min: -1.5e-4, max: 123456 };
    stage.value = value;
    const ctx = { stage, value, arch, cross, sizes: levels.letterSizes(stage, payload) };
    box.replaceChildren(levels.equation(stage.equation, ctx) ?? ""); // DOM nodes, never HTML
    out[stage.id] = {
      typeset: box.querySelectorAll(".katex .katex-html").length,
      errors: box.querySelectorAll(".katex-error").length,
      text: box.innerText,
      tex: [...box.querySelectorAll("annotation")].map((a) => a.textContent).join(" "),
    };
  }
  box.remove();
  return out;
}"""


def render(workshop: Workshop, config) -> dict[str, dict]:
    """Every step's equation for ``config``, drawn from its summary alone: the stage titles
    are blanked, so no equation can read a value from a title."""
    plan = [{**stage, "title": ""} for stage in stages(gf.build(config))]
    return workshop.page.evaluate(RENDER_ALL, {"arch": summary(config), "plan": plan})


def test_every_branch_of_the_equations_is_typeset(workshop):
    workshop.open(model="llama", text=TEXT, level="intermediate")
    for name, fields in CONFIGS.items():
        config = tiny(**fields)
        drawn = render(workshop, config)
        assert drawn.keys() == {s["id"] for s in stages(gf.build(config))}
        bad = {stage: d for stage, d in drawn.items() if d["typeset"] != 1 or d["errors"]}
        assert bad == {}, f"{name}: {bad}"
    workshop.close()


def rope_base_shown(config) -> str:
    """The base of θ_i the library uses (NTK scaling raises it), as the page prints it."""
    return constant(RotaryEmbedding(config).base, tex=True)


# (config, step, what its TeX or prose must hold, what it must not): each is the model's own
EXPECTED = [
    # a bias term only where the config has one (qkv_bias, out_bias, ffn_bias, lm_head_bias)
    ("gpt2", "blocks.0.attn.q", [r"Q = \hat{x}\, W_{Q} + b_{Q}"], []),
    ("gpt2", "blocks.0.attn.out", [r"W_O + b_{O}"], []),
    ("gpt2", "blocks.0.ffn.hidden", [r"z = \hat{x}\, W_{\mathrm{up}} + b_{\mathrm{up}}"], []),
    ("gpt2", "blocks.0.ffn.out", [r"y = a\, W_{\mathrm{down}} + b_{\mathrm{down}}"], []),
    ("qwen", "blocks.0.attn.k", [r"\mathrm{RoPE}(\hat{x}\, W_{K} + b_{K})"], []),
    ("qwen", "blocks.0.attn.v", [r"V = \hat{x}\, W_{V} + b_{V}"], []),
    ("qwen", "blocks.0.attn.out", [r"W_O, \quad"], ["b_{"]),
    ("qwen", "blocks.0.ffn.act", [r"\odot (\hat{x}\, W_{\mathrm{up}})"], ["b_{"]),
    ("llama", "blocks.0.attn.q", [r"Q = \mathrm{RoPE}(\hat{x}\, W_{Q}), \quad"], ["b_{"]),
    (
        "mqa-window",
        "blocks.0.ffn.out",
        [
            r"\bigl(\mathrm{GELU}(\hat{x}\, W_{\mathrm{gate}} + b_{\mathrm{gate}}) \odot "
            r"(\hat{x}\, W_{\mathrm{up}} + b_{\mathrm{up}})\bigr)\, W_{\mathrm{down}} + b_{\mathrm{down}}"
        ],
        [],
    ),
    (
        "llama",
        "blocks.0.ffn.out",
        [
            r"\bigl(\mathrm{SiLU}(\hat{x}\, W_{\mathrm{gate}}) \odot \hat{x}\, W_{\mathrm{up}}\bigr)\, "
            r"W_{\mathrm{down}}, \quad"
        ],
        ["b_{"],
    ),
    # the norm: LayerNorm's biased variance and RMSNorm's mean square, ε inside the root
    (
        "gpt2",
        "blocks.0.attn.in",
        [
            r"\dfrac{x - \mu}{\sqrt{\sigma^2 + \varepsilon}} \odot \gamma + \beta",
            r"\sigma^2 = \tfrac{1}{\htmlClass{num}{32}} \sum_{j} (x_j - \mu)^2",
            r"\varepsilon = \htmlClass{num}{10^{-5}}",
        ],
        [],
    ),
    (
        "llama",
        "final_norm",
        [
            r"\dfrac{x}{\sqrt{\tfrac{1}{\htmlClass{num}{32}} \sum_{j} x_j^2 + \varepsilon}} \odot \gamma",
            r"\varepsilon = \htmlClass{num}{10^{-6}}",
        ],
        [r"\beta", r"\mu"],
    ),
    (
        "bert",
        "blocks.0.resid_post",
        [r"\mathrm{LayerNorm}(u), \quad u = x + y", r"\htmlClass{num}{10^{-12}}"],
        [],
    ),
    ("bert", "blocks.0.attn.in", [r"\hat{x} = x"], [r"\varepsilon"]),
    # embeddings: √d_model scaling, BERT's segment table and embedding norm
    ("gpt2", "embed.tokens", [r"x_i = E[\mathrm{id}_i], \quad"], [r"\sqrt"]),
    ("original", "encoder.embed.tokens", [r"x_i = \sqrt{\htmlClass{num}{32}}\, E[\mathrm{id}_i]"], []),
    ("original", "decoder.embed.out", [r"x = \sqrt{\htmlClass{num}{32}}\, E[\mathrm{ids}] + P[0"], []),
    ("gpt2", "embed.out", [r"x = E[\mathrm{ids}] + P[0, \dots, \htmlClass{num}{4}]"], ["LayerNorm", "S[0]"]),
    (
        "bert",
        "embed.out",
        [
            r"x = \mathrm{LayerNorm}(u), \quad u = E[\mathrm{ids}] + P[0, \dots, \htmlClass{num}{4}] + S[0]",
            r"\varepsilon = \htmlClass{num}{10^{-12}}",
        ],
        [],
    ),
    ("gpt2", "embed.positions", [r"P \in \mathbb{R}^{\htmlClass{num}{64} \times \htmlClass{num}{32}}"], []),
    # sinusoids: interleaved (the paper) or halved (Marian)
    ("post-norm", "embed.positions", [r"P_{p,\,2k+1} = \cos(p / 10000^{2k/\htmlClass{num}{32}})"], []),
    ("original", "encoder.embed.positions", [r"P_{p,\,\htmlClass{num}{16} + k} = \cos"], ["2k+1"]),
    # RoPE: θ_i = base^(-2i/e), the pairs rotated, NTK's raised base, linear's divided positions
    (
        "llama",
        "blocks.0.attn.q",
        [r"\theta_i = \htmlClass{num}{500{,}000}^{-2i/\htmlClass{num}{8}}", "(i, i + 4)"],
        [],
    ),
    ("gpt2", "blocks.0.attn.q", [], ["RoPE", r"\theta"]),
    (
        "ntk",
        "blocks.0.attn.q",
        ["(2i, 2i + 1)", r"\theta_i = b^{-2i/", r"b = \htmlClass{num}{10{,}000} \cdot"],
        [],
    ),
    ("linear", "blocks.0.attn.q", [r"\text{angle}_i = \tfrac{p}{\htmlClass{num}{2}}\, \theta_i"], []),
    # GELU exact or its tanh approximation; SiLU
    ("bert", "blocks.0.ffn.act", [r"\mathrm{GELU}(z) = z\, \Phi(z)"], [r"\tanh"]),
    ("gpt2", "blocks.0.ffn.act", [r"\mathrm{GELU}(z) \approx", r"\tanh"], [r"\Phi"]),
    (
        "mqa-window",
        "blocks.0.ffn.act",
        [r"\tanh", r"\odot (\hat{x}\, W_{\mathrm{up}} + b_{\mathrm{up}})"],
        [],
    ),
    ("t5", "encoder.blocks.0.ffn.act", [r"\mathrm{GELU}(z) \odot (\hat{x}\, W_{\mathrm{up}})", r"\Phi"], []),
    # the sliding window, from the summary: w or more places back; causal also the later keys
    ("mqa-window", "blocks.0.attn.mask", [r"j > i \text{ or } j \le i - \htmlClass{num}{4}"], []),
    ("bert", "blocks.0.attn.mask", [r"j \le i - \htmlClass{num}{3}", "a key 3 or more"], ["j > i"]),
    ("original", "decoder.blocks.0.attn.mask", [r"j \le i - \htmlClass{num}{2}"], []),
    # position biases: T5's buckets, ALiBi's slopes (checked against the library below)
    (
        "t5",
        "encoder.blocks.0.attn.scores",
        ["S = Q K^{\\top} + B", "16 buckets each way", "below 8", "up to 128"],
        [],
    ),
    ("t5", "decoder.blocks.0.attn.scores", ["past keys only", "below 16"], []),
    ("t5", "decoder.blocks.0.cross_attn.scores", ["S = Q K^{\\top}"], ["B"]),
    # the head: tied (E^T) or its own W_U, its bias, T5's input scale
    ("gpt2", "logits", [r"\mathrm{logits} = \hat{x}\, E^{\top}, \quad E \in"], [r"W_{\mathrm{U}}", "b_{"]),
    (
        "llama",
        "logits",
        [r"\mathrm{logits} = \hat{x}\, W_{\mathrm{U}}, \quad W_{\mathrm{U}} \in"],
        [r"E^{\top}"],
    ),
    ("original", "logits", [r"\mathrm{logits} = x\, W_{\mathrm{U}} + b_{U}"], [r"E^{\top}"]),
    (
        "t5",
        "logits",
        [r"\mathrm{logits} = \tfrac{1}{\sqrt{\htmlClass{num}{32}}}\, \hat{x}\, E^{\top}", "(T5)"],
        [],
    ),
    ("silu", "logits", [r"\mathrm{logits} = \htmlClass{num}{0.5}\, \hat{x}\, E^{\top}"], []),
    ("bert", "logits", [r"E^{\top} + b_{\mathrm{vocab}}", r"\htmlClass{num}{10^{-12}}"], []),
    # Gemma 2 / 3: the sandwich's two norms, the soft-caps, each block's window and RoPE base
    ("gemma2", "blocks.0.attn.in", [r"\hat{x} = \mathrm{RMSNorm}(x)"], []),
    ("gemma2", "blocks.0.attn.post_norm", [r"\hat{o} = \mathrm{RMSNorm}(\mathrm{out})", "sandwich"], []),
    ("gemma2", "blocks.0.resid_mid", [r"x \gets x + \mathrm{RMSNorm}(\mathrm{out})"], []),
    ("gemma2", "blocks.0.attn.capped", [r"S \gets \htmlClass{num}{50} \tanh"], []),
    ("gemma2", "blocks.0.attn.mask", [r"j \le i - \htmlClass{num}{4}"], []),
    ("gemma2", "blocks.1.attn.mask", [r"j > i"], [r"j \le i -"]),  # a global block
    ("gemma2", "blocks.0.attn.q", [r"\theta_i = \htmlClass{num}{100}^", "each head's"], [r"\tfrac{p}"]),
    ("gemma2", "blocks.1.attn.q", [r"\tfrac{p}{\htmlClass{num}{8}}"], [r"\htmlClass{num}{100}^"]),
    ("gemma2", "logits_raw", [r"z = \hat{x}\, E^{\top}"], []),
    ("gemma2", "logits", [r"\mathrm{logits} = \htmlClass{num}{30} \tanh"], []),
    # OLMo 2: a norm on each sublayer's output only; q/k-norm over all heads at once
    ("olmo2", "blocks.0.attn.in", [r"\hat{x} = x", "on its output"], [r"\mathrm{RMSNorm}"]),
    ("olmo2", "blocks.0.ffn.post_norm", [r"\hat{y} = \mathrm{RMSNorm}(y)"], []),
    ("olmo2", "blocks.0.attn.q", ["all 32 query features at once"], []),
    ("olmo2", "final_norm", [r"\mathrm{RMSNorm}"], []),
]


def test_each_equation_is_the_models_own(workshop):
    workshop.open(model="llama", text=TEXT, level="intermediate")
    drawn = {name: render(workshop, tiny(**CONFIGS[name])) for name in {row[0] for row in EXPECTED}}
    wrong = []
    for name, stage, present, absent in EXPECTED:
        step = drawn[name][stage]
        said = step["tex"] + "\n" + step["text"]
        wrong += [f"{name} {stage}: lacks {p!r} in {step['tex']!r}" for p in present if p not in said]
        wrong += [f"{name} {stage}: has {a!r} in {step['tex']!r}" for a in absent if a in step["tex"]]
    # no bias term anywhere in a model without biases; ALiBi's slopes and NTK's base the library's
    for name in ("llama", "t5"):
        wrong += [f"{name} {stage}: a bias" for stage, step in drawn[name].items() if "b_{" in step["tex"]]
    slopes = tex_numbers(drawn["mqa-window"]["blocks.0.attn.scores"]["tex"])[-4:]
    assert [float(m) for m in slopes] == pytest.approx(alibi_slopes(4).tolist(), rel=1e-3)  # 4 digits
    ntk = tiny(**CONFIGS["ntk"])
    raised = (
        rf"^{{\htmlClass{{num}}{{8}}/\htmlClass{{num}}{{6}}}} = \htmlClass{{num}}{{{rope_base_shown(ntk)}}}"
    )
    assert raised in drawn["ntk"]["blocks.0.attn.q"]["tex"]
    assert wrong == []
    workshop.close()


def test_the_summary_carries_the_fields_the_equations_need():
    llama = summary(llama_style(vocab_size=61, d_model=32, n_heads=4, rope_base=500000.0, norm_eps=1e-6))
    assert llama["norm_eps"] == 1e-6 and llama["position_params"]["base"] == 500000.0
    assert (llama["attention"]["qkv_bias"], llama["attention"]["out_bias"], llama["ffn"]["bias"]) == (
        False,
    ) * 3
    ntk = tiny(**CONFIGS["ntk"])
    assert summary(ntk)["position_params"]["scaled_base"] == RotaryEmbedding(ntk).base != ntk.rope_base
    assert summary(tiny(**CONFIGS["mqa-window"]))["position_params"]["slopes"] == alibi_slopes(4).tolist()
    bert = summary(tiny(**CONFIGS["bert"], lm_head_input_scale=0.5))
    # the masked-LM head always has its biases and reads the stream unscaled (`unembed`)
    assert bert["head"] == {"tied": True, "bias": True, "input_scale": 1.0, "softcap": None}
    assert bert["embeddings"] == {"scale": 1.0, "norm": True, "segments": 2}
    assert bert["attention"]["window"] == 3
    assert summary(tiny(**CONFIGS["original"]))["embeddings"]["scale"] == math.sqrt(32)
    # the keys the page already read are all still there
    assert {
        "family",
        "stacks",
        "norm",
        "placement",
        "positions",
        "positions_text",
        "attention",
        "ffn",
    } <= set(bert)


def test_cross_attention_has_no_sliding_window_in_the_library_nor_on_the_page():
    config = tiny(**CONFIGS["original"])
    assert not any(s["id"].endswith("cross_attn.mask") for s in stages(gf.build(config)))
    assert any(s["id"] == "decoder.blocks.0.attn.mask" for s in stages(gf.build(config)))
    net = tiny_model(**CONFIGS["original"], decoder_start_token_id=0)
    patterns = {}
    with net.hooks({"decoder.blocks.0.*attn.pattern": lambda x, name: patterns.__setitem__(name, x)}):
        net(torch.arange(8)[None], torch.arange(6)[None])
    assert (patterns["decoder.blocks.0.attn.pattern"] == 0).any()  # the window hides some keys
    assert (patterns["decoder.blocks.0.cross_attn.pattern"] > 0).all()  # and no encoder token


def test_numbers_become_tex_and_a_bad_formula_shows_an_error(workshop):
    workshop.open(model="llama", text=TEXT, level="intermediate")
    page = workshop.page
    numbers = page.evaluate(
        """async () => {
          const { texNumber } = await import("./static/js/walk/levels.js");
          return [1.23456e-5, -2.5, -Infinity, 123456789, 0].map((v) => texNumber(v));
        }"""
    )
    assert numbers == ["1.235 \\times 10^{-5}", "-2.5", "-\\infty", "1.235 \\times 10^{8}", "0"]
    broken = page.evaluate(
        """async () => {
          const { tex } = await import("./static/js/core/tex.js");
          const node = tex("\\\\frac{1}{");
          document.body.append(node);
          return { error: node.querySelectorAll(".katex-error").length, text: node.innerText };
        }"""
    )
    assert broken == {"error": 1, "text": "\\frac{1}{"}
    assert any("KaTeX could not typeset" in e for e in workshop.errors)
    workshop.close(allowed_errors=tuple(e for e in workshop.errors if "KaTeX could not typeset" in e))


# sizes past 4 significant digits, as real models have them: a rounded number cannot pass
REAL_SIZES = {
    "smollm2-like decoder": {
        **LLAMA,
        **dict(vocab_size=49152, d_model=576, n_heads=9, n_kv_heads=3, d_ff=1536, max_seq_len=8192),
    },
    "gpt2-like decoder": dict(vocab_size=50257, d_model=768, n_heads=12, d_ff=3072, max_seq_len=1024),
    "minilm-like encoder": dict(
        family="encoder",
        vocab_size=30522,
        d_model=384,
        n_heads=12,
        d_ff=1536,
        max_seq_len=512,
        norm_placement="post",
        mlm_head=False,
    ),
    "t5-like encoder-decoder": dict(
        family="encoder_decoder",
        vocab_size=32128,
        d_model=512,
        n_heads=8,
        d_ff=2048,
        positions="t5_relative",
        decoder_start_token_id=0,
    ),
    "a classifier": dict(family="encoder", vocab_size=30522, d_model=384, n_heads=12, n_classes=3),
}


RENDERED_TOKENS = 5  # `render`'s input length t


def config_integers(config) -> set[int]:
    """Every integer an equation may print for ``config``: its sizes and what they make."""
    e, d = config.d_head, config.d_model
    sizes = {d, d // 2, d // 2 - 1, config.n_heads, config.n_heads - 1, config.n_kv_heads, e, e - 2}
    sizes |= {config.n_heads // config.n_kv_heads, config.d_ff, config.vocab_size, config.vocab_size - 1}
    sizes |= {config.max_seq_len, config.relative_buckets, config.n_classes, 1, 2}
    sizes |= {round(math.sqrt(n)) for n in (e, d) if math.isqrt(n) ** 2 == n}  # sqrt(64) = 8
    sizes |= {int(config.rope_base), RENDERED_TOKENS, RENDERED_TOKENS - 1}  # the base; t, t - 1
    return sizes


def test_every_integer_in_every_equation_is_the_config_s_exactly(workshop):
    """Integers are exact: E in R^{49,152 x 576} and 0 <= id <= 49,151, once rounded to four
    digits as 49,150; MiniLM's 30,522 as 30,520."""
    workshop.open(model="llama", text=TEXT, level="intermediate")
    for name, fields in REAL_SIZES.items():
        config = tiny(**fields)
        drawn = render(workshop, config)
        allowed, wrong = config_integers(config), []
        for stage, step in drawn.items():
            for number in tex_numbers(step["tex"]):
                if (
                    re.fullmatch(r"\d+(\{,\}\d{3})*", number)
                    and int(number.replace("{,}", "")) not in allowed
                ):
                    wrong.append(f"{stage}: {number}")
        assert wrong == [], name
        last_id = f"{config.vocab_size - 1:,}".replace(",", "{,}")
        assert rf"\le \htmlClass{{num}}{{{last_id}}}" in drawn["tokens"]["tex"], name
        table = f"{config.vocab_size:,}".replace(",", "{,}")
        assert rf"\htmlClass{{num}}{{{table}}} \times" in next(
            d["tex"] for k, d in drawn.items() if k.endswith("embed.tokens")
        ), name
    workshop.close()
