"""``glassformer workshop [MODEL ...] [--port 8765] [--host 127.0.0.1] [--no-browser]``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from glassformer.commands.runs import RUNS_ROOT

DEFAULT_MODELS = ("smollm2-135m-instruct", "minilm-l6")
LOCAL = ("127.0.0.1", "localhost", "::1")


def register(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "workshop",
        help="the workshop: walk through a real model's forward pass in the browser",
        description="Serve the workshop, a local web page that walks through one real forward pass of a "
        "model, from the tokens to the sampled token, with every number read from the pass. The models "
        "are loaded once, at start; the page can only choose among them.",
    )
    parser.add_argument(
        "models",
        nargs="*",
        metavar="MODEL",
        help="registry name, run directory, HF checkpoint directory or .gguf file (default: "
        f"{' and '.join(DEFAULT_MODELS)}, plus every run under {RUNS_ROOT}/)",
    )
    parser.add_argument("--port", type=int, default=8765, help="port to serve on (default: 8765)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)"
    )
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.set_defaults(handler=run)


def model_names(named: list[str], runs_root: Path = RUNS_ROOT) -> list[str]:
    """What to load: the models named, or the defaults and every run directory under runs/."""
    if named:
        return named
    runs = sorted(str(p.parent) for p in runs_root.glob("*/train_config.json")) if runs_root.is_dir() else []
    return [*DEFAULT_MODELS, *runs]


def run(args: argparse.Namespace) -> int:
    import uvicorn

    from glassformer.loading import load
    from glassformer.workshop.attention_change import origin
    from glassformer.workshop.server import create_app

    if not 0 < args.port < 65536:
        raise ValueError(f"--port {args.port} is not a port number (1..65535)")
    models = {}
    for name in model_names(args.models):
        print(f"loading {name} ...", flush=True)
        models[name] = load(name)
    if args.host not in LOCAL:
        print(f"warning: --host {args.host} serves the workshop to other machines too", file=sys.stderr)
    url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{args.port}/"
    print(f"the workshop is at {url}  (Ctrl-C stops it)", flush=True)
    if not args.no_browser:
        import webbrowser

        webbrowser.open(url)
    origins = {name: origin(name) for name in models if origin(name) in models}  # a fine-tuned run's base
    app = create_app(models, runs_root=RUNS_ROOT, origins=origins)  # the lab's runs: runs/, as the CLI's
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0
