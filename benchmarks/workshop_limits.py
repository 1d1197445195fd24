"""The largest request each workshop route allows, run: its time, its answer and its peak memory.

On SmolLM2-135M-Instruct (and MiniLM for a sentence encoder's routes), each route gets the
longest input its work limit (`glassformer/workshop/door/limits.py`) lets through, and then one
token more (which must be refused, 413, before any work). The peak resident memory of each
request is measured above what the process held with the models loaded (Linux: the
high-water mark is reset through /proc/self/clear_refs before each request, then read from
VmHWM), beside the limit's own estimate. The issue's goal: no single request above 2 GB.

Then Ctrl-C: a `glassformer workshop` process is interrupted two seconds into the largest
walk, and the time until it exits is printed. Last, issue 27's attacks on the budgets
(`benchmarks/workshop_attacks.py`: a large estimate, a long generation beside another client,
the largest logits, unread streams, lessons whose page left).

    python -m benchmarks.workshop_limits
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import threading
import time
import urllib.request
import warnings
from pathlib import Path

import torch

import glassformer as gf

GOAL_BYTES = 2 << 30
WORD = " the"  # one token each in SmolLM2's and MiniLM's vocabularies


def rss_peak_reset() -> None:
    Path("/proc/self/clear_refs").write_text("5")


def rss_kb(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def cpu_name() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def text_of(lm, n_tokens: int, unit: str = WORD) -> str:
    """The longest repetition of ``unit`` that is at most ``n_tokens`` tokens for ``lm``."""
    low, high = 1, n_tokens
    while low < high:  # the most repetitions within n_tokens
        middle = (low + high + 1) // 2
        low, high = (
            (middle, high) if len(lm.tokenizer.encode(unit * middle)) <= n_tokens else (low, middle - 1)
        )
    return unit * low


def main() -> None:
    warnings.filterwarnings("ignore")
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--skip-ctrl-c", action="store_true")
    parser.add_argument("--skip-attacks", action="store_true")
    args = parser.parse_args()

    from glassformer.workshop.door.limits import max_tokens
    from glassformer.workshop.server import create_app
    from tests.conftest import workshop_client

    smol, minilm = gf.load("smollm2-135m-instruct"), gf.load("minilm-l6")
    client = workshop_client(create_app({"smol": smol, "minilm": minilm}))
    client.post("/api/walk", json={"model": "smol", "text": "warm up"})
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; torch {torch.__version__}")
    print(f"models loaded: {rss_kb('VmRSS') / 1024:,.0f} MB resident\n")

    def limit(lm, route: str) -> int:
        return min(max_tokens(lm.config, route), lm.config.max_seq_len)

    walk_n = limit(smol, "walk")
    view_n = limit(smol, "views")
    explain_n = limit(smol, "explain")
    cases = [  # (label, method, path, body or query, tokens)
        ("walk", "post", "/api/walk", {"model": "smol"}, walk_n),
        (
            "stage (a pattern)",
            "post",
            "/api/stage",
            {"model": "smol", "name": "blocks.0.attn.pattern"},
            walk_n,
        ),
        ("lens", "post", "/api/lens", {"model": "smol"}, walk_n),
        ("generate (+16 new)", "post", "/api/generate", {"model": "smol", "max_new_tokens": 16}, walk_n - 16),
        ("tokens (emoji)", "post", "/api/tokens", {"model": "smol", "unit": "🌊⛵"}, limit(smol, "tokens")),
        ("view: head", "get", "/views/head", {"model": "smol"}, view_n),
        ("view: model", "get", "/views/model", {"model": "smol"}, view_n),
        (
            "attention change",
            "post",
            "/api/attention_change",
            {"model": "minilm", "base": "minilm"},
            limit(minilm, "attention_change"),
        ),
    ]
    for method in ("occlusion", "lime", "shap", "gxi", "ig"):
        cases.append(
            (f"explain: {method}", "post", "/api/explain", {"model": "smol", "method": method}, explain_n)
        )
    cases.append(("walk (MiniLM)", "post", "/api/walk", {"model": "minilm"}, limit(minilm, "walk") - 2))

    base_kb = rss_kb("VmRSS")
    heading = f"{'route':<26}{'tokens':>8}{'status':>8}{'seconds':>9}{'answer':>11}{'peak above models':>19}"
    print(heading + "  one more token")
    for label, method, path, fields, n in cases:
        lm = minilm if fields["model"] == "minilm" else smol
        fields = dict(fields)
        unit = fields.pop("unit", WORD)
        body = {**fields, "text": text_of(lm, n, unit)}
        n = len(lm.tokenizer.encode(body["text"]))
        rss_peak_reset()
        started = time.perf_counter()
        answer = client.get(path, params=body) if method == "get" else client.post(path, json=body)
        seconds = time.perf_counter() - started
        peak = (rss_kb("VmHWM") - base_kb) * 1024
        over = {**fields, "text": body["text"] + unit * 8}
        refused = client.get(path, params=over) if method == "get" else client.post(path, json=over)
        note = "" if answer.status_code == 200 else f"  ({answer.json()['error'][:60]}…)"
        print(
            f"{label:<26}{n:>8,}{answer.status_code:>8}{seconds:>9.2f}{len(answer.content) / 1e6:>9.1f}MB"
            f"{peak / 1e6:>16,.0f} MB{'' if peak < GOAL_BYTES else ' OVER'}  {refused.status_code}{note}"
        )
    if not args.skip_ctrl_c:
        ctrl_c(walk_n)
    if not args.skip_attacks:
        from benchmarks import workshop_attacks

        print("\nissue 27's attacks on the budgets:")
        workshop_attacks.main(list(workshop_attacks.ROWS))


def ctrl_c(n_tokens: int) -> None:
    """Seconds from SIGINT to exit of a workshop process two seconds into its largest walk."""
    from tests.workshop_server import free_port

    port, token = free_port(), "benchmark-token"
    env = {**os.environ, "GLASSFORMER_TOKEN": token}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "glassformer",
            "workshop",
            "smollm2-135m-instruct",
            "--port",
            str(port),
            "--no-browser",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/api/walk"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(
                urllib.request.Request(
                    f"http://127.0.0.1:{port}/api/models", headers={"Authorization": f"token {token}"}
                ),
                timeout=2,
            )
            break
        except OSError:
            time.sleep(0.2)
    body = json.dumps({"model": "smollm2-135m-instruct", "text": WORD * n_tokens}).encode()
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json", "Authorization": f"token {token}"}
    )

    def ask():
        try:
            urllib.request.urlopen(request, timeout=120).read()
        except OSError:
            pass

    threading.Thread(target=ask, daemon=True).start()
    time.sleep(2.0)
    started = time.monotonic()
    server.send_signal(signal.SIGINT)
    server.wait(timeout=120)
    took = time.monotonic() - started
    print(f"\nCtrl-C two seconds into a {n_tokens:,}-token walk: the server exited in {took:.2f} s")


if __name__ == "__main__":
    main()
