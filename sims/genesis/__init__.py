"""The Genesis adapter (``--sim genesis``, extra ``genesis``): natively batched, GPU when torch has CUDA.

Importing this package never imports Genesis; the simulator does, when it is built.
"""

from .simulator import GenesisSimulator

__all__ = ["GenesisSimulator"]
