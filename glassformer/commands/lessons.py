"""``glassformer lessons [show N | export DIR | run N]``: the course's lessons."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "lessons",
        help="list the lessons; show, run or export them as notebooks",
        description="The course as lessons: Markdown files whose code computes and checks every claim. "
        "With no action, list them (number, title, summary).",
        epilog="examples:\n  glassformer lessons\n  glassformer lessons show 3\n"
        "  glassformer lessons run attention-from-similarity\n  glassformer lessons export notebooks/",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.set_defaults(handler=run_list)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    show = actions.add_parser(
        "show", help="print a lesson's Markdown", description="Print a lesson's Markdown text as it is."
    )
    show.add_argument("lesson", help="the lesson's number or slug (see `glassformer lessons`)")
    show.set_defaults(handler=run_show)
    export = actions.add_parser(
        "export",
        help="write every lesson as a Jupyter notebook (NN-slug.ipynb)",
        description="Write every lesson as NN-slug.ipynb into DIR (made if missing; other files there are "
        "left alone). Open them in Jupyter: each runs top to bottom.",
    )
    export.add_argument("directory", help="where to write the notebooks")
    export.set_defaults(handler=run_export)
    execute = actions.add_parser(
        "run",
        help="run one lesson top to bottom and report pass or fail",
        description="Run a lesson as a notebook in a fresh kernel (in a temporary directory) and report "
        "whether every cell ran and every assertion held, and how long it took. "
        "--verbose prints each cell's output.",
    )
    execute.add_argument("lesson", help="the lesson's number, slug, or a lesson file (NN-slug.md)")
    execute.add_argument("--timeout", type=int, default=120, help="seconds allowed per cell (default: 120)")
    execute.add_argument("--verbose", "-v", action="store_true", help="print every cell's output")
    execute.set_defaults(handler=run_lesson)


def run_list(args: argparse.Namespace) -> int:
    from glassformer.lessons import lessons

    items = lessons()
    if not items:
        print("no lessons found")
        return 0
    for item in items:
        print(f"{item.number:2d}. {item.title}")
        print(f"    {item.summary}")
    print("\n`glassformer lessons show N` prints one; `glassformer lessons export DIR` writes notebooks.")
    return 0


def run_show(args: argparse.Namespace) -> int:
    from glassformer.lessons import lesson

    print(lesson(args.lesson).text, end="")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from glassformer.lessons import export

    written = export(args.directory)
    for path in written:
        print(path)
    print(f"wrote {len(written)} notebooks to {Path(args.directory).resolve()}")
    return 0


def run_lesson(args: argparse.Namespace) -> int:
    from glassformer.lessons import lesson
    from glassformer.lessons.run import run_and_report

    item = lesson(Path(args.lesson) if args.lesson.endswith(".md") else args.lesson)
    return run_and_report(item, args.timeout, verbose=args.verbose)
