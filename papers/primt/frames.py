"""Keyframes of a segment and their images, for the visual judge.

Keyframes (PRIMT's choice, computed from the segment's states, at most ``n``): the first and last step, minima of
the state's speed (poses held), peaks of the residual of a constant-velocity prediction (impacts, reversals), and
change points of the state (binary segmentation, the split that most reduces the squared deviation from
the segment means), filled in that order of priority.

Images are real MuJoCo renders of the task's robot model at each keyframe's pose (``Scene.pose``), with the
scene's named geoms recoloured to plain colours and an optional marker sphere (a target the model does not
draw), from a fixed camera; PNG-encoded with OpenCV for the chat endpoint.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

import numpy as np

from embody.extras import require


def keyframes(obs: np.ndarray, n: int = 8) -> np.ndarray:
    """Sorted step indices (≤ n) of a segment's observations (L, o) (see the module)."""
    length = len(obs)
    if length <= n:
        return np.arange(length)
    picked = [0, length - 1]
    z = (obs - obs.mean(0)) / (obs.std(0) + 1e-8)
    speed = np.linalg.norm(np.diff(z, axis=0), axis=1)  # (L − 1,)
    minima = [i for i in range(1, len(speed) - 1) if speed[i] <= speed[i - 1] and speed[i] < speed[i + 1]]
    residual = np.linalg.norm(z[2:] - 2 * z[1:-1] + z[:-2], axis=1)  # the prediction error at step t + 1
    candidates = [*sorted(minima, key=lambda i: speed[i]), *(np.argsort(-residual) + 1).tolist(), *change_points(z, n)]
    for i in candidates:
        if len(picked) >= n:
            break
        if i not in picked:
            picked.append(int(i))
    return np.array(sorted(picked))


def change_points(z: np.ndarray, k: int, min_size: int = 3) -> list[int]:
    """Up to ``k`` change points of (L, o) by binary segmentation, best split first."""
    segments, points = [(0, len(z))], []
    for _ in range(k):
        best = None
        for a, b in segments:
            for s in range(a + min_size, b - min_size + 1):
                gain = _cost(z[a:b]) - _cost(z[a:s]) - _cost(z[s:b])
                if best is None or gain > best[0]:
                    best = (gain, s, (a, b))
        if best is None or best[0] <= 0:
            break
        _, s, (a, b) = best
        segments.remove((a, b))
        segments += [(a, s), (s, b)]
        points.append(s)
    return points


def _cost(x: np.ndarray) -> float:
    return float(((x - x.mean(0)) ** 2).sum())


@dataclass(frozen=True)
class Scene:
    """How a task is drawn for the visual judge: geoms recoloured by name ({geom: (colour name, rgb in 0..1)}),
    an optional marker sphere at observation columns ``marker_cols`` (colour name, rgb, radius), and a camera."""

    robot: str
    colours: dict[str, tuple[str, tuple[float, float, float]]]
    marker_cols: tuple[int, int, int] | None = None
    marker: tuple[str, tuple[float, float, float], float] | None = None
    camera: dict[str, float] = field(default_factory=dict)  # lookat_x/y/z, distance, azimuth, elevation

    def legend(self) -> str:
        """The colour key the prompt gives."""
        named = {name: rgb for name, rgb in self.colours.values()}
        if self.marker:
            named[self.marker[0]] = self.marker[1]
        return "; ".join(f"{name} = RGB {tuple(round(255 * c) for c in rgb)}" for name, rgb in named.items())


class SceneRenderer:
    """Renders poses of a scene's robot model: ``render(joint_pos (m, j), obs (m, o)) → (m, size, size, 3)`` uint8."""

    def __init__(self, scene: Scene, size: int = 224):
        import mujoco

        from embody.robots import get_robot

        self.mj, self.scene, self.size = mujoco, scene, size
        robot = get_robot(scene.robot)
        self.model = mujoco.MjModel.from_xml_path(str(robot.mjcf))
        self.data = mujoco.MjData(self.model)
        self.qadr = np.array([self.model.joint(name).qposadr[0] for name in robot.joint_names])
        for geom, (_, rgb) in scene.colours.items():
            g = self.model.geom(geom)
            g.matid = -1
            g.rgba = (*rgb, 1.0)
        self.renderer = mujoco.Renderer(self.model, size, size)
        self.camera = mujoco.MjvCamera()
        c = scene.camera
        self.camera.lookat[:] = [c.get("lookat_x", 0.0), c.get("lookat_y", 0.0), c.get("lookat_z", 0.0)]
        self.camera.distance = c.get("distance", 2.0)
        self.camera.azimuth, self.camera.elevation = c.get("azimuth", 90.0), c.get("elevation", -15.0)

    def render(self, joint_pos: np.ndarray, obs: np.ndarray) -> np.ndarray:
        mj, frames = self.mj, []
        for q, o in zip(joint_pos, obs):
            self.data.qpos[self.qadr] = q
            mj.mj_forward(self.model, self.data)
            self.renderer.update_scene(self.data, self.camera)
            if self.scene.marker is not None:
                self._marker(o[list(self.scene.marker_cols)])
            frames.append(self.renderer.render())
        return np.stack(frames)

    def _marker(self, pos: np.ndarray) -> None:
        mj, scn = self.mj, self.renderer.scene
        _, rgb, radius = self.scene.marker
        if scn.ngeom < scn.maxgeom:
            mj.mjv_initGeom(
                scn.geoms[scn.ngeom], mj.mjtGeom.mjGEOM_SPHERE, [radius, 0, 0], pos, np.eye(3).ravel(), (*rgb, 1.0)
            )
            scn.ngeom += 1

    def close(self) -> None:
        self.renderer.close()


def png_data_url(image: np.ndarray) -> str:
    """An RGB image (H, W, 3) as a ``data:image/png;base64,...`` URL."""
    cv2 = require("cv2", "primt")

    ok, buf = cv2.imencode(".png", image[..., ::-1])
    if not ok:
        raise ValueError("OpenCV could not encode the image as PNG")
    return "data:image/png;base64," + base64.b64encode(buf.tobytes()).decode()


def decode_data_url(url: str) -> np.ndarray:
    """The RGB image of a ``data:image/...;base64,`` URL; ``ValueError`` for anything else."""
    cv2 = require("cv2", "primt")

    head, _, data = url.partition(",")
    if not (head.startswith("data:image/") and head.endswith(";base64")):
        raise ValueError(f"not a base64 image data URL: {head[:40]!r}")
    image = cv2.imdecode(np.frombuffer(base64.b64decode(data, validate=True), np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError("the image data does not decode")
    return image[..., ::-1]
