"""embody: train in simulation, deploy to robots through the same code."""

import os

# Headless rendering: MuJoCo and PyOpenGL read these when first imported (by us or by another
# engine such as Genesis), so choose EGL here, before any engine loads, unless told otherwise.
if not os.environ.get("DISPLAY"):
    os.environ.setdefault("MUJOCO_GL", "egl")
    os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

__version__ = "0.1.0"
