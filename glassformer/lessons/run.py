"""Run one lesson top to bottom as a notebook, as the tests do; print what each cell printed.

    python -m glassformer.lessons.run glassformer/lessons/03-attention-from-similarity.md
    python -m glassformer.lessons.run 3

The notebook runs in a fresh ``python3`` kernel (the interpreter running this, via
ipykernel) inside a temporary directory, with a time limit per cell. The first cell that
fails stops the run: its source and its error are printed and the exit status is 1.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

from glassformer.lessons.catalog import Lesson, lesson, to_notebook

ANSI = re.compile(r"\x1b\[[0-9;]*m")


class LessonFailed(RuntimeError):
    """A cell of a lesson raised: which cell, its source, the error, and the notebook as far
    as it ran (``notebook``)."""

    def __init__(self, item: Lesson, index: int, source: str, error: str, notebook) -> None:
        self.lesson, self.index, self.source, self.error, self.notebook = item, index, source, error, notebook
        super().__init__(f"{item.path.name}: code cell {index} failed\n{_indent(source)}\n{error}")


class LessonCancelled(RuntimeError):
    """The run was cancelled (its page left): its kernel was killed."""


def execute(
    item: Lesson | int | str | Path,
    cwd: str | Path,
    timeout: int = 120,
    notebook=None,
    cancel: threading.Event | None = None,
):
    """Execute every cell of a lesson in a new python3 kernel whose working directory is
    ``cwd``; each cell may run ``timeout`` seconds. -> the executed `nbformat.NotebookNode`.
    ``notebook``: run this notebook of the lesson instead of a fresh `to_notebook` (the
    tests run the exported file). Raises `LessonFailed` at the first failing cell, and
    `LessonCancelled` soon after ``cancel`` is set (the kernel is killed, mid-cell too)."""
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, CellTimeoutError

    item = item if isinstance(item, Lesson) else lesson(item)
    notebook = to_notebook(item) if notebook is None else notebook
    cancel = cancel or threading.Event()
    done = threading.Event()

    def watch_kernel(notebook) -> None:  # nbclient's hook: the kernel has started
        pid = getattr(getattr(client.km, "provisioner", None), "pid", None)

        def kill_when_cancelled() -> None:
            while not done.wait(0.1):
                if cancel.is_set() and pid is not None:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                    return

        threading.Thread(target=kill_when_cancelled, name="lesson-cancel", daemon=True).start()

    def stop_if_cancelled(cell, cell_index) -> None:  # nbclient's hook, before each cell
        if cancel.is_set():
            raise LessonCancelled(f"{item.path.name}: cancelled before code cell {cell_index}")

    client = NotebookClient(
        notebook,
        timeout=timeout,
        kernel_name="python3",
        resources={"metadata": {"path": str(cwd)}},
        on_notebook_start=watch_kernel,
        on_cell_start=stop_if_cancelled,
    )
    try:
        client.execute(env=_kernel_environment())
    except Exception as error:
        if cancel.is_set():  # a killed kernel fails in nbclient's own words: the cause is ours
            raise LessonCancelled(f"{item.path.name}: cancelled") from None
        if not isinstance(error, (CellExecutionError, CellTimeoutError)):
            raise
        index, cell = _failed_cell(notebook)
        detail = _error_text(cell) if cell is not None else ANSI.sub("", str(error))
        raise LessonFailed(item, index, cell.source if cell else "", detail, notebook) from None
    finally:
        done.set()
    return notebook


def _kernel_environment() -> dict[str, str]:
    """This process's environment for the kernel, less one warning: tqdm's notebook progress
    bar asks for ipywidgets, which a lesson does not need (its text bar works)."""
    import os

    ignored = "ignore:IProgress not found"
    warnings = os.environ.get("PYTHONWARNINGS")
    return {**os.environ, "PYTHONWARNINGS": f"{warnings},{ignored}" if warnings else ignored}


def code_cells(notebook) -> list:
    """The code cells of a notebook, in order (the numbering `LessonFailed` uses, from 1)."""
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def _failed_cell(notebook):
    """(number, cell) of the cell with an error output, else of the last one that started."""
    cells = code_cells(notebook)
    for number, cell in enumerate(cells, start=1):
        if any(output.output_type == "error" for output in cell.get("outputs", ())):
            return number, cell
    started = [n for n, cell in enumerate(cells, start=1) if cell.get("execution_count")]
    number = started[-1] if started else 1
    return number, cells[number - 1] if cells else None


def _error_text(cell) -> str:
    errors = [output for output in cell.get("outputs", ()) if output.output_type == "error"]
    if not errors:
        return "the cell did not finish (time limit)"
    error = errors[0]
    return ANSI.sub("", "\n".join(error.traceback)) or f"{error.ename}: {error.evalue}"


def output_text(cell) -> str:
    """What a code cell showed, as text: its streams, results and displays (images named)."""
    parts = []
    for output in cell.get("outputs", ()):
        if output.output_type == "stream":
            parts.append(output.text.rstrip("\n"))
        elif output.output_type in ("execute_result", "display_data"):
            data = output.get("data", {})
            if "text/plain" in data and not any(key.startswith("image/") for key in data):
                parts.append(data["text/plain"])
            else:
                parts.append("[" + ", ".join(sorted(data)) + "]")
        elif output.output_type == "error":
            parts.append(f"{output.ename}: {output.evalue}")
    return "\n".join(parts)


def print_outputs(notebook, file=None) -> None:
    """Each code cell's number, then what it printed (to ``file``, standard output by default)."""
    file = file or sys.stdout
    for number, cell in enumerate(code_cells(notebook), start=1):
        if cell.get("execution_count") is None and not cell.get("outputs"):
            continue  # never ran (after the failing cell)
        text = output_text(cell)
        print(f"── cell {number} " + "─" * 40, file=file)
        if text:
            print(text, file=file)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m glassformer.lessons.run",
        description="Run a lesson top to bottom in a fresh kernel (cwd: a temporary directory) and print "
        "each cell's output; exit 1 at the first failing cell, showing its source and its error.",
    )
    parser.add_argument("lesson", help="a lesson file (NN-slug.md), or a lesson's number or slug")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per cell (default: 120)")
    args = parser.parse_args(argv)
    item = lesson(Path(args.lesson) if args.lesson.endswith(".md") else args.lesson)
    return run_and_report(item, args.timeout)


def run_and_report(item: Lesson, timeout: int = 120, verbose: bool = True, file=None) -> int:
    """Run ``item`` in a temporary directory and print how it went: each cell's output
    (``verbose``), then ``pass  NN-slug  S s`` or ``FAIL  NN-slug  S s`` with the failing
    cell's source and error. -> the exit status: 0 passed, 1 failed."""
    file = file or sys.stdout
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="glassformer-lesson-") as cwd:
        try:
            notebook = execute(item, cwd, timeout=timeout)
        except LessonFailed as failure:
            if verbose:
                print_outputs(failure.notebook, file)
            print(f"FAIL  {item.name}  {time.perf_counter() - start:.1f} s", file=file)
            print(failure, file=file)
            return 1
    if verbose:
        print_outputs(notebook, file)
    cells = len(code_cells(notebook))
    print(f"pass  {item.name}  {time.perf_counter() - start:.1f} s ({cells} code cells)", file=file)
    return 0


if __name__ == "__main__":
    sys.exit(main())
