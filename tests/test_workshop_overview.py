"""The whole model on one screen, and the beginner's tour, in Chromium, for each kind of model:
a decoder (RoPE, GQA, SwiGLU), a sentence encoder, an MLM encoder (post-norm), an
encoder-decoder and a classifier. The overview's boxes are the model's own; zooming goes model
→ block → head → query · key and stays in the link; the tour has at most 20 stops and each says
what its numbers mean. Screenshots go to $GLASSFORMER_SCREENSHOTS (`Workshop.shot`)."""

from __future__ import annotations

import pytest

import glassformer as gf
from glassformer.models.fine_tune import with_classifier
from glassformer.workshop.walk.arrays import unpack
from tests.conftest import workshop_client
from tests.test_workshop_page import BROWSER_400, TEXT, char_lm

MAX_STOPS = 20


@pytest.fixture(scope="module")
def models() -> dict[str, gf.LanguageModel]:
    encoder = char_lm(family="encoder", norm_placement="post")
    classifier = with_classifier(
        char_lm(family="encoder").net, 3, pooling="mean", class_names=("a", "b", "c")
    )
    return {
        "decoder": char_lm(positions="rope", n_kv_heads=2, norm="rmsnorm", activation="swiglu"),
        "sentence": char_lm(family="encoder", mlm_head=False),
        "mlm": encoder,
        "seq2seq": char_lm(family="encoder_decoder", positions="t5_relative", decoder_start_token_id=0),
        "classifier": gf.LanguageModel(classifier.eval(), encoder.tokenizer),
        "neox": char_lm(positions="rope", rotary_dim=2, parallel_residual=True, n_heads=4),
    }


@pytest.fixture(scope="module")
def app(models):
    from glassformer.workshop.server import create_app

    return create_app(models)


@pytest.fixture(scope="module")
def client(app):
    with workshop_client(app) as client:
        yield client


def boxes(page) -> list[str]:
    return page.locator("#overview .ov-box").evaluate_all("bs => bs.map(b => b.dataset.kind)")


def tour(page) -> list[str]:
    return page.locator("#walk .tour-stop").evaluate_all("ss => ss.map(s => s.dataset.stage)")


@pytest.mark.parametrize(
    ("model", "ending"),
    [
        ("decoder", ["head", "sample"]),
        ("sentence", ["head"]),
        ("mlm", ["head"]),
        ("seq2seq", ["head", "sample"]),
        ("classifier", ["head", "head"]),
    ],
)
def test_the_overview_draws_each_model_s_own_parts(workshop, models, model, ending):
    lm = models[model]
    workshop.open(model=model, text=TEXT)
    page = workshop.page
    kinds = boxes(page)
    stacks = 2 if lm.config.family == "encoder_decoder" else 1
    assert (
        kinds.count("block") == stacks and kinds.count("embed") == stacks and kinds.count("tokens") == stacks
    )
    assert kinds[-len(ending) :] == ending
    block = page.locator("#overview .ov-block").first.inner_text()
    layers = lm.config.n_layers
    assert f"Block × {layers}" in block
    assert page.locator("#overview .ov-block").first.locator(".ov-bar").count() == layers  # one way into each
    if model == "decoder":
        assert (
            "4 query heads, 2 key/value heads (GQA)" in block and "RoPE" in block and "gated swiglu" in block
        )
        assert "RMSNorm" in block
        top = page.locator("#overview .ov-top li").first.inner_text()
        assert top.startswith("\u2018") and "%" in top  # the likeliest next token, from this pass
    if model == "seq2seq":
        assert "cross-attention" in page.locator("#overview").inner_text()
    stops = tour(page)
    assert stops[0] == "tokens" and len(stops) <= MAX_STOPS
    explained = page.locator("#walk .tour-stop").evaluate_all(
        "ss => ss.map(s => Boolean(s.querySelector('.step-explain')))"
    )
    assert all(explained)
    workshop.shot(f"overview_{model}")
    workshop.close(
        allowed_errors=(BROWSER_400,) if model == "sentence" else ()
    )  # its default second sentence is not lower-case


def test_zooming_goes_from_the_model_to_one_query_and_key(workshop, models):
    page = workshop.page
    workshop.open(model="decoder", text=TEXT)
    page.locator("#overview .ov-bar").nth(1).click()  # block 1
    assert workshop.query()["zoom"] == "blocks.1"
    assert page.locator("#overview .ov-crumb.current").inner_text() == "Block 1"
    page.wait_for_selector("#overview .ov-head canvas", state="attached")  # each head's own map
    heads = page.locator("#overview .ov-head")
    assert heads.count() == models["decoder"].config.n_heads
    heads.nth(2).click()
    assert workshop.query()["zoom"] == "blocks.1.attn:2"
    page.wait_for_selector('#overview .ov-head-map[data-ready="1"]', state="attached")
    page.wait_for_selector('#overview .qk-view[data-ready="1"]', state="attached")
    assert page.locator("#overview .qk-view").get_attribute("data-head") == "2"
    canvas = page.locator("#overview .ov-head-map canvas").first
    box = canvas.bounding_box()
    page.mouse.click(box["x"] + 2, box["y"] + box["height"] * 2.5 / len(TEXT))  # row 2: the query
    page.wait_for_selector('#overview .qk-view[data-query="2"][data-ready="1"]', state="attached")
    assert workshop.query()["zoom"] == "blocks.1.attn:2:2"
    workshop.shot("overview_query_key")
    # a shared link opens at the same zoom; the crumbs zoom back out
    workshop.open(model="decoder", text=TEXT, zoom="blocks.1.attn:2:2")
    page.wait_for_selector('#overview .qk-view[data-query="2"][data-ready="1"]', state="attached")
    page.locator("#overview .ov-crumb", has_text="Model").click()
    assert "zoom" not in workshop.query() and page.locator("#overview .ov-block").count() == 1
    workshop.close()


def test_a_box_opens_its_step_in_the_walk(workshop):
    page = workshop.page
    workshop.open(model="decoder", text=TEXT, level="intermediate")
    page.locator("#overview .ov-embed").click()
    assert workshop.query()["stage"] == "embed.out"
    page.wait_for_selector('.step[data-stage="embed.out"] .detail[data-ready="1"]', state="attached")
    workshop.close()


def test_a_sentence_encoder_shows_its_sentence_vector_and_a_similarity(workshop, models):
    page = workshop.page
    workshop.open(model="sentence", text=TEXT)
    assert tour(page)[-2:] == ["sentence.pooled", "sentence.vector"]
    assert page.locator("#prediction-title").inner_text() == "The sentence vector"
    page.wait_for_selector("#prediction .similarity[data-state]", state="attached")  # the default's
    other = "a dog sat on a log."  # the tiny model reads lower-case letters only: the default's 400
    page.fill(".similarity-other", other)
    page.click(".similarity-form button")
    page.wait_for_selector('#prediction .similarity[data-state="ready"]', state="attached")
    lm = models["sentence"]
    shown = float(page.locator(".similarity-cosine strong").inner_text().replace("\u2212", "-"))
    expected = float(lm.embed(TEXT)[0] @ lm.embed(other)[0])
    assert shown == pytest.approx(expected, abs=1e-3)
    assert page.locator(".similarity-strips canvas").count() == 2
    workshop.shot("sentence_vector")
    workshop.close(allowed_errors=(BROWSER_400,))


def test_an_mlm_encoder_ends_at_the_words_its_head_reads(workshop, models):
    page = workshop.page
    workshop.open(model="mlm", text=TEXT, level="intermediate")
    assert page.locator("#prediction-title").inner_text() == "What an encoder predicts"
    rows = page.locator("#prediction .masked-position")
    assert rows.count() == len(TEXT)  # no mask token: every position
    probs = models["mlm"].logits(TEXT)[0].softmax(-1)  # t v
    first = rows.nth(0).locator(".bar-row").first
    assert int(first.get_attribute("data-id")) == int(probs[0].argmax())
    workshop.close()


def test_a_beginner_s_logits_are_the_likeliest_tokens(workshop, models):
    """Opened at the beginner level, the logits step lists the tokens that score highest, not
    the scores of vocabulary ids 0 to 63."""
    page = workshop.page
    workshop.open(model="decoder", text=TEXT, level="beginner", stage="logits")
    page.wait_for_selector('.detail[data-stage="logits"][data-ready="1"]', state="attached")
    ids = page.locator('.detail[data-stage="logits"] .bar-row').evaluate_all(
        "rows => rows.map(r => Number(r.dataset.id))"
    )
    logits = models["decoder"].logits(TEXT)[0, -1]
    assert ids[:3] == logits.topk(3).indices.tolist()
    assert page.locator('.detail[data-stage="logits"] canvas').count() == 0
    workshop.close()


def test_a_parallel_residual_is_drawn_side_by_side(workshop, models, client):
    """GPT-NeoX's block: attention and the FFN both read the block's input; RoPE turns a part
    of each head. Every stage's whole tensor is the library's."""
    page = workshop.page
    workshop.open(model="neox", text=TEXT, level="intermediate")
    flow = page.locator("#overview .ov-block .ov-flow")
    assert "ov-parallel" in flow.get_attribute("class") and flow.locator(".ov-branch").count() == 2
    lm = models["neox"]
    assert (
        "RoPE on its first 2 of 8 features"
        in page.locator('[data-stage="blocks.0.attn.q"] .step-title').inner_text()
    )
    names = [s for s in lm.activation_names() if s.startswith("blocks.1.")]
    trace = lm.trace(TEXT, names)
    for name in names:
        answer = client.post("/api/stage", json={"model": "neox", "text": TEXT, "name": name})
        assert answer.status_code == 200, (name, answer.text)
        got = unpack(answer.json()["value"])
        assert (got - trace[name][0]).abs().max() <= (1 / 510 + 1e-6 if name.endswith("pattern") else 1e-5), (
            name
        )
    workshop.close()
