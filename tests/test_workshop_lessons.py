"""The lessons in the workshop: listed, rendered with their equations typeset, their links
opening the walk at the step and showing the code, and a lesson run on the server.

The server holds one tiny model that reads letters (so the walk's default text works) and
has every step a decoder has; the lessons are the package's own."""

from __future__ import annotations

import os
import re
import socket
import string
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import glassformer as gf
from glassformer.lessons.catalog import lessons, links, to_notebook
from glassformer.lessons.run import code_cells
from glassformer.tokenizers.char import CharTokenizer
from glassformer.workshop.server import create_app
from tests.conftest import tiny_model
from tests.workshop_server import auth, serving

LESSON = 3  # attention from similarity: equations, walk links and code links
RUN = 4  # the lesson the page runs (backpropagation through attention: a few seconds)


@pytest.fixture(scope="module")
def app():
    tokenizer = CharTokenizer.from_text(string.ascii_letters + string.digits + " .,?!'")
    lm = gf.LanguageModel(tiny_model(vocab_size=tokenizer.vocab_size, max_seq_len=80), tokenizer)
    return create_app({"tiny": lm})


def test_the_lessons_are_listed_and_rendered_as_cells(client):
    listed = client.get("/api/lessons").json()
    assert [x["number"] for x in listed] == [x.number for x in lessons()]
    page = client.get(f"/api/lessons/{LESSON}").json()
    expected = to_notebook(next(x for x in lessons() if x.number == LESSON))
    codes = [c["source"] for c in page["cells"] if c["kind"] == "code"]
    assert codes == [c.source for c in code_cells(expected)]
    html = "".join(c["html"] for c in page["cells"] if c["kind"] == "markdown")
    assert 'href="walk:' not in html and 'href="code:' not in html  # every course link rewritten
    assert 'class="math block"' in html and 'class="walk-link"' in html and 'class="code-link"' in html
    assert client.get("/api/lessons/99").status_code == 404
    assert (
        client.post("/api/lessons/03-attention-from-similarity.md/run", json={}).status_code == 404
    )  # never a path


def test_the_code_a_lesson_links_to_is_shown_and_nothing_else(client):
    linked = next(target for kind, target, _ in links(lessons()[LESSON - 1]) if kind == "code")
    answer = client.get("/api/source", params={"name": linked}).json()
    assert answer["file"].startswith("glassformer/") and answer["line"] >= 1
    assert answer["source"].lstrip().startswith(("def ", "class ", "@"))
    refused = client.get("/api/source", params={"name": "os.system"})
    assert refused.status_code == 400 and "only the code the lessons name" in refused.json()["error"]


def test_a_lesson_page_typesets_its_equations_and_its_links_open_the_walk(workshop):
    page = workshop.page
    page.goto(f"{workshop.base}lessons?lesson={LESSON}")
    page.wait_for_selector('body[data-state="ready"]', state="attached")
    assert page.locator("#lesson .math").count() == 0  # every equation was typeset
    assert page.locator("#lesson .katex").count() >= 5 and page.locator(".katex-error").count() == 0
    prose = " ".join(page.locator("#lesson .lesson-text").all_inner_texts())
    assert "$$" not in prose and "\\frac" not in prose and "\\sqrt" not in prose  # no raw TeX
    link = page.locator(".code-link >> nth=0")
    link.click()
    page.wait_for_selector("#code-panel:not([hidden])")
    assert page.locator("#code-panel").get_attribute("data-name") == link.get_attribute("data-code")
    workshop.shot("lesson", full_page=False)
    walk = page.locator('.walk-link[data-stage="blocks.0.attn.pattern"] >> nth=0')
    walk.click()
    workshop.wait_walks(1)
    assert workshop.query()["stage"] == "blocks.0.attn.pattern"
    opened = page.locator('li.step.selected[data-stage="blocks.0.attn.pattern"] .detail')
    opened.wait_for(state="attached")
    workshop.close()


def test_running_a_lesson_shows_what_each_cell_printed(workshop):
    page = workshop.page
    page.goto(f"{workshop.base}lessons?lesson={RUN}")
    page.wait_for_selector('body[data-state="ready"]', state="attached")
    page.click("#run-lesson")
    page.wait_for_selector(
        '#lesson:is([data-run="done"], [data-run="failed"])', state="attached", timeout=120_000
    )
    note = page.locator(".run-note").inner_text()
    assert page.locator("#lesson").get_attribute("data-run") == "done", note
    printed = page.locator(".output-text").all_inner_texts()
    assert printed and all(text.strip() for text in printed)
    assert any(ch.isdigit() for ch in "".join(printed))  # numbers computed on this machine
    workshop.close()


def test_the_walk_links_each_step_to_the_lessons_that_explain_it(workshop, client):
    listed = client.get("/api/lessons").json()
    pattern = re.compile(r"((en|de)coder\.)?blocks\.\d+\.(cross_)?attn\.pattern")  # any layer's weights
    explaining = [x["number"] for x in listed if any(pattern.fullmatch(stage) for stage in x["stages"])]
    assert LESSON in explaining
    page = workshop.page
    workshop.open(model="tiny", level="intermediate")
    step = page.locator('li.step[data-stage="blocks.0.attn.pattern"]')
    step.locator(".lesson-link >> nth=0").wait_for(state="attached")
    shown = [
        int(n) for n in step.locator(".lesson-link").evaluate_all("(a) => a.map((e) => e.dataset.lesson)")
    ]
    assert shown == explaining  # every lesson linking to an attention pattern, any layer's
    workshop.open(model="tiny", level="beginner")  # the tour's stop links to the same lessons
    stop = page.locator('li.tour-stop[data-stage="blocks.0.attn.pattern"]')
    stop.locator(".lesson-link >> nth=0").wait_for(state="attached")
    links = stop.locator(".lesson-link").evaluate_all("(a) => a.map((e) => Number(e.dataset.lesson))")
    assert links == explaining
    stop.locator(f'.lesson-link[data-lesson="{LESSON}"]').click()
    page.wait_for_selector(f'#lesson[data-lesson="{LESSON}"]', state="attached")
    workshop.close()


def _kernels() -> list[int]:
    """The pids of this process's child kernels (a lesson run's ipykernel)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
            command = (status.parent / "cmdline").read_bytes()
        except OSError:
            continue
        alive = not fields.get("State", "").startswith(("Z", "X"))  # a killed one not reaped yet is gone
        if alive and int(fields.get("PPid", "0").strip()) == os.getpid() and b"ipykernel" in command:
            found.append(int(status.parent.name))
    return found


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return condition()


def test_a_lesson_run_stops_when_its_page_leaves_and_queues_once(app):
    """Issue 27: three ``curl -m 2`` each started a kernel after they had gone. Now a second run
    from the same client is 429 at once, and the kernel of a run whose page left is killed."""
    with serving(app) as url:
        port = urlsplit(url).port
        body = b"{}"
        request = (
            f"POST /api/lessons/{RUN}/run HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
            f"Authorization: {auth(url)['Authorization']}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        leaving = socket.create_connection(("127.0.0.1", port))
        leaving.sendall(request)
        assert _wait_for(lambda: _kernels(), 60), "the lesson's kernel never started"
        again = urllib.request.Request(
            url + f"api/lessons/{RUN}/run",
            data=body,
            headers={**auth(url), "Content-Type": "application/json"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(again, timeout=30)
        assert refused.value.code == 429
        leaving.close()  # the page leaves mid-run
        # killed at once: the lesson itself runs for seconds more
        assert _wait_for(lambda: not _kernels(), 3), "the kernel outlived the page that asked for it"
