"""Where a block's norms sit is decoded once, by `ModelConfig`'s capabilities (`norm_on_input`,
`norm_on_output`, `norm_after_add`, `has_final_norm`); the blocks, the stack, the words, the page's
summary and its scripts ask those, never the `norm_placement` string (issue 29, one home per fact)."""

import re
from pathlib import Path

import pytest

from glassformer.config import ModelConfig
from glassformer.workshop.walk.architecture import summary

NAMES = ("norm_on_input", "norm_on_output", "norm_after_add", "has_final_norm")


@pytest.mark.parametrize(
    ("placement", "expected"),
    [
        ("pre", (True, False, False, True)),  # x + f(N(x)), then a final N
        ("post", (False, False, True, False)),  # N(x + f(x)), no final N
        ("sandwich", (True, True, False, True)),  # x + N2(f(N(x))) (Gemma 2, 3)
        ("output", (False, True, False, True)),  # x + N2(f(x)) (OLMo 2)
    ],
)
def test_each_placement_says_where_its_norms_sit(placement, expected):
    config = ModelConfig(n_layers=1, norm_placement=placement)
    assert tuple(getattr(config, name) for name in NAMES) == expected
    capabilities = summary(config)["capabilities"]  # what the page reads
    assert tuple(capabilities[name] for name in NAMES) == expected


# `x.placement == "post"`, `norm_placement in (...)`, `"pre" === arch.placement`; not `replacement`
PLACEMENT_TEST = re.compile(
    r"(?<![A-Za-z])placement\s*(?:[!=]==?|(?:not\s+)?in\b)"
    r"|[\"'](?:pre|post|sandwich|output)[\"']\s*[!=]==?\s*[\w.]*(?<![A-Za-z])placement\b"
)
# where the string is the fact itself: the config, its checks, the files' readers and writers
ALLOWED = ("glassformer/config.py", "glassformer/config_checks.py", "glassformer/formats/")
# files still to convert to the capabilities, with their count: none may be added
PENDING: dict[str, int] = {}


def test_callers_ask_where_the_norms_sit_not_the_placement_name():
    root = Path(__file__).resolve().parents[1]
    sources = [*root.glob("glassformer/**/*.py"), *root.glob("glassformer/workshop/static/js/**/*.js")]
    counts = {str(p.relative_to(root)): len(PLACEMENT_TEST.findall(p.read_text())) for p in sources}
    found = {path: n for path, n in counts.items() if n}
    outside = {path: n for path, n in found.items() if not path.startswith(ALLOWED)}
    assert {path: n for path, n in outside.items() if n > PENDING.get(path, 0)} == {}
    assert found.get("glassformer/config.py", 0) >= 3  # the capabilities themselves


def test_the_scan_sees_both_languages_and_both_orders():
    tests = ['config.norm_placement != "post"', 'arch.placement === "pre"', '"post" !== x.placement']
    assert [len(PLACEMENT_TEST.findall(line)) for line in tests] == [1, 1, 1]
    assert not PLACEMENT_TEST.findall('if replacement == "remove":')
