"""The training lab: one run at a time in its own process (`training_lab.py`,
`trainer_process.py`), its file followed as it grows (`followed_file.py`), its form
(`lab_fields.py`) and its routes (`lab_routes.py`).
"""
