"""Glassformer: a transformer workshop you can see through."""

from glassformer.config import ModelConfig
from glassformer.models import build

__version__ = "0.1.0"
__all__ = ["ModelConfig", "build", "__version__"]
