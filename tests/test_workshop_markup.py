"""No markup from data: what a model, a run, a tokenizer or a request holds reaches the page as
text, in every view and level (issue 27: a classifier's label ``<img src=x onerror=…>`` ran
script when a link to its walk was opened).

One server for the module holds two tiny models (one layer) whose tokenizer has the two hostile
strings below as special tokens, so a prompt holding them is cut into tokens that are them:

* ``labels``: an encoder classifier whose ``class_names`` are the hostile strings (HF
  ``id2label`` feeds the same field);
* ``lm <img …>``: a decoder named with one (a run's folder name is a model's name), its head
  biased so that its next-token guesses, its logit lens and its generation are the hostile
  tokens.

Each page is opened from a link, as the attacker's would be, at each level (each with another
zoom of the overview), with a step of each kind opened at the beginner's and the advanced level
and the prediction explained at the intermediate one; then a generation, the notebook views of
the prompt, and the lab with a run directory whose name and records hold the strings. After
each: no script ran (``window.__pwned``), no ``img[src="x"]``, no ``on…`` attribute and no
script holding the strings exists, and the strings are on the page as visible text where the
page shows them (a label, a token, a guess, a name, a generation, a run's sample).
"""

from __future__ import annotations

import json
import time

import pytest
import torch

import glassformer as gf
from glassformer.formats.run_directory import METRICS, PROGRESS, TRAIN_CONFIG
from glassformer.models import with_classifier
from glassformer.tokenizers.char import CharTokenizer
from glassformer.workshop.server import create_app
from tests.conftest import tiny_model
from tests.test_workshop_page import CHARS, Workshop, shown_token
from tests.workshop_server import wait_until

IMG = '<img src=x onerror="window.__pwned=1">'
SCRIPT = "</script><script>window.__pwned=2</script>"
HOSTILE = (IMG, SCRIPT)
PROMPT = f"the cat {IMG} sat {SCRIPT} on"
CLASSIFIER = "labels"
DECODER = f"lm {IMG}"
LEVELS = {  # level -> the overview's zoom opened with it: the model, a block, a head, a query · key
    "beginner": "",
    "intermediate": "blocks.0",
    "advanced": "blocks.0.attn:1:2",
}
# the steps opened at the beginner's and the advanced level (the intermediate one draws the
# advanced one's details, less the code): one step of each kind of detail, a stream with the lens
# at its layer, per-head vectors, the scores and the attention maps, the neurons, the head's
# scores or labels
OPEN_STEPS = {
    "embed.tokens",
    "blocks.0.attn.q",
    "blocks.0.attn.scores",
    "blocks.0.attn.pattern",
    "blocks.0.ffn.act",
    "blocks.0.resid_post",
    "logits",
    "classifier.pooled",
    "classifier.logits",
}
OPENED_AT = ("beginner", "advanced")
NOTEBOOK_VIEWS = ("head", "model", "neuron", "tokens", "lens")  # glassformer.viz's pages
TEXT_VIEWS = ("head", "neuron", "tokens")  # those that print the tokens (the lens is an SVG's paths)
HEAD_BIAS = 30.0  # the decoder's guesses: the hostile tokens first, whatever the stream holds

PWNED = """() => ({
  pwned: window.__pwned ?? null,
  images: document.querySelectorAll('img[src="x"]').length,
  handlers: [...document.querySelectorAll("*")]
    .filter((e) => [...e.attributes].some((a) => /^on/i.test(a.name))).length,
  // a script the page runs holding the strings (a view's JSON data is inert, its "<" escaped)
  scripts: [...document.scripts]
    .filter((s) => s.type !== "application/json" && s.textContent.includes("__pwned")).length,
})"""
SAFE = {"pwned": None, "images": 0, "handlers": 0, "scripts": 0}


def tokenizer() -> CharTokenizer:
    """Characters, and each hostile string as one special token (the workshop allows them)."""
    chars = "".join(sorted(set(CHARS + "".join(HOSTILE))))
    return CharTokenizer(chars, special_tokens=HOSTILE)


def hostile_id(tok: CharTokenizer, text: str) -> int:
    (token_id,) = tok.encode(text, allowed_special="all")
    return token_id


@pytest.fixture(scope="module")
def models() -> dict[str, gf.LanguageModel]:
    tok = tokenizer()
    sizes = dict(vocab_size=tok.vocab_size, max_seq_len=64, n_layers=1)
    encoder = tiny_model(family="encoder", **sizes)
    classifier = with_classifier(encoder, len(HOSTILE), pooling="mean", class_names=HOSTILE).eval()
    decoder = tiny_model(tie_embeddings=False, lm_head_bias=True, **sizes)
    with torch.no_grad():
        decoder.lm_head.bias.zero_()
        decoder.lm_head.bias[hostile_id(tok, IMG)] = HEAD_BIAS
        decoder.lm_head.bias[hostile_id(tok, SCRIPT)] = HEAD_BIAS - 1
    return {CLASSIFIER: gf.LanguageModel(classifier, tok), DECODER: gf.LanguageModel(decoder, tok)}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A run directory named with the hostile label, and one whose records hold both strings
    (its sample, a line that is no record); neither has a model, so both are listed damaged."""
    root = tmp_path_factory.mktemp("runs")
    named = root / IMG
    named.mkdir()
    (named / TRAIN_CONFIG).write_text(json.dumps({"preset": IMG, "model": {"name": SCRIPT}}))
    records = root / "records"
    records.mkdir()
    (records / TRAIN_CONFIG).write_text(json.dumps({"preset": SCRIPT}))
    now = time.time()
    progress = [
        {
            "step": s,
            "steps": 4,
            "loss": 3.0 - 0.1 * s,
            "lr": 1e-3,
            "grad_norm": 1.0,
            "tokens_per_s": 100.0,
            "time": now + s,
        }
        for s in (1, 2)
    ]
    (records / PROGRESS).write_text("".join(json.dumps(p) + "\n" for p in progress) + IMG + "\n")
    metrics = {"step": 2, "val_loss": 2.5, "sample": f"{IMG} {SCRIPT}"}
    (records / METRICS).write_text(json.dumps(metrics) + "\n")
    return root


@pytest.fixture(scope="module")
def app(models, runs):  # served by conftest's `server`, opened by its `workshop`
    return create_app(models, runs_root=runs)


def assert_no_markup(page, where: str) -> None:
    assert page.evaluate(PWNED) == SAFE, where


def visible_text(page) -> str:
    return page.evaluate("document.body.innerText")


def open_steps(workshop: Workshop, wanted: set[str]) -> int:
    """Open each step of the walk ``wanted`` that opens, one after the other, each drawn; -> how
    many."""
    page = workshop.page
    steps = page.locator(".step:has(> button.step-head)").evaluate_all(
        "steps => steps.map((s) => s.dataset.stage)"
    )
    ids = [stage for stage in steps if stage in wanted]
    for stage in ids:
        page.click(f'[data-stage="{stage}"] > .step-head')
        page.locator(f'.detail[data-stage="{stage}"][data-ready="1"]').wait_for(state="attached")
    return len(ids)


@pytest.mark.parametrize("model", [CLASSIFIER, DECODER])
def test_labels_tokens_names_and_the_prompt_stay_text_at_every_level(workshop, models, model):
    page = workshop.page
    for level, zoom in LEVELS.items():
        workshop.open(model=model, text=PROMPT, level=level, zoom=zoom)
        workshop.wait_walks(1)
        assert page.evaluate("document.body.dataset.state") == "ready", level
        if model == DECODER:
            page.wait_for_selector('#lens[data-state="ready"]', state="attached")
        if level in OPENED_AT:
            assert open_steps(workshop, OPEN_STEPS) >= 6, level
        assert_no_markup(page, f"{model} at {level}")
        chips = workshop.texts("#tokens .chip-text")
        for text in HOSTILE:  # the prompt's tokens, as the tokens panel spells them
            assert shown_token(text) in chips, (level, text)
        assert page.input_value("#text") == PROMPT
        names = [option.split(" (decoder")[0] for option in workshop.texts("#model option")]
        assert DECODER in names  # a model's name, as its option's text
        if model == CLASSIFIER:
            label = page.locator(".pred-label .pred-token-text").inner_text()
            assert label in HOSTILE, level
            if level != "beginner":
                note = page.locator('[data-stage="classifier.logits"] .step-eq .eq-note').inner_text()
                assert note == f"one score per class: {IMG}, {SCRIPT}"
                targets = page.locator("#explain .xp-target option").all_inner_texts()
                assert targets[1:] == list(HOSTILE)
        else:
            guesses = workshop.texts("#prediction .bar-token")
            assert guesses[:2] == [shown_token(IMG), shown_token(SCRIPT)], level
        if not zoom:  # the whole model: its answer in the head's box
            answer = page.locator("#overview .ov-token").last.inner_text()
            assert any(text in answer or shown_token(text) in answer for text in HOSTILE), answer
        if level == "intermediate":
            explain(page, model)
        assert "window.__pwned" in visible_text(page), level  # the strings are on the page, as text
    workshop.close()


def explain(page, model: str) -> None:
    """Explain the prediction of the hostile label (a classifier's) or token (a decoder's),
    the target sent in the request and named in the answer."""
    page.select_option("#explain .xp-method >> nth=1", "occlusion")  # quicker than LIME
    if model == CLASSIFIER:
        page.select_option("#explain select.xp-target", IMG)
    else:
        page.fill("#explain input.xp-target", IMG)
    page.click("#explain .xp-go")
    page.wait_for_selector('#explain[data-state="ready"]', state="attached")
    assert_no_markup(page, f"{model}: explained")
    assert IMG in page.inner_text("#explain .xp-what")


def test_a_generation_of_hostile_tokens_stays_text(workshop):
    page = workshop.page
    workshop.open(model=DECODER, text=PROMPT, level="intermediate")
    workshop.wait_walks(1)
    page.fill("#generate .gen-count", "3")
    page.click("#generate .gen-start")
    page.wait_for_selector('#generate[data-state="done"]', state="attached")
    assert_no_markup(page, "generation")
    assert page.inner_text("#generate .gen-prompt") == PROMPT
    assert workshop.texts("#generate .gen-token")[0] == IMG  # the head's bias: the label, every step
    workshop.close()


def test_teaching_mode_and_the_notebook_views_of_a_hostile_prompt_stay_text(workshop):
    page = workshop.page
    workshop.open(model=DECODER, text=PROMPT, level="intermediate", lock="1")  # as a class sees it
    workshop.wait_walks(1)
    assert page.inner_text("#prompt-shown") == PROMPT
    assert_no_markup(page, "teaching mode")
    links = {view: page.locator(f'a[data-view="{view}"]').get_attribute("href") for view in NOTEBOOK_VIEWS}
    for view, href in links.items():
        page.goto(f"{workshop.base}{href}")
        page.wait_for_load_state("load")
        assert_no_markup(page, view)
        if view in TEXT_VIEWS:
            assert "__pwned" in visible_text(page), view
    workshop.close()


def test_run_names_and_records_stay_text_in_the_lab(workshop):
    page = workshop.page
    # the presets' pace is not this test's: measuring it trains inside the server for seconds
    page.route(
        "**/api/lab/estimate", lambda route: route.fulfill(json={"seconds": None, "reason": "not measured"})
    )
    page.goto(f"{workshop.base}lab?run=records")
    page.wait_for_selector("#run option", state="attached")
    wait_until(page, "() => document.querySelector('#sample').textContent.includes('__pwned')")
    page.wait_for_selector("#message:not([hidden])", state="attached")  # the line that is no record
    assert_no_markup(page, "lab")
    names = page.locator("#run option").all_inner_texts()
    assert f"{IMG} (damaged)" in names
    assert page.inner_text("#sample") == f"step 2: {IMG} {SCRIPT}"
    workshop.close()


# what a formula reads from data --------------------------------------------------------------
LATEX_ATTACKS = (
    *HOSTILE,
    r"\htmlClass{num}{1} \href{javascript:alert(1)}{x} \def\a{b} \url{x}",
    r"}} $x$ \) ^_~#%& -- `` '' \\ \text{",
)

# KaTeX's text mode prints a space as a no-break space and ` ' as typographic quotes, as LaTeX does
KATEX_TEXT_GLYPHS = str.maketrans({"\u00a0": " ", "\u2018": "`", "\u2019": "'"})
TYPESET = """async (strings) => {
  const { tex, texText } = await import("./static/js/core/tex.js");
  return strings.map((s) => {
    const node = tex(`x = ${texText(s)}`);
    return {
      errors: node.querySelectorAll(".katex-error").length,
      elements: node.querySelectorAll("a, img, script, [href], .num").length,
      text: [...node.querySelectorAll(".katex-mathml mtext")].map((t) => t.textContent).join(""),
    };
  });
}"""


def test_a_string_in_a_formula_is_text_not_latex(workshop):
    """tex.js `texText`: whatever a name or label holds, KaTeX prints it, commands and all."""
    workshop.page.goto(f"{workshop.base}lessons")
    typeset = workshop.page.evaluate(TYPESET, list(LATEX_ATTACKS))
    printed = [t["text"].translate(KATEX_TEXT_GLYPHS) for t in typeset]
    assert printed == list(LATEX_ATTACKS)
    assert {(t["errors"], t["elements"]) for t in typeset} == {(0, 0)}
    assert_no_markup(workshop.page, "formulas")
    workshop.close()


def test_a_lesson_s_walk_links_carry_a_model_s_name_as_escaped_text(models):
    """A lesson's Markdown is the one HTML the page parses (lessons.js `lessonMarkup`): its walk
    links name the model, whose name can be a run's folder name, escaped by markdown-it."""
    from glassformer.lessons.catalog import lessons
    from glassformer.workshop.lessons.lesson_pages import page

    cells = [page(item, {DECODER: models[DECODER]})["cells"] for item in lessons()]
    html = "".join(cell["html"] for lesson in cells for cell in lesson if cell["kind"] == "markdown")
    assert 'of lm &lt;img src=x onerror="window.__pwned=1"&gt;' in html.replace("&quot;", '"')
    assert "<img" not in html and "<script" not in html
