"""The workshop's API: every number the page shows is the library's, and bad requests get 4xx."""

import json
from pathlib import Path

import pytest
import torch

import glassformer as gf
from glassformer.sampling import SAMPLING_DEFAULTS
from glassformer.tokenizers.char import CharTokenizer
from glassformer.workshop.server import create_app
from glassformer.workshop.walk.architecture import stages
from glassformer.workshop.walk.arrays import unpack
from tests.conftest import tiny, workshop_client

ALPHABET = "abcdefghijklmnopqrstuvwxyz .,"
TEXT = "the cat sat."


def char_lm(**overrides) -> gf.LanguageModel:
    tokenizer = CharTokenizer(ALPHABET)
    torch.manual_seed(0)
    config = tiny(vocab_size=len(ALPHABET), **overrides)
    return gf.LanguageModel(gf.build(config).eval(), tokenizer)


@pytest.fixture(scope="module")
def models():
    return {
        "llama": char_lm(positions="rope", norm="rmsnorm", activation="swiglu", n_kv_heads=2),
        "bert": char_lm(family="encoder", norm_placement="post"),
        "t5": char_lm(family="encoder_decoder", positions="t5_relative", decoder_start_token_id=0),
    }


@pytest.fixture(scope="module")
def client(models):
    with workshop_client(create_app(models)) as client:
        yield client


def walk(client, **body):
    answer = client.post("/api/walk", json={"model": "llama", "text": TEXT, **body})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_models_lists_each_with_its_own_stages(client, models):
    listed = {m["name"]: m for m in client.get("/api/models").json()["models"]}
    assert set(listed) == set(models)
    assert listed["llama"]["architecture"]["attention"]["kind"] == "GQA"
    assert [s["id"] for s in listed["t5"]["stages"]] == [s["id"] for s in stages(models["t5"].net)]


def test_models_send_the_library_s_sampling_defaults(client):
    """The page's form opens on them: their one home is `sampling.SAMPLING_DEFAULTS`."""
    assert client.get("/api/models").json()["sampling"] == SAMPLING_DEFAULTS


def test_every_number_of_the_walk_is_the_trace_s(client, models):
    lm = models["llama"]
    payload = walk(client)
    trace = lm.trace(TEXT)
    assert [t["id"] for t in payload["tokens"]] == lm.tokenizer.encode(TEXT)
    for stage in payload["stages"]:
        if stage["trace"] is None:
            assert stage["value"] is None
            continue
        tensor, value = trace[stage["trace"]][0], stage["value"]
        assert value["shape"] == list(tensor.shape), stage["trace"]
        if "norms" in value:
            assert torch.allclose(unpack(value["norms"]), tensor.norm(dim=-1), atol=1e-5), stage["trace"]
        else:
            assert stage["trace"].endswith((".scores", ".pattern"))
        assert value["min"] == pytest.approx(float(tensor.min()), abs=1e-6)
        if stage["trace"].endswith(".pattern"):
            assert torch.allclose(unpack(value["mean_pattern"]), tensor.mean(0), atol=1 / 510)
        if tensor.dim() == 2:
            assert torch.allclose(unpack(value["preview"]), tensor[:, :16], atol=1e-6)


def test_the_prediction_is_the_library_s(client, models):
    lm = models["llama"]
    settings = dict(temperature=0.7, top_k=5, top_p=0.9, seed=3)
    prediction = walk(client, **settings)["prediction"]
    assert [s["name"] for s in prediction["steps"]] == ["logits", "temperature", "top_k", "top_p"]
    logits = lm.logits(TEXT)[0, -1]
    probs = torch.softmax(logits / 0.7, dim=-1)
    shown = prediction["steps"][1]["top"]
    assert [t["id"] for t in shown] == probs.topk(len(shown)).indices.tolist()
    assert [t["p"] for t in shown] == pytest.approx(probs.topk(len(shown)).values.tolist(), abs=1e-6)
    assert prediction["steps"][2]["kept"] == 5 and prediction["steps"][3]["kept"] <= 5
    drawn = lm.generate(lm.tokenizer.encode(TEXT), max_new_tokens=1, **settings)
    assert prediction["token"]["id"] == drawn[0]  # the token lm.generate draws, same seed
    greedy = walk(client, temperature=0)["prediction"]
    assert greedy["token"]["id"] == int(logits.argmax()) and len(greedy["steps"]) == 1


def test_a_stage_in_full(client, models):
    trace = models["llama"].trace(TEXT)
    for name in ("blocks.1.attn.pattern", "blocks.0.ffn.act", "blocks.0.attn.k"):
        answer = client.post("/api/stage", json={"model": "llama", "text": TEXT, "name": name})
        assert answer.status_code == 200, answer.text
        tolerance = 1 / 510 if name.endswith("pattern") else 1e-6
        assert torch.allclose(unpack(answer.json()["value"]), trace[name][0], atol=tolerance)
    body = {"model": "llama", "text": TEXT, "name": "blocks.1.attn.pattern", "exact": True}
    exact = client.post("/api/stage", json=body).json()["value"]  # a table's weights: float32
    assert exact["dtype"] == "float32" and torch.equal(unpack(exact), trace["blocks.1.attn.pattern"][0])


def test_encoder_and_encoder_decoder_walks(client, models):
    bert = walk(client, model="bert")
    assert bert["prediction"] is None and bert["architecture"]["placement"] == "post"
    assert not any(s["id"].endswith("final_norm") for s in bert["stages"])  # post-norm: none
    t5 = walk(client, model="t5")
    ids = [s["id"] for s in t5["stages"]]
    assert "decoder.blocks.0.cross_attn.pattern" in ids and "encoder.blocks.1.attn.pattern" in ids
    assert not any(i.endswith("embed.positions") for i in ids)  # T5: a bias, no position vectors
    cross = next(s for s in t5["stages"] if s["id"] == "decoder.blocks.0.cross_attn.pattern")
    assert cross["value"]["shape"] == [4, 1, len(TEXT)]  # h, the start token, the source
    assert t5["decoder_tokens"] == [{"id": 0, "text": ALPHABET[0]}] and t5["prediction"] is not None


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"model": "gpt-5"}, 404, "no model 'gpt-5' here"),
        ({"text": ""}, 400, "text: string should have at least 1 character"),
        ({"text": 7}, 400, "text: input should be a valid string (got 7)"),
        ({"text": "a" * 65}, 400, "more than max_seq_len=64"),
        ({"text": "ABC"}, 400, "'A'"),
        ({"temperature": -1}, 400, "temperature: input should be greater than or equal to 0 (got -1)"),
        ({"temperature": "hot"}, 400, "temperature: input should be a valid number (got 'hot')"),
        ({"top_k": 2.5}, 400, "top_k: input should be a valid integer (got 2.5)"),
        ({"top_p": 1.5}, 400, "top_p: input should be less than or equal to 1 (got 1.5)"),
        ({"seed": True}, 400, "seed: input should be a valid integer (got True)"),
        ({"seed": 2**64}, 400, "seed: input should be less than or equal to 9223372036854775807"),
        ({"top_k": 10**400}, 400, "top_k: input should be less than or equal to 2147483647"),
        ({"repetition_penalty": 1e-300}, 400, "repetition_penalty: input should be greater than or equal"),
        ({"colour": "red"}, 400, "unknown field 'colour'; this request takes: model, text, "),
    ],
)
def test_bad_requests_get_a_message(client, body, status, message):
    answer = client.post("/api/walk", json={"model": "llama", "text": TEXT, **body})
    assert answer.status_code == status
    assert message in answer.json()["error"]


def test_bad_bodies_and_stage_names(client):
    not_json = client.post("/api/walk", content=b"{not json", headers={"content-type": "application/json"})
    assert not_json.status_code == 400 and not_json.json()["error"].startswith("the body must be JSON")
    assert client.post("/api/walk", content=b"{}").status_code == 415  # no content type: not JSON
    assert client.post("/api/walk", json=[1, 2]).status_code == 400
    answer = client.post("/api/stage", json={"model": "llama", "text": TEXT, "name": "blocks.9.attn.q"})
    assert answer.status_code == 400 and "not a stage of this model" in answer.json()["error"]
    assert client.get("/api/walk").status_code == 405


def test_no_model_no_app():
    with pytest.raises(ValueError, match="at least one model"):
        create_app({})


@pytest.mark.parametrize("view", ["head", "model", "neuron", "tokens"])
def test_the_notebook_views_open_for_the_current_text(client, view):
    answer = client.get(f"/views/{view}", params={"model": "llama", "text": TEXT, "layer": 1, "head": 2})
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    assert "<script" in answer.text and "http://" not in answer.text.replace("http://www.w3.org", "")


def test_the_tokens_explained_are_the_tokens_the_walk_reads(client, models):
    from glassformer.tokenizers.bpe_train import train_bpe

    answer = client.post("/api/tokens", json={"model": "llama", "text": TEXT}).json()
    assert answer["kind"] == "char" and answer["ids"] == [t["id"] for t in walk(client)["tokens"]]
    assert [p["steps"][0]["rule"] for p in answer["pieces"]] == ["character"] * len(TEXT)
    bpe = train_bpe("the cat sat on the mat. the cat ate the rat. " * 20, vocab_size=270, progress=False)
    lm = gf.LanguageModel(gf.build(tiny(vocab_size=bpe.vocab_size)).eval(), bpe)
    with workshop_client(create_app({"bpe": lm})) as bpe_client:
        answer = bpe_client.post("/api/tokens", json={"model": "bpe", "text": "the cat sat."}).json()
        walked = bpe_client.post("/api/walk", json={"model": "bpe", "text": "the cat sat."}).json()
    assert answer["kind"] == "bpe" and answer["ids"] == [t["id"] for t in walked["tokens"]]
    cat = next(p for p in answer["pieces"] if p["text"] == " cat")
    assert cat["parts"] == [" ", "c", "a", "t"] and cat["steps"][-1]["parts"] == [" cat"]  # never "Ġ"
    assert cat["tokens"] == [" cat"]


@pytest.mark.parametrize("model", ["llama", "t5"])
def test_the_lens_and_embeddings_views_are_self_contained_pages(client, model):
    lens = client.get("/views/lens", params={"model": model, "text": TEXT})
    assert lens.status_code == 200 and "<svg" in lens.text and "Logit lens" in lens.text
    assert "<script" not in lens.text and "src=" not in lens.text
    embeddings = client.get("/views/embeddings", params={"model": model, "text": TEXT})
    assert embeddings.status_code == 200 and "Plotly.newPlot" in embeddings.text
    assert "<script src=" not in embeddings.text.replace(" ", "")  # plotly.js inlined, no CDN


def test_views_of_an_encoder_decoder_and_bad_view_requests(client):
    assert client.get("/views/head", params={"model": "t5", "text": TEXT}).status_code == 200
    answer = client.get("/views/head", params={"model": "llama", "text": TEXT, "layer": 7})
    assert answer.status_code == 400 and "layer 7 is out of range" in answer.json()["error"]
    answer = client.get("/views/movie", params={"model": "llama", "text": TEXT})
    assert answer.status_code == 400 and "no view 'movie'" in answer.json()["error"]
    answer = client.get("/views/head", params={"model": "llama", "text": TEXT, "head": "x"})
    assert answer.status_code == 400 and "head: input should be a valid integer" in answer.json()["error"]


def events(answer) -> list[tuple[str, dict]]:
    """The (event, data) pairs of a server-sent event stream."""
    out = []
    for block in answer.text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        out.append((lines["event"], json.loads(lines["data"])))
    return out


def test_generation_streams_the_tokens_lm_generate_makes(client, models):
    lm = models["llama"]
    settings = dict(temperature=0.9, top_k=8, seed=5)
    body = {"model": "llama", "text": TEXT, "max_new_tokens": 12, **settings}
    with client.stream("POST", "/api/generate", json=body) as answer:
        answer.read()
    assert answer.headers["content-type"].startswith("text/event-stream")
    stream = events(answer)
    tokens = [data["id"] for name, data in stream if name == "token"]
    assert tokens == lm.generate(lm.tokenizer.encode(TEXT), max_new_tokens=12, **settings)
    name, done = stream[-1]
    assert name == "done" and done["tokens"] == 12 and done["text"] == lm.tokenizer.decode(tokens)
    assert "".join(data["text"] for name, data in stream if name == "token") == done["text"]
    t5 = events(client.post("/api/generate", json={"model": "t5", "text": TEXT, "max_new_tokens": 3}))
    assert [name for name, _ in t5] == ["token", "token", "token", "done"]


@pytest.mark.parametrize("model", ["llama", "t5"])
def test_each_step_reports_the_kv_cache_rows_it_reused_and_computed(client, models, model):
    from glassformer.nn.kv_cache import KVCache

    lm = models[model]
    body = {"model": model, "text": TEXT, "max_new_tokens": 5, "temperature": 0}
    stream = events(client.post("/api/generate", json=body))
    steps = [data for name, data in stream if name == "token"]
    prompt = 1 if model == "t5" else len(TEXT)  # the decoder starts from its start token
    per_token = KVCache.bytes_per_token(lm.config)
    assert steps[0]["kv"] == {"new": prompt, "reused": 0, "bytes": prompt * per_token}  # the prefill
    for step, data in enumerate(steps[1:], start=1):
        assert data["kv"] == {"new": 1, "reused": prompt + step - 1, "bytes": (prompt + step) * per_token}
    done = stream[-1][1]
    assert done["prefill_seconds"] == pytest.approx(steps[0]["step_seconds"])
    assert done["kv_bytes_per_token"] == per_token and done["decode_tokens_per_s"] > 0
    assert not lm.net.hook_points["blocks.0.attn.q" if model == "llama" else "decoder.blocks.0.attn.q"].fns


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"model": "bert"}, "an encoder does not generate"),
        ({"max_new_tokens": 0}, "max_new_tokens: input should be greater than or equal to 1"),
        ({"max_new_tokens": "many"}, "max_new_tokens: input should be a valid integer"),
        ({"text": "a" * 65}, "more than max_seq_len=64"),
        ({"temperature": -2}, "temperature: input should be greater than or equal to 0"),
    ],
)
def test_bad_generation_requests(client, body, message):
    answer = client.post("/api/generate", json={"model": "llama", "text": TEXT, **body})
    assert answer.status_code == 400 and message in answer.json()["error"]


def test_ablating_heads_changes_what_follows_as_the_library_does(client, models):
    from glassformer.inspect.interventions import head_ablation_hook

    lm = models["llama"]
    changes = [{"layer": 1, "head": 2, "mode": "zero"}, {"layer": 0, "head": 0, "mode": "mean"}]
    payload = walk(client, interventions=changes, temperature=0)
    z = next(s for s in payload["stages"] if s["id"] == "blocks.1.attn.z")
    assert torch.all(unpack(z["value"]["norms"])[2] == 0)  # h t: head 2 writes nothing
    hooks = {
        "blocks.1.attn.z": head_ablation_hook([2], "zero"),
        "blocks.0.attn.z": head_ablation_hook([0], "mean"),
    }
    with lm.net.hooks(hooks):
        expected = lm.logits(TEXT)[0, -1]
    assert payload["prediction"]["token"]["id"] == int(expected.argmax())
    shown = payload["prediction"]["steps"][0]["top"][0]
    assert shown["p"] == pytest.approx(float(torch.softmax(expected, -1).max()), abs=1e-6)
    assert payload["interventions"] == changes
    assert walk(client)["interventions"] == []


def test_scaling_a_head_scales_its_output(client, models):
    lm = models["llama"]
    payload = walk(client, interventions=[{"layer": 1, "head": 3, "mode": "scale", "factor": 2.5}])
    z = next(s for s in payload["stages"] if s["id"] == "blocks.1.attn.z")
    plain = lm.trace(TEXT, ["blocks.1.attn.z"])["blocks.1.attn.z"][0]  # h t e
    norms = unpack(z["value"]["norms"])
    assert torch.allclose(norms[3], 2.5 * plain[3].norm(dim=-1), atol=1e-5)
    assert torch.allclose(norms[:3], plain[:3].norm(dim=-1), atol=1e-5)  # the others untouched
    logits = client.post(
        "/api/stage",
        json={"model": "llama", "text": TEXT, "name": "logits", "interventions": payload["interventions"]},
    ).json()
    factor_one = walk(client, interventions=[{"layer": 1, "head": 3, "mode": "scale", "factor": 1}])
    assert factor_one["prediction"] == walk(client)["prediction"]  # x1 changes nothing
    assert not torch.allclose(unpack(logits["value"]), lm.logits(TEXT)[0])


def test_patching_a_head_from_a_second_prompt_is_the_library_s_patch(client, models):
    from glassformer.inspect.interventions import patch_activation

    lm = models["llama"]
    source = "the dog ran."  # as many characters as TEXT
    changes = [{"layer": 1, "head": 1, "mode": "patch"}]
    payload = walk(client, interventions=changes, patch_text=source, temperature=0)
    token = payload["prediction"]["token"]["id"]
    effect = patch_activation(lm, source, TEXT, "blocks.1.attn.z", heads=[1], target=token)
    logit = client.post(
        "/api/stage",
        json={
            "model": "llama",
            "text": TEXT,
            "name": "logits",
            "interventions": changes,
            "patch_text": source,
        },
    ).json()
    assert float(unpack(logit["value"])[-1, token]) == pytest.approx(effect.patched, abs=1e-5)
    z = next(s for s in payload["stages"] if s["id"] == "blocks.1.attn.z")
    source_z = lm.trace(source, ["blocks.1.attn.z"])["blocks.1.attn.z"][0]
    assert torch.allclose(unpack(z["value"]["norms"])[1], source_z[1].norm(dim=-1), atol=1e-5)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"interventions": [{"layer": 2, "head": 0}]}, "layer 2 is out of range (0..1)"),
        ({"interventions": [{"layer": 0, "head": 4}]}, "head 4 is out of range (0..3)"),
        (
            {"interventions": [{"layer": 0, "head": 0, "mode": "erase"}]},
            "interventions.0.mode: input should be 'zero', 'mean', 'scale' or 'patch' (got 'erase')",
        ),
        ({"interventions": "all"}, "interventions: input should be a valid array"),
        ({"interventions": [{"layer": 0, "head": 0}] * 65}, "at most 64"),
        ({"interventions": [{"layer": 0, "head": 0, "mode": "scale"}]}, "scale needs a factor"),
        (
            {"interventions": [{"layer": 0, "head": 0, "mode": "scale", "factor": 1e9}]},
            "interventions.0.factor: input should be less than or equal to 100",
        ),
        ({"interventions": [{"layer": 0, "head": 0, "mode": "patch"}]}, "a patch needs patch_text"),
        (
            {"interventions": [{"layer": 0, "head": 0, "mode": "patch"}], "patch_text": "a dog"},
            "the same token count",
        ),
        ({"patch_text": 7}, "patch_text: input should be a valid string"),
        ({"generated": ["a"]}, "generated.0: input should be a valid integer"),
        ({"generated": [999]}, "999"),
    ],
)
def test_bad_interventions(client, body, message):
    answer = client.post("/api/walk", json={"model": "llama", "text": TEXT, **body})
    assert answer.status_code == 400 and message in answer.json()["error"], answer.text


def test_a_walk_with_generated_tokens_is_that_generation_step_s_forward_pass(client, models):
    lm = models["llama"]
    prompt = lm.tokenizer.encode(TEXT)
    generated = lm.generate(prompt, max_new_tokens=4, temperature=0)  # with the KV cache
    for step, token in enumerate(generated):
        payload = walk(client, generated=generated[:step], temperature=0)
        assert [t["id"] for t in payload["tokens"]] == prompt + generated[:step]
        assert payload["prediction"]["token"]["id"] == token
    t5 = walk(client, model="t5", generated=[3, 4])
    assert [t["id"] for t in t5["decoder_tokens"]] == [0, 3, 4]


@pytest.mark.parametrize(
    "settings",
    [
        {"seed": 0},
        {"seed": 7, "temperature": 1.5},
        {"seed": 123, "temperature": 1.0, "top_k": 5},
        {"seed": 2**63 - 1, "temperature": 1.2, "top_p": 0.9, "repetition_penalty": 1.3},
    ],
)
def test_the_timeline_is_the_generation(client, models, settings):
    """The walk of step k of a sampled generation draws the token the generation drew at
    step k (its stream, `/api/generate`, and `lm.generate` alike): each step has its own
    random stream (`sampling.step_generator`), so the walk needs no replay of the steps
    before it. Once the walk re-seeded every step, and 6 of 12 steps disagreed."""
    lm, steps = models["llama"], 24
    body = {"model": "llama", "text": TEXT, "max_new_tokens": steps, **settings}
    streamed = [
        data["id"] for name, data in events(client.post("/api/generate", json=body)) if name == "token"
    ]
    assert streamed == lm.generate(lm.tokenizer.encode(TEXT), max_new_tokens=steps, **settings)
    assert len(set(streamed)) > 3  # a sampled generation, not one token again and again
    for k, token in enumerate(streamed):
        payload = walk(client, generated=streamed[:k], **settings)
        assert payload["prediction"]["token"]["id"] == token, f"step {k}"


def test_an_encoder_decoder_reads_a_decoder_text(client, models):
    lm = models["t5"]
    payload = walk(client, model="t5", decoder_text="the")
    assert [t["id"] for t in payload["decoder_tokens"]] == [0, *lm.tokenizer.encode("the")]
    trace = lm.trace(TEXT, ["decoder.blocks.0.cross_attn.pattern"], decoder_input="the")
    cross = next(s for s in payload["stages"] if s["id"] == "decoder.blocks.0.cross_attn.pattern")
    assert torch.allclose(
        unpack(cross["value"]["mean_pattern"]),
        trace["decoder.blocks.0.cross_attn.pattern"][0].mean(0),
        atol=1 / 510,
    )
    body = {"model": "t5", "text": TEXT, "name": "decoder.blocks.1.attn.pattern", "decoder_text": "the"}
    assert client.post("/api/stage", json=body).json()["value"]["shape"] == [4, 4, 4]
    answer = client.post("/api/walk", json={"model": "llama", "text": TEXT, "decoder_text": "x"})
    assert answer.status_code == 400 and "only for encoder-decoder models" in answer.json()["error"]
    answer = client.post("/api/walk", json={"model": "t5", "text": TEXT, "decoder_text": 5})
    assert (
        answer.status_code == 400 and "decoder_text: input should be a valid string" in answer.json()["error"]
    )


def test_the_logit_lens_is_the_library_s(client, models):
    from glassformer.inspect import logit_lens

    lm = models["llama"]
    answer = client.post("/api/lens", json={"model": "llama", "text": TEXT})
    assert answer.status_code == 200, answer.text
    payload = answer.json()
    token = int(lm.logits(TEXT)[0, -1].argmax())
    expected = logit_lens(lm, TEXT, k=3, target=token)
    assert payload["layers"] == ["embed.out", "blocks.0.resid_post", "blocks.1.resid_post"]
    assert payload["token"]["id"] == token and payload["rows"][-1]["rank"] == 1
    for row, ranks, ids, probs in zip(
        payload["rows"],
        expected.target_ranks[:, -1],
        expected.top_ids[:, -1],
        expected.top_probs[:, -1],
        strict=True,
    ):
        assert row["rank"] == int(ranks) and [t["id"] for t in row["top"]] == ids.tolist()
        assert [t["p"] for t in row["top"]] == pytest.approx(probs.tolist(), abs=1e-6)
    t5 = client.post("/api/lens", json={"model": "t5", "text": TEXT, "decoder_text": "th"}).json()
    assert t5["layers"][0] == "decoder.embed.out"
    assert client.post("/api/lens", json={"model": "bert", "text": TEXT}).status_code == 200  # an MLM head


def test_a_post_norm_step_is_named_for_what_it_computes(models):
    """BERT's step after attention computes LayerNorm(x + out), and says so (it was titled
    "residual add"); a pre-norm model's is the plain sum."""
    bert, llama = models["bert"], models["llama"]
    titles = {s["id"]: s["title"] for s in stages(bert.net)}
    assert titles["blocks.0.resid_mid"] == "residual add, then LayerNorm: LayerNorm(x + out)"
    assert titles["blocks.0.resid_post"] == "residual add, then LayerNorm: LayerNorm(x + out)"
    assert {s["id"]: s["title"] for s in stages(llama.net)}["blocks.0.resid_mid"] == "residual add: x + out"
    names = ["blocks.0.attn.in", "blocks.0.attn.out", "blocks.0.resid_mid"]
    trace = bert.trace(TEXT, names)
    norm = bert.net.stack.blocks[0].attn_norm
    with torch.no_grad():
        computed = norm(trace["blocks.0.attn.in"] + trace["blocks.0.attn.out"])
    torch.testing.assert_close(trace["blocks.0.resid_mid"], computed)


def test_a_sentence_encoder_ends_at_its_sentence_vector():
    """Its walk's last steps are the pooling and the normalized vector, lm.embed's numbers; the
    similarity route answers the cosine of two texts' vectors, and only for a sentence encoder."""
    sentence = char_lm(family="encoder", mlm_head=False, norm_placement="post")
    app = create_app({"sentence": sentence, "llama": char_lm(positions="rope")})
    with workshop_client(app) as client:
        answer = client.post("/api/walk", json={"model": "sentence", "text": TEXT}).json()
        last = answer["stages"][-2:]
        assert [s["id"] for s in last] == ["sentence.pooled", "sentence.vector"]
        assert answer["architecture"]["sentence"] == {"pooling": "mean", "normalized": True}
        full = client.post("/api/stage", json={"model": "sentence", "text": TEXT, "name": "sentence.vector"})
        vector = unpack(full.json()["value"])
        torch.testing.assert_close(vector, sentence.embed(TEXT)[0])
        assert vector.norm().item() == pytest.approx(1.0, abs=1e-6)
        other = "a dog ran."
        similar = client.post("/api/similarity", json={"model": "sentence", "text": TEXT, "other": other})
        expected = (sentence.embed(TEXT)[0] @ sentence.embed(other)[0]).item()
        assert similar.json()["cosine"] == pytest.approx(expected, abs=1e-6)
        refused = client.post("/api/similarity", json={"model": "llama", "text": TEXT, "other": other})
        assert refused.status_code == 400 and "sentence encoder" in refused.json()["error"]


def test_an_mlm_encoder_ends_at_its_masked_word_prediction(client, models):
    """Without a mask token (the character tokenizer has none) the head's words at every
    position, the softmax of lm.logits' rows."""
    answer = client.post("/api/walk", json={"model": "bert", "text": TEXT}).json()
    masked = answer["masked"]
    assert masked["mask_token"] is None and masked["masked"] is False
    assert [row["position"] for row in masked["positions"]] == list(range(len(TEXT)))
    probs = torch.softmax(models["bert"].logits(TEXT)[0], dim=-1)  # t v
    for row in masked["positions"]:
        expected = torch.topk(probs[row["position"]], len(row["top"]))
        assert [w["id"] for w in row["top"]] == expected.indices.tolist()
        assert [w["p"] for w in row["top"]] == pytest.approx(expected.values.tolist(), abs=1e-6)
    assert walk(client)["masked"] is None  # a decoder predicts the next token instead


def test_the_masked_positions_are_the_mask_tokens():
    from glassformer.tokenizers.wordpiece import WordPiece
    from glassformer.workshop.walk.masked import masked_prediction

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "sat", "."]
    tokenizer = WordPiece(vocab)
    torch.manual_seed(0)
    lm = gf.LanguageModel(gf.build(tiny(family="encoder", vocab_size=len(vocab))).eval(), tokenizer)
    ids = lm.inputs.ids("the [MASK] sat.")
    answer = masked_prediction(lm, ids, lm.logits("the [MASK] sat.")[0])
    assert answer["masked"] and answer["mask_token"] == "[MASK]"
    assert [row["position"] for row in answer["positions"]] == [ids[0].tolist().index(4)]


def test_a_stage_s_pass_stops_at_the_stage(client, models):
    """Block 0's weights run block 0 only: the last block never sees the request."""
    lm = models["llama"]
    expected = lm.trace(TEXT, ["blocks.0.attn.pattern"])["blocks.0.attn.pattern"][0]
    reached = []
    handle = lm.net.stack.blocks[-1].register_forward_pre_hook(lambda module, args: reached.append(1))
    try:
        body = {"model": "llama", "text": TEXT, "name": "blocks.0.attn.pattern"}
        answer = client.post("/api/stage", json=body)
        assert answer.status_code == 200 and reached == []
        assert (unpack(answer.json()["value"]) - expected).abs().max() <= 1 / 510 + 1e-6
        assert client.post("/api/stage", json={**body, "name": "logits"}).status_code == 200
        assert reached == [1]
    finally:
        handle.remove()


def test_the_page_preloads_every_module_it_imports(client):
    """One modulepreload per module main.js imports, directly or not (katex too): a fresh
    browser asks for them all at once instead of one wave of imports after another."""
    import re

    page = client.get("/").text
    preloaded = re.findall(r'<link rel="modulepreload" href="static/([^"]+)">', page)
    assert (
        "js/main.js" in preloaded
        and "js/walk/stage_detail.js" in preloaded
        and "vendor/katex/katex.mjs" in preloaded
    )
    static = Path(create_app.__globals__["STATIC"])
    from glassformer.viz.modules import SHARED

    shared = {f"viz/{name}" for name in SHARED}  # the modules the notebook views inline too
    on_disk = {str(p.relative_to(static)) for p in static.glob("js/**/*.js")}
    not_main = {
        "js/lab/lab.js",
        "js/lab/lab_charts.js",
        "js/lab/lab_film.js",
        "js/lab/lab_pace.js",
        "js/lessons/lessons.js",
        "js/teach.js",
    }
    assert set(preloaded) == (on_disk - not_main) | shared | {"vendor/katex/katex.mjs"}
    for path in preloaded:
        assert client.get(f"/static/{path}").status_code == 200


def test_a_long_walk_leaves_the_attention_maps_to_the_stage_route():
    """Past SHORT_INPUT tokens the walk does not capture scores and weights (attention keeps
    its fused path); it sends their shapes, and /api/stage their values."""
    from glassformer.workshop.walk.payload import SHORT_INPUT

    lm = char_lm(positions="rope", max_seq_len=2 * SHORT_INPUT)
    text = ("the cat sat. " * 12)[: SHORT_INPUT + 6]
    t = len(text)
    trace = lm.trace(text, ["blocks.1.attn.pattern", "logits"])
    with workshop_client(create_app({"long": lm})) as client:
        answer = walk(client, model="long", text=text, temperature=0)
        by_id = {s["id"]: s for s in answer["stages"]}
        assert by_id["blocks.0.attn.pattern"]["value"] == {"shape": [lm.config.n_heads, t, t]}
        assert by_id["blocks.0.attn.scores"]["value"] == {"shape": [lm.config.n_heads, t, t]}
        assert by_id["blocks.0.attn.z"]["value"]["max"] is not None  # every other step as before
        # the same pass, the same answer
        assert answer["prediction"]["token"]["id"] == int(trace["logits"][0, -1].argmax())
        body = {"model": "long", "text": text, "name": "blocks.1.attn.pattern"}
        full = unpack(client.post("/api/stage", json=body).json()["value"])
        assert (full - trace["blocks.1.attn.pattern"][0]).abs().max() <= 1 / 510 + 1e-6
