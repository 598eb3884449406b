"""The common policy layer: the Policy protocol, networks, trainers, checkpoints, evaluation."""

__all__ = ["Policy"]


def __getattr__(name: str):
    if name == "Policy":  # lazily: importing a submodule (e.g. the class registry) must not load torch
        from .base import Policy

        return Policy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
