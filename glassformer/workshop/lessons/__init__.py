"""The course's lessons as workshop pages (`lesson_pages.py`) and their routes
(`lesson_routes.py`).
"""
