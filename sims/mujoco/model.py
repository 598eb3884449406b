"""Build the MuJoCo model of a robot from its RobotSpec.

The model file holds kinematics, inertia and geometry only; control and sensing come from
the spec here, so every engine derives them the same way: one general actuator per actuated
joint (PD or torque, torque-limited) and sensors at the spec's sites.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from embody.robots import RobotSpec, RobotState

from ..adapter import fixed_base_privileged, free_joint_privileged, full_torque
from ..base import ModelError, SimConfig


@dataclass
class SensorLayout:
    """Slices into mjData.sensordata for each RobotState field (absent: None)."""

    joint_torque: slice
    imu_quat: slice | None = None
    imu_gyro: slice | None = None
    imu_accel: slice | None = None
    ee_pos: slice | None = None
    ee_quat: slice | None = None
    wrench: slice | None = None
    contact: slice | None = None
    foot_pos: slice | None = None


def load_spec(path: Path):
    """The MJCF at ``path`` as an ``mujoco.MjSpec``; raises ModelError if the file is missing or does not parse."""
    import mujoco

    path = Path(path)
    if not path.is_file():
        raise ModelError(f"model file not found: {path}")
    try:
        return mujoco.MjSpec.from_file(str(path))
    except Exception as e:  # mujoco raises ValueError with its parser's message
        raise ModelError(f"cannot load model file {path}: {e}") from None


def build_model(robot: RobotSpec, config: SimConfig):
    """Compile ``robot`` for MuJoCo. Returns (MjModel, SensorLayout)."""

    spec = load_spec(robot.mjcf)
    joint_names = {j.name for j in spec.joints}
    missing = [n for n in robot.joint_names if n not in joint_names]
    if missing:
        raise ModelError(f"model file {robot.mjcf} lacks joints named in the {robot.name} spec: {missing}")
    if config.physics_dt:
        spec.option.timestep = config.physics_dt
    set_armature(spec, robot, config)
    if robot.floating_base and "floor" not in {g.name for g in spec.geoms}:
        _add_floor_and_lights(spec)
    _add_actuators(spec, robot, config)
    layout = _add_sensors(spec, robot)
    try:
        model = spec.compile()
    except Exception as e:
        raise ModelError(f"cannot compile model file {robot.mjcf}: {e}") from None
    model.vis.quality.offsamples = 4 if config.multisample else 0
    model.vis.quality.shadowsize = 2048 if config.shadows else 0
    return model, layout


def set_armature(spec, robot: RobotSpec, config: SimConfig) -> None:
    """``config.armature == "motors"``: each joint's rotor inertia from the robot spec's motor table replaces the
    model file's (an MjSpec edited before compiling)."""
    if config.armature == "motors":
        from embody.config import ConfigError

        try:
            armature = robot.motor_armature()
        except ValueError as e:
            raise ConfigError(str(e)) from None
        for name, value in zip(robot.joint_names, armature):
            spec.joint(name).armature = value


def _add_floor_and_lights(spec) -> None:
    """A floor for a free-standing robot: a checkerboard with 0.5 m squares and lines (so that motion shows against
    it), a sky gradient, a sun from above and a fill light from the side (so that primitive geoms show their
    shape). Rendering only: the physics sees a plane."""
    import mujoco

    spec.add_texture(
        name="embody_floor",
        type=mujoco.mjtTexture.mjTEXTURE_2D,
        builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
        width=256,
        height=256,
        rgb1=[0.36, 0.40, 0.46],
        rgb2=[0.28, 0.31, 0.36],
        mark=mujoco.mjtMark.mjMARK_EDGE,
        markrgb=[0.62, 0.66, 0.72],
    )
    spec.add_texture(
        name="embody_sky",
        type=mujoco.mjtTexture.mjTEXTURE_SKYBOX,
        builtin=mujoco.mjtBuiltin.mjBUILTIN_GRADIENT,
        width=256,
        height=256,
        rgb1=[0.62, 0.72, 0.82],
        rgb2=[0.16, 0.18, 0.22],
    )
    floor = spec.add_material(name="embody_floor", texrepeat=[1, 1], texuniform=True)
    floor.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = "embody_floor"
    spec.worldbody.add_geom(name="floor", type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05], material="embody_floor")
    directional = mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
    spec.worldbody.add_light(pos=[0, 0, 4], dir=[0, 0, -1], type=directional, diffuse=[0.6, 0.6, 0.6])
    spec.worldbody.add_light(pos=[2, -2, 3], dir=[-0.5, 0.6, -0.6], type=directional, diffuse=[0.35, 0.35, 0.35])
    spec.visual.headlight.ambient = [0.25, 0.25, 0.25]
    spec.visual.headlight.diffuse = [0.35, 0.35, 0.35]


def _add_actuators(spec, robot: RobotSpec, config: SimConfig) -> None:
    import mujoco

    for i in robot.actuated:
        j = robot.joints[i]
        a = spec.add_actuator(name=f"act_{j.name}", target=j.name, trntype=mujoco.mjtTrn.mjTRN_JOINT)
        a.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        a.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        a.forcelimited = 1
        a.forcerange = [-j.torque_limit, j.torque_limit]
        if config.control == "pd":  # force = kp (target - q) - kd dq, evaluated every physics step
            a.gainprm[0] = j.kp
            a.biasprm[:3] = [0.0, -j.kp, -j.kd]
            a.ctrllimited = 0
        else:
            a.gainprm[0] = 1.0
            a.biasprm[:3] = [0.0, 0.0, 0.0]
            a.ctrllimited = 1
            a.ctrlrange = [-j.torque_limit, j.torque_limit]


def _add_sensors(spec, robot: RobotSpec) -> SensorLayout:
    import mujoco

    S, O = mujoco.mjtSensor, mujoco.mjtObj
    adr = 0
    slices: dict[str, slice] = {}

    def add(field: str, kind, dim: int, objname: str, objtype=O.mjOBJ_SITE, **kw) -> None:
        nonlocal adr
        spec.add_sensor(name=f"{field}_{kind.name}_{objname}", type=kind, objtype=objtype, objname=objname, **kw)
        start = slices[field].start if field in slices else adr
        slices[field] = slice(start, adr + dim)
        adr += dim

    for i in robot.actuated:
        add("joint_torque", S.mjSENS_ACTUATORFRC, 1, f"act_{robot.joints[i].name}", objtype=O.mjOBJ_ACTUATOR)
    s = robot.sensors
    if s.imu_site:
        add("imu_quat", S.mjSENS_FRAMEQUAT, 4, s.imu_site)
        add("imu_gyro", S.mjSENS_GYRO, 3, s.imu_site)
        add("imu_accel", S.mjSENS_ACCELEROMETER, 3, s.imu_site)
    if s.ee_site:
        add("ee_pos", S.mjSENS_FRAMEPOS, 3, s.ee_site)
        add("ee_quat", S.mjSENS_FRAMEQUAT, 4, s.ee_site)
    if s.ft_site:
        add("wrench", S.mjSENS_FORCE, 3, s.ft_site)
        add("wrench", S.mjSENS_TORQUE, 3, s.ft_site)
    for site in s.foot_sites:
        add("contact", S.mjSENS_TOUCH, 1, site)
    for site in s.foot_sites:
        add("foot_pos", S.mjSENS_FRAMEPOS, 3, site)
    if "joint_torque" not in slices:
        slices["joint_torque"] = slice(0, 0)
    return SensorLayout(**slices)


def state_offsets(model) -> dict[str, int]:
    """Column offsets of time, qpos, qvel and act inside an mjSTATE_FULLPHYSICS state row."""
    import mujoco

    full = mujoco.mjtState.mjSTATE_FULLPHYSICS.value

    def offset(bit) -> int:  # components are stored in bit order
        return mujoco.mj_stateSize(model, full & (bit.value - 1))

    S = mujoco.mjtState
    return {
        "time": offset(S.mjSTATE_TIME),
        "qpos": offset(S.mjSTATE_QPOS),
        "qvel": offset(S.mjSTATE_QVEL),
        "act": offset(S.mjSTATE_ACT),
    }


def joint_addresses(model, robot: RobotSpec) -> tuple[np.ndarray, np.ndarray]:
    """qpos and qvel addresses of the spec's joints, in motor order."""
    import mujoco

    ids = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in robot.joint_names]
    return model.jnt_qposadr[ids].copy(), model.jnt_dofadr[ids].copy()


def robot_state(robot: RobotSpec, layout: SensorLayout, qpos, qvel, sensordata, time, qadr, vadr, free) -> RobotState:
    """The RobotState of MuJoCo-layout arrays (the MuJoCo and MJX adapters): qpos (n, nq), qvel (n, nv), sensordata
    (n, nsensordata) laid out by ``layout``, time (n,); ``qadr``, ``vadr`` (j,) the spec joints' addresses; ``free``
    the free joint's (qpos, dof) addresses, or None for a fixed base. Every field is a copy: a RobotState outlives
    the next step."""
    sd, L, n = sensordata, layout, len(qpos)
    pick = lambda sl: None if sl is None else sd[:, sl].copy()  # noqa: E731
    contact = sd[:, L.contact] if L.contact else np.zeros((n, 0))
    if free is None:
        privileged = fixed_base_privileged(n, contact)
    else:
        foot_pos = sd[:, L.foot_pos].reshape(n, -1, 3) if L.foot_pos else None
        privileged = free_joint_privileged(qpos, qvel, *free, contact, foot_pos)
    return RobotState(
        joint_pos=qpos[:, qadr],
        joint_vel=qvel[:, vadr],
        joint_torque=full_torque(robot, sd[:, L.joint_torque]),
        time=np.array(time, dtype=np.float64),
        imu_quat=pick(L.imu_quat),
        imu_gyro=pick(L.imu_gyro),
        imu_accel=pick(L.imu_accel),
        ee_pos=pick(L.ee_pos),
        ee_quat=pick(L.ee_quat),
        wrench=pick(L.wrench),
        privileged=privileged,
    )
