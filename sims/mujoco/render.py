"""Batched rendering for the MuJoCo adapter: many envs' frames per call from one GL context.

``mujoco.Renderer`` draws one scene and reads its pixels back per frame; the read-back stalls the GL pipeline
every time. ``TiledRenderer`` draws each env's scene into its own tile (viewport) of one offscreen buffer and reads
the whole buffer back once per pass of up to ``MAX_TILES`` envs (fewer for frames so large that the buffer would pass
``MAX_SIDE``). The frames are the ones ``mujoco.Renderer`` draws:
same scene, camera and options, the same projection (a tile has the frame's size and aspect).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ..adapter import TRACK_AZIMUTH, TRACK_DISTANCE, TRACK_ELEVATION

MAX_TILES = 64  # envs per pass at most: an 8 × 8 grid
MAX_SIDE = 4096  # px: fewer tiles per pass for large frames, so the offscreen buffer stays within GL limits


class TiledRenderer:
    """Frames (k, height, width, 3) uint8 of many envs per call (module docstring); ``model`` supplies meshes,
    textures and the offscreen size, the per-env models passed to ``render`` their own poses."""

    def __init__(self, model, width: int, height: int, shadows: bool = False, reflections: bool = False):
        import mujoco
        from mujoco.rendering.classic import gl_context

        self._mj, self.width, self.height = mujoco, width, height
        self.shadows, self.reflections = shadows, reflections
        side = math.isqrt(MAX_TILES)
        self.cols, self.rows = max(1, min(side, MAX_SIDE // width)), max(1, min(side, MAX_SIDE // height))
        self.tiles = self.cols * self.rows
        w, h = self.cols * width, self.rows * height
        model.vis.global_.offwidth = max(model.vis.global_.offwidth, w)
        model.vis.global_.offheight = max(model.vis.global_.offheight, h)
        self._gl = gl_context.GLContext(w, h)
        self._gl.make_current()
        self._ctx = mujoco.MjrContext(model, mujoco.mjtFontScale.mjFONTSCALE_150.value)
        mujoco.mjr_setBuffer(mujoco.mjtFramebuffer.mjFB_OFFSCREEN.value, self._ctx)
        self._scene = mujoco.MjvScene(model, maxgeom=10_000)
        self._option, self._perturb = mujoco.MjvOption(), mujoco.MjvPerturb()
        self._buffer = np.empty((h, w, 3), dtype=np.uint8)

    def render(self, items, camera) -> np.ndarray:
        """``items``: an iterable of (model, data) whose data holds a forward-computed state, consumed one at a time
        (a generator may reuse one MjData); ``camera``: an MjvCamera or a camera name. Returns (k, height, width, 3)
        uint8."""
        items, frames = iter(items), []
        while (chunk := self._pass(itertools.islice(items, self.tiles), camera)) is not None:
            frames.append(chunk)
        return np.concatenate(frames) if frames else np.zeros((0, self.height, self.width, 3), np.uint8)

    def _pass(self, items, camera) -> np.ndarray | None:
        """Draw up to ``tiles`` items into their tiles and read them back; None when ``items`` is empty."""
        mj, w, h = self._mj, self.width, self.height
        self._gl.make_current()
        n = 0
        for n, (model, data) in enumerate(items, start=1):
            mj.mjv_updateScene(
                model,
                data,
                self._option,
                self._perturb,
                self._camera(model, camera),
                mj.mjtCatBit.mjCAT_ALL.value,
                self._scene,
            )
            self._scene.flags[mj.mjtRndFlag.mjRND_SHADOW] = self.shadows
            self._scene.flags[mj.mjtRndFlag.mjRND_REFLECTION] = self.reflections
            mj.mjr_render(self._viewport(n - 1), self._scene, self._ctx)
        if n == 0:
            return None
        rows = math.ceil(n / self.cols)
        buf = self._buffer[: rows * h]
        mj.mjr_readPixels(buf, None, mj.MjrRect(0, 0, self.cols * w, rows * h), self._ctx)
        tiles = [buf[(k // self.cols) * h :][:h, (k % self.cols) * w :][:, :w] for k in range(n)]
        return np.stack(tiles)[:, ::-1]  # GL's rows start at the bottom

    def _camera(self, model, camera):
        """An MjvCamera as given, or the named model camera as mujoco.Renderer resolves a name."""
        if not isinstance(camera, str):
            return camera
        cam = self._mj.MjvCamera()
        cam.type = self._mj.mjtCamera.mjCAMERA_FIXED
        cam.fixedcamid = self._mj.mj_name2id(model, self._mj.mjtObj.mjOBJ_CAMERA, camera)
        if cam.fixedcamid < 0:
            names = [self._mj.mj_id2name(model, self._mj.mjtObj.mjOBJ_CAMERA, i) for i in range(model.ncam)]
            raise ValueError(f"the model has no camera {camera!r}; cameras: {names}")
        return cam

    def _viewport(self, k: int):
        """Tile k: column k mod cols, row k div cols counted from the bottom (GL's origin)."""
        return self._mj.MjrRect((k % self.cols) * self.width, (k // self.cols) * self.height, self.width, self.height)

    def __del__(self) -> None:  # as mujoco.Renderer: an unclosed simulator still frees its GL context
        try:
            self.close()
        except Exception:  # interpreter shutdown: GL may be gone already
            pass

    def close(self) -> None:
        if getattr(self, "_ctx", None) is not None:
            self._gl.make_current()
            self._ctx.free()
            self._gl.free()
            self._ctx = None


def tracking_camera(model, robot):
    """The default camera: one following ``robot``'s base body (a free camera on the model's centre without one)."""
    import mujoco as mj

    cam = mj.MjvCamera()
    body = mj.mj_name2id(model, mj.mjtObj.mjOBJ_BODY, robot.base_body or "")
    cam.type = mj.mjtCamera.mjCAMERA_TRACKING if body > 0 else mj.mjtCamera.mjCAMERA_FREE
    cam.trackbodyid = max(body, 0)
    cam.distance = TRACK_DISTANCE * float(model.stat.extent)
    cam.azimuth, cam.elevation = np.degrees(TRACK_AZIMUTH), np.degrees(TRACK_ELEVATION)
    cam.lookat[:] = model.stat.center
    return cam
