"""Shared fixtures: tiny configurations of every family, seeded."""

from __future__ import annotations

import os
import signal

# Reference libraries (transformers, sentence-transformers) read local files only: the
# tests never touch the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

import glassformer as gf  # noqa: E402

POSITIONS = ("learned", "sinusoidal", "rope", "alibi", "t5_relative", "none")


def pytest_configure(config) -> None:
    """Ctrl-C reaches the trainers the tests start. A shell's background job (``make test &``
    in a script, nohup) starts pytest with SIGINT ignored, and a process inherits that: every
    trainer would ignore the lab's Stop, and be killed, with no checkpoint, STOP_WAIT_S later."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def tiny(**overrides) -> gf.ModelConfig:
    """A small config (d=32, 2 layers, 4 heads, vocab 61) with some fields overridden."""
    base = dict(vocab_size=61, d_model=32, n_layers=2, n_heads=4, d_ff=48, max_seq_len=64)
    base.update(overrides)
    return gf.ModelConfig(**base)


def tiny_model(**overrides):
    torch.manual_seed(0)
    return gf.build(tiny(**overrides)).eval()


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(1234)


@pytest.fixture(autouse=True)
def _own_data_dir(tmp_path_factory, monkeypatch):
    """Corpora and token caches go to a fresh folder, never to ~/.cache: a test neither
    reads what an earlier run left nor leaves anything behind."""
    monkeypatch.setenv("GLASSFORMER_DATA", str(tmp_path_factory.mktemp("glassformer-data")))


CHROMIUM = "/usr/bin/chromium"  # Debian's package: never a browser downloaded by Playwright


@pytest.fixture(scope="module")
def browser():
    """Headless Chromium driven by Playwright, one per test module (skipped without it)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not os.path.exists(CHROMIUM):
        pytest.skip("Debian's chromium is not installed")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield chromium
        chromium.close()


# the workshop ----------------------------------------------------------------------------
# A module that serves the workshop defines ``app`` (or its own ``server``); these give it
# a test client, a server on a free port for the module, and a browser tab per test.
@pytest.fixture(scope="module")
def client(app):
    return workshop_client(app)


def workshop_client(app):
    """A TestClient of the workshop ``app`` as a script sees it: on 127.0.0.1, with its token."""
    from starlette.testclient import TestClient

    headers = {"Authorization": f"token {app.state.token}"}
    return TestClient(app, base_url="http://127.0.0.1:8765", headers=headers)


@pytest.fixture(scope="module")
def server(app):
    from tests.workshop_server import serving

    with serving(app) as url:
        yield url


@pytest.fixture
def workshop(browser, server, tmp_path):
    """The page in a tab (`tests.test_workshop_page.Workshop`), closed after the test."""
    from tests.test_workshop_page import Workshop

    opened = Workshop(browser, server, tmp_path)
    yield opened
    if not opened.page.is_closed():
        opened.close()
