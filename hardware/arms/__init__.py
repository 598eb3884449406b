"""Real arms behind RobotInterface: UR arms through ur_rtde (extra ``ur``), Franka arms through
pylibfranka (extra ``franka``). The vendor libraries are imported at ``connect``, so importing
this package needs neither.

Every connect probes the controller in plain Python first (TCP connect, then a protocol hello
that must be answered) so that an unreachable or silent robot fails within ``timeout_s`` with a
RobotConnectionError naming host:port; see ``timeouts.py`` for why a thread around the
library's own constructor cannot do that.
"""

from .base import ArmDriver, arm_supervisor
from .franka import FrankaArm
from .ur import URArm, ur5e_spec

__all__ = ["ArmDriver", "FrankaArm", "URArm", "arm_supervisor", "ur5e_spec"]
