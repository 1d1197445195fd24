"""The training lab's page in Chromium: start the induction preset from the form (made
small), watch the charts grow, pause and resume, scrub the checkpoints of the film, and
come back to the run after a reload. Runs live under the test's tmp_path."""

from __future__ import annotations

import contextlib
import re
import shutil
import time
import urllib.error
import urllib.request

import pytest

from glassformer.inspect.film import read_film
from glassformer.workshop.server import create_app
from tests.test_workshop_api import char_lm
from tests.test_workshop_page import BROWSER_400, Workshop
from tests.trainer_processes import TIMEOUT_S
from tests.workshop_server import auth, serving, wait_until

STEPS, EVAL = 60, 15
WAIT_MS = TIMEOUT_S * 1000  # each wait ends when the page gets there: only a failure reaches this


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
            urllib.request.urlopen(stop, timeout=TIMEOUT_S)


def test_each_preset_tells_its_time_here_measuring_first(lab_page):
    lab, _ = lab_page
    page = lab.page
    held = []  # the first estimate's request, held: the page says it is measuring meanwhile
    page.route("**/api/lab/estimate", lambda route: held.append(route) if not held else route.continue_())
    page.goto(f"{lab.base}lab")
    wait_until(page, "() => document.querySelector('#preset-estimate')?.textContent === 'measuring…'")
    # the page says "measuring…" as it sends the request: the route may see it a moment later
    deadline = time.monotonic() + TIMEOUT_S
    while not held and time.monotonic() < deadline:
        page.wait_for_timeout(20)  # the route's callback runs while Playwright waits
    held[0].continue_()
    page.wait_for_selector("#preset-estimate[data-seconds]", state="attached")
    seconds = float(page.get_attribute("#preset-estimate", "data-seconds"))
    assert seconds > 0 and "steps ×" in page.get_attribute("#preset-estimate", "title")
    page.fill('[name="train.steps"]', "1200")  # twice the preset's 600
    page.dispatch_event('[name="train.steps"]', "change")
    wait_until(page, f"() => document.querySelector('#preset-estimate').dataset.seconds > {1.5 * seconds}")
    doubled = float(page.get_attribute("#preset-estimate", "data-seconds"))
    assert doubled == pytest.approx(2 * seconds)
    page.fill('[name="model.n_heads"]', "3")  # 64 is not divisible by 3: told before Start
    page.dispatch_event('[name="model.n_heads"]', "change")
    page.wait_for_selector("#preset-estimate:not([data-seconds])", state="attached")
    wait_until(page, "() => document.querySelector('#preset-estimate').textContent.includes('no model')")
    lab.close(allowed_errors=(BROWSER_400,))  # the refused settings' answer


def test_the_time_left_counts_evaluations_and_ignores_a_pause(lab_page):
    """`lab_pace.secondsLeft` on a run of 600 steps of 10 ms with an evaluation of 0.5 s every 25
    steps, paused for a minute at step 80, read at step 100: 500 steps and 20 evaluations left."""
    lab, _ = lab_page
    lab.page.goto(f"{lab.base}lab")
    left = lab.page.evaluate(
        """async () => {
            const { secondsLeft } = await import("./static/js/lab/lab_pace.js");
            const progress = [], metrics = [];
            let time = 1000;
            for (let step = 1; step <= 100; step++) {
                time += 0.01 + (step === 81 ? 60 : 0) + ((step - 1) % 25 === 0 && step > 1 ? 0.5 : 0);
                progress.push({ step, steps: 600, time: Math.round(time * 1000) / 1000 });
                if (step % 25 === 0) metrics.push({ step });
            }
            return [secondsLeft(progress.slice(0, 2), []), secondsLeft(progress, metrics)];
        }"""
    )
    assert left[0] is None  # a step in: no pace to tell yet
    assert left[1] == pytest.approx(500 * 0.01 + 20 * 0.5, rel=0.02)
    lab.close()


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
    page.wait_for_selector("#preset-estimate[data-seconds]", state="attached")
    assert re.fullmatch(r"about \d+ (s|min) on this machine", page.inner_text("#preset-estimate"))
    page.fill('[name="train.steps"]', str(STEPS))
    page.fill('[name="train.eval_interval"]', str(EVAL))
    page.fill('[name="model.d_model"]', "32")
    page.click("#start")
    page.wait_for_selector('body[data-state="running"]', state="attached")
    assert page.locator("#start").is_disabled()  # one run at a time
    assert "0 s to go" not in page.inner_text("#eta")  # no estimate before there is a pace
    page.fill('[name="model.n_layers"]', "3")  # another model's time: not measured beside the run
    page.dispatch_event('[name="model.n_layers"]', "change")
    page.wait_for_selector("#preset-estimate:text('measured once no run is training')")
    wait_until(page, "Number(document.querySelector('#charts').dataset.points) >= 5")
    assert page.locator('#charts [data-chart="loss"] polyline').count() >= 1
    page.click("#pause")
    page.wait_for_selector('body[data-state="paused"]', state="attached")
    page.click("#resume")
    page.wait_for_selector('body[data-state="running"], body[data-state="done"]', state="attached")
    page.wait_for_selector('body[data-state="done"]', state="attached")
    assert page.locator("#start").is_enabled() and "to go" not in page.inner_text("#eta")
    page.wait_for_selector("#preset-estimate[data-seconds]", state="attached")  # measured once it ended
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
