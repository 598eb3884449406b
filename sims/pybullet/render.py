"""Rendering for the PyBullet adapter: one env per image, in a separate render-only client.

The render client is posed like each requested env in turn, so rendering never perturbs the
physics clients, and EGL (which only draws bodies created after its plugin) is loaded once. EGL
when its plugin loads on a hardware device, TinyRenderer otherwise (Mesa's software EGL,
llvmpipe, is 10-20x slower than TinyRenderer: 180-310 ms against 10-23 ms a 320x240 frame).

Cameras follow the MuJoCo adapter, placed by MuJoCo at the env's configuration: ``None`` tracks
the base (``adapter.tracking_eye``), a name is that MJCF camera.
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable

import numpy as np

from ..adapter import tracking_eye
from ..base import SimConfig
from .client import Index, World, quiet
from .state import BASE_END, POS, QUAT, wxyz

# lit from above, as the MJCF scenes and the MuJoCo adapter's added light are
LIGHT = {
    "lightDirection": [0.0, 0.0, 1.0],
    "lightAmbientCoeff": 0.4,
    "lightDiffuseCoeff": 0.6,
    "lightSpecularCoeff": 0.1,
}


class Renderer:
    """A render-only client of ``world`` (EGL or TinyRenderer) that draws state rows."""

    def __init__(self, world: World, index: Index, config: SimConfig):
        p = world.p
        self.world, self.index, self.config, self.p = world, index, config, p
        try:
            if pkgutil.get_loader("eglRenderer") is None:
                raise RuntimeError("no EGL renderer plugin in this pybullet build")
            self.client, self.renderer = world.connect(egl=True), p.ER_BULLET_HARDWARE_OPENGL
        except (RuntimeError, p.error):
            self.client, self.renderer = world.connect(), p.ER_TINY_RENDERER
        self._mj_data = None

    def render(self, rows: np.ndarray, camera: str | None, place: Callable[[int], None]) -> np.ndarray:
        """RGB frames (k, H, W, 3) uint8 of state rows (k, s); ``place(k)`` poses the render
        client's fixtures as in the env of row k."""
        p, cfg, c, body, dof = self.p, self.config, self.client, self.world.body, self.index.dof
        frames = []
        for k, row in enumerate(rows):  # rendering is per image by nature
            p.resetBasePositionAndOrientation(body, row[POS].tolist(), row[QUAT].tolist(), physicsClientId=c)
            p.resetJointStatesMultiDof(body, dof, [[x] for x in row[BASE_END : BASE_END + len(dof)]], physicsClientId=c)
            place(k)
            eye, target, up, fovy, near, far = self._camera(row, camera)
            view = p.computeViewMatrix(eye, target, up, physicsClientId=c)
            proj = p.computeProjectionMatrixFOV(
                fovy, cfg.render_width / cfg.render_height, near, far, physicsClientId=c
            )
            with quiet():  # the EGL plugin announces its device on the first frame
                img = p.getCameraImage(
                    cfg.render_width,
                    cfg.render_height,
                    view,
                    proj,
                    shadow=int(cfg.shadows),
                    renderer=self.renderer,
                    physicsClientId=c,
                    **LIGHT,
                )[2]
            frames.append(np.asarray(img, dtype=np.uint8).reshape(cfg.render_height, cfg.render_width, 4)[..., :3])
        return np.stack(frames)

    def _camera(self, row: np.ndarray, camera: str | None) -> tuple[list, list, list, float, float, float]:
        """eye, target, up, vertical fov [deg], near, far: the MJCF camera ``camera``, placed by
        MuJoCo at the row's pose, or (None) the MuJoCo adapter's camera tracking the base."""
        import mujoco

        m, d, robot = self.world.model, self._mj_pose(row), self.world.robot
        extent = float(m.stat.extent)
        near, far = m.vis.map.znear * extent, m.vis.map.zfar * extent
        if camera is not None:
            cam = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_CAMERA, camera)
            if cam < 0:
                names = [m.camera(k).name for k in range(m.ncam)]
                raise ValueError(f"{robot.mjcf} has no camera {camera!r}; cameras: {names}")
            rot = d.cam_xmat[cam].reshape(3, 3)  # MuJoCo cameras look along -z with y up
            eye = d.cam_xpos[cam]
            return eye.tolist(), (eye - rot[:, 2]).tolist(), rot[:, 1].tolist(), float(m.cam_fovy[cam]), near, far
        body = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_BODY, robot.base_body or "")
        target = d.subtree_com[body] if body > 0 else m.stat.center
        eye = tracking_eye(target, extent)
        return eye.tolist(), target.tolist(), [0.0, 0.0, 1.0], float(m.vis.global_.fovy), near, far

    def _mj_pose(self, row: np.ndarray):
        """MuJoCo data at the row's configuration (kinematics, subtree centres of mass, cameras)."""
        import mujoco

        m, world = self.world.model, self.world
        if self._mj_data is None:
            self._mj_data = mujoco.MjData(m)
        d, n_dof = self._mj_data, len(self.index.dof)
        d.qpos[self.index.mj_qadr] = row[BASE_END : BASE_END + n_dof]
        if world.robot.floating_base:
            pos, quat = self.index.base.com_to_link(row[None, POS], wxyz(row[None, QUAT]))
            a = m.jnt_qposadr[m.body_jntadr[world.root_body]]  # its free joint
            d.qpos[a : a + 3], d.qpos[a + 3 : a + 7] = pos[0], quat[0]
        mujoco.mj_kinematics(m, d)
        mujoco.mj_comPos(m, d)
        mujoco.mj_camlight(m, d)
        return d

    def close(self) -> None:
        with quiet():  # EGL says goodbye
            self.p.disconnect(physicsClientId=self.client)
