"""The workshop: a local web app that walks through one real forward pass of a model.

`glassformer workshop [MODEL ...]` serves it on 127.0.0.1. The server (`server.py`) is
thin over the library: a route validates its input, calls the same functions a notebook
user calls (`lm.trace`, `glassformer.sampling`), and serializes what they return
(`payload.py`, `prediction.py`, `architecture.py`); the page (`static/`, plain ES
modules, nothing from the network) draws what the payload says the model has.
"""
