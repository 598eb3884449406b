"""Low-level controllers in the road frame, the same for every backend.

  * TrajectoryFollower: (x, y, heading, speed) waypoints at given times → continuous actions
    [acceleration, steering] (pure pursuit on the waypoint polyline for steering; speed and
    along-path position tracking with the reference acceleration fed forward). This is how a
    policy that predicts a short future ego trajectory drives the ego.
  * lane_keep_action: hold a lane centre (straight road frame) at a target speed; CARLA's meta-actions and
    expert use it (highway-env has its own lane controller).
  * bicycle_step: the kinematic bicycle model highway-env integrates (CARLA's scripted/behavior actors).

Steering is the front-wheel angle [rad], positive to the left; with highway-env's bicycle
(centre of gravity mid-wheelbase, length L) the yaw rate is v·sin(β)/(L/2), β = atan(tan(δ)/2).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .actors import Trajectory
from .base import ACCEL_MAX, STEER_MAX, Observation
from .frames import wrap_angle


@dataclass
class FollowerConfig:
    """Gains of the trajectory follower: pure pursuit on a bicycle model for steering, speed and along-path position
    feedback for acceleration."""

    lookahead_s: float = 0.7  # pursuit distance = max(min_lookahead_m, speed * lookahead_s)
    min_lookahead_m: float = 6.0
    speed_gain: float = 1.5  # [1/s] on the speed error
    position_gain: float = 0.4  # [1/s²] on the along-path position error (time tracking)
    length: float = 5.0  # vehicle length L [m] in the bicycle model


def steering_for_curvature(curvature, length: float = 5.0):
    """Front-wheel angle [rad] giving path curvature ``curvature`` [1/m] in highway-env's bicycle model."""
    sin_beta = np.clip(np.asarray(curvature) * length / 2.0, -1.0, 1.0)
    return np.arctan(2.0 * np.tan(np.arcsin(sin_beta)))


def bicycle_step(state: np.ndarray, acceleration: float, steering: float, dt: float, length: float = 5.0) -> np.ndarray:
    """Integrate (x, y, heading, speed) one step of ``dt`` (highway-env's model, road frame)."""
    x, y, h, v = state
    beta = math.atan(0.5 * math.tan(steering))
    return np.array(
        [
            x + v * math.cos(h + beta) * dt,
            y + v * math.sin(h + beta) * dt,
            float(wrap_angle(h + v * math.sin(beta) / (length / 2.0) * dt)),
            v + acceleration * dt,
        ]
    )


def _pursuit_steer(ego: np.ndarray, target_xy: np.ndarray, length: float) -> float:
    dx, dy = target_xy[0] - ego[0], target_xy[1] - ego[1]
    ld = math.hypot(dx, dy)
    if ld < 1e-6:
        return 0.0
    alpha = float(wrap_angle(math.atan2(dy, dx) - ego[2]))
    return float(np.clip(steering_for_curvature(2.0 * math.sin(alpha) / ld, length), -STEER_MAX, STEER_MAX))


class TrajectoryFollower:
    """Turn a road-frame reference trajectory into continuous actions (2,) = [acc, steering]."""

    def __init__(self, config: FollowerConfig | None = None):
        self.config = config or FollowerConfig()

    def action(self, ego: np.ndarray, trajectory: Trajectory, t: float) -> np.ndarray:
        """``ego``: (≥4,) x, y, heading, speed now (Observation.ego); ``trajectory`` in absolute
        episode time; ``t``: now [s]."""
        c = self.config
        ego = np.asarray(ego, dtype=np.float64)
        pts = np.stack([trajectory.x, trajectory.y], axis=1)
        if len(pts) == 1:  # a single waypoint: extend it along its heading
            h = trajectory.heading[0]
            pts = np.vstack([pts, pts[0] + 50.0 * np.array([math.cos(h), math.sin(h)])])
        seg = np.diff(pts, axis=0)
        seg_len = np.maximum(np.linalg.norm(seg, axis=1), 1e-9)
        cum = np.concatenate([[0.0], np.cumsum(seg_len)])
        # closest point on the polyline
        rel = ego[:2] - pts[:-1]
        u = np.clip(np.einsum("ij,ij->i", rel, seg) / seg_len**2, 0.0, 1.0)
        d = np.linalg.norm(rel - u[:, None] * seg, axis=1)
        i = int(np.argmin(d))
        s_ego = cum[i] + u[i] * seg_len[i]
        ld = max(c.min_lookahead_m, abs(ego[3]) * c.lookahead_s)
        s_target = s_ego + ld
        if s_target <= cum[-1]:
            target = np.array([np.interp(s_target, cum, pts[:, 0]), np.interp(s_target, cum, pts[:, 1])])
        else:  # past the end: continue straight along the last segment
            direction = seg[-1] / seg_len[-1]
            target = pts[-1] + (s_target - cum[-1]) * direction
        steer = _pursuit_steer(ego, target, c.length)
        # longitudinal: reference speed and position along the path at time t
        x_ref, y_ref, _, v_ref = trajectory.at(t)
        rel_ref = np.array([x_ref, y_ref]) - pts[:-1]
        u_ref = np.clip(np.einsum("ij,ij->i", rel_ref, seg) / seg_len**2, 0.0, 1.0)
        j = int(np.argmin(np.linalg.norm(rel_ref - u_ref[:, None] * seg, axis=1)))
        s_ref = cum[j] + u_ref[j] * seg_len[j]
        a_ref = (trajectory.at(t + 0.1)[3] - trajectory.at(t)[3]) / 0.1
        acc = a_ref + c.speed_gain * (v_ref - ego[3]) + c.position_gain * (s_ref - s_ego)
        return np.array([float(np.clip(acc, -ACCEL_MAX, ACCEL_MAX)), steer])


class FollowTrajectory:
    """A driving policy (act(obs) → action) that follows one fixed road-frame trajectory."""

    def __init__(self, trajectory: Trajectory, config: FollowerConfig | None = None):
        self.trajectory, self.follower = trajectory, TrajectoryFollower(config)

    def act(self, obs: Observation) -> np.ndarray:
        """The continuous action (2,) that tracks the trajectory at the observation's time."""
        return self.follower.action(obs.ego, self.trajectory, obs.t)

    def reset(self) -> None:
        pass


def lane_keep_action(
    ego: np.ndarray,
    lane_y: float,
    target_speed: float,
    acceleration: float | None = None,
    lookahead_s: float = 0.7,
    length: float = 5.0,
) -> np.ndarray:
    """[acc, steering] holding the straight lane centre y = ``lane_y`` (road frame) at ``target_speed``
    (P control, 1/s), or at the given ``acceleration``."""
    ego = np.asarray(ego, dtype=np.float64)
    ld = max(6.0, abs(ego[3]) * lookahead_s)
    steer = _pursuit_steer(ego, np.array([ego[0] + ld, lane_y]), length)
    acc = acceleration if acceleration is not None else 1.0 / 0.6 * (target_speed - ego[3])  # highway-env's TAU_ACC
    return np.array([float(np.clip(acc, -ACCEL_MAX, ACCEL_MAX)), steer])
