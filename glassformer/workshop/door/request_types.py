"""Every request the workshop takes, as a typed object validated in one place (pydantic).

A route names its request type; `http.read_request` reads the body (JSON only, at most
`MAX_BODY_BYTES`, nested at most pydantic's JSON depth of 200) and validates it here:
types and ranges for every field, at float and int64 bounds, and no field the route does
not know. What the model decides (a token count, a layer index, a vocabulary id) is checked
where the model is known: `limits.py` and the library.

    PassRequest        {model, text, decoder_text?, generated?, interventions?, patch_text?};
                       a vision model's {model, pixels | sample, interventions?} (`images.py`)
    WalkRequest        a pass + the sampling fields (temperature, top_k, top_p, repetition_penalty, seed)
    StageRequest       a pass + name (a trace name)
    GenerateRequest    {model, text, max_new_tokens?, sampling fields}
    TokensRequest      {model, text}
    SimilarityRequest  {model, text, other}       two sentences for a sentence encoder
    ExplainRequest     {model, text, method, target?, keep_first?, samples?}
    AttentionChangeRequest {model, base, text, layer?, head?}
    RunRequest         {run}                      the lab's continue, a run opened as a model
    LabStartRequest    {preset, fields: {"train.steps": 300, ...}}   the lab's start, and its estimate
    ClassUpdate        any of {model, text, level, step, stage, zoom, panel, sampling}: a class's change
    PollGuess          {guess}: a guess at the next token in the class's poll (1..40 characters)
    ViewQuery, CostsQuery, EventsQuery, SourceQuery, SamplesQuery, ClassEventsQuery, QrQuery, NoQuery
                       the query strings of the GET routes
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, WithJsonSchema

from glassformer.workshop.walk.images import MAX_SIDE, read_pixels
from glassformer.workshop.walk.interventions import MAX_FACTOR

MAX_TEXT_CHARS = 20_000  # one text field; the token limit is the route's (`limits.py`)
MAX_NEW_TOKENS = 512  # most tokens one /api/generate makes
MAX_INTERVENTIONS = 64  # most heads one walk changes
MAX_NAME_CHARS = 200  # a model, stage, run, preset or source name
MAX_INDEX = 2**31 - 1  # a token id, layer, head or length: int32 is every model's range
MAX_SEED = 2**63 - 1  # torch.manual_seed takes an int64
MAX_LAB_FIELDS = 32
MAX_SAMPLES = 1000  # LIME's samples / SHAP's evaluations in one explanation
MIN_SAMPLES = 10

Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME_CHARS)]
Text = Annotated[str, StringConstraints(min_length=1, max_length=MAX_TEXT_CHARS)]
OptionalText = Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)] | None
Index = Annotated[int, Field(ge=0, le=MAX_INDEX)]
Number = Annotated[float, Field(allow_inf_nan=False, ge=-1e6, le=1e6)]
# an image: rows of numbers in [0, 1] or a packed array, read into a float32 array (`images.read_pixels`)
_PIXEL = {"type": "number", "minimum": 0, "maximum": 1}
_ROWS = {
    "type": "array",
    "maxItems": MAX_SIDE,
    "items": {"type": "array", "maxItems": MAX_SIDE, "items": _PIXEL},
}
_PACKED = {
    "type": "object",
    "properties": {
        "dtype": {"enum": ["float32", "uint8"]},
        "shape": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": MAX_SIDE}},
        "data": {"type": "string"},
    },
    "required": ["dtype", "shape", "data"],
}
Pixels = Annotated[
    Any,
    AfterValidator(read_pixels),
    WithJsonSchema({"anyOf": [_ROWS, {"type": "array", "maxItems": MAX_SIDE, "items": _ROWS}, _PACKED]}),
]


class Request(BaseModel):
    """A request body: strict JSON types (no "3" for 3, no true for 1), no unknown fields."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class Query(BaseModel):
    """A query string: every value arrives as text, so numbers are parsed (not strict)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class Intervention(Request):
    """One head changed: `interventions.HeadInterventions` checks it against the model."""

    layer: Index
    head: Index
    mode: Literal["zero", "mean", "scale", "patch"] = "zero"
    factor: Annotated[float, Field(allow_inf_nan=False, ge=-MAX_FACTOR, le=MAX_FACTOR)] | None = None


class Sampling(Request):
    """The sampling fields (absent or null: not set; `glassformer.sampling.generation_settings`)."""

    temperature: Annotated[float, Field(allow_inf_nan=False, ge=0, le=100)] | None = None
    top_k: Annotated[int, Field(ge=0, le=MAX_INDEX)] | None = None
    top_p: Annotated[float, Field(allow_inf_nan=False, gt=0, le=1)] | None = None
    repetition_penalty: Annotated[float, Field(allow_inf_nan=False, ge=1e-3, le=100)] | None = None
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)] | None = None

    def sampling(self) -> dict[str, float | int]:
        """The fields that were set."""
        return {
            key: getattr(self, key)
            for key in ("temperature", "top_k", "top_p", "repetition_penalty", "seed")
            if getattr(self, key) is not None
        }


class ModelText(Request):
    model: Name
    text: Text


class PassRequest(ModelText):
    """One forward pass (`pass_input.PassInput`): the walk's, a stage's, the lens's. A text
    model reads ``text``; a vision model an image, ``pixels`` or a held-out ``sample``
    (`images.py`): which one a model needs is checked where the model is known (`pass_input.read_pass`)."""

    text: Text | None = None
    pixels: Pixels | None = None
    sample: Index | None = None
    decoder_text: OptionalText = None
    generated: Annotated[list[Index], Field(max_length=MAX_NEW_TOKENS)] = []
    interventions: Annotated[list[Intervention], Field(max_length=MAX_INTERVENTIONS)] = []
    patch_text: OptionalText = None


class WalkRequest(Sampling, PassRequest):
    pass


class StageRequest(PassRequest):
    name: Name
    exact: bool = False  # attention weights as float32 (a table's numbers), not bytes (a map's)


class TokensRequest(ModelText):
    pass


class SimilarityRequest(ModelText):
    other: Text


class GenerateRequest(Sampling, ModelText):
    max_new_tokens: Annotated[int, Field(ge=1, le=MAX_NEW_TOKENS)] = 64


class ExplainRequest(ModelText):
    method: Name
    target: Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)] | Index | None = None
    keep_first: bool = False
    samples: Annotated[int, Field(ge=MIN_SAMPLES, le=MAX_SAMPLES)] | None = None


class AttentionChangeRequest(ModelText):
    base: Name
    layer: Index | None = None
    head: Index | None = None


def _run_name(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", name):
        raise ValueError(
            "must be the name of a run under the runs folder (letters, digits, . _ -), not a path"
        )
    return name


class RunRequest(Request):
    run: Annotated[str, StringConstraints(max_length=100), AfterValidator(_run_name)]


LabValue = Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)] | bool | int | Number


class LabStartRequest(Request):
    preset: Name
    fields: Annotated[
        dict[Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)], LabValue],
        Field(max_length=MAX_LAB_FIELDS),
    ] = {}


class Empty(Request):
    """A POST that carries no fields ({}): the lab's pause / resume / stop, a lesson's run."""


class ViewQuery(Query):
    model: Name
    text: Text
    layer: Index = 0
    head: Index = 0


class CostsQuery(Query):
    model: Name
    seq_len: Annotated[int, Field(ge=1, le=MAX_INDEX)] | None = None
    batch: Annotated[int, Field(ge=1, le=2**20)] = 1
    dtype: Name = "float32"


class SamplesQuery(Query):
    model: Name


class QuantizationQuery(Query):
    """A quantized model's numbers; with ``matrix``, that matrix's view (`model_quantization.py`),
    its window at block ``block`` of row ``row`` (both, or neither: the block of largest error)."""

    model: Name
    matrix: Name | None = None
    row: Index | None = None
    block: Index | None = None


class EventsQuery(Query):
    run: Annotated[str, StringConstraints(max_length=100)] = ""


class SourceQuery(Query):
    name: Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)] = ""


LEVELS = ("beginner", "intermediate", "advanced")


class ClassSampling(Request):
    """The sampling a class shows (`Sampling`'s fields the page's form sets); absent: not set."""

    temperature: Annotated[float, Field(allow_inf_nan=False, ge=0, le=100)] | None = None
    top_k: Annotated[int, Field(ge=0, le=MAX_INDEX)] | None = None
    top_p: Annotated[float, Field(allow_inf_nan=False, gt=0, le=1)] | None = None
    seed: Annotated[int, Field(ge=0, le=MAX_SEED)] | None = None


class ClassUpdate(Request):
    """A class's change (POST /api/class): the keys sent change, the others stay. A field
    absent is unchanged; null is refused where the state has no "none" (only ``stage`` and
    ``panel`` may be null: no step opened, no panel). Defaults are not validated, so an absent
    field reads None, and ``model_dump(exclude_unset=True)`` is what was sent."""

    model: Name = None  # one of the held models: checked where the models are known
    text: Annotated[str, StringConstraints(max_length=MAX_TEXT_CHARS)] = None
    level: Literal[LEVELS] = None
    step: Annotated[int, Field(ge=1, le=MAX_INDEX)] = None  # teaching mode's reveal: the steps shown
    stage: Name | None = None  # the step opened
    zoom: Annotated[str, StringConstraints(max_length=MAX_NAME_CHARS)] = None  # "" the model, "blocks.3"
    panel: Name | None = None
    sampling: ClassSampling = None


MAX_GUESS_CHARS = 40  # a guess at the next token: a word or two


class PollGuess(Request):
    """A guess in the class's poll (POST /api/class/guess): the text a student expects next,
    kept and shown as text (`classroom/poll.py` maps it to the model's token)."""

    guess: Annotated[str, StringConstraints(min_length=1, max_length=MAX_GUESS_CHARS)]


class ClassEventsQuery(Query):
    following: Literal["0", "1"] = "0"  # 1: this page follows the teacher (counted as following)


class QrQuery(Query):
    at: Annotated[str, StringConstraints(max_length=40)] = ""  # a page's cache-buster (a time), ignored


class NoQuery(Query):
    """A GET route that takes no query: any key is refused by name."""
