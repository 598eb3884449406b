"""Teleoperation for any robot (the arm today): input devices, displays, homing, and teleoperated
episodes of a task in a supervised session. A method keeps only its own schema (what it records,
what the human is told) and its CLI glue (papers/blindfolded/teleop.py).
"""

from .devices import (
    BUTTONS,
    DEVICES,
    SLOW,
    DeviceError,
    GamepadInput,
    InputDevice,
    KeyboardInput,
    SpaceMouseInput,
    dead_zone,
    init_pygame,
    make_device,
)
from .displays import Display, PygameDisplay, TerminalDisplay
from .episodes import OUTCOMES, Episode, OnStep, Teleoperable, TeleopPlan, TeleopRunner, episode, teleoperate
from .homing import Homing, home

__all__ = [
    "BUTTONS",
    "DEVICES",
    "OUTCOMES",
    "SLOW",
    "DeviceError",
    "Display",
    "Episode",
    "GamepadInput",
    "Homing",
    "InputDevice",
    "KeyboardInput",
    "OnStep",
    "PygameDisplay",
    "SpaceMouseInput",
    "TeleopPlan",
    "TeleopRunner",
    "Teleoperable",
    "TerminalDisplay",
    "dead_zone",
    "episode",
    "home",
    "init_pygame",
    "make_device",
    "teleoperate",
]
