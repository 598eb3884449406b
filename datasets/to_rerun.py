"""An episode in Rerun (``embody dataset view``): the robot's geoms in 3D, the camera, joint signals by limb, the
other signals and events on one ``time`` timeline. Needs the ``viz`` extra (rerun-sdk).

Entity paths: ``world/robot/{box,capsule,cylinder,sphere,ellipsoid}``, ``camera/<video key>``,
``joints/<limb>/<joint>/<quantity>``, ``signals/<feature>[/<component>]``, ``events``.
"""

from __future__ import annotations

import os
import urllib.parse
from pathlib import Path

import numpy as np

from embody.extras import require

from .content import LIMBS, EpisodeContent


def view(content: EpisodeContent, save: Path | None = None, web_port: int | None = None) -> str | None:
    """Write ``content`` to ``save`` (an .rrd file, written beside and renamed into place), or serve it to Rerun's
    web viewer on ``web_port`` (returns its URL; the caller keeps the process alive), or spawn the native viewer."""
    rr = require("rerun", "viz")
    rec = rr.RecordingStream("embody", recording_id=f"{content.dataset}#{content.episode}")
    layout = blueprint(content)
    if save is not None:
        save.parent.mkdir(parents=True, exist_ok=True)
        tmp = save.with_name(f".{save.name}.{os.getpid()}.tmp")
        rec.save(tmp, default_blueprint=layout)
        log_episode(rr, rec, content)
        rec.flush()
        rec.disconnect()
        tmp.replace(save)
        return str(save)
    if web_port is not None:
        grpc = rec.serve_grpc(default_blueprint=layout)
        rr.serve_web_viewer(web_port=web_port, open_browser=False, connect_to=grpc)
    else:
        rec.spawn(default_blueprint=layout)
    log_episode(rr, rec, content)
    rec.flush()
    return f"http://127.0.0.1:{web_port}/?url={urllib.parse.quote(grpc, safe='')}" if web_port is not None else None


def blueprint(content: EpisodeContent):
    """The 3D view and cameras beside one time-series view per limb, the signals and the events."""
    import rerun.blueprint as rrb

    limbs = [limb for limb in (*LIMBS, "joints") if any(limb in s.limbs for s in content.joints)]
    left = [rrb.Spatial3DView(origin="world", name="robot")] if content.geometry else []
    left += [rrb.Spatial2DView(origin=f"camera/{k}", name=k) for k in content.videos]
    right = [rrb.TimeSeriesView(origin=f"joints/{limb}", name=limb) for limb in limbs]
    right += [rrb.TimeSeriesView(origin="signals", name="signals"), rrb.TextLogView(origin="events", name="events")]
    return rrb.Blueprint(rrb.Horizontal(rrb.Vertical(*left), rrb.Grid(*right)) if left else rrb.Grid(*right))


def log_episode(rr, rec, content: EpisodeContent) -> None:
    """Everything in ``content``, as columns over the ``time`` timeline (one call per entity, not per frame)."""
    time = [rr.TimeColumn("time", duration=content.time)]
    for series in content.joints:
        for i, (joint, limb) in enumerate(zip(series.joints, series.limbs)):
            path = f"joints/{limb}/{joint}/{series.quantity}"
            rec.send_columns(path, indexes=time, columns=rr.Scalars.columns(scalars=series.values[:, i]))
    for name, values in content.signals.items():
        rec.send_columns(f"signals/{name}", indexes=time, columns=rr.Scalars.columns(scalars=values))
    for key, frames in content.videos.items():
        images = rr.EncodedImage.columns(blob=frames, media_type=["image/jpeg"] * len(frames))
        rec.send_columns(f"camera/{key}", indexes=time, columns=images)
    for t, text in content.events:
        rec.set_time("time", duration=t)
        rec.log("events", rr.TextLog(text))
    if content.geometry is not None:
        rec.log("world", rr.ViewCoordinates.RIGHT_HAND_Z_UP, static=True)
        _log_geometry(rr, rec, content, time)


def _log_geometry(rr, rec, content: EpisodeContent, time) -> None:
    """Each geom kind as one batch per frame; MuJoCo's sizes are half-extents, its quaternions (w, x, y, z)."""
    g = content.geometry
    T = len(content.time)
    for kind in sorted(set(g.kind)):
        idx = np.array([i for i, k in enumerate(g.kind) if k == kind])
        pos, quat = g.pos[:, idx].reshape(-1, 3), g.quat[:, idx][..., [1, 2, 3, 0]].reshape(-1, 4)
        size = np.tile(g.size[idx], (T, 1))
        colors = np.tile((g.rgba[idx] * 255).astype(np.uint8), (T, 1))
        if kind == "box":
            cols = rr.Boxes3D.columns(centers=pos, half_sizes=size, quaternions=quat, colors=colors)
        elif kind in ("sphere", "ellipsoid"):
            half = size if kind == "ellipsoid" else np.repeat(size[:, :1], 3, axis=1)
            cols = rr.Ellipsoids3D.columns(centers=pos, half_sizes=half, quaternions=quat, colors=colors)
        elif kind == "cylinder":
            cols = rr.Cylinders3D.columns(
                centers=pos, lengths=2 * size[:, 1], radii=size[:, 0], quaternions=quat, colors=colors
            )
        else:  # capsule: Rerun's starts at its translation and runs along +z; MuJoCo's is centered
            start = pos - _rotate_z(g.quat[:, idx].reshape(-1, 4), size[:, 1])
            cols = rr.Capsules3D.columns(
                translations=start, lengths=2 * size[:, 1], radii=size[:, 0], quaternions=quat, colors=colors
            )
        archetype = {"box": rr.Boxes3D, "cylinder": rr.Cylinders3D, "capsule": rr.Capsules3D}.get(kind, rr.Ellipsoids3D)
        rec.log(f"world/robot/{kind}", archetype.from_fields(fill_mode="solid"), static=True)  # not wireframes
        rec.send_columns(f"world/robot/{kind}", indexes=time, columns=cols.partition([len(idx)] * T))


def _rotate_z(quat_wxyz: np.ndarray, length: np.ndarray) -> np.ndarray:
    """(k, 3): the local z axis of each (w, x, y, z) rotation, times ``length``."""
    w, x, y, z = quat_wxyz.T
    axis = np.stack([2 * (x * z + w * y), 2 * (y * z - w * x), 1 - 2 * (x * x + y * y)], axis=1)
    return axis * length[:, None]
