"""The errors that mean "bad input from the user": the CLI prints them as one clear line."""

from embody.config import ConfigError
from embody.datasets.format import DatasetFormatError
from embody.extras import MissingExtra
from embody.hardware.interface import HardwareError, RobotConnectionError
from embody.policies.checkpoint import CheckpointError
from embody.registry import UnknownName
from embody.robots.motion import MotionError
from embody.sims.base import ModelError, UnsupportedTask

UserError = (
    ConfigError,
    MissingExtra,
    CheckpointError,
    UnknownName,
    ModelError,
    UnsupportedTask,
    MotionError,
    FileNotFoundError,
    HardwareError,
    RobotConnectionError,
    DatasetFormatError,
)
