"""What the PyBullet adapter loads: the robot's URDF (adapted for PyBullet) and the static scene.

The URDF comes from ``embody.robots.urdf`` (the MJCF stays the one source of truth), with two
PyBullet-specific edits written into ``cache_dir("urdf")``:

* Links without an <inertial> (sensor sites, MuJoCo's massless bodies such as peg_arm's
  ``ft_sensor``) get an explicit zero one: PyBullet would give them 1 kg and a unit inertia.
* PyBullet has no joint armature (rotor inertia). It is folded into the child link's inertia
  about the joint axis (I += a u uᵀ, re-diagonalised), which keeps explicit PD stable on light
  links (the H1-2 wrists: 1e-4 kg·m² links, kd = 1, armature 0.01). Unlike true armature this
  extra inertia also resists the link's rotation caused by other joints about that axis; the
  error is small except for light end links. The result often breaks the triangle inequality
  (I1 + I2 >= I3), which PyBullet's URDF importer answers by zeroing the inertia, so the URDF
  holds the new principal frame with a placeholder diagonal and the adapter sets the real one
  with changeDynamics after loading. Prismatic armature has no such equivalent and is dropped
  (no robot here has one).

Scene geometry outside the robot subtree (the peg board, the cart-pole's floor and rails) is not
in the URDF; ``scene_geoms`` reads it from the compiled MuJoCo model's static (world-welded)
geoms so that contacts with it exist. Floating-base robots without a ``floor`` geom get a ground
plane, as in the MuJoCo adapter.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embody.cache import cache_dir, write_cached
from embody.robots import RobotSpec
from embody.robots.urdf import mjcf_to_urdf

from ..base import ModelError, SimConfig

FLOOR_RGBA = (0.3, 0.35, 0.4, 1.0)  # the MuJoCo adapter's added floor
VISIBLE_GROUPS = 3  # MuJoCo draws geom groups 0-2 by default (as robots/urdf.py)


def compile_mjcf(robot: RobotSpec, config: SimConfig):
    """The compiled MuJoCo model of ``robot`` (frames, timestep, cameras, scene geoms, the armature to fold)."""
    from ..mujoco.model import load_spec, set_armature

    spec = load_spec(robot.mjcf)  # ModelError naming the file when missing or malformed
    missing = [n for n in robot.joint_names if n not in {j.name for j in spec.joints}]
    if missing:
        raise ModelError(f"model file {robot.mjcf} lacks joints named in the {robot.name} spec: {missing}")
    set_armature(spec, robot, config)
    try:
        return spec.compile()
    except Exception as e:
        raise ModelError(f"cannot compile model file {robot.mjcf}: {e}") from None


# -- the robot's URDF --------------------------------------------------------------------------
def pybullet_urdf(robot: RobotSpec, model) -> tuple[Path, dict[str, np.ndarray]]:
    """Generate the URDF of ``robot``, adapt it for PyBullet (module docstring) and cache it.

    Returns its path and the principal moments (3,) to set on links whose inertia holds armature.
    """
    try:
        root = ET.fromstring(mjcf_to_urdf(robot))
    except ValueError as e:  # a body URDF cannot express
        raise ModelError(str(e)) from None
    links = {el.get("name"): el for el in root.iter("link")}
    moments = {}
    for joint in root.iter("joint"):
        child = links[joint.find("child").get("link")]
        if joint.get("type") in ("revolute", "continuous") and child.find("inertial") is not None:
            armature = float(model.dof_armature[model.jnt_dofadr[model.joint(joint.get("name")).id]])
            if armature > 0:
                moments[child.get("name")] = _add_rotor_inertia(child, _floats(joint.find("axis"), "xyz"), armature)
    for name, link in links.items():
        if link.find("inertial") is None and name != "world":
            _set_inertial(link, np.zeros(3), np.eye(3), 0.0, np.zeros(3))
    ET.indent(root)
    path = write_cached(
        cache_dir("urdf"), ET.tostring(root, encoding="unicode") + "\n", stem=f"{robot.name}-pybullet", suffix=".urdf"
    )
    return path, moments


def _floats(el: ET.Element, attr: str) -> np.ndarray:
    return np.array([float(x) for x in el.get(attr).split()])


def _rpy_to_mat(rpy: np.ndarray) -> np.ndarray:
    (cr, cp, cy), (sr, sp, sy) = np.cos(rpy), np.sin(rpy)
    return np.array(
        [
            [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
            [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
            [-sp, cp * sr, cp * cr],
        ]
    )


def _mat_to_rpy(r: np.ndarray) -> np.ndarray:
    pitch = np.arctan2(-r[2, 0], np.hypot(r[0, 0], r[1, 0]))
    if np.hypot(r[0, 0], r[1, 0]) < 1e-12:  # gimbal lock: all of the rotation in roll
        return np.array([np.arctan2(-r[1, 2], r[1, 1]), pitch, 0.0])
    return np.array([np.arctan2(r[2, 1], r[2, 2]), pitch, np.arctan2(r[1, 0], r[0, 0])])


def _add_rotor_inertia(link: ET.Element, axis: np.ndarray, armature: float) -> np.ndarray:
    """I_link += armature * u uᵀ about the link's centre of mass: writes its principal frame with an
    isotropic placeholder diagonal (always importable) and returns the principal moments (3,)."""
    inertial = link.find("inertial")
    origin, inertia = inertial.find("origin"), inertial.find("inertia")
    rot = _rpy_to_mat(_floats(origin, "rpy"))
    tensor = rot @ np.diag([float(inertia.get(k)) for k in ("ixx", "iyy", "izz")]) @ rot.T
    u = axis / np.linalg.norm(axis)
    diag, vecs = np.linalg.eigh(tensor + armature * np.outer(u, u))
    if np.linalg.det(vecs) < 0:  # a proper rotation
        vecs[:, 0] *= -1
    mass = float(inertial.find("mass").get("value"))
    link.remove(inertial)
    _set_inertial(link, _floats(origin, "xyz"), vecs, mass, np.full(3, diag.max()))
    return diag


def _set_inertial(link: ET.Element, pos, rot: np.ndarray, mass: float, diag) -> None:
    el = ET.Element("inertial")
    ET.SubElement(
        el, "origin", xyz=" ".join(map(repr, map(float, pos))), rpy=" ".join(map(repr, map(float, _mat_to_rpy(rot))))
    )
    ET.SubElement(el, "mass", value=repr(float(mass)))
    ixx, iyy, izz = map(float, diag)
    ET.SubElement(el, "inertia", ixx=repr(ixx), iyy=repr(iyy), izz=repr(izz), ixy="0", ixz="0", iyz="0")
    link.insert(0, el)


def urdf_link_names(path: Path) -> set[str]:
    """The ``name`` of every ``<link>`` in the URDF at ``path``."""
    return {el.get("name") for el in ET.parse(path).getroot().iter("link")}


def root_body(model, robot: RobotSpec, robot_links: set[str]) -> int:
    """The MuJoCo body whose frame is the URDF root link (the base): ``base_body`` (or the free
    joint's body) for a floating base, else the world for a ``world`` root, else the world's first
    child (robots/urdf.py's rules)."""
    import mujoco

    if robot.floating_base:
        if robot.base_body:
            return model.body(robot.base_body).id
        return int(model.jnt_bodyid[np.flatnonzero(model.jnt_type == mujoco.mjtJoint.mjJNT_FREE)[0]])
    return 0 if "world" in robot_links else 1


def root_pose(model, robot: RobotSpec, root: int) -> tuple[list[float], list[float]]:
    """World position and x,y,z,w orientation to load the URDF root at: ``default_base_pos`` for a
    floating base, else where the MJCF welds the root body."""
    if robot.floating_base:
        return list(robot.default_base_pos), [0.0, 0.0, 0.0, 1.0]
    import mujoco

    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    w, x, y, z = data.xquat[root]
    return data.xpos[root].tolist(), [float(x), float(y), float(z), float(w)]


# -- the static scene --------------------------------------------------------------------------
@dataclass(frozen=True)
class SceneGeom:
    """One static scene shape in the world frame. ``size``: MuJoCo's geom size (box half extents,
    sphere/capsule/cylinder radius and half length); quat w,x,y,z."""

    name: str
    kind: str  # box, sphere, capsule, cylinder, plane
    pos: np.ndarray
    quat: np.ndarray
    size: np.ndarray
    rgba: np.ndarray
    collide: bool
    visible: bool
    friction: float


def scene_geoms(model, robot: RobotSpec, robot_links: set[str]) -> list[SceneGeom]:
    """The MJCF's static geoms outside the robot (plus a floor for floating-base robots)."""
    import mujoco

    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)  # world poses of geoms welded to the world
    T, out = mujoco.mjtGeom, []
    kinds = {
        T.mjGEOM_BOX: "box",
        T.mjGEOM_SPHERE: "sphere",
        T.mjGEOM_CAPSULE: "capsule",
        T.mjGEOM_CYLINDER: "cylinder",
        T.mjGEOM_PLANE: "plane",
    }
    for g in range(model.ngeom):
        b = int(model.geom_bodyid[g])
        if b != 0 and model.body(b).name in robot_links:
            continue
        if model.body_weldid[b] != 0:
            raise ModelError(
                f"{robot.mjcf}: scene body {model.body(b).name!r} moves; the pybullet adapter "
                "mirrors static scene geometry only"
            )
        visible = model.geom_group[g] < VISIBLE_GROUPS and model.geom_rgba[g][3] > 0
        if not (visible or model.geom_contype[g] or model.geom_conaffinity[g]):
            continue  # neither drawn nor colliding
        if model.geom_type[g] == T.mjGEOM_HFIELD:
            raise ModelError(f"{robot.mjcf}: height field {model.geom(g).name!r} is not mirrored in pybullet yet")
        kind = kinds.get(T(int(model.geom_type[g])), "box")  # ellipsoids, meshes: their bounding box
        size, pos = model.geom_size[g].copy(), data.geom_xpos[g].copy()
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, data.geom_xmat[g])
        if kind == "box" and model.geom_type[g] != T.mjGEOM_BOX:
            size, pos = model.geom_aabb[g][3:].copy(), pos + data.geom_xmat[g].reshape(3, 3) @ model.geom_aabb[g][:3]
        mat = model.geom_matid[g]
        rgba = model.mat_rgba[mat] if mat >= 0 else model.geom_rgba[g]
        out.append(
            SceneGeom(
                model.geom(g).name or f"geom{g}",
                kind,
                pos,
                quat,
                size,
                rgba.copy(),
                collide=bool(model.geom_contype[g] or model.geom_conaffinity[g]),
                visible=bool(visible),
                friction=float(model.geom_friction[g][0]),
            )
        )
    if robot.floating_base and not any(s.name == "floor" for s in out):
        out.append(
            SceneGeom(
                "floor",
                "plane",
                np.zeros(3),
                np.array([1.0, 0, 0, 0]),
                np.zeros(3),
                np.array(FLOOR_RGBA),
                True,
                True,
                1.0,
            )
        )
    return out


def add_scene(p, client: int, geoms: list[SceneGeom], friction: float) -> dict[str, int]:
    """Create ``geoms`` as static multibodies in ``client``; their body ids by geom name.

    PyBullet multiplies the friction of the two bodies in contact, MuJoCo takes the larger one:
    robot links are given friction 1 and scene bodies max(own, ``friction``), ``friction`` being
    the robot's largest coefficient (exact when the robot's geoms share one, as they do here).
    """
    bodies = {}
    for g in geoms:
        xyzw = [*g.quat[1:], g.quat[0]]
        col, vis = _shapes(p, client, g)
        body = p.createMultiBody(
            0.0, col, vis, basePosition=g.pos.tolist(), baseOrientation=xyzw, physicsClientId=client
        )
        p.changeDynamics(body, -1, lateralFriction=max(g.friction, friction), physicsClientId=client)
        bodies[g.name] = body
    return bodies


def _shapes(p, client: int, g: SceneGeom) -> tuple[int, int]:
    """(collision, visual) shape ids of ``g``; -1 where MuJoCo never collides or draws it."""
    kw = {"physicsClientId": client}
    rgba = [float(x) for x in g.rgba]
    if g.kind == "plane":  # an infinite collision plane, drawn as a rectangle of the MJCF size (20 m if 0)
        half = [float(s) if s > 0 else 10.0 for s in g.size[:2]]
        vis = _tiled_rectangle(p, client, *half, rgba) if g.visible else -1
        return (p.createCollisionShape(p.GEOM_PLANE, planeNormal=[0, 0, 1], **kw) if g.collide else -1), vis
    if g.kind == "box":
        args = {"halfExtents": g.size.tolist()}
    elif g.kind == "sphere":
        args = {"radius": float(g.size[0])}
    else:  # capsule, cylinder: along z, radius and half length
        args = {"radius": float(g.size[0]), "height": 2 * float(g.size[1])}
    shape = {"box": p.GEOM_BOX, "sphere": p.GEOM_SPHERE, "capsule": p.GEOM_CAPSULE, "cylinder": p.GEOM_CYLINDER}[g.kind]
    vis_args = {"length" if k == "height" else k: v for k, v in args.items()}  # visual shapes say length
    vis = p.createVisualShape(shape, rgbaColor=rgba, **vis_args, **kw) if g.visible else -1
    return (p.createCollisionShape(shape, **args, **kw) if g.collide else -1), vis


def _tiled_rectangle(p, client: int, half_x: float, half_y: float, rgba: list[float], tiles: int = 16) -> int:
    """A z-up rectangle mesh of ``tiles`` x ``tiles`` quads: TinyRenderer drops a triangle with a
    corner behind the camera, so one big quad vanishes when the camera stands above the floor."""
    xs, ys = np.linspace(-half_x, half_x, tiles + 1), np.linspace(-half_y, half_y, tiles + 1)
    vertices = [[float(x), float(y), 0.0] for y in ys for x in xs]
    indices = []
    for r in range(tiles):
        for c in range(tiles):
            a, b, d = r * (tiles + 1) + c, r * (tiles + 1) + c + 1, (r + 1) * (tiles + 1) + c
            indices += [a, b, d + 1, a, d + 1, d]  # counter-clockwise seen from above
    return p.createVisualShape(
        p.GEOM_MESH,
        vertices=vertices,
        indices=indices,
        normals=[[0.0, 0.0, 1.0]] * len(vertices),
        rgbaColor=rgba,
        physicsClientId=client,
    )
