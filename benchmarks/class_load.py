"""A class on one server (issue 30): how fast the teacher's change reaches every follower, how
long students exploring on their own wait, and the server's memory over a class.

Real HTTP clients on 127.0.0.1, one thread each, as a browser would be: each student opens
the students' link (its cookies: the students' token and its own id), reads the class's
server-sent events (``GET /api/class/events?following=1``) and, at each change, fetches what
a following page fetches, the walk and the lens of the teacher's text. The teacher changes
the class's text with ``POST /api/class``. For each change: the time from the teacher's POST
to each follower holding the new step's data; p50 / p95 / max over the followers and the
changes after the first (the first warms the model).

Two servers in the same run, the same model, the same clients:

* shared: today's workshop (a walk computed once for the class, `shared_work.py`);
* baseline: each page computing its own answer (``create_app(cache_bytes=0)``: nothing kept,
  nothing joined, nothing prepared), as the workshop served a class before issue 30 (its
  walks still run a few to a pass, `batched_walk.py`, as today's server runs them).

Then 30 students exploring at once (each its own 16-token prompt: nothing to share) while the
teacher changes the text once: p50 / p95 of the explorers' walks, and the followers' times
meanwhile. Last, with ``--minutes`` > 0, a class that goes on that long (a change every few
seconds): the server's resident memory (the server's process) after warm-up and
at the end, and the shared work's hit rate.

Goals (issue 30): followers' p95 <= 1 s for 30 and <= 2 s for 100; explorers' p95 <= 5 s with
the teacher's changes still reaching followers within those goals.

    python -m benchmarks.class_load [--model smollm2-135m-instruct] [--followers 30 100]
                                    [--changes 4] [--explorers 30] [--minutes 10]
"""

from __future__ import annotations

import argparse
import http.client
import json
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from urllib.parse import urlsplit

import glassformer as gf
from benchmarks.common import cpu_name

TEXTS = [  # the teacher's texts, one per change (16 tokens or so each for SmolLM2)
    "The capital of France is a city on the river Seine, and its",
    "A transformer reads every token of the text at once and then",
    "In the morning the baker opens the shop and sells fresh bread to",
    "The cat sat on the mat, looked at the dog, and slowly walked to",
    "Water boils at one hundred degrees Celsius at sea level, but on",
    "The students asked the teacher why the attention weights in each row",
]
WAIT_S = 300.0  # the longest a change may take to reach every follower before the run gives up


class Student:
    """One student's browser: its cookies (from the students' link), its event stream, and the
    times it held each version's data."""

    def __init__(self, url: str, link: str, model: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.model = parts.hostname, parts.port, model
        self.cookies = self._open(link)
        self.held: dict[int, float] = {}  # version -> when this page held its walk and lens
        self.failures: list[str] = []

    def _open(self, link: str) -> str:
        """GET the students' link: the cookies it sets (the token, this browser's id)."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=60)
        target = link[link.index("/", len("http://")) :]
        connection.request("GET", target)
        response = connection.getresponse()
        response.read()
        cookies = [
            value.split(";", 1)[0] for name, value in response.getheaders() if name.lower() == "set-cookie"
        ]
        connection.close()
        if response.status != 303 or len(cookies) < 2:
            raise RuntimeError(f"the students' link answered {response.status} with cookies {cookies}")
        return "; ".join(cookies)

    def post(self, path: str, body: dict) -> bytes:
        connection = http.client.HTTPConnection(self.host, self.port, timeout=WAIT_S)
        headers = {"Cookie": self.cookies, "Content-Type": "application/json"}
        connection.request("POST", path, json.dumps(body), headers)
        response = connection.getresponse()
        content = response.read()
        connection.close()
        if response.status != 200:
            raise RuntimeError(f"{path} answered {response.status}: {content[:200]!r}")
        return content

    def see(self, text: str) -> None:
        """What a following page fetches when the teacher's text changes."""
        self.post("/api/walk", {"model": self.model, "text": text})
        self.post("/api/lens", {"model": self.model, "text": text})

    def follow(self, stop: threading.Event) -> None:
        """Read the class's events until ``stop``; fetch each new state's data."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=WAIT_S)
        connection.request("GET", "/api/class/events?following=1", headers={"Cookie": self.cookies})
        response = connection.getresponse()
        event, data = "", ""
        try:
            while not stop.is_set():
                line = response.readline().decode("utf-8")
                if not line:
                    return
                line = line.rstrip("\n")
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:"):
                    data = line[5:].strip()
                elif line == "" and event == "class":
                    state = json.loads(data)
                    try:
                        self.see(state["text"])
                        self.held[state["version"]] = time.monotonic()
                    except (OSError, RuntimeError) as error:
                        self.failures.append(str(error))
                    event, data = "", ""
        finally:
            connection.close()


def teacher_post(url: str, token: str, body: dict) -> tuple[int, float]:
    """POST /api/class as the teacher: (the new version, when it was sent)."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
    sent = time.monotonic()
    headers = {"Authorization": f"token {token}", "Content-Type": "application/json"}
    connection.request("POST", "/api/class", json.dumps(body), headers)
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    if response.status != 200:
        raise RuntimeError(f"POST /api/class answered {response.status}: {answer}")
    return answer["version"], sent


def figures(times: list[float]) -> str:
    if not times:
        return "n/a"
    ordered = sorted(times)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):5.2f} s  p95 {p95:5.2f} s  max {ordered[-1]:5.2f} s"


class Class:
    """A served class: the workshop in a process of its own (as a real server: its clients'
    threads here never share its interpreter), its teacher's token and students' link, the
    students following."""

    def __init__(self, model: str, cache_bytes: int | None) -> None:
        from tests.workshop_server import free_port

        self.runs = tempfile.TemporaryDirectory()
        self.token, port = secrets.token_urlsafe(16), free_port()
        command = [
            sys.executable,
            "-m",
            "benchmarks.class_load",
            "--serve",
            "--model",
            model,
            "--port",
            str(port),
        ]
        command += [f"--token={self.token}", "--runs", self.runs.name]  # a token may start with "-"
        command += [] if cache_bytes is None else ["--cache-bytes", str(cache_bytes)]
        self.server = subprocess.Popen(command)
        self.url, self.name = f"http://127.0.0.1:{port}/", Path(model).name
        self.link = self._students_link()
        self.students: list[Student] = []
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []

    def _students_link(self) -> str:
        """The students' link the teacher's GET /api/class gives, once the server answers."""
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if self.server.poll() is not None:
                raise RuntimeError(f"the workshop exited with {self.server.returncode}")
            try:
                parts = urlsplit(self.url)
                connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=5)
                connection.request("GET", "/api/class", headers={"Authorization": f"token {self.token}"})
                answer = json.loads(connection.getresponse().read())
                connection.close()
                return answer["links"]["students"]
            except (OSError, ValueError, KeyError):
                time.sleep(0.5)
        raise RuntimeError("the workshop did not answer")

    def rss_mb(self) -> float:
        """The server's resident set size now (MB)."""
        for line in Path(f"/proc/{self.server.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def work_stats(self) -> dict:
        parts = urlsplit(self.url)
        connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=60)
        connection.request("GET", "/api/class", headers={"Authorization": f"token {self.token}"})
        answer = json.loads(connection.getresponse().read())
        connection.close()
        return answer["work"]

    def add_followers(self, n: int) -> None:
        for _ in range(n):
            student = Student(self.url, self.link, self.name)
            thread = threading.Thread(target=student.follow, args=(self.stop,), daemon=True)
            thread.start()
            self.students.append(student)
            self.threads.append(thread)

    def change(self, text: str, step: int) -> list[float]:
        """The teacher's change; each follower's time to hold its data (seconds)."""
        version, sent = teacher_post(self.url, self.token, {"text": text, "step": step})
        deadline = time.monotonic() + WAIT_S
        while any(version not in s.held for s in self.students) and time.monotonic() < deadline:
            if any(s.failures for s in self.students):
                raise RuntimeError(next(s.failures for s in self.students if s.failures)[0])
            time.sleep(0.01)
        return [s.held[version] - sent for s in self.students if version in s.held]

    def close(self) -> None:
        self.stop.set()
        self.server.terminate()
        self.server.wait(30)
        self.runs.cleanup()


def followers_run(model: str, n: int, changes: int, cache_bytes: int | None) -> list[float]:
    """Times of ``changes`` teacher changes (after one to warm up) reaching ``n`` followers."""
    room = Class(model, cache_bytes)
    try:
        room.add_followers(n)
        room.change(TEXTS[-1], 1)  # warm-up: the model's first passes
        times = []
        for i in range(changes):
            times += room.change(TEXTS[i % (len(TEXTS) - 1)], i + 2)
        return times
    finally:
        room.close()


def explorers_run(model: str, followers: int, explorers: int) -> tuple[list[float], list[float]]:
    """``explorers`` students walking their own prompts at once while the teacher changes the
    text once for ``followers``: (the explorers' walk times, the followers' times)."""
    room = Class(model, None)
    try:
        room.add_followers(followers)
        room.change(TEXTS[-1], 1)
        own = [Student(room.url, room.link, room.name) for _ in range(explorers)]
        walked: list[float] = []
        lock = threading.Lock()

        def explore(i: int, student: Student) -> None:
            started = time.monotonic()
            student.post(
                "/api/walk", {"model": room.name, "text": f"Student {i} asks: {TEXTS[i % len(TEXTS)]}"}
            )
            with lock:
                walked.append(time.monotonic() - started)

        threads = [threading.Thread(target=explore, args=(i, s)) for i, s in enumerate(own)]
        for thread in threads:
            thread.start()
        time.sleep(0.2)  # the explorers' walks are queued: now the teacher moves on
        followed = room.change(TEXTS[0], 2)
        for thread in threads:
            thread.join(WAIT_S)
        return walked, followed
    finally:
        room.close()


def long_class(model: str, followers: int, minutes: float) -> None:
    """A class of ``minutes``: a change every few seconds; memory and the hit rate."""
    room = Class(model, None)
    try:
        room.add_followers(followers)
        room.change(TEXTS[-1], 1)
        warm = room.rss_mb()
        end = time.monotonic() + 60 * minutes
        step = 2
        while time.monotonic() < end:
            room.change(TEXTS[step % len(TEXTS)], step)
            step += 1
            time.sleep(3.0)
        stats = room.work_stats()
        asked = stats["hits"] + stats["misses"]
        print(
            f"{minutes:g}-minute class, {followers} followers, {step - 1} changes: RSS {warm:.0f} MB after "
            f"warm-up, {room.rss_mb():.0f} MB at the end; shared work {stats['hits']}/{asked} answers shared "
            f"({100 * stats['hits'] / max(asked, 1):.0f}%), {stats['bytes'] / 2**20:.1f} MB kept"
        )
    finally:
        room.close()


def serve(args: argparse.Namespace) -> None:
    """The workshop of a class, served in this process until it is terminated (``--serve``)."""
    import uvicorn

    from glassformer.workshop.server import create_app

    lm = gf.load(args.model)
    extra = {} if args.cache_bytes is None else {"cache_bytes": args.cache_bytes}
    app = create_app({Path(args.model).name: lm}, args.runs, token=args.token, classroom=True, **extra)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


def main() -> None:
    warnings.filterwarnings("ignore")
    formatter = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=formatter)
    parser.add_argument("--model", default="smollm2-135m-instruct", help="what gf.load reads")
    parser.add_argument("--followers", type=int, nargs="+", default=[30, 100])
    parser.add_argument("--changes", type=int, default=4, help="teacher's changes timed per server")
    parser.add_argument("--explorers", type=int, default=30, help="0: skip the explorers' run")
    parser.add_argument("--minutes", type=float, default=10.0, help="the long class's length (0: skip)")
    parser.add_argument("--no-baseline", action="store_true", help="skip the baseline server")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the server's process
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--token", help=argparse.SUPPRESS)
    parser.add_argument("--runs", help=argparse.SUPPRESS)
    parser.add_argument("--cache-bytes", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args)
        return

    print(f"{cpu_name()}; {Path(args.model).name}; {args.changes} changes after a warm-up; the server in its")
    print("own process, real HTTP clients (one thread per student) on 127.0.0.1")
    print(f"{'followers':>9}  {'server':<9} teacher's change -> every follower holding its walk and lens")
    for n in args.followers:
        for label, cache in (("shared", None), ("baseline", 0)):
            if label == "baseline" and args.no_baseline:
                continue
            times = followers_run(args.model, n, args.changes, cache)
            print(f"{n:9d}  {label:<9} {figures(times)}", flush=True)
    if args.explorers:
        walked, followed = explorers_run(args.model, min(args.followers), args.explorers)
        print(f"{args.explorers} explorers' own walks:           {figures(walked)}")
        print(f"{min(args.followers)} followers meanwhile:          {figures(followed)}")
    if args.minutes > 0:
        long_class(args.model, min(args.followers), args.minutes)


if __name__ == "__main__":
    main()
