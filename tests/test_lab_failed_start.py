"""A Start that fails touches no run (issue 30, item 7): a stopped run's files stay byte for
byte what they were after a start the trainer would refuse (vit-digits' 100 warm-up steps
against 40 steps: its cosine schedule decays from the warm-up to the last step), the reason
comes back as a 400 and shows beside the Start button, and a start that succeeds writes a
fresh run directory, never the stopped one. Real trainer processes (vit-digits made small:
scikit-learn's digits, nothing downloaded); every run lives under the test's tmp_path."""

from __future__ import annotations

from pathlib import Path

import pytest

from glassformer.formats.run_directory import PROGRESS, TRAINER_STATE
from glassformer.workshop.lab.training_lab import Lab
from glassformer.workshop.server import create_app
from tests import test_workshop_lab
from tests.test_workshop_api import char_lm
from tests.test_workshop_lab import call, wait_for
from tests.test_workshop_page import BROWSER_400, Workshop
from tests.trainer_processes import TIMEOUT_S
from tests.workshop_server import serving

PRESET = "vit-digits"  # cosine, 100 warm-up steps
SMALL = {"model.d_model": 32, "model.n_layers": 1, "train.steps": 100_000, "train.eval_interval": 10_000}
REFUSED = {"train.steps": 40}  # under the warm-up: the trainer's schedule refuses it
REASON = "total_steps must be an integer larger than warmup_steps"


lab = test_workshop_lab.lab  # the fixture: a lab served on a tmp runs root, stopped after


def files_of(run: Path) -> dict[str, bytes]:
    """Every file under ``run`` and its bytes."""
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_a_refused_start_is_refused_before_any_file_is_touched(tmp_path):
    runs = tmp_path / "runs"
    with pytest.raises(ValueError, match=REASON) as refused:
        Lab(runs).start(PRESET, REFUSED)
    assert "train.steps=40" in str(refused.value) and "warms up for 100 steps" in str(refused.value)
    assert not runs.exists()  # not even the runs root, nor a log


def test_a_failed_start_after_a_stop_leaves_the_stopped_run_as_it_was(lab):
    url, runs = lab
    status, state = call(url, "api/lab/start", {"preset": PRESET, "fields": SMALL})
    assert status == 200 and state["run"] == f"{PRESET}-lab", state
    run = runs / f"{PRESET}-lab"
    wait_for(lambda: (run / PROGRESS).exists() and (run / PROGRESS).stat().st_size > 0, "the first steps")
    state = call(url, "api/lab/stop", {})[1]
    assert state["status"] == "stopped" and (run / TRAINER_STATE).exists(), state["log"]
    before = files_of(run)

    status, answer = call(url, "api/lab/start", {"preset": PRESET, "fields": REFUSED})
    wait_for(lambda: call(url, "api/lab")[1]["state"]["status"] != "running", "a started trainer to end")
    assert status == 400 and REASON in answer["error"], answer
    assert files_of(run) == before  # every file, byte for byte
    assert [r["name"] for r in call(url, "api/lab")[1]["runs"]] == [f"{PRESET}-lab"]

    # a start that goes through writes a fresh directory: the stopped run stays as it was
    status, state = call(url, "api/lab/start", {"preset": PRESET, "fields": SMALL})
    assert status == 200 and state["run"] == f"{PRESET}-lab-2", state
    fresh = runs / f"{PRESET}-lab-2"
    wait_for(lambda: (fresh / PROGRESS).exists() and (fresh / PROGRESS).stat().st_size > 0, "its steps")
    assert call(url, "api/lab/stop", {})[1]["status"] == "stopped"
    assert files_of(run) == before
    assert call(url, "api/lab/continue", {"run": f"{PRESET}-lab"})[0] == 200  # and goes on when asked


def test_the_reason_of_a_refused_start_shows_beside_the_start_button(browser, tmp_path):
    runs = tmp_path / "runs"
    with serving(create_app({"tiny": char_lm()}, runs_root=runs)) as url:
        lab = Workshop(browser, url, tmp_path)
        page = lab.page
        page.set_default_timeout(TIMEOUT_S * 1000)
        try:
            page.goto(f"{lab.base}lab")
            page.wait_for_selector("#preset option", state="attached")
            page.select_option("#preset", PRESET)
            page.fill('[name="train.steps"]', "40")
            page.click("#start")
            problem = page.locator('#start-problem[role="alert"]')
            problem.wait_for(state="visible")
            assert REASON in problem.inner_text()
            # beside Start: right after the row of buttons that holds it, in the same panel
            assert page.evaluate(
                "() => document.querySelector('.lab-buttons').nextElementSibling.id === 'start-problem'"
            )
            assert not runs.exists()
            page.fill('[name="train.steps"]', "1500")  # a change of the form clears it
            page.dispatch_event('[name="train.steps"]', "change")
            problem.wait_for(state="hidden")
        finally:
            lab.close(allowed_errors=(BROWSER_400,))  # the refusals' answers; no run started
