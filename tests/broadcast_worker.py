"""One worker of a class shared through Redis, for `tests/test_workshop_broadcast.py`:

    python -m tests.broadcast_worker PORT TOKEN REDIS_URL RUNS_DIR

serves the tiny character model of `tests/test_workshop_page.py` (seeded, so every worker
holds the same weights, as workers loading one checkpoint do) with a class
(``create_app(..., classroom=True, broadcast=REDIS_URL, token=TOKEN)``) on 127.0.0.1:PORT,
as ``glassformer workshop --class --token TOKEN --broadcast REDIS_URL --port PORT`` would
serve a real model. It stops on SIGTERM (uvicorn's own), leaving its presence key behind for
no longer than it expires.
"""

from __future__ import annotations

import sys

import torch
import uvicorn

from glassformer.workshop.server import create_app
from tests.test_workshop_page import char_lm


def main(port: str, token: str, url: str, runs: str) -> None:
    torch.manual_seed(0)
    app = create_app({"chars": char_lm()}, runs_root=runs, token=token, classroom=True, broadcast=url)
    uvicorn.run(app, host="127.0.0.1", port=int(port), log_level="warning", lifespan="on")


if __name__ == "__main__":
    main(*sys.argv[1:5])
