"""A mixture of experts in the workshop: every step of its walk opens and equals the library's
trace, and the router's scores open as a tokens × experts map with each token's routing (the
experts it chose, their weights) and each expert's load. Screenshots go to
$GLASSFORMER_SCREENSHOTS."""

from __future__ import annotations

import pytest
import torch

from glassformer.workshop.walk.arrays import unpack
from tests.conftest import workshop_client
from tests.test_workshop_page import TEXT, char_lm

N_EXPERTS, TOP_K = 4, 2


@pytest.fixture(scope="module")
def lm():
    torch.manual_seed(0)
    model = char_lm(
        positions="rope",
        norm="rmsnorm",
        activation="swiglu",
        n_experts=N_EXPERTS,
        experts_per_token=TOP_K,
        shared_expert_d_ff=16,
    )
    with torch.no_grad():  # a router at init scores every expert alike: spread it out
        for block in model.net.stack.blocks:
            block.ffn.router.weight.normal_(0.0, 1.0)
    return model


@pytest.fixture(scope="module")
def app(lm):
    from glassformer.workshop.server import create_app

    return create_app({"moe": lm})


@pytest.fixture(scope="module")
def api(app):
    with workshop_client(app) as client:
        yield client


def test_every_step_of_the_walk_opens_and_is_the_library_s(api, lm):
    walk = api.post("/api/walk", json={"model": "moe", "text": TEXT})
    assert walk.status_code == 200, walk.text
    stages = {stage["id"]: stage for stage in walk.json()["stages"]}
    for local in ("router_logits", "router_probs", "experts", "expert_weights", "expert_out", "shared_out"):
        assert f"blocks.0.ffn.{local}" in stages, local
    assert stages["blocks.0.ffn.expert_out"]["shape"] == "k t d"
    assert "top-2" in stages["blocks.1.ffn.experts"]["title"]
    traced = [stage["trace"] for stage in stages.values() if stage["trace"]]
    trace = lm.trace(TEXT, traced)
    for name in traced:
        answer = api.post("/api/stage", json={"model": "moe", "text": TEXT, "name": name})
        assert answer.status_code == 200, (name, answer.text)
        got, expected = unpack(answer.json()["value"]), trace[name][0].float()
        tolerance = 1 / 510 + 1e-6 if name.endswith("pattern") else 1e-5
        assert (got - expected).abs().max() <= tolerance, name


def test_the_router_s_map_shows_each_token_s_experts_and_their_load(workshop, lm):
    page = workshop.page
    workshop.open(model="moe", text=TEXT, level="intermediate", stage="blocks.1.ffn.router_probs")
    routing = page.locator('.step[data-stage="blocks.1.ffn.router_probs"] .moe-routing[data-ready="1"]')
    routing.wait_for()
    trace = lm.trace(TEXT, ["blocks.1.ffn.experts", "blocks.1.ffn.expert_weights"])
    chosen, weights = trace["blocks.1.ffn.experts"][0], trace["blocks.1.ffn.expert_weights"][0]  # t k
    last = chosen.shape[0] - 1
    marked = routing.locator(".moe-expert.chosen").evaluate_all(
        "rows => rows.map(r => Number(r.dataset.expert))"
    )
    assert sorted(marked) == sorted(chosen[last].tolist())
    first = routing.locator(f'.moe-expert[data-expert="{int(chosen[last, 0])}"] .moe-weight').inner_text()
    assert f"{weights[last, 0].item():.3f}"[:4] in first
    loads = routing.locator(".moe-load-row").evaluate_all("rows => rows.map(r => Number(r.dataset.load))")
    assert loads == torch.bincount(chosen.flatten(), minlength=N_EXPERTS).tolist()
    workshop.part_shot('.step[data-stage="blocks.1.ffn.router_probs"]', "moe_routing")
    routing.locator("select.moe-token").select_option("0")  # the keyboard's way to another token
    page.wait_for_selector('.moe-routing[data-token="0"]', state="attached")
    marked = routing.locator(".moe-expert.chosen").evaluate_all(
        "rows => rows.map(r => Number(r.dataset.expert))"
    )
    assert sorted(marked) == sorted(chosen[0].tolist())
    workshop.close()


def test_the_overview_draws_the_router_and_its_experts(workshop):
    page = workshop.page
    workshop.open(model="moe", text=TEXT, level="intermediate")
    block = page.locator("#overview .ov-block").first
    assert f"router → {TOP_K} of {N_EXPERTS} experts" in block.locator(".ov-flow").inner_text()
    assert f"{TOP_K} of {N_EXPERTS} experts per token" in block.inner_text()
    workshop.part_shot("#overview", "moe_overview")
    workshop.close()
