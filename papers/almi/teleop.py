"""A person's hand targets as the upper body's reference (ALMI's loco-manipulation extension).

``embody deploy RUN --teleop keyboard|gamepad|spacemouse``: each control tick the device's move (3,) in [-1, 1]
moves the selected hand's target at ``speed`` m/s (pelvis frame: x forward, y left, z up) within ``reach`` m of
where it started; "grip" switches hands. Damped least squares on that arm's four joints (shoulder pitch, roll,
yaw, elbow pitch) brings its wrist towards the target each tick, within the joint ranges and the velocity
limits; the rest of the upper body holds the default pose. The upper policy tracks the result as it tracks a
clip, while the legs keep balance and follow the velocity command.
"""

from __future__ import annotations

import numpy as np

from embody.robots import RobotSpec
from embody.robots.retarget import default_pose_model

ARM = ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow_pitch")


class HandTargets:
    """Hand targets moved by an input device → a whole-body joint reference (n_joints,)."""

    def __init__(self, spec: RobotSpec, dt: float, speed: float = 0.25, reach: float = 0.3, damping: float = 1e-3):
        if spec.retarget is None:
            raise ValueError(f"robot {spec.name!r} has no keypoints for hand targets (RobotSpec.retarget)")
        self.dt, self.speed, self.reach, self.damping = dt, speed, reach, damping
        self.mj, self.model, self.data, self.qadr = default_pose_model(spec)
        self.q = spec.default_pose.copy()
        sides = ("left", "right")
        self.joints = {s: np.array([spec.joint_names.index(f"{s}_{j}_joint") for j in ARM]) for s in sides}
        self.dofs = {
            s: np.array([self.model.joint(spec.joint_names[j]).dofadr[0] for j in self.joints[s]]) for s in sides
        }
        self.wrist = {s: self.model.body(spec.retarget.bodies[f"{s}_wrist"]).id for s in sides}
        self.lower, self.upper, self.max_step = spec.lower, spec.upper, spec.velocity_limit * dt
        self.mj.mj_kinematics(self.model, self.data)
        self.home = {s: self.data.xpos[self.wrist[s]].copy() for s in sides}
        self.target = {s: p.copy() for s, p in self.home.items()}
        self.side = "left"

    def update(self, move: np.ndarray, buttons: set[str]) -> np.ndarray:
        """One tick: switch hands on "grip", move the selected target, step both arms towards their targets;
        returns the joint reference (n_joints,)."""
        if "grip" in buttons:
            self.side = "right" if self.side == "left" else "left"
        s = self.side
        moved = self.target[s] + self.speed * self.dt * np.clip(np.asarray(move, dtype=np.float64), -1.0, 1.0)
        self.target[s] = np.clip(moved, self.home[s] - self.reach, self.home[s] + self.reach)
        for side in self.target:
            self._step(side)
        return self.q.copy()

    def wrist_position(self, side: str) -> np.ndarray:
        """The wrist's position (3,) at the current reference."""
        self._kinematics()
        return self.data.xpos[self.wrist[side]].copy()

    def _kinematics(self) -> None:
        self.data.qpos[self.qadr] = self.q
        self.mj.mj_kinematics(self.model, self.data)
        self.mj.mj_comPos(self.model, self.data)

    def _step(self, side: str) -> None:
        """A damped least-squares step of the arm's joints towards the wrist target, within ranges and speeds."""
        self._kinematics()
        err = self.target[side] - self.data.xpos[self.wrist[side]]
        jacp = np.zeros((3, self.model.nv))
        self.mj.mj_jacBody(self.model, self.data, jacp, None, self.wrist[side])
        J = jacp[:, self.dofs[side]]
        dq = J.T @ np.linalg.solve(J @ J.T + self.damping * np.eye(3), err)
        j = self.joints[side]
        dq = np.clip(dq, -self.max_step[j], self.max_step[j])
        self.q[j] = np.clip(self.q[j] + dq, self.lower[j], self.upper[j])
