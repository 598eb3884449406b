"""Robot descriptions as data (RobotSpec) and the registry of robots by name.

Each robot lives in its own module or folder with a ``make_spec(**params) -> RobotSpec``.
"""

from embody.registry import Registry

from .spec import Joint, RobotSpec, Sensors
from .state import PrivilegedState, RobotState

ROBOTS: Registry = Registry("robot")
ROBOTS.register("cartpole", "embody.robots.cartpole:make_spec")
ROBOTS.register("h1_2", "embody.robots.h1_2:make_spec")
ROBOTS.register("gym_humanoid", "embody.robots.gym_humanoid:make_spec")
ROBOTS.register("gym_hopper", "embody.robots.gym_hopper:make_spec")
ROBOTS.register("peg_arm", "embody.robots.peg_arm:make_spec")


def get_robot(name: str, **params) -> RobotSpec:
    """The RobotSpec of a registered robot; unknown names list the valid ones."""
    return ROBOTS.get(name)(**params)


__all__ = ["ROBOTS", "Joint", "PrivilegedState", "RobotSpec", "RobotState", "Sensors", "get_robot"]
