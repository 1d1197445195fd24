r"""The page parses no stage name: `architecture.name_parts` is the one parser, on the server, and
each stage of the payload carries what its name says (stack, layer, kind, cross).

The scan reads every module the page imports (`module_graph.imported`, as the page is
preloaded) and looks for the ways a name was taken apart on the page: a `parseStage`; a split,
a regular expression or a string test applied to a stage's id or trace (``stage.id.split(".")``,
``trace?.match(/...attn/)``, ``s.id.endsWith("embed.out")``, ``stage.id.replace(/\.pattern$/, "")``);
a regular expression that reads an attention's name out of a path (``/\.(attn|cross_attn)$/``).
Group names and the overview's zoom text are not stage names: the zoom is read by matching the
stages (overview_zoom.js), not by taking it apart.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import glassformer as gf
from glassformer.workshop.module_graph import imported
from glassformer.workshop.walk import architecture
from glassformer.workshop.walk.architecture import stages
from tests.conftest import tiny

PACKAGE = Path(gf.__file__).parent
ROOTS = {"": PACKAGE / "workshop" / "static", "viz/": PACKAGE / "viz" / "assets"}

# a stage's name taken apart: stage.id.split(...), s.trace?.match(...), stageId.split(...),
# trace.match(...), /re/.test(stage.id), /re/.exec(trace)
_NAME = r"(?:\b\w+\.(?:id|trace)|\bstageId|\btrace)"
TAKEN_APART = [
    re.compile(r"\bparseStage\b"),
    re.compile(_NAME + r"\??\.(?:split|match|matchAll)\("),
    re.compile(r"\.(?:test|exec)\(" + _NAME + r"\)"),
    # s.id.endsWith("embed.out"), stage.trace.startsWith(...), stage.id.replace(/\.pattern$/, "")
    re.compile(_NAME + r"\??\.(?:endsWith|startsWith|includes|replace|replaceAll|slice|(?:lastI|i)ndexOf)\("),
    re.compile(r"/[^/\n]*\(attn\|cross_attn\)"),  # /\.(attn|cross_attn)$/: an attention read out of a path
    re.compile(r"/[^/\n]*blocks\\\.\(\\d"),  # /blocks\.(\d+)\.resid_post$/: a block number read from a name
    re.compile(
        r"\b(?:id|last|name|layer)\??\.(?:endsWith|startsWith)\(\"(?:\w+\.)*(?:attn|ffn|embed|tour)\b"
    ),
]


def _page_modules() -> list[tuple[str, str]]:
    out = []
    for path in imported(ROOTS, "js/main.js"):
        prefix = max((p for p in ROOTS if path.startswith(p)), key=len)
        out.append((path, (ROOTS[prefix] / path[len(prefix) :]).read_text(encoding="utf-8")))
    return out


def test_the_scan_reads_the_page_and_catches_a_parser():
    modules = dict(_page_modules())
    assert {"js/main.js", "js/core/stages.js", "js/overview/overview.js", "js/walk/tour.js"} <= set(modules)
    for line in (
        "const { kind } = parseStage(stage.id);",
        'const [stack] = stage.id.split(".");',
        "return trace?.match(OPENS_ON)?.[1];",
        "if (/cross_attn/.test(stage.id)) return;",
        "const block = name.match(/blocks\\.(\\d+)\\.resid_post$/);",
        'row.layer.replace(/^.*blocks\\.(\\d+)\\.resid_post$/, "block $1")',
        'reveal.reached((id) => id.endsWith("attn.pattern"));',
        'if (upto < 0 && last.endsWith("tour.others")) {',
        'const stream = embed.stages.find((s) => s.id.endsWith("embed.out"));',
        'const base = stage.id.replace(/\\.pattern$/, "");',
        'if (stage.trace.endsWith(".scores") || stage.trace.endsWith(".capped")) return "scores";',
        'const base = /\\.(attn|cross_attn)$/.test(path) ? path : "";',
    ):
        assert any(p.search(line) for p in TAKEN_APART), line
    for line in (
        "const { kind, cross } = stage;",
        'const [path, head] = zoom.split(":");',
        'const letters = stage.shape.split(" ");',
        'const stream = embed.stages.find((s) => s.kind === "embed.out");',
        'if (kind.startsWith("attn.")) return "attn";',
        'return `${pattern.group}.${pattern.cross ? "cross_attn" : "attn"}`;',
    ):
        assert not any(p.search(line) for p in TAKEN_APART), line


def test_no_page_module_takes_a_stage_name_apart():
    found = [
        f"{path}:{number}: {line.strip()}"
        for path, source in _page_modules()
        for number, line in enumerate(source.splitlines(), 1)
        if any(p.search(line) for p in TAKEN_APART)
    ]
    assert not found, "the page reads stack, layer, kind and cross from the stage:\n" + "\n".join(found)


@pytest.mark.parametrize("family", ["decoder", "encoder_decoder"])
def test_each_stage_says_what_its_name_says(family):
    plan = stages(gf.build(tiny(family=family)))
    for stage in plan:
        if stage["trace"] is not None:  # a hook point: its name read by the one parser
            stack, layer, cross, kind = architecture.name_parts(stage["id"])
            said = (stage["stack"], stage["layer"], stage["cross"], stage["kind"])
            assert said == (stack, layer, cross, kind)
    masks = [s for s in plan if s["kind"] == "attn.mask"]
    assert masks and all(s["layer"] is not None and not s["cross"] for s in masks)
    assert plan[0] | {"stack": "", "layer": None, "kind": "tokens", "cross": False} == plan[0]
    assert any(s["cross"] for s in plan) == (family == "encoder_decoder")
