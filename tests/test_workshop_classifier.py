"""A classifier in the workshop: its walk ends at the label, its explanations render, and
the page shows what fine-tuning changed in each head's attention.

Two tiny models that read characters: ``base``, an encoder, and ``tuned``, its copy under a
three-label head (`with_classifier`) whose second block's query / key weights were scaled,
so fine-tuning "moved" exactly the heads of layer 1 (layer 0 reads the same vectors in both
models, so its attention cannot change). The server knows ``tuned`` came from ``base``.
"""

from __future__ import annotations

import re

import pytest
import torch

import glassformer as gf
from glassformer.inspect.fine_tuning import attention_shift
from glassformer.models import with_classifier
from glassformer.workshop.reading.explanations import explain
from glassformer.workshop.server import create_app
from glassformer.workshop.walk.arrays import pack_unit
from tests.test_workshop_page import TEXT, char_lm
from tests.workshop_server import wait_until

LABELS = ("comedy", "history", "tragedy")
MOVED_LAYER = 1


@pytest.fixture(scope="module")
def models() -> dict[str, gf.LanguageModel]:
    base = char_lm(family="encoder")
    net = with_classifier(base.net, len(LABELS), pooling="mean", class_names=LABELS).eval()
    with torch.no_grad():
        for name, weight in net.named_parameters():
            if re.fullmatch(rf"stack\.blocks\.{MOVED_LAYER}\.attn\.(qkv|q|kv)_proj\.weight", name):
                weight.mul_(3.0)
    return {"base": base, "tuned": gf.LanguageModel(net, base.tokenizer)}


@pytest.fixture(scope="module")
def app(models):
    return create_app(models, origins={"tuned": "base"})


# the API ---------------------------------------------------------------------------------
def test_the_walk_of_a_classifier_ends_at_its_label(client, models):
    lm = models["tuned"]
    answer = client.post("/api/walk", json={"model": "tuned", "text": TEXT}).json()
    assert answer["prediction"] is None
    assert [s["id"] for s in answer["stages"][-2:]] == ["classifier.pooled", "classifier.logits"]
    assert answer["architecture"]["classifier"] == {"classes": list(LABELS), "pooling": "mean"}
    logits = lm.inputs.forward(lm.inputs.single(TEXT))[0]  # c
    probs = torch.softmax(logits, -1)
    shown = answer["classification"]
    assert [c["label"] for c in shown["classes"]] == list(LABELS)
    torch.testing.assert_close(torch.tensor([c["p"] for c in shown["classes"]]), probs, atol=1e-6, rtol=0)
    assert shown["label"] == int(probs.argmax())
    stage = client.post(
        "/api/stage", json={"model": "tuned", "text": TEXT, "name": "classifier.pooled"}
    ).json()
    pooled = lm.trace(lm.inputs.single(TEXT), ["classifier.pooled"])["classifier.pooled"][0]  # d
    assert stage["value"]["shape"] == [pooled.numel()]


def test_the_models_say_which_was_fine_tuned_from_which(client):
    described = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    assert described["tuned"]["fine_tuned_from"] == "base"
    assert described["base"]["fine_tuned_from"] is None


def test_attention_change_is_the_library_s_attention_shift(client, models):
    answer = client.post(
        "/api/attention_change", json={"model": "tuned", "base": "base", "text": TEXT}
    ).json()
    shift = attention_shift(models["base"], models["tuned"], TEXT)
    torch.testing.assert_close(torch.tensor(answer["shift"]), shift.shift)
    assert answer["ranked"][0]["layer"] == MOVED_LAYER
    assert max(answer["shift"][0]) < 1e-6 < min(answer["shift"][MOVED_LAYER])  # layer 0 cannot move
    assert (answer["layer"], answer["head"]) == (shift.ranked()[0][0], shift.ranked()[0][1])
    before, after = shift.patterns(answer["layer"], answer["head"])
    assert answer["before"] == pack_unit(before) and answer["after"] == pack_unit(after)
    chosen = client.post(
        "/api/attention_change", json={"model": "tuned", "base": "base", "text": TEXT, "layer": 0, "head": 1}
    ).json()
    assert (chosen["layer"], chosen["head"]) == (0, 1)


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"model": "tuned", "base": "nope", "text": TEXT}, 404, "no model 'nope'"),
        ({"model": "tuned", "base": "base", "text": TEXT, "layer": 1}, 400, "give both layer and head"),
        (
            {"model": "tuned", "base": "base", "text": TEXT, "layer": "1", "head": 0},
            400,
            "layer: input should be a valid integer",
        ),
        ({"model": "tuned", "base": "base", "text": TEXT, "layer": 9, "head": 0}, 400, "layer"),
    ],
)
def test_bad_attention_change_requests_are_explained(client, body, status, message):
    response = client.post("/api/attention_change", json=body)
    assert response.status_code == status
    assert message in response.json()["error"]


# the page --------------------------------------------------------------------------------
def test_the_page_shows_the_label_its_steps_and_its_explanations(workshop, models):
    page = workshop.page
    workshop.open(model="tuned", text=TEXT, level="intermediate")
    lm = models["tuned"]
    label = LABELS[int(lm.inputs.forward(lm.inputs.single(TEXT))[0].argmax())]
    assert page.locator("#prediction-title").inner_text() == "The label"
    assert page.locator(".pred-label").get_attribute("data-label") == label
    assert page.locator("#prediction .bar-row").count() == len(LABELS)
    for stage in ("classifier.pooled", "classifier.logits"):
        page.click(f'li[data-stage="{stage}"] .step-head')
        page.wait_for_selector(f'.detail[data-stage="{stage}"][data-ready="1"]', state="attached")
    assert page.locator(".class-logits tr").count() == len(LABELS)
    # why this label? occlusion (deterministic: compared number for number) beside LIME; the
    # characters have no bos / eos to stand for an empty input, so the first is held fixed
    page.select_option("#explain .xp-method >> nth=0", "occlusion")
    page.select_option("#explain .xp-method >> nth=1", "lime")
    page.check("#explain .xp-keep")
    page.click("#explain .xp-go")
    page.wait_for_selector('#explain:is([data-state="ready"], [data-state="error"])', state="attached")
    assert page.locator("#explain").get_attribute("data-state") == "ready", page.locator(
        "#explain"
    ).inner_text()
    assert f"probability of the label '{label}'" in page.locator(".xp-what").inner_text()
    rows = page.locator("#explain .xp-row")
    assert rows.count() == 2
    expected = explain(models["tuned"], TEXT, "occlusion", keep_first=True)
    shown = [
        float(s)
        for s in rows.nth(0).locator(".xp-token").evaluate_all("(n) => n.map((e) => e.dataset.score)")
    ]
    torch.testing.assert_close(torch.tensor(shown), torch.tensor(expected["scores"]), atol=1e-6, rtol=0)
    assert rows.nth(1).locator(".xp-token").count() == len(expected["tokens"])
    workshop.shot("classifier")
    workshop.close()


def test_the_page_shows_what_fine_tuning_changed(workshop, models):
    page = workshop.page
    workshop.open(model="tuned", text=TEXT, level="intermediate")
    assert page.locator("#change-panel").is_visible()
    page.click(".change-go")
    page.wait_for_selector('#change[data-state="ready"]', state="attached")
    config = models["tuned"].config
    assert page.locator(".shift-cell").count() == config.n_layers * config.n_heads
    pair = page.locator(".change-pair")
    assert pair.get_attribute("data-layer") == str(MOVED_LAYER)
    assert page.locator(".change-pattern .hm-canvas").count() == 2
    page.click('.shift-cell[data-layer="0"][data-head="1"]')
    page.wait_for_selector('.change-pair[data-layer="0"][data-head="1"]', state="attached")
    workshop.shot("fine_tuning_changed")
    # a model the server knows no origin of has no such panel
    workshop.open(model="base", text=TEXT, level="intermediate")
    assert not page.locator("#change-panel").is_visible()
    workshop.close()


def test_the_page_shows_what_the_model_costs(workshop, models):
    from glassformer.inspect.cost_report import costs

    page = workshop.page
    workshop.open(model="tuned", text=TEXT, level="intermediate")
    page.click("#costs summary")
    page.wait_for_selector('#costs[data-state="ready"]', state="attached")
    lm = models["tuned"]
    expected = costs(lm.config, seq_len=lm.config.max_seq_len)
    shown = page.locator(".costs-table")
    assert int(shown.get_attribute("data-total")) == expected.total_parameters == lm.net.num_parameters()
    assert int(shown.get_attribute("data-forward")) == expected.flops.forward
    assert "= the model's own count" in shown.inner_text()
    page.fill("#costs .costs-seq", "16")
    page.select_option("#costs .costs-dtype", "bfloat16")
    wait_until(
        page,
        f"document.querySelector('.costs-table').dataset.forward === '{costs(lm.config, 16).flops.forward}'",
    )
    assert (
        int(page.locator(".costs-table").get_attribute("data-kv"))
        == costs(lm.config, 16, dtype="bfloat16").kv_cache_bytes_per_token
    )
    workshop.close()
