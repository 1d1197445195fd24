"""Every route driven with generated requests: no answer is a 5xx, and no answer breaks mid-way.

Two kinds of body per route, from hypothesis:

* **from the route's own schema** (`request_types`, through pydantic's JSON schema, drawn
  by `from_schema` below): every field of the right type and range, so the request reaches
  the library (a layer past the model's last, a vocabulary id it lacks, a text it cannot
  read, an encoder asked to generate); the model named is one of the server's most of the
  time, and the text drawn from the models' alphabet;
* **anything JSON**: the route's field names with any values, nested, huge or odd.

Decoder, encoder and encoder-decoder models are served, with the lab's runs under a temporary
root. The test prints how many requests it sent and the status codes it saw. The requests are
the same every run (a test suite must not fail by chance); ``GLASSFORMER_FUZZ_RANDOM=1``
draws new ones, as a search for bugs (it found a temperature of 2.2e-311 answered 500).
"""

from __future__ import annotations

import collections
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from glassformer.inspect.explain_methods import METHODS
from glassformer.workshop.door import request_types as rt
from glassformer.workshop.server import create_app
from tests.conftest import workshop_client
from tests.test_workshop_api import ALPHABET, char_lm

EXAMPLES = 60  # per route and kind of body: 17 routes x 2 x 60 = 2,040 requests (~1 min)
ROUTES = [  # (method, path, request type); the lessons' run is left out: it starts a kernel
    ("post", "/api/walk", rt.WalkRequest),
    ("post", "/api/stage", rt.StageRequest),
    ("post", "/api/lens", rt.PassRequest),
    ("post", "/api/tokens", rt.TokensRequest),
    ("post", "/api/similarity", rt.SimilarityRequest),
    ("post", "/api/explain", rt.ExplainRequest),
    ("post", "/api/generate", rt.GenerateRequest),
    ("post", "/api/attention_change", rt.AttentionChangeRequest),
    ("post", "/api/lab/open", rt.RunRequest),
    ("post", "/api/lab/continue", rt.RunRequest),
    ("post", "/api/lab/estimate", rt.LabStartRequest),
    ("post", "/api/lab/start", rt.LabStartRequest),
    ("post", "/api/lab/stop", rt.Empty),
    ("get", "/views/head", rt.ViewQuery),
    ("get", "/views/neuron", rt.ViewQuery),
    ("get", "/api/costs", rt.CostsQuery),
    ("get", "/api/source", rt.SourceQuery),
    ("get", "/api/lab/events", rt.EventsQuery),
]
MODELS = ["llama", "bert", "t5"]
STAGES = ["blocks.0.attn.pattern", "blocks.1.ffn.out", "embed.out", "logits", "encoder.blocks.0.attn.q"]
SEEN: collections.Counter = collections.Counter()

texts = st.text(alphabet=ALPHABET, min_size=1, max_size=40)
json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    models = {
        "llama": char_lm(positions="rope", norm="rmsnorm", activation="swiglu", n_kv_heads=2),
        "bert": char_lm(family="encoder", norm_placement="post"),
        "t5": char_lm(family="encoder_decoder", positions="t5_relative", decoder_start_token_id=0),
    }
    app = create_app(models, runs_root=tmp_path_factory.mktemp("runs"))
    with workshop_client(app) as client:
        yield client
    print(f"\nfuzzed {sum(SEEN.values()):,} requests; status codes seen: {dict(sorted(SEEN.items()))}")
    stopped = client.post("/api/lab/stop", json={})  # in case a generated start was a real one
    assert stopped.status_code in (200, 400)


def from_schema(schema: dict, defs: dict | None = None) -> st.SearchStrategy:
    """Values a JSON schema (the subset pydantic writes for `request_types`) accepts, bounds
    included: hypothesis draws the edges (0, the maximum, the longest string) often."""
    defs = schema.get("$defs", {}) if defs is None else defs
    if "$ref" in schema:
        return from_schema(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
    if "anyOf" in schema:
        return st.one_of([from_schema(option, defs) for option in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "object" and "properties" in schema:
        required = set(schema.get("required", ()))
        fields = {name: from_schema(s, defs) for name, s in schema["properties"].items()}
        return st.fixed_dictionaries(
            {k: v for k, v in fields.items() if k in required},
            optional={k: v for k, v in fields.items() if k not in required},
        )
    if kind == "object":
        values = from_schema(schema.get("additionalProperties", {}), defs)
        return st.dictionaries(st.text(max_size=20), values, max_size=schema.get("maxProperties", 4))
    if kind == "array":
        return st.lists(from_schema(schema["items"], defs), max_size=min(schema.get("maxItems", 8), 8))
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False)
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True).filter(lambda s: len(s) <= 100)
        return st.text(min_size=schema.get("minLength", 0), max_size=min(schema.get("maxLength", 50), 50))
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return json_values  # no type: any JSON


def schema_bodies(kind) -> st.SearchStrategy[dict]:
    """Valid bodies of ``kind``, naming a served model and readable text most of the time."""
    schema = kind.model_json_schema()
    real = st.fixed_dictionaries(
        {
            "model": st.sampled_from(MODELS),
            "base": st.sampled_from(MODELS),
            "text": texts,
            "method": st.sampled_from(METHODS),
            "name": st.sampled_from(STAGES),
        }
    )

    def aim(body: dict, values: dict, aimed: bool) -> dict:
        """The body with the names and text it has made real (when ``aimed``)."""
        return {**body, **{k: v for k, v in values.items() if k in body}} if aimed else body

    return st.builds(aim, from_schema(schema), real, st.booleans())


def any_bodies(kind) -> st.SearchStrategy[dict]:
    """The fields of ``kind`` (and one more) with any JSON values."""
    keys = st.sampled_from([*kind.model_fields, "extra"])
    return st.dictionaries(keys, json_values, max_size=len(kind.model_fields) + 1)


def send(client, method: str, path: str, body: dict) -> int:
    if method == "get":
        params = {k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()}
        if path == "/api/lab/events":  # a stream that follows a run: only its refusals end
            params["run"] = "no-such-run-" + str(params.get("run", ""))[:20]
        answer = client.get(path, params=params)
    else:
        answer = client.post(path, content=json.dumps(body), headers={"Content-Type": "application/json"})
    SEEN[answer.status_code] += 1
    assert answer.status_code < 500, (path, body, answer.text[:500])
    if answer.status_code >= 400:
        assert "error" in answer.json(), answer.text[:200]
    return answer.status_code


@pytest.mark.parametrize(("method", "path", "kind"), ROUTES, ids=[r[1] for r in ROUTES])
def test_no_generated_request_gets_a_5xx(client, method, path, kind):
    strategy = st.one_of(schema_bodies(kind), any_bodies(kind))
    if path in ("/api/lab/start", "/api/lab/estimate"):  # a real preset would train, or time its steps
        strategy = strategy.filter(lambda body: body.get("preset") not in ("induction", "shakespeare-char"))

    @settings(
        max_examples=EXAMPLES * 2,
        deadline=None,
        database=None,
        derandomize=not os.environ.get("GLASSFORMER_FUZZ_RANDOM"),  # CI: the same requests every run
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(body=strategy)
    def fuzz(body):
        send(client, method, path, body)

    fuzz()
