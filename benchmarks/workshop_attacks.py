"""Issue 27's attacks on the workshop's budgets, replayed on SmolLM2, with what each cost.

Each row is one attack, sent over HTTP to a workshop served in this process (so its resident
memory is the server's):

- estimate: the lab's pace of a 617M-parameter mixture of experts that the size check allows
  (it used to train inside the server: 295 s, +12.4 GB kept while idle);
- generate + tokens: a 730-token prompt generating 512 tokens, and another client's
  3-token /api/tokens sent after the first token (it used to wait for the whole generation);
- stage logits: /api/stage "logits" at the walk's limit of tokens (a 325 MB answer);
- unread streams: 20 lab event streams of a run with a 43 MB film, never read (+0.9 GB), and
  /api/lab asked meanwhile;
- lessons: three lesson runs whose clients leave after 2 s (each started a kernel afterwards).

    python -m benchmarks.workshop_attacks          (also the end of benchmarks.workshop_limits)
    python -m benchmarks.workshop_attacks estimate generate    (those rows alone)

The script uses only the HTTP routes, so the same file measures an older checkout (the
before column of the issue's table).
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import glassformer as gf

WORD = " the"
MOE = {"model.n_layers": 12, "model.d_model": 512, "model.n_experts": 16, "model.n_heads": 8}


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def call(
    url: str, token: str, route: str, body: dict | None = None, timeout: float = 600
) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"token {token}", **({"Content-Type": "application/json"} if data else {})}
    request = urllib.request.Request(url + route, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()
    except OSError as error:
        return 0, str(error).encode()


def row(label: str, **figures) -> None:
    print(f"{label:<22}" + "  ".join(f"{k}={v}" for k, v in figures.items()), flush=True)


def estimate(url: str, token: str) -> None:
    before, start = rss_mb(), time.perf_counter()
    status, answer = call(url, token, "api/lab/estimate", {"preset": "induction", "fields": MOE}, timeout=200)
    took = time.perf_counter() - start
    time.sleep(1)
    note = json.loads(answer).get("error", "")[:70] if status != 200 else ""
    row(
        "estimate (617M MoE)",
        status=status,
        seconds=f"{took:.1f}",
        server_rss_kept=f"{rss_mb() - before:+.0f}MB",
        note=note,
    )


def generate_and_tokens(url: str, token: str, smol) -> None:
    prompt = WORD * 730
    first, done, seen = threading.Event(), threading.Event(), []

    def stream() -> None:
        body = json.dumps({"model": "smol", "text": prompt, "max_new_tokens": 512, "temperature": 0}).encode()
        headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
        request = urllib.request.Request(url + "api/generate", data=body, headers=headers)
        with urllib.request.urlopen(request, timeout=600) as answer:
            for line in answer:
                if line.startswith(b"event:"):
                    seen.append(line.split(b":", 1)[1].strip().decode())
                    if seen[-1] == "token":
                        first.set()
        done.set()

    start = time.perf_counter()
    threading.Thread(target=stream, daemon=True).start()
    first.wait(600)
    asked = time.perf_counter()
    status, _ = call(url, token, "api/tokens", {"model": "smol", "text": "a b c"})
    waited = time.perf_counter() - asked
    done.wait(600)
    total = time.perf_counter() - start
    ended = seen[-1] if seen else "nothing"
    row(
        "generate 730+512",
        seconds=f"{total:.1f}",
        tokens=seen.count("token"),
        ended_by=ended,
        other_tokens_wait=f"{waited:.2f}s",
        other_status=status,
    )


def stage_logits(url: str, token: str, smol) -> None:
    from glassformer.workshop.door.limits import max_tokens

    n = min(max_tokens(smol.config, "walk"), smol.config.max_seq_len)
    before, start = rss_mb(), time.perf_counter()
    status, answer = call(url, token, "api/stage", {"model": "smol", "text": WORD * n, "name": "logits"})
    took = time.perf_counter() - start
    row(
        "stage logits",
        tokens=n,
        status=status,
        seconds=f"{took:.1f}",
        answer=f"{len(answer) / 1e6:.0f}MB",
        rss=f"{rss_mb() - before:+.0f}MB",
    )


def unread_streams(url: str, token: str, runs: Path) -> None:
    run = runs / "film"
    run.mkdir(parents=True)
    (run / "train_config.json").write_text("{}")
    frame = json.dumps({"step": 0, "attention": [0.123456] * 50_000})
    with (run / "film.jsonl").open("w") as film:
        for _ in range(43_000_000 // len(frame)):
            film.write(frame + "\n")
    port = urlsplit(url).port
    head = f"GET /api/lab/events?run=film HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: token {token}"
    before, sockets, refused = rss_mb(), [], 0
    for _ in range(20):
        reader = socket.create_connection(("127.0.0.1", port))
        reader.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        reader.sendall(f"{head}\r\n\r\n".encode())
        sockets.append(reader)
    time.sleep(8)
    for reader in sockets:
        reader.settimeout(0.2)
        try:
            refused += b" 429 " in reader.recv(64)
        except OSError:
            pass
    held = rss_mb() - before
    start = time.perf_counter()
    status, _ = call(url, token, "api/lab")
    lab_s = time.perf_counter() - start
    row(
        "20 unread streams",
        refused=refused,
        server_rss=f"{held:+.0f}MB",
        lab_status=status,
        lab_seconds=f"{lab_s:.2f}",
    )
    for reader in sockets:
        reader.close()


def kernels() -> set[int]:
    """The pids of the lesson kernels running now (any ipykernel on this machine)."""
    found = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"ipykernel" in cmdline.read_bytes():
                found.add(int(cmdline.parent.name))
        except OSError:
            pass
    return found


def lessons_left(url: str, token: str) -> None:
    before = kernels()
    statuses = [call(url, token, "api/lessons/4/run", {}, timeout=2)[0] for _ in range(3)]  # 0: left
    seen, deadline = set(), time.monotonic() + 15
    while time.monotonic() < deadline:  # every kernel alive after the last client left
        seen |= kernels() - before
        time.sleep(0.1)
    row("3 lessons left at 2 s", statuses=statuses, kernels_running_after_they_left=len(seen))


ROWS = ("estimate", "generate", "stage", "streams", "lessons")


def main(rows: list[str] | None = None) -> None:
    import argparse

    from glassformer.workshop.server import create_app
    from tests.workshop_server import serving

    if rows is None:
        parser = argparse.ArgumentParser(
            description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
        )
        parser.add_argument(
            "rows", nargs="*", choices=[[], *ROWS], help="the attacks to replay (default: all)"
        )
        rows = parser.parse_args().rows or list(ROWS)

    smol = gf.load("smollm2-135m-instruct")
    with tempfile.TemporaryDirectory(prefix="glassformer-attacks-") as folder:
        runs = Path(folder) / "runs"
        app = create_app({"smol": smol}, runs_root=runs)
        token = app.state.token
        with serving(app) as url:
            call(url, token, "api/walk", {"model": "smol", "text": "warm up"})
            print(f"server resident: {rss_mb():,.0f} MB, pid {os.getpid()}")
            replay = {
                "estimate": lambda: estimate(url, token),
                "generate": lambda: generate_and_tokens(url, token, smol),
                "stage": lambda: stage_logits(url, token, smol),
                "streams": lambda: unread_streams(url, token, runs),
                "lessons": lambda: lessons_left(url, token),
            }
            for name in rows:
                replay[name]()


if __name__ == "__main__":
    main()
