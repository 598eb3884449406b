"""Generate a robot's URDF from its MJCF, so the MJCF stays the one source of truth.

The URDF is built from the *compiled* MuJoCo model (frames, inertials and geoms exactly as
MuJoCo resolves them: fromto, default classes, orientations) plus the RobotSpec (torque and
velocity limits). Structure:

* Each MuJoCo body becomes a link named after it; a hinge becomes a revolute joint (continuous
  when unlimited), a slide a prismatic joint; a body without a joint hangs on a fixed joint
  named ``<body>_fixed``. A body with more than one joint (or a ball joint) has no URDF
  equivalent and raises ``ValueError``.
* The robot is one subtree. Floating base: the base body's; it is the root link and its free
  joint is dropped (engines add their own floating base). Fixed base: the first body's; it is
  the root link when it has no joint (welded to the world), otherwise a massless ``world``
  link carries it through its joint (the cart-pole's slider). Everything else in the world
  (floors, rails, fixtures such as a peg board) is scene, not robot, and is left out.
* Sites named in the spec's sensors become massless links on fixed joints (``<site>_fixed``).
* Inertials are written in their principal frame (MuJoCo's ipos/iquat and diagonal inertia),
  which is exact.
* Geoms: boxes, spheres and cylinders map one to one. A capsule becomes a cylinder plus two
  end spheres (three URDF shapes, the same volume). Other shapes (ellipsoid, mesh) become their
  bounding box; planes and height fields are dropped. Geoms that collide (contype or
  conaffinity set) become <collision>; geoms in a default-visible group (0-2) become <visual>.
* URDF has no armature; joint damping and frictionloss go to <dynamics>.

A ``<mujoco>`` block keeps fixed links and visuals when MuJoCo imports the URDF.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

from .spec import RobotSpec

_VISIBLE_GROUPS = 3  # MuJoCo's viewer shows geom groups 0-2 by default


def write_urdf(spec: RobotSpec, path: str | Path) -> Path:
    """Write the generated URDF of ``spec`` to ``path``; returns the path."""
    path = Path(path)
    path.write_text(mjcf_to_urdf(spec))
    return path


def mjcf_to_urdf(spec: RobotSpec) -> str:
    """The URDF text of ``spec``'s MJCF (see the module docstring for the mapping)."""
    import mujoco

    model = mujoco.MjModel.from_xml_path(str(spec.mjcf))
    return _UrdfWriter(model, spec).build()


# -- small helpers ---------------------------------------------------------------------------
def _num(x: float) -> str:
    x = float(x)
    return "0" if abs(x) < 1e-15 else repr(x)


def _vec(v) -> str:
    return " ".join(_num(x) for x in v)


def _quat_to_mat(q) -> np.ndarray:
    import mujoco

    m = np.zeros(9)
    mujoco.mju_quat2Mat(m, np.asarray(q, dtype=np.float64))
    return m.reshape(3, 3)


def _rpy(q) -> np.ndarray:
    """URDF roll-pitch-yaw (R = Rz(yaw) Ry(pitch) Rx(roll)) of a w,x,y,z quaternion."""
    r = _quat_to_mat(q)
    pitch = math.atan2(-r[2, 0], math.hypot(r[0, 0], r[1, 0]))
    if math.hypot(r[0, 0], r[1, 0]) < 1e-12:  # gimbal lock: put all of the rotation in roll
        return np.array([math.atan2(-r[1, 2], r[1, 1]), pitch, 0.0])
    return np.array([math.atan2(r[2, 1], r[2, 2]), pitch, math.atan2(r[1, 0], r[0, 0])])


def _origin(parent: ET.Element, pos, quat=None) -> None:
    rpy = np.zeros(3) if quat is None else _rpy(quat)
    ET.SubElement(parent, "origin", xyz=_vec(pos), rpy=_vec(rpy))


class _UrdfWriter:
    def __init__(self, model, spec: RobotSpec):
        import mujoco

        self.mj, self.m, self.spec = mujoco, model, spec
        self.robot = ET.Element("robot", name=spec.name)
        block = ET.SubElement(self.robot, "mujoco")  # MuJoCo's URDF import would drop fixed links
        ET.SubElement(block, "compiler", discardvisual="false", fusestatic="false", inertiafromgeom="false")
        self.materials: dict[tuple, str] = {}
        # Link frame = body frame shifted to the body's joint position (URDF joints sit at the
        # child link origin); zero for joints at the body origin, the usual case.
        self.offset = np.zeros((model.nbody, 3))
        self.link_names: set[str] = set()
        self.joint_names: set[str] = set()

    # -- names ---------------------------------------------------------------------------
    def _name(self, obj, i: int, prefix: str) -> str:
        return self.mj.mj_id2name(self.m, obj, i) or f"{prefix}{i}"

    def body_name(self, b: int) -> str:
        """Body ``b``'s name in the model (``world`` for body 0, ``body<b>`` if unnamed)."""
        return "world" if b == 0 else self._name(self.mj.mjtObj.mjOBJ_BODY, b, "body")

    def _unique(self, name: str, taken: set[str], kind: str) -> str:
        if name in taken:
            raise ValueError(f"{self.spec.mjcf}: URDF {kind} name {name!r} is used twice")
        taken.add(name)
        return name

    # -- tree ----------------------------------------------------------------------------
    def build(self) -> str:
        """The URDF document (text): the robot's subtree of links and joints, its sites, its materials."""
        top = self._top_body()
        via_world = not self.spec.floating_base and self.m.body_jntnum[top] > 0
        if via_world:
            self.link(0, with_body=False)
        self._subtree(top, is_root=not via_world)
        self._sites()
        materials = [ET.Element("material", name=n) for n in self.materials.values()]
        for el, rgba in zip(materials, self.materials):
            ET.SubElement(el, "color", rgba=_vec(rgba))
        self.robot[1:1] = materials  # after the <mujoco> block, before the links
        ET.indent(self.robot)
        return ET.tostring(self.robot, encoding="unicode") + "\n"

    def _top_body(self) -> int:
        """The body whose subtree is the robot."""
        m, free = self.m, self.mj.mjtJoint.mjJNT_FREE
        if self.spec.floating_base:
            if self.spec.base_body:
                b = self.mj.mj_name2id(m, self.mj.mjtObj.mjOBJ_BODY, self.spec.base_body)
                if b < 1:
                    raise ValueError(f"{self.spec.mjcf} has no base body {self.spec.base_body!r}")
                return b
            frees = [j for j in range(m.njnt) if m.jnt_type[j] == free]
            if not frees:
                raise ValueError(f"{self.spec.mjcf}: floating-base robot without a free joint or base_body")
            return int(m.jnt_bodyid[frees[0]])
        if m.nbody < 2:
            raise ValueError(f"{self.spec.mjcf} has no bodies")
        return 1  # MuJoCo numbers bodies depth-first: body 1 is the world's first child

    def _children(self, b: int) -> list[int]:
        return [c for c in range(1, self.m.nbody) if self.m.body_parentid[c] == b]

    def _subtree(self, b: int, is_root: bool = False) -> None:
        if not is_root:
            self.joint(b)
        self.link(b)
        for c in self._children(b):
            self._subtree(c)

    # -- links ---------------------------------------------------------------------------
    def link(self, b: int, with_body: bool = True) -> None:
        """Add body ``b`` as a link: its inertial (if it has mass) and its geoms; ``with_body=False``: name only."""
        el = ET.SubElement(self.robot, "link", name=self._unique(self.body_name(b), self.link_names, "link"))
        if not with_body:
            return
        m, off = self.m, self.offset[b]
        if m.body_mass[b] > 0:
            inertial = ET.SubElement(el, "inertial")
            _origin(inertial, m.body_ipos[b] - off, m.body_iquat[b])
            ET.SubElement(inertial, "mass", value=_num(m.body_mass[b]))
            ixx, iyy, izz = m.body_inertia[b]
            ET.SubElement(inertial, "inertia", ixx=_num(ixx), iyy=_num(iyy), izz=_num(izz), ixy="0", ixz="0", iyz="0")
        for g in range(m.ngeom):
            if m.geom_bodyid[g] == b:
                self.geom(el, g, off)

    def geom(self, link: ET.Element, g: int, off: np.ndarray) -> None:
        """Add geom ``g`` to ``link`` as visual and/or collision primitives, shifted by the link's ``off``."""
        m = self.m
        collide = bool(m.geom_contype[g] or m.geom_conaffinity[g])
        visible = m.geom_group[g] < _VISIBLE_GROUPS and m.geom_rgba[g][3] > 0
        for pos, quat, shape, attrs in self._shapes(g):
            for tag, wanted in (("visual", visible), ("collision", collide)):
                if not wanted:
                    continue
                el = ET.SubElement(link, tag)
                _origin(el, pos - off, quat)
                ET.SubElement(ET.SubElement(el, "geometry"), shape, **attrs)
                if tag == "visual":
                    ET.SubElement(el, "material", name=self._material(m.geom_rgba[g]))

    def _shapes(self, g: int) -> list[tuple[np.ndarray, np.ndarray, str, dict]]:
        """URDF primitives (pos, quat, shape, attributes) approximating geom ``g``."""
        T, m = self.mj.mjtGeom, self.m
        pos, quat, size, kind = m.geom_pos[g], m.geom_quat[g], m.geom_size[g], T(int(m.geom_type[g]))
        if kind == T.mjGEOM_BOX:
            return [(pos, quat, "box", {"size": _vec(2 * size)})]
        if kind == T.mjGEOM_SPHERE:
            return [(pos, quat, "sphere", {"radius": _num(size[0])})]
        if kind in (T.mjGEOM_CYLINDER, T.mjGEOM_CAPSULE):
            out = [(pos, quat, "cylinder", {"radius": _num(size[0]), "length": _num(2 * size[1])})]
            if kind == T.mjGEOM_CAPSULE:  # + end caps at +-half length along the geom's z
                axis = _quat_to_mat(quat)[:, 2] * size[1]
                out += [(pos + s * axis, quat, "sphere", {"radius": _num(size[0])}) for s in (1, -1)]
            return out
        if kind in (T.mjGEOM_PLANE, T.mjGEOM_HFIELD):
            return []
        center, half = m.geom_aabb[g][:3], m.geom_aabb[g][3:]  # bounding box in the geom frame
        return [(pos + _quat_to_mat(quat) @ center, quat, "box", {"size": _vec(2 * half)})]

    def _material(self, rgba) -> str:
        key = tuple(round(float(x), 6) for x in rgba)  # float32 in MuJoCo
        return self.materials.setdefault(key, f"rgba_{len(self.materials)}")

    # -- joints --------------------------------------------------------------------------
    def joint(self, b: int) -> None:
        """Add the joint from body ``b``'s parent to it (a fixed joint when the body has none); ValueError for
        more than one joint or a free or ball joint."""
        m, J = self.m, self.mj.mjtJoint
        parent, n = int(m.body_parentid[b]), int(m.body_jntnum[b])
        if n > 1:
            raise ValueError(f"{self.spec.mjcf}: body {self.body_name(b)!r} has {n} joints; a URDF link has one")
        j = int(m.body_jntadr[b]) if n else -1
        kind = None if j < 0 else J(int(m.jnt_type[j]))  # enum: `in` fails on numpy ints
        if kind in (J.mjJNT_FREE, J.mjJNT_BALL):
            raise ValueError(
                f"{self.spec.mjcf}: body {self.body_name(b)!r} has a {kind.name} joint, which URDF cannot express"
            )
        if j >= 0:
            self.offset[b] = m.jnt_pos[j]
        pos = m.body_pos[b] + _quat_to_mat(m.body_quat[b]) @ self.offset[b] - self.offset[parent]
        if j < 0:
            name, urdf_type = f"{self.body_name(b)}_fixed", "fixed"
        else:
            name = self._name(self.mj.mjtObj.mjOBJ_JOINT, j, "joint")
            revolute = kind == J.mjJNT_HINGE
            urdf_type = ("revolute" if m.jnt_limited[j] else "continuous") if revolute else "prismatic"
        el = ET.SubElement(self.robot, "joint", name=self._unique(name, self.joint_names, "joint"), type=urdf_type)
        _origin(el, pos, m.body_quat[b])
        ET.SubElement(el, "parent", link=self.body_name(parent))
        ET.SubElement(el, "child", link=self.body_name(b))
        if j >= 0:
            self._joint_details(el, j, name)

    def _joint_details(self, el: ET.Element, j: int, name: str) -> None:
        m = self.m
        ET.SubElement(el, "axis", xyz=_vec(m.jnt_axis[j]))
        limits = {}
        if m.jnt_limited[j]:
            limits = {"lower": _num(m.jnt_range[j][0]), "upper": _num(m.jnt_range[j][1])}
        elif m.jnt_type[j] == self.mj.mjtJoint.mjJNT_SLIDE:  # URDF prismatic joints must be limited
            limits = {"lower": "-1e9", "upper": "1e9"}
        effort, velocity = self._effort_velocity(j, name)
        ET.SubElement(el, "limit", **limits, effort=_num(effort), velocity=_num(velocity))
        dof = m.jnt_dofadr[j]
        ET.SubElement(el, "dynamics", damping=_num(m.dof_damping[dof]), friction=_num(m.dof_frictionloss[dof]))

    def _effort_velocity(self, j: int, name: str) -> tuple[float, float]:
        for joint in self.spec.joints:
            if joint.name == name:
                return joint.torque_limit, joint.velocity_limit
        m = self.m  # a joint the spec does not list (passive): the model's force limit, if any
        return (float(m.jnt_actfrcrange[j][1]) if m.jnt_actfrclimited[j] else 0.0), 0.0

    # -- sites ---------------------------------------------------------------------------
    def _sites(self) -> None:
        s = self.spec.sensors
        for site in dict.fromkeys([s.imu_site, *s.foot_sites, s.ee_site, s.ft_site]):  # ordered, unique
            if site is None:
                continue
            i = self.mj.mj_name2id(self.m, self.mj.mjtObj.mjOBJ_SITE, site)
            if i < 0:
                raise ValueError(f"{self.spec.mjcf} has no site {site!r} named in the {self.spec.name} sensors")
            b = int(self.m.site_bodyid[i])
            if self.body_name(b) not in self.link_names:
                raise ValueError(f"site {site!r} is on body {self.body_name(b)!r}, which is not part of the URDF")
            ET.SubElement(self.robot, "link", name=self._unique(site, self.link_names, "link"))
            name = self._unique(f"{site}_fixed", self.joint_names, "joint")
            el = ET.SubElement(self.robot, "joint", name=name, type="fixed")
            _origin(el, self.m.site_pos[i] - self.offset[b], self.m.site_quat[i])
            ET.SubElement(el, "parent", link=self.body_name(b))
            ET.SubElement(el, "child", link=site)
