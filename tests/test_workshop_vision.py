"""A vision transformer in the workshop: the pass input is an image, sent as pixels (rows of
numbers, or a packed array) or named as a held-out digit of the vit-digits split; every step
of the walk opens with the library's values (`lm.trace` on the same pixels); a bad image is
refused with a message that says what the model reads. In Chromium: the image drawn large,
the held-out digits to pick from, a digit painted by mouse and by keyboard (the prediction
follows), the patches as tokens, and an attention step's weights laid on the image's patch
grid. Screenshots go to $GLASSFORMER_SCREENSHOTS.
"""

from __future__ import annotations

import base64
import json
import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import glassformer as gf
from glassformer.inputs import patch_labels
from glassformer.train.images import DIGITS, digits_split
from glassformer.workshop.door.http import MAX_BODY_BYTES
from glassformer.workshop.server import create_app
from glassformer.workshop.walk.architecture import stages
from glassformer.workshop.walk.arrays import pack, pack_unit, unpack
from glassformer.workshop.walk.stage_catalogue import VISION
from glassformer.workshop.walk.stage_words import Context
from tests.conftest import workshop_client
from tests.test_vit import vit_config as tiny_vit_config
from tests.test_workshop_fuzz import json_values
from tests.test_workshop_katex import render
from tests.test_workshop_layout import MEASURE, cut_off, overlaps
from tests.test_workshop_page import ATTENTION_SHARPNESS, TEXT, WEIGHT_STEP, char_lm
from tests.workshop_server import wait_until

SIDE, PATCH = 8, 2
GRID = SIDE // PATCH
SAMPLE = 7
WEIGHT_TOLERANCE = WEIGHT_STEP / 2 + 1e-6  # attention weights travel as bytes
BROWSER_400 = "Failed to load resource: the server responded with a status of 400 (Bad Request)"


def vit_config(**overrides) -> gf.ModelConfig:
    """`tests.test_vit`'s tiny ViT, labelling the ten digits."""
    fields = dict(
        d_ff=48, n_classes=len(DIGITS), class_names=DIGITS, activation="gelu_tanh", positions="learned"
    )
    return tiny_vit_config(**{**fields, **overrides})


@pytest.fixture(scope="module")
def lm() -> gf.LanguageModel:
    """A tiny untrained ViT on 8 x 8 digits, its attention sharpened (at init every head reads
    every patch alike, and a test could not tell one patch's weight from another's)."""
    torch.manual_seed(0)
    net = gf.build(vit_config()).eval()
    with torch.no_grad():
        for name, weight in net.named_parameters():
            if name.endswith("attn.qkv_proj.weight"):
                weight.mul_(ATTENTION_SHARPNESS)
            if name == "embed.cls_token" or name.endswith("cls_token"):
                weight.normal_(0.0, 1.0)
    return gf.LanguageModel(net, None)


@pytest.fixture(scope="module")
def rgb() -> gf.LanguageModel:
    """A ViT of 3 channels (no held-out digits fit it)."""
    torch.manual_seed(0)
    return gf.LanguageModel(
        gf.build(vit_config(n_channels=3, n_classes=2, class_names=("cat", "dog"))).eval(), None
    )


@pytest.fixture(scope="module")
def app(lm, rgb):
    return create_app({"digits": lm, "rgb": rgb, "tiny": char_lm()})


@pytest.fixture(scope="module")
def api(app):
    with workshop_client(app) as client:
        yield client


def held_out(index: int) -> torch.Tensor:
    """A held-out digit of the vit-digits split as the library makes it: 1 1 8 8 in [0, 1]."""
    return digits_split().test_images[index][None]


def drawn() -> torch.Tensor:
    """A seven, drawn: 1 1 8 8."""
    image = torch.zeros(1, 1, SIDE, SIDE)
    image[0, 0, 1, 1:7] = 1.0
    for row in range(2, 8):
        image[0, 0, row, 7 - row] = 0.75
    return image


def traced_names(lm) -> list[str]:
    return [s["trace"] for s in stages(lm.net) if s["trace"]]


def assert_every_stage_is_the_library_s(api, lm, body: dict, image: torch.Tensor) -> None:
    names = traced_names(lm)
    trace = lm.trace(image, names)
    for name in names:
        answer = api.post("/api/stage", json={"model": "digits", "name": name, **body})
        assert answer.status_code == 200, (name, answer.text)
        got, expected = unpack(answer.json()["value"]), trace[name][0].float()
        tolerance = WEIGHT_TOLERANCE if name.endswith("pattern") else 1e-5
        assert got.shape == expected.shape and (got - expected).abs().max() <= tolerance, name


# the API ----------------------------------------------------------------------------------
def test_the_walk_of_a_held_out_digit_is_the_library_s(api, lm):
    answer = api.post("/api/walk", json={"model": "digits", "sample": SAMPLE})
    assert answer.status_code == 200, answer.text
    walk = answer.json()
    image = held_out(SAMPLE)
    assert (
        [t["text"] for t in walk["tokens"]]
        == patch_labels(lm.config)
        == ["[CLS]", "patch 0,0", *walk["image"]["patches"][1:]]
    )
    assert all(t["id"] is None for t in walk["tokens"])  # an image has no vocabulary ids
    shown = walk["image"]
    assert torch.equal(unpack(shown["pixels"]), image[0])
    assert shown["label"] == DIGITS[int(digits_split().test_labels[SAMPLE])] and shown["sample"] == SAMPLE
    assert (shown["patch_size"], shown["grid"]) == (PATCH, [GRID, GRID])
    probs = lm.classify(image)[0]
    classes = walk["classification"]["classes"]
    assert [c["label"] for c in classes] == list(DIGITS)
    assert max(abs(c["p"] - float(p)) for c, p in zip(classes, probs, strict=True)) < 1e-6
    assert walk["classification"]["label"] == int(probs.argmax())
    ids = [s["id"] for s in walk["stages"]]
    assert ids[:5] == ["tokens", "embed.patches", "embed.tokens", "embed.positions", "embed.out"]
    assert ids[-2:] == ["classifier.pooled", "classifier.logits"] and "logits" not in ids
    by_id = {s["id"]: s for s in walk["stages"]}
    assert (
        by_id["embed.patches"]["value"]["shape"] == [GRID * GRID, 32]
        and by_id["embed.patches"]["shape"] == "n d"
    )
    assert walk["architecture"]["vision"] == {
        "image_size": SIDE,
        "patch_size": PATCH,
        "channels": 1,
        "patches": 16,
    }
    assert walk["architecture"]["capabilities"]["vision"] is True
    pattern = lm.trace(image, ["blocks.0.attn.pattern"])["blocks.0.attn.pattern"][0].mean(0)
    mean = unpack(by_id["blocks.0.attn.pattern"]["value"]["mean_pattern"])
    assert (mean - pattern).abs().max() <= WEIGHT_TOLERANCE
    assert_every_stage_is_the_library_s(api, lm, {"sample": SAMPLE}, image)


@pytest.mark.parametrize("form", ["rows", "channels", "float32", "uint8"])
def test_every_stage_of_sent_pixels_is_the_library_s(api, lm, form):
    image = drawn()
    if form == "uint8":
        image = torch.round(image * 255) / 255  # what the bytes hold
    pixels = {
        "rows": image[0, 0].tolist(),  # H x W: one channel
        "channels": image[0].tolist(),  # C x H x W
        "float32": pack(image[0]),  # the typed arrays the answers carry
        "uint8": pack_unit(image[0]),
    }[form]
    walk = api.post("/api/walk", json={"model": "digits", "pixels": pixels})
    assert walk.status_code == 200, walk.text
    assert torch.allclose(unpack(walk.json()["image"]["pixels"]), image[0], atol=1e-7)
    assert walk.json()["image"]["sample"] is None and walk.json()["image"]["label"] is None
    assert_every_stage_is_the_library_s(api, lm, {"pixels": pixels}, image)


def test_interventions_change_an_image_s_pass_as_the_library_s_hooks(api, lm):
    body = {"model": "digits", "sample": 1, "interventions": [{"layer": 0, "head": 2, "mode": "zero"}]}
    walk = api.post("/api/walk", json=body)
    assert walk.status_code == 200, walk.text
    z = next(s for s in walk.json()["stages"] if s["id"] == "blocks.0.attn.z")
    assert torch.all(unpack(z["value"]["norms"])[2] == 0)  # head 2 writes nothing
    patched = api.post(
        "/api/walk", json={**body, "interventions": [{"layer": 0, "head": 0, "mode": "patch"}]}
    )
    assert patched.status_code == 400 and "patch_text" in patched.json()["error"]


def packed(dtype: str, shape: list[int], data: bytes) -> dict:
    return {"dtype": dtype, "shape": shape, "data": base64.b64encode(data).decode()}


NINE = [[0.5] * 9] * 9
BAD_IMAGES = [
    ({"pixels": NINE}, "this model reads images of 1 x 8 x 8 (C x H x W, or 8 x 8); got 9 x 9"),
    ({"pixels": [[[0.5] * 8] * 8] * 3}, "got 3 x 8 x 8"),
    (
        {"pixels": [[0.5] * 8] * 7 + [[0.5, float("nan")] + [0.5] * 6]},
        "pixels: [7][1] is nan: every pixel must be a finite",
    ),
    ({"pixels": [[0.5] * 8] * 7 + [[0.5] * 7 + [float("inf")]]}, "[7][7] is inf"),
    (
        {"pixels": [[0.5] * 8] * 2 + [[0.5, 1.5] + [0.5] * 6] + [[0.5] * 8] * 5},
        "[2][1] is 1.5, outside [0, 1]",
    ),
    ({"pixels": [[0, 255] * 4] * 8}, "divide 0..255 by 255"),
    ({"pixels": [[10**400] * 8] * 8}, "[0][0] is a huge integer, outside [0, 1]"),
    ({"pixels": [[0.5] * 8] * 7 + [[0.5] * 7]}, "[7] holds 7 items where its neighbours hold 8"),
    ({"pixels": [["a"] * 8] * 8}, "[0][0] is 'a', not a number"),
    ({"pixels": [[True] * 8] * 8}, "is True, not a number"),
    ({"pixels": []}, "the image is empty"),
    ({"pixels": [0.5] * 64}, "has 1 axes"),
    ({"pixels": "an image"}, "must be an image: rows of numbers in [0, 1]"),
    (
        {"pixels": packed("float32", [1, 8, 8], b"\0" * 100)},
        "data holds 100 bytes; shape [1, 8, 8] of float32 needs 256",
    ),
    ({"pixels": packed("float64", [1, 8, 8], b"\0" * 512)}, "a packed image is float32 or uint8"),
    ({"pixels": {**packed("uint8", [1, 8, 8], b"\0" * 64), "data": "not base64!"}}, "data is not base64"),
    (
        {"pixels": packed("float32", [1, 8, 8], np.full(64, 2.0, dtype="<f4").tobytes())},
        "[0][0][0] is 2, outside [0, 1]",
    ),
    ({"pixels": [[0.5] * 8] * 8, "sample": 1}, "send pixels or sample, not both"),
    ({"sample": 450}, "sample 450 is out of range: the held-out digits are 450 images (0..449)"),
    ({"sample": -1}, "sample: input should be greater than or equal to 0"),
    ({}, "this is a vision model: send pixels (an image of 1 x 8 x 8"),
    ({"text": TEXT}, "digits is a vision model (ViT): it reads an image, not text; send pixels"),
    ({"sample": 1, "decoder_text": "x"}, "a vision model reads no decoder text"),
]


@pytest.mark.parametrize(("body", "message"), BAD_IMAGES)
def test_a_bad_image_is_refused_with_what_the_model_reads(api, body, message):
    for route, extra in (("/api/walk", {}), ("/api/stage", {"name": "embed.patches"})):
        sent = json.dumps({"model": "digits", **body, **extra})  # NaN and Infinity as Python writes them
        answer = api.post(route, content=sent, headers={"Content-Type": "application/json"})
        assert answer.status_code == 400, (route, answer.text)
        assert message in answer.json()["error"], (route, answer.json()["error"])


numbers = st.floats() | st.integers() | st.booleans() | st.none() | st.text(max_size=3)
images = st.lists(st.lists(numbers, min_size=0, max_size=9), min_size=0, max_size=9)  # H x W, ragged
packed_images = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["float32", "uint8", "int8"]),
        "shape": st.lists(st.integers(-2, 9), max_size=4),
    },
    optional={"data": st.binary(max_size=300).map(lambda b: base64.b64encode(b).decode()) | json_values},
)


@settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    pixels=images | st.lists(images, max_size=4) | packed_images | json_values,
    sample=st.none() | st.integers(),
)
def test_no_image_breaks_the_server(api, pixels, sample):
    body = {"model": "digits", "pixels": pixels, **({} if sample is None else {"sample": sample})}
    answer = api.post("/api/walk", content=json.dumps(body), headers={"Content-Type": "application/json"})
    assert answer.status_code in (200, 400), (body, answer.text[:300])
    assert answer.status_code == 200 or answer.json()["error"]


def test_an_image_past_the_body_limit_is_refused_before_it_is_read(api):
    side = 1 + int(math.sqrt(MAX_BODY_BYTES / 2))  # "0," per pixel: past 1 MiB
    answer = api.post("/api/walk", json={"model": "digits", "pixels": [[0] * side] * side})
    assert answer.status_code == 413 and "at most 1,048,576" in answer.json()["error"]
    wide = api.post("/api/walk", json={"model": "digits", "pixels": [[0] * 1025] * 2})
    assert wide.status_code == 400 and "at most 1,024" in wide.json()["error"]


def test_a_large_image_travels_packed(api, rgb):
    """224 x 224 x 3 as rows of numbers is past the body limit; packed as bytes it is 200 KB.
    The 8 x 8 model refuses it for its shape, after reading it."""
    image = torch.rand(3, 224, 224)
    body = {"model": "rgb", "pixels": pack_unit(image)}
    answer = api.post("/api/walk", json=body)
    assert (
        answer.status_code == 400
        and "reads images of 3 x 8 x 8 (C x H x W); got 3 x 224 x 224" in answer.text
    )
    small = torch.rand(3, SIDE, SIDE)
    walk = api.post("/api/walk", json={"model": "rgb", "pixels": pack(small)})
    assert walk.status_code == 200, walk.text
    assert [c["label"] for c in walk.json()["classification"]["classes"]] == ["cat", "dog"]
    refused = api.post("/api/walk", json={"model": "rgb", "sample": 0})
    assert (
        refused.status_code == 400 and "the held-out samples are 1 x 8 x 8 digits" in refused.json()["error"]
    )


def test_text_and_images_go_to_the_models_that_read_them(api):
    for route, body in (
        ("/api/tokens", {"text": TEXT}),
        ("/api/explain", {"text": TEXT, "method": "ig"}),
        ("/api/generate", {"text": TEXT}),
    ):
        answer = api.post(route, json={"model": "digits", **body})
        assert answer.status_code == 400, route
        assert "this is a vision model (ViT): it reads images, not text" in answer.json()["error"], route
    lens = api.post("/api/lens", json={"model": "digits", "sample": 0})
    assert lens.status_code == 400 and "no logit lens" in lens.json()["error"]
    for body in ({"pixels": [[0.5] * 8] * 8}, {"sample": 3}):
        answer = api.post("/api/walk", json={"model": "tiny", "text": TEXT, **body})
        assert answer.status_code == 400 and "tiny reads text, not images" in answer.json()["error"]
    missing = api.post("/api/walk", json={"model": "tiny"})
    assert missing.status_code == 400 and "the field 'text' is missing" in missing.json()["error"]


def test_the_held_out_digits_are_the_vit_digits_split(api):
    answer = api.get("/api/samples", params={"model": "digits"}).json()
    split = digits_split()
    assert answer["count"] == len(split.test_images) == 450
    assert torch.equal(unpack(answer["images"]), split.test_images)
    assert answer["labels"] == [DIGITS[int(k)] for k in split.test_labels]
    for other in ("rgb", "tiny"):
        none = api.get("/api/samples", params={"model": other}).json()
        assert none["count"] == 0 and none["images"] is None and none["source"]
    models = {m["name"]: m for m in api.get("/api/models").json()["models"]}
    assert models["digits"]["reads_images"] and not models["digits"]["reads_text"]


def test_the_embedding_steps_say_what_a_vit_does():
    by_id = {s["id"]: s for s in stages(gf.build(vit_config()))}
    assert by_id["tokens"]["plain"] == "cut the image into patches"
    assert "4 x 4 patches of 2 x 2" in by_id["tokens"]["title"] and "17 tokens" in by_id["tokens"]["words"]
    patches = by_id["embed.patches"]
    assert "W_patch" in patches["title"] and "window jumps 2 pixels" in patches["words"]
    assert patches["code"]["name"] == "PatchEmbedding.forward" and patches["equation"] == "vit.embed.patches"
    assert (
        "[CLS]" in by_id["embed.tokens"]["words"] and "place in the grid" in by_id["embed.positions"]["words"]
    )
    assert by_id["classifier.pooled"]["plain"] == "one vector for the whole image"
    text = {
        s["id"]: s for s in stages(gf.build(gf.ModelConfig(vocab_size=32, d_model=16, n_layers=1, n_heads=2)))
    }
    assert text["embed.tokens"]["title"] == "token embedding E[T]" and text["tokens"]["equation"] == "tokens"
    for kind, entry in VISION.items():  # each code location is a function of the library
        assert callable(entry.code(Context(vit_config()))), kind


# the page ---------------------------------------------------------------------------------
def prediction(workshop) -> str:
    return workshop.page.locator("#prediction .pred-label").get_attribute("data-label")


def library_label(lm, image: torch.Tensor) -> str:
    return DIGITS[int(lm.classify(image)[0].argmax())]


def code_image(code: str) -> torch.Tensor:
    """The image a page's URL code names (pixels.js): one character per pixel, k / 16."""
    values = [int(ch, 17) / 16 for ch in code]
    return torch.tensor(values, dtype=torch.float32).view(1, 1, SIDE, SIDE)


def test_the_page_shows_the_image_its_patches_and_the_label(workshop, lm):
    page = workshop.page
    workshop.open(model="digits", sample=SAMPLE)
    workshop.wait_walks(1)
    assert page.locator("#image-panel").is_visible() and not page.locator("#text").is_visible()
    assert page.locator(".img-editor[data-ready='1']").is_visible()
    assert page.locator(f".img-thumb[data-sample='{SAMPLE}'][aria-pressed='true']").count() == 1
    truth = DIGITS[int(digits_split().test_labels[SAMPLE])]
    assert page.locator(".img-caption .img-label").inner_text() == truth
    assert page.locator(".patch-chip").count() == 1 + GRID * GRID  # [CLS] and the patches
    assert page.locator(".patch-chip.patch-cls").inner_text().startswith("[CLS]")
    assert page.locator(".patch-chip .img-patch").count() == GRID * GRID
    assert prediction(workshop) == library_label(lm, held_out(SAMPLE))
    assert page.locator(".pred-truth").get_attribute("data-truth") == truth
    said = page.locator(".img-answer .img-label").get_attribute("data-label")  # beside the image too
    assert said == prediction(workshop)
    assert page.locator("#explain-panel").is_hidden() and page.locator("#text-row").is_hidden()
    workshop.part_shot("#image-panel", "vision_image_1280")
    workshop.shot("vision_beginner_1280")
    page.click(".img-next")  # the next held-out digit: the link names it
    workshop.wait_walks(2)
    assert workshop.query()["sample"] == str(SAMPLE + 1)
    assert prediction(workshop) == library_label(lm, held_out(SAMPLE + 1))
    page.click(".img-thumb[data-sample='3']")
    workshop.wait_walks(3)
    assert workshop.query()["sample"] == "3" and prediction(workshop) == library_label(lm, held_out(3))
    workshop.close()


def test_a_digit_painted_by_mouse_and_by_keyboard_is_walked(workshop, lm):
    page = workshop.page
    workshop.open(model="digits", sample=0, level="intermediate")
    workshop.wait_walks(1)
    page.click(".img-clear")
    workshop.wait_walks(2)
    assert workshop.query()["pixels"] == "0" * 64 and "sample" not in workshop.query()
    editor = page.locator(".img-editor").bounding_box()
    cell = editor["width"] / SIDE
    centre = lambda row, col: (editor["x"] + (col + 0.5) * cell, editor["y"] + (row + 0.5) * cell)  # noqa: E731
    page.mouse.move(*centre(1, 1))
    page.mouse.down()
    page.mouse.move(*centre(1, 6), steps=8)  # the top bar of a seven
    page.mouse.move(*centre(6, 2), steps=8)  # and its stroke down
    page.mouse.up()
    workshop.wait_walks(3)
    code = workshop.query()["pixels"]
    painted = code_image(code)
    assert painted[0, 0, 1, 1:7].eq(1).all() and painted[0, 0, 6, 2] == 1 and painted.sum() >= 10
    assert prediction(workshop) == library_label(lm, painted)
    # keyboard: the cursor starts where the stroke ended; arrows move it, Space toggles
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Space")
    workshop.wait_walks(4)
    toggled = code_image(workshop.query()["pixels"])
    assert toggled[0, 0, 7, 3] == 1 and (toggled - painted).abs().sum() == 1
    assert prediction(workshop) == library_label(lm, toggled)
    page.keyboard.press("Space")  # and back
    workshop.wait_walks(5)
    assert workshop.query()["pixels"] == code
    # the pass the page asked for is the drawing's: its tokens strip shows the painted patches
    patch = page.locator(".patch-chip[data-patch='0']").get_attribute("title")
    assert patch.startswith("token 1: patch 0,0")
    workshop.shot("vision_painted_1280")
    page.reload()  # the drawing is in the link
    workshop.wait_walks(1)
    assert prediction(workshop) == library_label(lm, painted)
    workshop.close()


def overlay_weights(locator) -> list[float]:
    return locator.locator(".pa-cell").evaluate_all("cells => cells.map(c => Number(c.dataset.weight))")


def test_an_attention_step_lays_its_weights_on_the_patch_grid(workshop, lm):
    page = workshop.page
    image = held_out(SAMPLE)
    weights = lm.trace(image, ["blocks.0.attn.pattern"])["blocks.0.attn.pattern"][0]  # h t s
    workshop.open(model="digits", sample=SAMPLE, level="intermediate", stage="blocks.0.attn.pattern")
    step = page.locator('.step[data-stage="blocks.0.attn.pattern"]')
    overlay = step.locator(".patch-attention[data-ready='1']")
    overlay.wait_for()
    assert overlay.get_attribute("data-query") == "0"  # [CLS] first: the label is read from it
    got = overlay_weights(overlay)
    assert len(got) == GRID * GRID
    assert max(abs(g - float(w)) for g, w in zip(got, weights[0, 0, 1:], strict=True)) <= WEIGHT_TOLERANCE
    assert (
        abs(float(overlay.locator(".pa-cls").get_attribute("data-weight")) - float(weights[0, 0, 0]))
        <= WEIGHT_TOLERANCE
    )
    assert step.locator(".heatmap .hm-canvas").count() == 1  # the usual t x s map too
    step.locator(".head-button[data-head='2']").click()
    page.wait_for_selector(".detail[data-head='2']", state="attached")
    overlay.locator(".pa-cell[data-patch='5']").click()  # patch 1,1 as the query (token 6)
    wait_until(page, "document.querySelector('.patch-attention').dataset.query === '6'")
    got = overlay_weights(overlay)
    assert max(abs(g - float(w)) for g, w in zip(got, weights[2, 6, 1:], strict=True)) <= WEIGHT_TOLERANCE
    assert "patch 1,1" in overlay.locator(".detail-caption").inner_text()
    workshop.part_shot('.step[data-stage="blocks.0.attn.pattern"]', "vision_attention_1280")
    # the overview's head view: the same weights on the image
    workshop.open(model="digits", sample=SAMPLE, level="intermediate", zoom="blocks.0.attn:1")
    head = page.locator("#overview .patch-attention[data-ready='1']")
    head.wait_for()
    got = overlay_weights(head)
    assert max(abs(g - float(w)) for g, w in zip(got, weights[1, 0, 1:], strict=True)) <= WEIGHT_TOLERANCE
    head.locator(".pa-cell[data-patch='15']").click()  # a patch picks the query, in the link
    wait_until(page, "new URLSearchParams(location.search).get('zoom') === 'blocks.0.attn:1:16'")
    workshop.part_shot("#overview-panel", "vision_overview_head_1280")
    workshop.close()


def test_a_beginner_sees_where_cls_looks_block_by_block(workshop, lm):
    page = workshop.page
    workshop.open(model="digits", sample=SAMPLE)
    lines = page.locator("#lines[data-ready='1']")
    lines.wait_for()
    assert page.locator("#lines-title").inner_text() == "Where each token looks in the image"
    mean = lm.trace(held_out(SAMPLE), ["blocks.1.attn.pattern"])["blocks.1.attn.pattern"][0].mean(0)
    page.locator("#lines .lines-layer").fill("1")
    page.wait_for_selector("#lines[data-layer='1'][data-ready='1']", state="attached")
    got = overlay_weights(page.locator("#lines .patch-attention"))
    assert max(abs(g - float(w)) for g, w in zip(got, mean[0, 1:], strict=True)) <= WEIGHT_TOLERANCE
    workshop.close()


def test_the_vit_s_equations_are_typeset(workshop):
    workshop.open(model="digits", sample=0, level="intermediate")
    drawn = render(workshop, vit_config())
    bad = {stage: d for stage, d in drawn.items() if d["typeset"] != 1 or d["errors"]}
    assert bad == {}
    assert r"W_{\mathrm{patch}}^{\top}" in drawn["embed.patches"]["tex"]
    assert (
        r"\mathbb{R}^{\htmlClass{num}{32} \times (\htmlClass{num}{1} \cdot \htmlClass{num}{2}"
        in drawn["embed.patches"]["tex"]
    )
    assert r"(\htmlClass{num}{8} / \htmlClass{num}{2})^2 = \htmlClass{num}{16}" in drawn["tokens"]["tex"]
    assert r"x_{\mathrm{cls}}" in drawn["embed.out"]["tex"]
    shown = workshop.page.locator('.step[data-stage="embed.patches"] .step-eq .katex')
    assert shown.count() == 1
    workshop.close()


@pytest.mark.parametrize("width", [390, 800, 1280, 1920])
def test_the_vision_page_fits_a_phone_and_a_laptop(workshop, width):
    page = workshop.page
    page.set_viewport_size({"width": width, "height": 900})
    for level in ("beginner", "advanced"):
        workshop.open(model="digits", sample=SAMPLE, level=level, stage="blocks.0.attn.pattern")
        page.wait_for_selector(".patch-attention[data-ready='1']", state="attached")
        page.evaluate("window.scrollTo(0, 0)")
        measured = page.evaluate(MEASURE)
        problems = overlaps(measured["boxes"]) + cut_off(measured)
        assert problems == [], (level, problems)
        workshop.shot(f"vision_{level}_{width}")
    workshop.close()


def test_a_bad_link_says_so(workshop):
    workshop.open(model="digits", sample=900)
    assert "sample 900 is out of range" in workshop.page.locator("#message").inner_text()
    workshop.close(allowed_errors=(BROWSER_400,))
