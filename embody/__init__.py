"""embody: train in simulation, deploy to robots through the same code."""

__version__ = "0.1.0"
