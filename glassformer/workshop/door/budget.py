"""Model work with a budget: stopped when nobody waits for it, past its time, or when the
server stops, checked between steps.

Every model the server holds carries a forward pre-hook on the model and on each of its
blocks (`watch`). Each checks the `WorkBudget` of the work running now on this thread, so a
long walk stops within one block, and LIME's thousand passes, SHAP's or integrated
gradients' within one pass: the library's code needs no flag of its own. A hook costs one
thread-local read when no budget runs (a notebook using the same model).

    budget = WorkBudget("the walk", seconds=30)
    budget.run(payload.walk, given, settings)   # on the model thread
    budget.cancel("the page left")              # from the event loop: the work stops soon

Stopped work raises `WorkStopped`, which the server answers 503 (past its time, or the
server stopping) or 499 (its client left: nobody reads the answer).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from starlette.requests import Request
from torch import nn

from glassformer.nn.blocks import Block

T = TypeVar("T")
CLIENT_GONE = 499  # nginx's "client closed request": nobody reads it, the log shows why it stopped
_running = threading.local()  # .budget: the WorkBudget of the work on this thread, if any


class WorkStopped(Exception):
    """Work stopped before its end: ``reason`` in words, ``status`` to answer with."""

    def __init__(self, reason: str, status: int) -> None:
        super().__init__(reason)
        self.status = status


class WorkBudget:
    """The time ``what`` may take (``seconds``), and a flag that stops it from another thread."""

    def __init__(self, what: str, seconds: float) -> None:
        self.what, self.seconds = what, seconds
        self.deadline = float("inf")  # set when the work starts (`run`): time in the queue is free
        self._stop = threading.Event()
        self._reason, self._status = "", 503

    def cancel(self, reason: str, status: int = 503) -> None:
        """Stop the work at its next check (from any thread)."""
        if not self._stop.is_set():
            self._reason, self._status = reason, status
            self._stop.set()

    def check(self) -> None:
        """Raise `WorkStopped` if the work was cancelled or has run past its time."""
        if self._stop.is_set():
            raise WorkStopped(f"{self.what} stopped: {self._reason}", self._status)
        if time.monotonic() > self.deadline:
            raise WorkStopped(
                f"{self.what} took longer than {self.seconds:g} s, the workshop's limit for one request "
                "on this machine: try a shorter text (or fewer samples)",
                503,
            )

    def run(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` with this budget checked by every watched model it runs. The time runs
        from the first call: a generation's steps, each one call, share one budget."""
        if self.deadline == float("inf"):
            self.deadline = time.monotonic() + self.seconds
        self.check()
        _running.budget = self
        try:
            return fn(*args)
        finally:
            _running.budget = None


async def when_gone(request: Request, then: Callable[[], None]) -> None:
    """Call ``then()`` when ``request``'s client disconnects (its body read: what comes next is that)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
    then()


def watch(net: nn.Module) -> None:
    """Check the running budget before ``net`` and each of its blocks runs (once per model)."""
    if getattr(net, "_glassformer_watched", False):
        return
    for module in (net, *(m for m in net.modules() if isinstance(m, Block))):
        module.register_forward_pre_hook(_check_running)
    net._glassformer_watched = True


def _check_running(module: nn.Module, args: Any) -> None:
    budget = getattr(_running, "budget", None)
    if budget is not None:
        budget.check()
