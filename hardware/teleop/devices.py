"""Teleoperation input devices: keyboard, gamepad (pygame-ce) and 3Dconnexion SpaceMouse (pyspacemouse).

Every device is an ``InputDevice``: ``read() -> (move (3,) in [-1, 1], buttons)``; +x away from the
robot's base, +y to its left, +z up; buttons are a set of "done", "abort" (and "slow" for the
keyboard's Shift, "grip" for other gamepad buttons). pygame(-ce) and pyspacemouse are imported
lazily, each missing one a ``DeviceError`` that names it; without a display SDL's dummy video driver
is used, so everything runs headless.
"""

from __future__ import annotations

import os
import sys
from typing import Protocol

import numpy as np

DEVICES = ("keyboard", "gamepad", "spacemouse")
BUTTONS = frozenset({"done", "abort", "grip", "slow"})
SLOW = 0.3  # the keyboard's Shift: fine positioning


class DeviceError(RuntimeError):
    """An input device that is missing, unsupported or not connected."""


class InputDevice(Protocol):
    """A teleoperation input device (keyboard, gamepad, SpaceMouse), polled once per control tick."""

    name: str

    def read(self) -> tuple[np.ndarray, set[str]]:
        """(move (3,) in [-1, 1]: +x away from the robot's base, +y to its left, +z up; buttons held or pressed)."""

    def close(self) -> None: ...


# -- pygame ---------------------------------------------------------------------------------------------


def init_pygame(window: bool = True, size: tuple[int, int] = (480, 160), caption: str = "embody teleop"):
    """pygame(-ce), initialized; SDL's dummy video driver when there is no display (headless)."""
    if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or sys.platform in ("darwin", "win32")):
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
    try:
        import pygame
    except ImportError as e:
        raise DeviceError("keyboard and gamepad teleoperation need pygame-ce (pip install pygame-ce)") from e
    for part in (pygame.display, pygame.joystick, pygame.font):  # not pygame.init(): no audio wanted
        part.init()
    if window and pygame.display.get_surface() is None:
        pygame.display.set_mode(size)
        pygame.display.set_caption(caption)
    return pygame


def dead_zone(value: np.ndarray | float, zone: float) -> np.ndarray:
    """|v| < zone → 0, beyond it rescaled to reach ±1 at ±1 (no jump at the zone's edge); clipped to [-1, 1]."""
    v = np.clip(np.asarray(value, dtype=np.float64), -1.0, 1.0)
    return np.where(np.abs(v) < zone, 0.0, np.sign(v) * (np.abs(v) - zone) / (1.0 - zone))


class KeyboardInput:
    """Keys held in the pygame window: arrows or WASD move x/y (Up/W +x, Left/A +y), R/PageUp and
    F/PageDown z; Shift slows to 30%; G (or Tab) presses "grip"; Enter (or Space) ends the episode ("done"),
    Esc or closing the window aborts. Held keys are tracked from KEYDOWN/KEYUP events (what a real keyboard and
    ``pygame.event.post`` both produce); losing the window's focus releases them all."""

    name = "keyboard"

    def __init__(self):
        self.pg = pg = init_pygame()
        self.axes = {
            pg.K_UP: (0, 1),
            pg.K_w: (0, 1),
            pg.K_DOWN: (0, -1),
            pg.K_s: (0, -1),
            pg.K_LEFT: (1, 1),
            pg.K_a: (1, 1),
            pg.K_RIGHT: (1, -1),
            pg.K_d: (1, -1),
            pg.K_r: (2, 1),
            pg.K_PAGEUP: (2, 1),
            pg.K_f: (2, -1),
            pg.K_PAGEDOWN: (2, -1),
        }
        self.held: set[int] = set()
        self.shift = False

    def read(self) -> tuple[np.ndarray, set[str]]:
        """Arrows/WASD move in x and y, R/F or page up/down in z (shift held: slower, adds "slow"); Escape or closing
        the window aborts, Enter or space is done."""
        pg, buttons = self.pg, set()
        for e in pg.event.get():
            if e.type == pg.KEYDOWN:
                if e.key == pg.K_ESCAPE:
                    buttons.add("abort")
                elif e.key in (pg.K_RETURN, pg.K_KP_ENTER, pg.K_SPACE):
                    buttons.add("done")
                elif e.key in (pg.K_g, pg.K_TAB):
                    buttons.add("grip")
                elif e.key in (pg.K_LSHIFT, pg.K_RSHIFT):
                    self.shift = True
                else:
                    self.held.add(e.key)
            elif e.type == pg.KEYUP:
                self.held.discard(e.key)
                if e.key in (pg.K_LSHIFT, pg.K_RSHIFT):
                    self.shift = False
            elif e.type == pg.QUIT:
                buttons.add("abort")
            elif e.type == pg.WINDOWFOCUSLOST:
                self.held.clear()
                self.shift = False
        move = np.zeros(3)
        for key in self.held:
            if key in self.axes:
                axis, sign = self.axes[key]
                move[axis] += sign
        move = np.clip(move, -1.0, 1.0)
        if self.shift:
            buttons.add("slow")
            move *= SLOW
        return move, buttons

    def close(self) -> None:
        pass


class GamepadInput:
    """A pygame joystick: left stick x/y (stick up = +x, left = +y), right stick vertical z (up = +z),
    each with a dead zone; button 0 (A / cross) or 7 (start) = "done", button 1 (B / circle) or 6
    (back) = "abort". Axes are tracked from JOYAXISMOTION events. ``joystick``: an index into
    pygame's joysticks or an opened joystick (anything with ``get_instance_id()``)."""

    name = "gamepad"
    AXES = {0: (1, -1.0), 1: (0, -1.0), 3: (2, -1.0)}  # SDL axis → (move axis, sign); SDL's stick up is -1
    DONE, ABORT = (0, 7), (1, 6)

    def __init__(self, joystick=0, dead_zone: float = 0.15):
        if not 0 <= dead_zone < 1:
            raise ValueError(f"dead_zone must lie in [0, 1), got {dead_zone}")
        self.pg = pg = init_pygame()
        if isinstance(joystick, int):
            pg.joystick.init()
            if pg.joystick.get_count() <= joystick:
                raise DeviceError(
                    f"no gamepad {joystick}: pygame sees {pg.joystick.get_count()} joystick(s); "
                    "plug one in, or use --teleop keyboard"
                )
            joystick = pg.joystick.Joystick(joystick)
        self.joystick, self.zone = joystick, dead_zone
        self.instance = joystick.get_instance_id()
        self.raw = np.zeros(3)

    def read(self) -> tuple[np.ndarray, set[str]]:
        """Left stick moves in x and y, right stick's vertical axis in z (within a dead zone); buttons 0 and 7 are done,
        1 and 6 abort, others grip; unplugging the gamepad aborts."""
        pg, buttons = self.pg, set()
        for e in pg.event.get():
            if getattr(e, "instance_id", self.instance) != self.instance:
                continue
            if e.type == pg.JOYAXISMOTION and e.axis in self.AXES:
                axis, sign = self.AXES[e.axis]
                self.raw[axis] = sign * float(e.value)
            elif e.type == pg.JOYBUTTONDOWN:
                buttons.add("done" if e.button in self.DONE else "abort" if e.button in self.ABORT else "grip")
            elif e.type == pg.JOYDEVICEREMOVED:
                self.raw[:] = 0.0
                buttons.add("abort")
            elif e.type == pg.QUIT:
                buttons.add("abort")
        return dead_zone(self.raw, self.zone), buttons

    def close(self) -> None:
        pass


class SpaceMouseInput:
    """A 3Dconnexion SpaceMouse through ``pyspacemouse`` (optional: DeviceError naming it when missing):
    translation x/y/z with a dead zone; left button "done", right button "abort"."""

    name = "spacemouse"

    def __init__(self, dead_zone: float = 0.1):
        try:
            import pyspacemouse
        except ImportError as e:
            raise DeviceError(
                "SpaceMouseInput needs the 'pyspacemouse' package (pip install pyspacemouse, and "
                "hidapi for your system); use --teleop keyboard or gamepad without it"
            ) from e
        self.lib, self.zone = pyspacemouse, dead_zone
        if not pyspacemouse.open():
            raise DeviceError("pyspacemouse found no SpaceMouse (is it plugged in, and readable by this user?)")

    def read(self) -> tuple[np.ndarray, set[str]]:
        """Translation axes move (within a dead zone); button 0 is done, button 1 aborts."""
        s = self.lib.read()
        buttons = set()
        pressed = list(getattr(s, "buttons", []) or [])
        if pressed[:1] == [1]:
            buttons.add("done")
        if pressed[1:2] == [1]:
            buttons.add("abort")
        return dead_zone([s.y, -s.x, s.z], self.zone), buttons

    def close(self) -> None:
        """Close the SpaceMouse if its library can."""
        close = getattr(self.lib, "close", None)
        if close is not None:
            close()


def make_device(name: str) -> InputDevice:
    """The input device named ``name`` (keyboard, gamepad, spacemouse); DeviceError for another name or a missing
    device."""
    if name == "keyboard":
        return KeyboardInput()
    if name == "gamepad":
        return GamepadInput()
    if name == "spacemouse":
        return SpaceMouseInput()
    raise DeviceError(f"unknown teleoperation device {name!r}; devices: keyboard, gamepad, spacemouse")


__all__ = [
    "BUTTONS",
    "DEVICES",
    "SLOW",
    "DeviceError",
    "GamepadInput",
    "InputDevice",
    "KeyboardInput",
    "SpaceMouseInput",
    "dead_zone",
    "init_pygame",
    "make_device",
]
