"""Rendering for the Genesis adapter: one env per image, from a one-env copy of the scene.

Genesis' rasterizer draws a batched scene either as one image of all envs side by side or, with
``split_envs``, one image per env for *every* env on each call. Neither fits ``render(env_ids)``,
so the adapter builds (on the first render) an unbatched scene of the same robot, poses it with
each requested env's qpos and renders it: k envs cost k images, whatever n_envs is.

Cameras follow the MuJoCo adapter: ``None`` tracks the robot's base (looking at the subtree
centre of mass, at 2.5 × the model extent, azimuth 135°, elevation −20°; the model centre when
there is no base body); a name is that MJCF camera, posed from the compiled MuJoCo model (its
body frame × its local pose, in its fixed mode).
"""

from __future__ import annotations

import numpy as np

from embody.robots import RobotSpec
from embody.rotations import quat_mul, quat_rotate

from ..adapter import tracking_eye
from ..base import SimConfig
from .simulator import make_scene


class Renderer:
    """Renders envs one at a time from an unbatched copy of the scene, posed with each env's qpos (built on the first
    render)."""

    def __init__(self, gs, robot: RobotSpec, model, config: SimConfig):
        import mujoco

        self.gs, self.robot, self.model = gs, robot, model
        # MuJoCo's headlight ambient as ambient light, so that frames are about as bright as MuJoCo's
        vis = gs.options.VisOptions(shadow=config.shadows, ambient_light=tuple(model.vis.headlight.ambient))
        self.scene, self.entity = make_scene(gs, robot, model, vis)
        extent = float(model.stat.extent)
        res = (config.render_width, config.render_height)

        def camera(fovy: float):  # Genesis' fov is vertical, in degrees, like MuJoCo's fovy
            return self.scene.add_camera(res=res, fov=fovy, near=0.01 * extent, far=50 * extent, GUI=False)

        self.default = camera(float(model.vis.global_.fovy))
        self.named = {
            mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_CAMERA, i): (i, camera(float(model.cam_fovy[i])))
            for i in range(model.ncam)
        }  # cameras cannot be added once the scene is built
        self.scene.build()  # unbatched: one env
        body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, robot.base_body or "")
        self.base = self.entity.get_link(robot.base_body).idx_local if body > 0 else None

    def render(self, qpos: np.ndarray, camera: str | None) -> np.ndarray:
        """RGB frames (k, H, W, 3) uint8 of the poses qpos (k, nq)."""
        if camera is not None and camera not in self.named:
            raise ValueError(f"model {self.robot.mjcf} has no camera {camera!r}; cameras: {sorted(self.named)}")
        frames = []
        for q in qpos:
            self.entity.set_qpos(self._tensor(q))
            cam = self._pose_default() if camera is None else self._pose_named(camera)
            rgb, *_ = cam.render(rgb=True, force_render=True)  # posed without stepping: force the redraw
            frames.append(np.asarray(rgb, dtype=np.uint8))
        return np.stack(frames)

    def _tensor(self, x: np.ndarray):
        import torch

        return torch.as_tensor(x, dtype=self.gs.tc_float, device=self.gs.device)

    def _pose_default(self):
        if self.base is None:
            lookat = np.asarray(self.model.stat.center, dtype=np.float64)
        else:  # MuJoCo's tracking camera looks at the subtree centre of mass of the base
            com = self.entity.get_links_pos([self.base], ref=self.gs.link_ref_frame.root_COM)
            lookat = com.reshape(3).cpu().numpy().astype(np.float64)
        pos = tracking_eye(lookat, float(self.model.stat.extent))
        self.default.set_pose(pos=pos, lookat=lookat, up=(0.0, 0.0, 1.0))
        return self.default

    def _pose_named(self, name: str):
        import mujoco

        i, cam = self.named[name]
        m = self.model
        pos, quat = m.cam_pos[i].copy(), m.cam_quat[i].copy()
        body = int(m.cam_bodyid[i])
        if body > 0:  # a camera on a moving body: compose with the body's pose in the scene
            link = self.entity.get_link(mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, body))
            p = link.get_pos().cpu().numpy().astype(np.float64)[None]
            q = link.get_quat().cpu().numpy().astype(np.float64)[None]
            pos, quat = (p + quat_rotate(q, pos[None]))[0], quat_mul(q, quat[None])[0]
        # a camera looks along its frame's −z with +y up (MuJoCo and OpenGL alike)
        look = quat_rotate(quat[None], np.array([[0.0, 0.0, -1.0]]))[0]
        up = quat_rotate(quat[None], np.array([[0.0, 1.0, 0.0]]))[0]
        cam.set_pose(pos=pos, lookat=pos + look, up=up)
        return cam
