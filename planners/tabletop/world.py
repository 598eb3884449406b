"""One compiled tabletop scene: MuJoCo model and data, stepping with frame capture, object
poses, the drawer's slide and the weld grasp.

Grasp: every block and peg has an equality weld ``grasp_<name>`` between the hand and its body,
inactive in the model. ``grasp`` sets the weld's reference to the current relative pose (so
nothing jumps) and activates it; ``release`` deactivates it. The skills close the fingers on
the object first; the weld then stands in for friction, which would need much finer
contact tuning to hold a block reliably through fast arm motions. While a weld is active the
fingers keep squeezing, so the grasp looks and collides like a real one.
"""

from __future__ import annotations

import math

import mujoco
import numpy as np

from embody import exits

from . import layout as L


class SceneError(ValueError):
    """The scene cannot be built or asked this (unrealizable init, unknown object or action)."""

    exit_code = exits.INPUT


def yaw_of(rot: np.ndarray) -> float:
    """Heading of a body's x axis in the table plane."""
    return math.atan2(rot[1, 0], rot[0, 0])


class World:
    """The physical state of one scene. ``objects``: name → type; holes are numbered in order."""

    def __init__(
        self,
        objects: dict[str, str],
        render: bool,
        fps: float,
        size: tuple[int, int],
        frames: list[np.ndarray] | None = None,
    ):
        self.objects = dict(objects)
        of = lambda kind: [n for n, t in objects.items() if t == kind]  # noqa: E731
        self.blocks, self.pegs, self.holes = of("block"), of("peg"), of("hole")
        self.drawer = next(iter(of("drawer")), None)
        xml = L.scene_xml(
            self.blocks,
            self.pegs,
            self.drawer is not None,
            len(self.holes),
            framebuffer=(max(640, size[0]), max(480, size[1])),
        )
        self.model = m = mujoco.MjModel.from_xml_string(xml)
        self.data = mujoco.MjData(m)
        self.arm_adr = np.array([m.joint(f"joint{i}").qposadr[0] for i in range(1, 8)])
        self.finger_adr = np.array([m.joint(n).qposadr[0] for n in ("left_finger", "right_finger")])
        self.hole_pos = dict(zip(self.holes, L.hole_positions(len(self.holes))))
        self._weld = {n: m.equality(f"grasp_{n}").id for n in self.blocks + self.pegs}
        self._hand = m.body("hand").id
        self.frames = [] if frames is None else frames  # captured RGB frames (H, W, 3) uint8
        self._frame_every = max(1, round(1.0 / (fps * m.opt.timestep)))
        self._steps = 0
        self._renderer = mujoco.Renderer(m, size[1], size[0]) if render else None
        self._camera = mujoco.MjvCamera()
        self._camera.lookat[:], self._camera.distance = (0.38, 0.03, 0.12), 1.6  # front left, whole arm in view
        self._camera.azimuth, self._camera.elevation = 235.0, -35.0

    # -- objects -------------------------------------------------------------------------
    def body(self, name: str) -> int:
        """MuJoCo body id of object ``name``."""
        return self.model.body(f"obj_{name}").id

    def pos(self, name: str) -> np.ndarray:
        """(3,) world position of an object's centre."""
        return self.data.xpos[self.body(name)].copy()

    def rot(self, name: str) -> np.ndarray:
        """(3, 3) world rotation of an object."""
        return self.data.xmat[self.body(name)].reshape(3, 3).copy()

    def set_pose(self, name: str, pos, yaw: float = 0.0) -> None:
        """Teleport a block or peg (at rest, upright, heading ``yaw``)."""
        j = self.model.joint(f"obj_{name}")
        self.data.qpos[j.qposadr[0] : j.qposadr[0] + 7] = (*pos, math.cos(yaw / 2), 0, 0, math.sin(yaw / 2))
        self.data.qvel[j.dofadr[0] : j.dofadr[0] + 6] = 0

    def drawer_q(self) -> float:
        """How far the drawer is pulled out (m); 0 = closed."""
        return float(self.data.qpos[self.model.joint("drawer").qposadr[0]])

    def set_drawer_q(self, q: float) -> None:
        """Teleport the drawer, carrying what lies in it along."""
        dx = -(q - self.drawer_q())
        for b in self.blocks:
            if self.in_drawer(b):
                self.set_pose(b, self.pos(b) + (dx, 0, 0), yaw_of(self.rot(b)))
        self.data.qpos[self.model.joint("drawer").qposadr[0]] = q

    def drawer_origin(self) -> np.ndarray:
        """World position of the drawer frame (front panel's outer face, floor level)."""
        return np.array([L.DRAWER_POS[0] - self.drawer_q(), L.DRAWER_POS[1], 0.0])

    def in_drawer(self, name: str) -> bool:
        """The object's centre lies inside the drawer box, below its walls' top."""
        if self.drawer is None:
            return False
        x, y, z = self.pos(name) - self.drawer_origin()
        x0, x1, y0, y1 = L.DRAWER_IN
        return x0 < x < x1 and y0 < y < y1 and z < L.DRAWER_WALL_TOP

    # -- grasp ---------------------------------------------------------------------------
    def held(self) -> str | None:
        """The object whose grasp weld is active, if any."""
        return next((n for n, i in self._weld.items() if self.data.eq_active[i]), None)

    def grasp(self, name: str) -> None:
        """Weld ``name`` to the hand where it is now (relpose = the object in the hand frame)."""
        d, h, b = self.data, self._hand, self.body(name)
        rel_pos = d.xmat[h].reshape(3, 3).T @ (d.xpos[b] - d.xpos[h])
        rel_quat = np.zeros(4)
        mujoco.mju_negQuat(rel_quat, d.xquat[h])
        mujoco.mju_mulQuat(rel_quat, rel_quat, d.xquat[b])
        i = self._weld[name]
        self.model.eq_data[i, :3] = 0  # anchor: the object's origin
        self.model.eq_data[i, 3:6], self.model.eq_data[i, 6:10] = rel_pos, rel_quat
        d.eq_active[i] = 1

    def release(self) -> None:
        """Deactivate every grasp weld (the fingers stay where they are)."""
        self.data.eq_active[:] = 0

    def fingers(self) -> np.ndarray:
        """(2,) finger openings (each pad's distance from the hand's midplane)."""
        return self.data.qpos[self.finger_adr].copy()

    def touching(self, geom_prefix: str, name: str) -> bool:
        """Any contact between a geom named ``geom_prefix``* and object ``name``."""
        m, d, b = self.model, self.data, self.body(name)
        for c in d.contact[: d.ncon]:
            for g, other in ((c.geom1, c.geom2), (c.geom2, c.geom1)):
                if m.geom_bodyid[other] == b and (m.geom(g).name or "").startswith(geom_prefix):
                    return True
        return False

    # -- time ----------------------------------------------------------------------------
    def step(self, n: int = 1) -> None:
        """Advance the physics ``n`` steps, capturing a frame every 1/fps of sim time when rendering."""
        for _ in range(n):
            mujoco.mj_step(self.model, self.data)
            self._steps += 1
            if self._renderer is not None and self._steps % self._frame_every == 0:
                self.capture()

    def capture(self) -> None:
        """Append the current camera image to ``frames`` (nothing without rendering)."""
        if self._renderer is not None:
            self._renderer.update_scene(self.data, self._camera)
            self.frames.append(self._renderer.render())

    def close(self) -> None:
        """Free the renderer; safe to call twice."""
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
