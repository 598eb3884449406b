"""The road frame and each backend's conversion into it.

The road frame is right-handed: x forward along the road, y to the left, heading in radians
counter-clockwise from +x, SI units (m, m/s, rad). A scenario's road frame has its origin at
the start of the ego's first road segment, on the centre of the leftmost lane, with x along
that lane; lane k (0 = leftmost) of a straight road then has its centre at y = -k * width.

Backends differ from it:
  * highway-env: world x forward, y to the RIGHT (screen coordinates), heading clockwise [rad];
  * CARLA (Unreal): left-handed, x forward, y to the right, z up, yaw clockwise seen from above
    in DEGREES.
Both reduce to a right-handed world by negating y and the heading (CARLA: also degrees to
radians); ``Frame2D`` then places the scenario's road frame in that world.

All functions take floats or arrays of any (matching) shape and return the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def wrap_angle(a):
    """Angle(s) wrapped to [-pi, pi)."""
    return (np.asarray(a) + np.pi) % (2.0 * np.pi) - np.pi


@dataclass(frozen=True)
class Frame2D:
    """The road frame's pose in a right-handed world: origin (x0, y0) [m] and yaw [rad, CCW]."""

    x0: float = 0.0
    y0: float = 0.0
    yaw: float = 0.0

    def to_road(self, x, y, heading):
        """Right-handed world (x, y, heading) → road frame."""
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        dx, dy = np.asarray(x) - self.x0, np.asarray(y) - self.y0
        return c * dx + s * dy, -s * dx + c * dy, wrap_angle(np.asarray(heading) - self.yaw)

    def from_road(self, x, y, heading):
        """Road frame (x, y, heading) → right-handed world."""
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        x, y = np.asarray(x), np.asarray(y)
        return self.x0 + c * x - s * y, self.y0 + s * x + c * y, wrap_angle(np.asarray(heading) + self.yaw)

    def vector_to_road(self, vx, vy):
        """A right-handed world vector (velocity) → road frame."""
        c, s = np.cos(self.yaw), np.sin(self.yaw)
        return c * np.asarray(vx) + s * np.asarray(vy), -s * np.asarray(vx) + c * np.asarray(vy)


IDENTITY = Frame2D()


# ---------------------------------------------------------------- highway-env (y right, heading clockwise)


def highway_to_road(x, y, heading, frame: Frame2D = IDENTITY):
    """highway-env world (x, y right, heading clockwise) → road frame."""
    return frame.to_road(x, -np.asarray(y), -np.asarray(heading))


def road_to_highway(x, y, heading, frame: Frame2D = IDENTITY):
    """Road frame → highway-env world (x, y right, heading clockwise)."""
    wx, wy, wh = frame.from_road(x, y, heading)
    return wx, -wy, wrap_angle(-wh)


def highway_frame(x, y, heading) -> Frame2D:
    """The Frame2D whose road-frame origin sits at highway-env pose (x, y, heading)."""
    return Frame2D(float(x), float(-y), float(wrap_angle(-heading)))


# ---------------------------------------------------------------- CARLA (left-handed, yaw in degrees)


def carla_to_road(x, y, yaw_deg, frame: Frame2D = IDENTITY):
    """CARLA world (x, y right, yaw clockwise in degrees) → road frame (heading in rad, CCW)."""
    return frame.to_road(x, -np.asarray(y), -np.deg2rad(yaw_deg))


def road_to_carla(x, y, heading, frame: Frame2D = IDENTITY):
    """Road frame → CARLA world (x, y, yaw in degrees, in [-180, 180))."""
    wx, wy, wh = frame.from_road(x, y, heading)
    return wx, -wy, np.rad2deg(wrap_angle(-wh))


def carla_vector_to_road(vx, vy, frame: Frame2D = IDENTITY):
    """A CARLA world vector (a velocity) → road frame."""
    return frame.vector_to_road(vx, -np.asarray(vy))


def carla_frame(x, y, yaw_deg) -> Frame2D:
    """The Frame2D whose road-frame origin sits at CARLA pose (x, y, yaw_deg)."""
    return Frame2D(float(x), float(-y), float(wrap_angle(-np.deg2rad(yaw_deg))))


def road_steering_to_carla(steering_rad, max_steer_rad: float):
    """Road-frame steering (positive turns left) → CARLA's VehicleControl.steer in [-1, 1] (positive right)."""
    return np.clip(-np.asarray(steering_rad) / max_steer_rad, -1.0, 1.0)
