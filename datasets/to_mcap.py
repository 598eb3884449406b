"""An episode as MCAP with Foxglove's message schemas (``embody dataset export-mcap``). Needs the ``viz`` extra
(foxglove-sdk, which writes the file; ``mcap`` reads it back).

Topics (log time = the frame's time from the episode start, in ns):

* ``/joint_states`` (foxglove.JointStates): position, velocity and torque of every named joint;
* ``/joints/<quantity>`` (foxglove.JointStates): the other joint-named features (target, action, sent command), the
  value in ``position`` (``effort`` for torques);
* ``/robot`` (foxglove.SceneUpdate): the robot's geoms in the ``world`` frame (capsules drawn as cylinders over their
  whole length: the schema has no capsule);
* ``/camera/<video key>`` (foxglove.CompressedImage, JPEG);
* ``/signals/<feature>`` (JSON): the other named signals, ``{component: value}`` (``{"value": x}`` for scalars);
* ``/events`` (foxglove.Log): episode start and end, supervisor phase changes.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import numpy as np

from embody.extras import require

from .content import EpisodeContent, Geometry

BUILT_IN = {"position": "position", "velocity": "velocity", "torque": "effort"}  # /joint_states fields


def export_mcap(contents: list[EpisodeContent], out: Path) -> Path:
    """Write the episodes ``contents`` one after another on the timeline to ``out`` (beside it first, then renamed
    into place)."""
    fg = require("foxglove", "viz")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    topics = Topics(fg.Context())
    writer = fg.open_mcap(tmp, allow_overwrite=True, context=topics.context)
    try:
        start = 0.0
        for content in contents:
            _write(content, topics, start)
            start += content.time[-1] + (content.time[-1] - content.time[0]) / max(len(content.time) - 1, 1)
    finally:
        writer.close()
    tmp.replace(out)
    return out


class Topics:
    """One channel per topic within a foxglove context, made on first use."""

    def __init__(self, context):
        self.context, self._channels = context, {}

    def get(self, topic: str, make):
        if topic not in self._channels:
            self._channels[topic] = make(topic, context=self.context)
        return self._channels[topic]


def _write(content: EpisodeContent, topics: Topics, start: float) -> None:
    from foxglove import channels as ch
    from foxglove import messages as m

    ns = ((start + content.time) * 1e9).round().astype(np.int64)
    stamp = [_stamp(m, n) for n in ns]
    _joint_topics(content, topics, ns, stamp)
    if content.geometry is not None:
        robot = topics.get("/robot", ch.SceneUpdateChannel)
        for t, (n, s) in enumerate(zip(ns, stamp)):
            robot.log(m.SceneUpdate(entities=[_scene_entity(content.geometry, t, s)]), log_time=int(n))
    for key, frames in content.videos.items():
        cam = topics.get(f"/camera/{key}", ch.CompressedImageChannel)
        for jpeg, n, s in zip(frames, ns, stamp):
            cam.log(m.CompressedImage(timestamp=s, frame_id=key, data=jpeg, format="jpeg"), log_time=int(n))
    _signal_topics(content, topics, ns)
    events = topics.get("/events", ch.LogChannel)
    for t, text in content.events:
        n = int(round((start + t) * 1e9))
        events.log(m.Log(timestamp=_stamp(m, n), level=m.LogLevel.Info, message=text, name="embody"), log_time=n)


def _stamp(m, ns: int):
    return m.Timestamp(sec=int(ns // 10**9), nsec=int(ns % 10**9))


def _joint_topics(content: EpisodeContent, topics: Topics, ns: np.ndarray, stamp: list) -> None:
    """/joint_states from the position, velocity and torque series (joined by joint name); /joints/<q> for the rest."""
    from foxglove import channels as ch
    from foxglove import messages as m

    built_in = [s for s in content.joints if s.quantity in BUILT_IN]
    others = [[s] for s in content.joints if s.quantity not in BUILT_IN]
    for topic, series in zip(["/joint_states"] + [f"/joints/{s[0].quantity}" for s in others], [built_in, *others]):
        if not series:
            continue
        names = list(dict.fromkeys(j for s in series for j in s.joints))
        channel = topics.get(topic, ch.JointStatesChannel)
        for t, (n, s) in enumerate(zip(ns, stamp)):
            fields = {name: {} for name in names}
            for ser in series:
                field = BUILT_IN.get(ser.quantity, "effort" if "torque" in ser.quantity else "position")
                for j, name in enumerate(ser.joints):
                    fields[name][field] = float(ser.values[t, j])
            joints = [m.JointState(name=name, **f) for name, f in fields.items()]
            channel.log(m.JointStates(timestamp=s, joints=joints), log_time=int(n))


def _signal_topics(content: EpisodeContent, topics: Topics, ns: np.ndarray) -> None:
    """One JSON topic per feature, its components as number fields (a schema named ``embody.signals.<feature>``)."""
    import foxglove

    groups: dict[str, dict[str, np.ndarray]] = {}
    for name, values in content.signals.items():
        feature, _, component = name.partition("/")
        groups.setdefault(feature, {})[component or "value"] = values
    for feature, components in groups.items():
        props = {"type": "object", "properties": {c: {"type": "number"} for c in components}}
        schema = foxglove.Schema(
            name=f"embody.signals.{feature}", encoding="jsonschema", data=json.dumps(props).encode()
        )
        make = functools.partial(foxglove.Channel, schema=schema, message_encoding="json")
        channel = topics.get(f"/signals/{feature}", make)
        for t, n in enumerate(ns):
            channel.log({c: float(v[t]) for c, v in components.items()}, log_time=int(n))


def _scene_entity(g: Geometry, t: int, stamp):
    from foxglove import messages as m

    cubes, cylinders, spheres = [], [], []
    for i, kind in enumerate(g.kind):
        (x, y, z), (qw, qx, qy, qz) = g.pos[t, i], g.quat[t, i]
        pose = m.Pose(position=m.Vector3(x=x, y=y, z=z), orientation=m.Quaternion(x=qx, y=qy, z=qz, w=qw))
        color = m.Color(r=g.rgba[i, 0], g=g.rgba[i, 1], b=g.rgba[i, 2], a=g.rgba[i, 3])
        r, h, s3 = g.size[i, 0], g.size[i, 1], g.size[i]
        if kind == "box":
            cubes.append(m.CubePrimitive(pose=pose, size=m.Vector3(x=2 * s3[0], y=2 * s3[1], z=2 * s3[2]), color=color))
        elif kind in ("sphere", "ellipsoid"):
            d = 2 * (s3 if kind == "ellipsoid" else np.full(3, r))
            spheres.append(m.SpherePrimitive(pose=pose, size=m.Vector3(x=d[0], y=d[1], z=d[2]), color=color))
        else:
            length = 2 * h + (2 * r if kind == "capsule" else 0.0)
            size = m.Vector3(x=2 * r, y=2 * r, z=length)
            cylinders.append(m.CylinderPrimitive(pose=pose, size=size, bottom_scale=1.0, top_scale=1.0, color=color))
    return m.SceneEntity(
        timestamp=stamp, frame_id="world", id="robot", cubes=cubes, cylinders=cylinders, spheres=spheres
    )
