"""Walks served together (`batched_walk.py`) are the walks each prompt gets alone: every
stage, token, character and prediction, to a matmul's rounding."""

import asyncio
import json
import math
import threading

import pytest
import torch

import glassformer as gf
from glassformer.sampling import GenerationSettings
from glassformer.tokenizers.char import CharTokenizer
from glassformer.workshop.door.fair_queue import FairQueue
from glassformer.workshop.door.request_types import WalkRequest
from glassformer.workshop.model_work import Together, settings
from glassformer.workshop.server import create_app
from glassformer.workshop.walk.arrays import unpack
from glassformer.workshop.walk.batched_walk import BATCH_LIMIT, batch_key, walks
from glassformer.workshop.walk.interventions import HeadInterventions
from glassformer.workshop.walk.pass_input import PassInput
from glassformer.workshop.walk.payload import SHORT_INPUT, walk
from tests.conftest import tiny
from tests.test_workshop_shared_work import WAIT_S, Page, _until

ALPHABET = "abcdefghijklmnopqrstuvwxyz .,"
TEXTS = ["the cat sat.", "a", "on the mat, the dog", "zz", "the cat sat. the cat sat. the cat"]


def char_lm(**overrides) -> gf.LanguageModel:
    torch.manual_seed(0)
    config = tiny(vocab_size=len(ALPHABET), max_seq_len=128, **overrides)
    return gf.LanguageModel(gf.build(config).eval(), CharTokenizer(ALPHABET))


DECODERS = {
    "gpt2": {},
    "llama": {"positions": "rope", "norm": "rmsnorm", "activation": "swiglu", "n_kv_heads": 2},
    "alibi": {"positions": "alibi"},
}


def same(single, batched, where: str = "") -> None:
    """``batched`` holds ``single``'s numbers (packed arrays unpacked) to rounding."""
    if isinstance(single, dict) and "dtype" in single and "data" in single:
        a, b = unpack(single), unpack(batched)
        assert a.shape == b.shape, where
        tolerance = 1.01 / 255 if single["dtype"] == "uint8" else 1e-4 * (1 + float(a.abs().max()))
        assert torch.allclose(a, b, atol=tolerance, rtol=0), where
    elif isinstance(single, dict):
        assert single.keys() == batched.keys(), where
        for key in single:
            if key != "seconds":
                same(single[key], batched[key], f"{where}.{key}")
    elif isinstance(single, list):
        assert len(single) == len(batched), where
        for i, (a, b) in enumerate(zip(single, batched, strict=True)):
            same(a, b, f"{where}[{i}]")
    elif isinstance(single, float):
        assert math.isclose(single, batched, rel_tol=1e-4, abs_tol=1e-5), (where, single, batched)
    else:
        assert single == batched, where


@pytest.mark.parametrize("family", DECODERS)
def test_walks_in_one_pass_are_each_prompt_s_own_walk(family):
    lm = char_lm(**DECODERS[family])
    settings = [GenerationSettings(greedy=True), GenerationSettings(temperature=0.7, top_k=5, seed=3)]
    givens = [PassInput(lm, text) for text in TEXTS] + [PassInput(lm, "the dog", generated=(3, 4))]
    chosen = [settings[i % 2] for i in range(len(givens))]
    names = [f"prompt {i}" for i in range(len(givens))]
    assert len({batch_key(given) for given in givens}) == 1
    together = walks(list(zip(givens, chosen, names, strict=True)))
    for given, setting, name, answer in zip(givens, chosen, names, together, strict=True):
        same(walk(given, setting, name), answer, name)


def test_a_bad_or_long_prompt_gets_its_own_answer():
    lm = char_lm()
    long_text = "ab " * (SHORT_INPUT // 3 + 1)  # past SHORT_INPUT tokens: a long walk, which captures less
    givens = [PassInput(lm, "the cat"), PassInput(lm, "NOT IN THE ALPHABET"), PassInput(lm, long_text)]
    greedy = GenerationSettings(greedy=True)
    first, bad, long = walks([(given, greedy, name) for given, name in zip(givens, "abc", strict=True)])
    same(walk(givens[0], greedy, "a"), first)
    assert isinstance(bad, ValueError)
    same(walk(givens[2], greedy, "c"), long)


@pytest.mark.parametrize(
    "overrides",
    [
        {"family": "encoder", "norm_placement": "post"},  # sees the padding after it
        {"family": "encoder_decoder", "positions": "t5_relative", "decoder_start_token_id": 0},
        {"n_experts": 4},
    ],
)
def test_what_the_padding_argument_does_not_cover_walks_alone(overrides):
    assert batch_key(PassInput(char_lm(**overrides), "the cat")) is None


def test_a_walk_with_heads_changed_walks_alone():
    lm = char_lm()
    changed = HeadInterventions(lm, [{"layer": 0, "head": 1, "mode": "zero"}])
    assert batch_key(PassInput(lm, "the cat")) is not None
    assert batch_key(PassInput(lm, "the cat", interventions=changed)) is None


# served together: the fair queue's turn takes the walks waiting behind it ----------------------


def test_a_walk_s_turn_takes_the_students_walks_waiting_behind_it_into_one_pass(tmp_path):
    lm = char_lm()
    app = create_app({"char": lm}, runs_root=tmp_path / "runs")
    workshop, released, calls = app.state.workshop, threading.Event(), []

    def held(text: str) -> dict:  # the teacher's work on the model thread while the students ask
        assert released.wait(WAIT_S)
        return {"text": text}

    def counted(works):
        calls.append([given.text for given, _, _ in works])
        return walks(works)

    async def ask(page: Page, text: str):
        body = WalkRequest(model="char", text=text, temperature=0)
        given = workshop.pass_input(body, "walk")
        together = Together(batch_key(given), counted, BATCH_LIMIT)
        args = (given, settings(body), "char")
        return await workshop.shared(page.request, "walk", body, walk, *args, together=together)

    async def scenario() -> list:
        first = asyncio.create_task(
            workshop.shared(Page().request, "walk", WalkRequest(model="char"), held, "x")
        )
        await _until(lambda: workshop.work.misses == 1, "the teacher's work started")
        asked = [
            ("a", "the cat sat."),
            ("b", "on the mat"),
            ("a", "the dog"),
            ("c", "a mat"),
            ("d", "zz"),
        ]
        tasks = []
        for student, text in asked:
            tasks.append(asyncio.create_task(ask(Page(f"student:{student}"), text)))
            queued = len(tasks)
            await _until(lambda: workshop.queue.queued == queued, "the walk queued")  # noqa: B023
        released.set()
        await first
        return await asyncio.gather(*tasks, return_exceptions=True)

    answers = asyncio.run(scenario())
    # a's first walk holds the turn and takes b's, c's and d's along (one in flight per student)
    assert calls == [["the cat sat.", "on the mat", "a mat", "zz"]]  # a's second: alone, after
    greedy = settings(WalkRequest(model="char", text="x", temperature=0))
    for text, answer in zip(["the cat sat.", "on the mat", "the dog", "a mat", "zz"], answers, strict=True):
        same(walk(PassInput(lm, text), greedy, "char"), json.loads(answer.body), text)
    assert workshop.queue.queued == 0


def test_take_along_goes_in_turn_order_within_its_key_and_limit():
    async def scenario() -> tuple[list[str], list[str]]:
        queue = FairQueue()
        holder = queue.enter("student:a")
        holder.together = "m"
        asked = [("student:b", "m"), ("student:c", "other model"), ("teacher", "m"), ("student:d", "m")]
        asked += [("student:e", "m"), ("student:b", "m")]
        tickets = []
        for client, key in asked:
            tickets.append(queue.enter(client))
            tickets[-1].together = key
        taken = queue.take_along(holder, 3)
        assert all(t.carried is not None and not queue.waiting(t) for t in taken)
        left = [t.client for t in tickets if queue.waiting(t)]
        return [t.client for t in taken], left

    taken, left = asyncio.run(scenario())
    assert taken == ["teacher", "student:b", "student:d"]  # the teacher's line first, then the round
    assert left == ["student:c", "student:e", "student:b"]
