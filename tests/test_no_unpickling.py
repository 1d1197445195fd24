"""Nothing in the package can run code hidden in data: no call that unpickles or evaluates.

Every file the package reads (a run folder, a model's files, a request's body) may come from
someone else. This reads the package's source and fails on any call that could execute what
such a file holds: ``pickle.load(s)``, ``torch.load`` without ``weights_only=True``, DCP's own
``load`` (it unpickles ``.metadata``: `glassformer.train.dcp_manifest` is the one reader, with
its manifest and a weights-only planner), ``numpy.load(allow_pickle=True)``, ``yaml.load``,
``marshal``, ``shelve``, and the builtins ``eval`` / ``exec`` / ``compile``."""

from __future__ import annotations

import ast
from pathlib import Path

import glassformer

PACKAGE = Path(glassformer.__file__).parent
UNPICKLING = {
    ("pickle", "load"),
    ("pickle", "loads"),
    ("pickle", "Unpickler"),
    ("marshal", "load"),
    ("marshal", "loads"),
    ("shelve", "open"),
    ("yaml", "load"),
    ("yaml", "unsafe_load"),
    ("joblib", "load"),
    ("dill", "load"),
    ("dill", "loads"),
}
EVALUATING = {"eval", "exec", "compile", "__import__"}
# the one reviewed place each risky reader is called from: (file, call) -> why it is safe
REVIEWED = {
    ("train/dcp_manifest.py", "dcp.load"): "metadata from our JSON manifest, values weights-only",
}


def _dotted(node: ast.AST) -> str:
    """``a.b.c`` of a call's function, "" for anything else."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    return ""


def _keyword(call: ast.Call, name: str):
    for keyword in call.keywords:
        if keyword.arg == name and isinstance(keyword.value, ast.Constant):
            return keyword.value.value
    return None


def risky_calls(source: str, where: str) -> list[str]:
    """The calls in ``source`` that could execute what a file holds, as "where:line: call"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        parts = tuple(name.split("."))
        risky = (
            parts[-2:] in UNPICKLING
            or (name in EVALUATING)
            or (parts[-1] == "load" and parts[0] == "torch" and _keyword(node, "weights_only") is not True)
            or (parts[-1] == "load" and parts[0] in ("np", "numpy") and _keyword(node, "allow_pickle"))
            or name in ("dcp.load", "torch.distributed.checkpoint.load", "FileSystemReader")
        )
        if risky and (where, name) not in REVIEWED:
            found.append(f"{where}:{node.lineno}: {name}(...)")
    return found


def test_the_package_never_unpickles_or_evaluates():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        found += risky_calls(path.read_text(encoding="utf-8"), path.relative_to(PACKAGE).as_posix())
    assert not found, "calls that could run code held in a file:\n" + "\n".join(found)


def test_the_scan_finds_each_kind():
    """The scan itself: each risky call is found, its safe form is not."""
    risky = [
        "pickle.load(f)",
        "pickle.loads(b)",
        "torch.load(p)",
        "torch.load(p, weights_only=False)",
        "dcp.load(state, checkpoint_id=p)",
        "np.load(p, allow_pickle=True)",
        "eval(text)",
        "exec(code)",
        "yaml.load(text)",
    ]
    for call in risky:
        assert risky_calls(call, "x.py"), call
    safe = ("torch.load(p, weights_only=True)", "np.load(p)", "json.loads(s)", "net.eval()")
    for call in safe:
        assert not risky_calls(call, "x.py"), call
