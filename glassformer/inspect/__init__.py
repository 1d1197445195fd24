"""Inspection: traces of named activations and, later, the analyses built on them."""

from glassformer.inspect.trace import Trace, capture

__all__ = ["Trace", "capture"]
