"""The workshop: a local web app that walks through one real forward pass of a model.

`glassformer workshop [MODEL ...]` serves it on 127.0.0.1. The server (`server.py`) is
thin over the library: a route validates its input, calls the same functions a notebook
user calls (`lm.trace`, `glassformer.sampling`), and serializes what they return
(`walk/payload.py`, `walk/prediction.py`, `walk/architecture.py`); the page (`static/`, plain
ES modules, nothing from the network) draws what the payload says the model has.

Its rooms, each a folder:

    door/      who may talk to it and how much a request may ask: guard, http, requests, limits, budgets
    walk/      one forward pass as the page draws it: payload, diagram, catalogue and words, prediction,
               lens, interventions, images
    reading/   readings beside the walk: tokenization, similarity, explanations, attention change,
               notebook views, generation streamed
    lab/       the training lab: its run in a child process, the run's file followed, its form
    lessons/   the course's lessons as pages
    (here)     the app itself: `server.py` (the route list), `model_work.py` (the models and their
               lock), `model_routes.py`, `page_routes.py`, `module_graph.py`, `teach.py`
"""
