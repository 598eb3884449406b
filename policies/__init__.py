"""The common policy layer: the Policy protocol, networks, trainers, checkpoints, evaluation."""

from .base import Policy

__all__ = ["Policy"]
