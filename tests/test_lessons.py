"""The lessons: every file parses, its links resolve, and it runs top to bottom.

The execution test is the CI gate of the course: each lesson of `glassformer.lessons` is
exported as a notebook and that notebook is executed in a fresh kernel (cwd: a temporary
directory); a failing cell or assertion fails the suite. A new lesson file is picked up
by the parametrization without any change here.
"""

from __future__ import annotations

import re
import time

import nbformat
import pytest

import glassformer as gf
from glassformer.cli import main
from glassformer.config import llama_style
from glassformer.formats.registry import REGISTRY
from glassformer.lessons import export, lesson, lessons, links, resolve_code, to_notebook
from glassformer.lessons.run import LessonFailed, code_cells, execute
from glassformer.lessons.run import main as run_main
from glassformer.workshop.walk.architecture import stages

LESSONS = lessons()
IDS = [item.name for item in LESSONS]

# one small config per family (and the Llama-style decoder's RoPE, gate and RMSNorm):
# a walk: link must name a stage at least one of them has
FAMILIES = [
    gf.ModelConfig(family="decoder", vocab_size=64, d_model=16, n_layers=2, n_heads=2),
    gf.ModelConfig(family="encoder", vocab_size=64, d_model=16, n_layers=2, n_heads=2),
    gf.ModelConfig(
        family="encoder_decoder", vocab_size=64, d_model=16, n_layers=2, n_heads=2, positions="t5_relative"
    ),
    llama_style(vocab_size=64, d_model=16, n_layers=2, n_heads=2, n_kv_heads=1),
    llama_style(vocab_size=64, d_model=16, n_layers=2, n_heads=2, n_experts=4),  # a mixture of experts
]
STAGE_IDS = {stage["id"] for config in FAMILIES for stage in stages(gf.build(config))}


def test_the_course_has_lessons_numbered_once():
    assert len(LESSONS) >= 3, "glassformer/lessons/ should hold the course's lessons"
    numbers = [item.number for item in LESSONS]
    assert len(set(numbers)) == len(numbers), f"two lessons share a number: {numbers}"


@pytest.mark.parametrize("item", LESSONS, ids=IDS)
def test_lesson_has_title_summary_and_code(item):
    assert item.title and item.summary, f"{item.path.name}: a title line and a one-sentence summary"
    assert item.text.startswith(f"# {item.number}. {item.title}\n")
    assert not item.text.startswith("---"), "no YAML front matter"
    notebook = to_notebook(item)
    nbformat.validate(notebook)
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    blocks = re.findall(r"^```python\n(.*?)^```$", item.text, re.S | re.M)
    assert [cell.source.strip() for cell in code_cells(notebook)] == [block.strip() for block in blocks]
    assert blocks and "assert" in item.text, "a lesson computes and checks its claims"


@pytest.mark.parametrize("item", LESSONS, ids=IDS)
def test_lesson_links_resolve(item):
    for kind, target, label in links(item):
        if kind == "code":
            assert callable(resolve_code(target)), f"{item.path.name}: [{label}](code:{target})"
        else:
            stage, _, query = target.partition("?")
            assert stage in STAGE_IDS, (
                f"{item.path.name}: [{label}](walk:{target}) names no stage of the walk; "
                f"stages: {sorted(STAGE_IDS)}"
            )
            if query:
                key, _, model = query.partition("=")
                assert key == "model" and model in REGISTRY, f"{item.path.name}: walk:{target}"


def test_resolve_code_and_lesson_lookup_say_what_is_wrong():
    from glassformer.nn.masks import build_mask

    assert resolve_code("glassformer.nn.masks.build_mask") is build_mask
    with pytest.raises(ValueError, match="has no attribute path"):
        resolve_code("glassformer.nn.masks.no_such_thing")
    with pytest.raises(ValueError, match="no importable module"):
        resolve_code("no_such_package.thing")
    first = LESSONS[0]
    assert lesson(first.number) == lesson(f"{first.number:02d}") == lesson(first.slug) == first
    with pytest.raises(ValueError, match=f"(?s)the lessons are.*{first.slug}"):
        lesson("no-such-lesson")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    folder = tmp_path_factory.mktemp("notebooks")
    return {path.stem: path for path in export(folder)}


def test_export_writes_one_notebook_per_lesson(exported):
    assert sorted(exported) == sorted(item.name for item in lessons())
    for path in exported.values():
        nbformat.validate(nbformat.read(path, as_version=4))


@pytest.mark.parametrize("item", LESSONS, ids=IDS)
def test_lesson_runs_top_to_bottom(item, exported, tmp_path):
    """The exported notebook, executed cell by cell; every assertion in it must hold."""
    notebook = nbformat.read(exported[item.name], as_version=4)
    start = time.perf_counter()
    try:
        done = execute(item, tmp_path, notebook=notebook)
    except LessonFailed as failure:
        pytest.fail(str(failure), pytrace=False)
    print(f"{item.name}: {time.perf_counter() - start:.1f} s")
    cells = code_cells(done)
    assert cells and all(cell.execution_count for cell in cells)
    assert not any(output.output_type == "error" for cell in cells for output in cell.outputs)


def test_cli_lists_shows_and_exports(tmp_path, capsys):
    assert main(["lessons"]) == 0
    listing = capsys.readouterr().out
    for item in LESSONS:
        assert f"{item.number:2d}. {item.title}" in listing and item.summary in listing
    assert main(["lessons", "show", LESSONS[0].slug]) == 0
    assert capsys.readouterr().out == LESSONS[0].text
    assert main(["lessons", "show", "99"]) == 2
    assert "no lesson '99'" in capsys.readouterr().err
    assert main(["lessons", "export", str(tmp_path / "out")]) == 0
    written = sorted(p.stem for p in (tmp_path / "out").glob("*.ipynb"))
    assert f"wrote {len(written)} notebooks" in capsys.readouterr().out
    assert written == sorted(item.name for item in lessons())  # read now: lessons may be added meanwhile


TINY = (
    "# 98. Tiny\n\nA lesson of two cells.\n\n"
    "```python\nx = 6 * 7\nprint(x)\n```\n\n```python\nassert x == {}\n```\n"
)


def test_cli_run_reports_pass_and_the_failing_cell(tmp_path, capsys):
    passing = tmp_path / "98-tiny.md"
    passing.write_text(TINY.format(42))
    assert main(["lessons", "run", str(passing), "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "42" in out and re.search(r"pass  98-tiny  \d+\.\d s", out)

    failing = tmp_path / "broken" / "98-tiny.md"
    failing.parent.mkdir()
    failing.write_text(TINY.format(41))
    assert run_main([str(failing)]) == 1
    out = capsys.readouterr().out
    assert re.search(r"FAIL  98-tiny  \d+\.\d s", out) and "98-tiny.md: code cell 2 failed" in out
    assert "assert x == 41" in out and "AssertionError" in out
