"""Our own control topic for simulated robots (not part of any vendor protocol).

No ``from __future__ import annotations`` here: cyclonedds resolves the field types at runtime.
"""

from dataclasses import dataclass

from cyclonedds.idl import IdlStruct
from cyclonedds.idl.types import uint8

TOPIC_SIM_CONTROL = "rt/embody/sim_control"


KEEP = 255  # leave the band as it is


@dataclass
class SimControl_(IdlStruct, typename="embody_sim.msg.dds_.SimControl_"):
    """robot-sim's control topic: the elastic band and resets of the simulated robot."""

    band: uint8  # 1: hold the robot on the elastic band, 0: release it, KEEP: leave it
    reset: uint8  # 1: put the robot back into its start state (default pose, band as started)
