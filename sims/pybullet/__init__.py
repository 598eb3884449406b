"""The PyBullet adapter (``pip install 'embody[pybullet]'``); pybullet is imported only when a simulator is built."""

from .simulator import PybulletSimulator

__all__ = ["PybulletSimulator"]
