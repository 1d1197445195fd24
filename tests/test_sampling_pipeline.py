"""The sampling order has one home, `glassformer.sampling.pipeline`: generation keeps its last
stage and the workshop shows every stage, so both must be exactly what it yields."""

from __future__ import annotations

import pytest
import torch

from glassformer.generate import generate_ids
from glassformer.sampling import GenerationSettings, choose, pipeline
from glassformer.workshop.walk.prediction import next_token
from tests.conftest import tiny_model

V = 40
SEEN = torch.tensor([[3, 5, 5, 7]])  # 1 s


def logits() -> torch.Tensor:
    return torch.randn(V, generator=torch.Generator().manual_seed(0)) * 3  # v


def test_every_stage_in_order():
    settings = GenerationSettings(
        temperature=0.7, top_k=9, top_p=0.8, repetition_penalty=1.3, min_new_tokens=2, seed=1
    )
    stages = list(pipeline(logits()[None], SEEN, settings, step=1, stop=torch.tensor([4])))
    names = [name for name, _ in stages]
    assert names == ["logits", "repetition", "suppress", "temperature", "top_k", "top_p"]
    kept = [int(torch.isfinite(scores).sum()) for _, scores in stages]
    assert kept[:3] == [V, V, V - 1] and kept[4] == 9 and 1 <= kept[5] <= 9
    assert stages[3].scores[0, 4] == float("-inf")  # suppressed before temperature


@pytest.mark.parametrize(
    ("settings", "names"),
    [
        (GenerationSettings(temperature=0), ["logits"]),  # greedy: no warper
        (GenerationSettings(temperature=0.5, top_p=1.0), ["logits", "temperature"]),  # top_p = 1: off
        (GenerationSettings(temperature=0.5, top_p=None), ["logits", "temperature"]),
        (GenerationSettings(num_beams=2, repetition_penalty=1.2), ["logits", "repetition"]),
    ],
)
def test_a_stage_that_changes_nothing_is_left_out(settings, names):
    assert [name for name, _ in pipeline(logits()[None], SEEN, settings)] == names


@pytest.mark.parametrize(
    "settings",
    [
        GenerationSettings(temperature=0.9, top_k=7, top_p=0.85, repetition_penalty=1.4, seed=3),
        GenerationSettings(temperature=0, repetition_penalty=2.0),
        GenerationSettings(temperature=1.3, top_p=1.0, seed=11),
    ],
)
def test_the_workshop_shows_the_pipeline_and_draws_what_it_chooses(settings):
    step = 2
    steps, token = next_token(logits(), SEEN, settings, step)
    stages = list(pipeline(logits()[None], SEEN, settings, step))
    assert [s.name for s in steps] == [name for name, _ in stages]
    for shown, (_, scores) in zip(steps, stages, strict=True):
        assert torch.equal(shown.scores, scores)
    assert token == int(choose(stages[-1].scores, settings, step)[0])


def test_generation_chooses_from_the_pipeline_s_last_stage():
    """A naive loop over the pipeline draws the tokens `generate_ids` draws."""
    net = tiny_model(vocab_size=V).eval()
    settings = GenerationSettings(
        max_new_tokens=6,
        temperature=0.9,
        top_k=12,
        top_p=0.9,
        repetition_penalty=1.2,
        seed=5,
        stop_token_ids=(),
    )
    prompt = [1, 2, 3]
    ids = torch.tensor([prompt])
    with torch.no_grad():
        for step in range(settings.max_new_tokens):
            *_, (_, scores) = pipeline(net(ids)[:, -1].float(), ids, settings, step)
            ids = torch.cat([ids, choose(scores, settings, step)[:, None]], dim=1)
    assert generate_ids(net, [prompt], settings)[0] == ids[0, len(prompt) :].tolist()
