"""Simulator adapters behind one protocol, tasks written against it, and vector envs.

Adapters load lazily by name so that an engine is imported only when it is asked for.
"""

from embody.registry import Registry
from embody.robots import RobotSpec

from .base import InitState, PhysicsParams, SimConfig, Simulator

SIMULATORS: Registry = Registry("simulator")
SIMULATORS.register("mujoco", "embody.sims.mujoco:MujocoSimulator", extra="mujoco")
SIMULATORS.register("pybullet", "embody.sims.pybullet:PybulletSimulator", extra="pybullet")
SIMULATORS.register("genesis", "embody.sims.genesis:GenesisSimulator", extra="genesis")
SIMULATORS.register("mjx", "embody.sims.mjx:MjxSimulator", extra="mjx")


def installed_simulators() -> list[str]:
    """Registered simulators whose engine is importable here."""
    from embody.extras import available

    return [n for n in SIMULATORS.names() if available(SIMULATORS.get(n).engine)]


def make_sim(name: str, robot: RobotSpec, config: SimConfig) -> Simulator:
    """Build simulator ``name`` (``--sim``) holding ``robot``; unknown names list the valid ones."""
    return SIMULATORS.get(name)(robot, config)


__all__ = ["SIMULATORS", "InitState", "PhysicsParams", "SimConfig", "Simulator", "installed_simulators", "make_sim"]
