"""The workshop's door: who may talk to it (`guard.py`), what every route shares (`http.py`),
the typed requests (`request_types.py`), and how much work one request may ask
(`limits.py`, `budget.py`).
"""
