"""Readings of a model beside the walk: tokenization, similarity,
explanations, what fine-tuning changed, the notebook views, and generation streamed
(`generate_routes.py`, `streaming.py`); their routes in `reading_routes.py`.
"""
