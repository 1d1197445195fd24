"""The walk: one forward pass as the page draws it. Its input (`pass_input.py`, `images.py`),
the payload (`payload.py`, `arrays.py`), the diagram (`architecture.py`), the catalogue of
steps and their words (`stage_catalogue.py`, `stage_words.py`, `stage_vision.py`), the
prediction (`prediction.py`; a masked model's fillings, `masked.py`), the logit lens and the
interventions, and its routes (`walk_routes.py`).
"""
