"""The MuJoCo adapter (the embedded default simulator)."""

from .model import ModelError, build_model
from .simulator import MujocoSimulator

__all__ = ["ModelError", "MujocoSimulator", "build_model"]
