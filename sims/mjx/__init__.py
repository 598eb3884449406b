"""The MJX adapter (``--sim mjx``, extra ``mjx``): MuJoCo in JAX, batched on the device (GPU when JAX has one).

Importing this package never imports JAX; the simulator does, when it is built.
"""

from .simulator import MjxSimulator

__all__ = ["MjxSimulator"]
