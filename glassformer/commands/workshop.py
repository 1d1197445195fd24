"""``glassformer workshop [MODEL ...] [--port 8765] [--host 127.0.0.1] [--token T] [--class] [--quantize KIND]
[--no-browser]``.

With ``--quantize q8_0`` (or q4_0, q4_1) each model is quantized as it is loaded
(`glassformer.quantized_model`): the walk is the quantized model's forward pass, and the page
shows each matrix's blocks and their errors.

With ``--class`` a class runs on this server (`glassformer.workshop.classroom`): besides its
usual lines the command prints the teacher's link (``teacher: ``, a login link that works once)
and the students' link (``students: ``, ``?token=<the students' token>``) with a QR code of it
for the projector; bound beyond this machine, it says what each link allows. With
``--broadcast redis://host:port`` several such workers (same ``--token``, ``--class``) behind
one address teach one class through that Redis (`glassformer.workshop.classroom.broadcast`)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

from glassformer.commands.arguments import HUB_ID_HELP, add_quantize_flag, quantize_weights
from glassformer.commands.runs import RUNS_ROOT

DEFAULT_MODELS = ("smollm2-135m-instruct", "minilm-l6")
EVERY_INTERFACE = ("0.0.0.0", "::", "")
TOKEN_VARIABLE = "GLASSFORMER_TOKEN"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")
GRACE_S = 2  # Ctrl-C: requests still running get this long, then they are stopped


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
        help="registry name, run directory, HF checkpoint directory, .gguf file (default: "
        f"{' and '.join(DEFAULT_MODELS)}, plus every run under {RUNS_ROOT}/), {HUB_ID_HELP}",
    )
    parser.add_argument("--port", type=int, default=8765, help="port to serve on (default: 8765)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to bind (default: 127.0.0.1, this machine only)"
    )
    parser.add_argument(
        "--token",
        default=None,
        help=f"the secret the page and scripts must show (default: ${TOKEN_VARIABLE}, else a new random one "
        "at each start). Fix it for a class so the links you share keep working across restarts; "
        "scripts send it as 'Authorization: token TOKEN'",
    )
    parser.add_argument(
        "--class",
        dest="classroom",
        action="store_true",
        help="teach a class on this server: prints a teacher's link and a students' link (with a QR "
        "code). The teacher's walk shows on every student's screen; students may follow, walk, "
        "generate and open the views, not start the lab's runs, run lessons' code, open models or "
        "change the class. Use with --host 0.0.0.0 so the students' machines can reach it",
    )
    parser.add_argument(
        "--broadcast",
        default=None,
        metavar="redis://HOST:PORT",
        help="with --class: share the class through this Redis, so several workshop processes or "
        "machines (each started with the same --token and --class) behind one address teach one "
        "class: the teacher's changes, the students' link, the counts, the poll and the computed "
        "answers travel through it. Checked at start",
    )
    add_quantize_flag(
        parser, where=": the page shows it, matrix by matrix, and names the model 'NAME · Q8_0'"
    )
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    parser.set_defaults(handler=run)


def model_names(named: list[str], runs_root: Path = RUNS_ROOT) -> list[str]:
    """What to load: the models named, or the defaults and every run directory under runs/."""
    if named:
        return named
    runs = sorted(str(p.parent) for p in runs_root.glob("*/train_config.json")) if runs_root.is_dir() else []
    return [*DEFAULT_MODELS, *runs]


def load_models(named: list[str], runs_root: Path = RUNS_ROOT) -> dict:
    """{name: LanguageModel} to serve: each model named (one that cannot be loaded stops the
    workshop, with the reason), or the defaults and every run under runs/ that loads. A run
    found there that is damaged is skipped with its reason printed, and the workshop starts
    without it: one cut-short copy must not keep every other model from being served."""
    from glassformer.formats.run_directory import damage
    from glassformer.loading import load

    models = {}
    for name in model_names(named, runs_root):
        found = not named and name not in DEFAULT_MODELS  # a run found under runs/, not asked for
        problem = damage(name) if found else None  # cheap: before anything is built
        if problem is None:
            print(f"loading {name} ...", flush=True)
            try:
                models[name] = load(name)
                continue
            except (OSError, ValueError) as error:
                if not found:
                    raise
                problem = str(error)
        print(f"skipping {name}: {problem}", flush=True)
    return models


def run(args: argparse.Namespace) -> int:
    from glassformer.workshop.door.guard import LOOPBACK
    from glassformer.workshop.reading.attention_change import origin
    from glassformer.workshop.server import create_app

    if not 0 < args.port < 65536:
        raise ValueError(f"--port {args.port} is not a port number (1..65535)")
    classroom = getattr(args, "classroom", False)
    broadcast = getattr(args, "broadcast", None)
    if broadcast is not None:  # before any model is loaded: a mistake is told at once
        from glassformer.workshop.classroom.broadcast import reach

        if not classroom:
            raise ValueError("--broadcast shares a class between workers: give --class too")
        if args.token is None and TOKEN_VARIABLE not in os.environ:
            raise ValueError(
                f"--broadcast: give every worker the same --token (or ${TOKEN_VARIABLE}): "
                "the class is the one of that token"
            )
        reach(broadcast)
    models = load_models(args.models)
    kind = getattr(args, "quantize", None)
    quantized = {name: quantize_weights(lm, kind, print) for name, lm in models.items()} if kind else {}
    token = checked_token(args.token if args.token is not None else os.environ.get(TOKEN_VARIABLE))
    hosts = served_hosts(args.host)
    if args.host not in LOOPBACK:
        print(exposure(args.host), file=sys.stderr)
    origins = {name: origin(name) for name in models if origin(name) in models}  # a fine-tuned run's base
    # the lab's runs: runs/, as the CLI's
    app = create_app(
        models,
        runs_root=RUNS_ROOT,
        origins=origins,
        token=token,
        hosts=hosts,
        classroom=classroom,
        broadcast=broadcast,
        quantized=quantized,
    )
    name = "127.0.0.1" if args.host in EVERY_INTERFACE else args.host
    address = _address(name, args.port)
    # a login code works once: what the browser's history keeps of the link opens nothing later
    print(f"the workshop is at {address}?login={app.state.login_link()}  (Ctrl-C stops it)", flush=True)
    print(f"  that link works once; for another browser: {address}?token={token}", flush=True)
    if classroom:
        announce_class(app, address, args.host, args.port)
    if not args.no_browser:
        import webbrowser

        webbrowser.open(f"{address}?login={app.state.login_link()}")
    serve(app, args.host, args.port)
    return 0


def announce_class(app, address: str, host: str, port: int, out=None) -> None:
    """The class's two links, the students' as a QR code too; beyond this machine, what each
    allows. The students' link names this machine as the students reach it: bound to every
    interface, its address on the network it reaches others by."""
    from glassformer.workshop.classroom.class_links import print_qr, students_link

    out = out or sys.stdout
    room = app.state.classroom
    room.address = _address(network_address(), port) if host in EVERY_INTERFACE else address
    link = students_link(room.address, room.key.token)
    print(f"teacher: {address}?login={app.state.login_link()}", file=out)
    print(f"students: {link}", file=out)
    print_qr(link, out)
    if host not in LOOPBACK_NAMES:
        print(
            "  the teacher's link allows everything: the class, the lab's runs, lessons' code, models",
            file=out,
        )
        print(
            "  the students' link allows following the class, the walk, generation and the views; "
            "not the lab's runs, lessons' code, models or the class",
            file=out,
        )
    out.flush()


def network_address() -> str:
    """This machine's address on the network it reaches others by (no packet is sent: a UDP
    socket only picks its route); 127.0.0.1 when it has none."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def _address(name: str, port: int) -> str:
    return f"http://{f'[{name}]' if ':' in name else name}:{port}/"


def serve(app, host: str, port: int) -> None:
    """Serve ``app`` with uvicorn, whose Ctrl-C here first stops the workshop's work in flight
    (answered 503, streams closed), so the requests end at once and the server with them;
    what is left is cancelled after `GRACE_S`."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            app.state.stop_work("the server is stopping (Ctrl-C)")
            super().handle_exit(sig, frame)
            # uvicorn would raise the signal again once stopped; its KeyboardInterrupt then
            # cancels the app's lifespan and prints a traceback. The stop was asked for: none.
            getattr(self, "_captured_signals", []).clear()

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", timeout_graceful_shutdown=GRACE_S)
    Server(config).run()
    print("the workshop stopped", flush=True)


def checked_token(token: str | None) -> str:
    """The token given (by --token or the environment), checked; a new random one if none."""
    from glassformer.workshop.door.guard import new_token

    if token is None:
        return new_token()
    if not re.fullmatch(r"[A-Za-z0-9._~-]{8,256}", token):
        raise ValueError(
            "--token must be 8 to 256 letters, digits or . _ ~ - (it travels in a URL); "
            f"got {len(token)} characters"
        )
    return token


def served_hosts(host: str) -> tuple[str, ...] | None:
    """The Host names the server answers to: this machine's loopback names and the address it
    is bound to; None (any name) when bound to every interface, where only the token guards."""
    from glassformer.workshop.door.guard import LOOPBACK

    if host in EVERY_INTERFACE:
        return None
    return tuple(dict.fromkeys((*LOOPBACK, host)))


def exposure(host: str) -> str:
    """What binding ``host`` (not loopback) exposes, said plainly."""
    where = "every network this machine is on" if host in EVERY_INTERFACE else f"the network of {host}"
    return (
        f"--host {host}: the workshop is served to {where}, not only to this machine.\n"
        "Anyone who has the token can use it as you do: run the models, start and stop training runs\n"
        "and run lessons, with this machine's processor, memory and disk. Without the token nothing\n"
        "is answered. The connection is plain HTTP: on a network you do not trust, the token can be\n"
        "read in transit. Share the link only with your class, and stop the server after it."
    )
