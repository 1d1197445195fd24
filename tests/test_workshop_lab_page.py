"""The training lab's page in Chromium: start the induction preset from the form (made
small), watch the charts grow, pause and resume, scrub the checkpoints of the film, and
come back to the run after a reload. Runs live under the test's tmp_path."""

from __future__ import annotations

import contextlib
import shutil
import urllib.error
import urllib.request

import pytest

from glassformer.inspect.film import read_film
from glassformer.workshop.server import create_app
from tests.test_workshop_api import char_lm
from tests.test_workshop_page import Workshop
from tests.workshop_server import auth, serving

STEPS, EVAL = 60, 15
WAIT_MS = 120_000


@pytest.fixture
def lab_page(browser, tmp_path):
    runs = tmp_path / "runs"
    with serving(create_app({"tiny": char_lm()}, runs_root=runs)) as url:
        opened = Workshop(browser, url, tmp_path)
        opened.page.set_default_timeout(WAIT_MS)
        yield opened, runs
        if not opened.page.is_closed():
            opened.close()
        headers = {"Content-Type": "application/json", **auth(url)}
        stop = urllib.request.Request(f"{url}api/lab/stop", data=b"{}", method="POST", headers=headers)
        with contextlib.suppress(urllib.error.HTTPError):  # 400: nothing was running
            urllib.request.urlopen(stop, timeout=60)


def test_start_watch_pause_resume_and_scrub_the_film(lab_page):
    lab, runs = lab_page
    page = lab.page
    page.goto(f"{lab.base}lab")
    page.wait_for_selector("#preset option", state="attached")
    assert page.input_value("#preset") == "induction"  # the quick preset comes first
    assert page.inner_text("#preset-summary").startswith("Repeated random sequences: a two-layer decoder")
    page.select_option("#preset", "shakespeare-char")
    assert page.inner_text("#preset-summary").startswith("Characters of Shakespeare")
    page.select_option("#preset", "induction")
    assert page.input_value('[name="train.steps"]') == "600"  # the preset's own values
    page.fill('[name="train.steps"]', str(STEPS))
    page.fill('[name="train.eval_interval"]', str(EVAL))
    page.fill('[name="model.d_model"]', "32")
    page.click("#start")
    page.wait_for_selector('body[data-state="running"]', state="attached")
    assert page.locator("#start").is_disabled()  # one run at a time
    assert "0 s to go" not in page.inner_text("#eta")  # no estimate before there is a pace
    page.wait_for_function("Number(document.querySelector('#charts').dataset.points) >= 5")
    assert page.locator('#charts [data-chart="loss"] polyline').count() >= 1
    page.click("#pause")
    page.wait_for_selector('body[data-state="paused"]', state="attached")
    page.click("#resume")
    page.wait_for_selector('body[data-state="running"], body[data-state="done"]', state="attached")
    page.wait_for_selector('body[data-state="done"]', state="attached")
    assert page.locator("#start").is_enabled() and "to go" not in page.inner_text("#eta")
    page.wait_for_selector(f'#film[data-frames="{STEPS // EVAL}"]', state="attached")
    frames = read_film(runs / "induction-lab")
    assert [f["step"] for f in frames] == list(range(EVAL, STEPS + 1, EVAL))
    page.fill(".film-slider", "0")  # scrub back to the first checkpoint
    page.wait_for_selector(f'#film[data-step="{EVAL}"]', state="attached")
    cell = page.locator('.film-roles tr[data-layer="1"][data-head="0"] [data-role="induction"]')
    assert float(cell.get_attribute("data-value")) == frames[0]["induction"][1][0]
    assert page.locator("#charts .marker").count() == 4  # the checkpoint marked on each chart
    page.select_option(".film-compare", "3")  # the first checkpoint beside the last
    change = page.locator(
        '.film-roles tr[data-layer="1"][data-head="0"] [data-role="induction"] .role-change'
    )
    assert float(change.get_attribute("data-before")) == frames[3]["induction"][1][0]
    lab.shot("lab", full_page=True)
    page.reload()  # the page comes back to the run it started
    page.wait_for_selector(f'#film[data-frames="{STEPS // EVAL}"]', state="attached")
    assert page.locator("#status").inner_text() == "induction-lab: done"
    page.click("#open")  # the trained run, walked through in the forward-pass page
    page.wait_for_selector('body[data-walks="1"][data-state="ready"]', state="attached")
    assert lab.query()["model"] == "runs/induction-lab"
    assert page.locator("#model option:checked").inner_text().startswith("runs/induction-lab")
    # two runs side by side: a copy of the run stands for a second one
    shutil.copytree(runs / "induction-lab", runs / "induction-copy")
    page.goto(f"{lab.base}lab?run=induction-lab")
    page.wait_for_selector('#other-run option[value="induction-copy"]', state="attached")
    assert page.input_value("#run") == "induction-lab"
    page.select_option("#other-run", "induction-copy")
    page.click("#compare-runs")
    page.wait_for_selector('body[data-walks="1"][data-state="ready"]', state="attached")
    assert lab.query()["compare"] == "runs/induction-copy"
    page.wait_for_selector("#compare .cmp-table >> nth=1", state="visible")
    lab.close()
