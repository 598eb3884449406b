"""hardware/teleop/devices.py: the keyboard, gamepad and SpaceMouse readers on real pygame events
(SDL's dummy video driver: headless); missing devices are clear errors."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
pygame = pytest.importorskip("pygame")

from embody.hardware import teleop as T  # noqa: E402


def key(kind, k):
    return pygame.event.Event(kind, key=k, mod=0, unicode="", scancode=0)


def test_keyboard_reads_posted_key_events():
    kb = T.KeyboardInput()
    pygame.event.clear()
    for k in (pygame.K_UP, pygame.K_a, pygame.K_PAGEDOWN):
        pygame.event.post(key(pygame.KEYDOWN, k))
    move, buttons = kb.read()
    assert move.tolist() == [1.0, 1.0, -1.0] and buttons == set()
    pygame.event.post(key(pygame.KEYDOWN, pygame.K_DOWN))  # opposite keys cancel
    pygame.event.post(key(pygame.KEYDOWN, pygame.K_RSHIFT))
    move, buttons = kb.read()
    np.testing.assert_allclose(move, [0.0, T.SLOW, -T.SLOW])
    assert buttons == {"slow"}
    pygame.event.post(pygame.event.Event(pygame.WINDOWFOCUSLOST))  # a KEYUP that will never come
    assert kb.read()[0].tolist() == [0.0, 0.0, 0.0]
    pygame.event.post(key(pygame.KEYDOWN, pygame.K_RETURN))
    assert kb.read()[1] == {"done"}
    pygame.event.post(key(pygame.KEYDOWN, pygame.K_ESCAPE))
    assert kb.read()[1] == {"abort"}
    pygame.event.post(pygame.event.Event(pygame.QUIT))
    assert kb.read()[1] == {"abort"}


class Pad:
    """The gamepad hardware's one fact the reader needs: its SDL instance id (no joystick on CI)."""

    def get_instance_id(self):
        return 7


def axis(n, value, instance=7):
    return pygame.event.Event(pygame.JOYAXISMOTION, instance_id=instance, axis=n, value=value, joy=0)


def test_gamepad_axes_have_a_dead_zone():
    pad = T.GamepadInput(Pad(), dead_zone=0.15)
    pygame.event.clear()
    for ev in (axis(0, 0.1), axis(1, -0.14), axis(3, 0.149)):  # stick drift: inside the dead zone
        pygame.event.post(ev)
    assert pad.read()[0].tolist() == [0.0, 0.0, 0.0]
    for ev in (axis(1, -0.575), axis(0, -1.0), axis(3, 0.2), axis(0, 0.9, instance=8)):  # another pad: ignored
        pygame.event.post(ev)
    move, _ = pad.read()
    np.testing.assert_allclose(move, [0.5, 1.0, -0.05 / 0.85])  # rescaled past the zone; stick up = +x
    pygame.event.post(axis(1, -3.0))  # out of range: clipped
    assert pad.read()[0][0] == 1.0
    pygame.event.post(pygame.event.Event(pygame.JOYBUTTONDOWN, instance_id=7, button=0, joy=0))
    assert pad.read()[1] == {"done"}
    pygame.event.post(pygame.event.Event(pygame.JOYBUTTONDOWN, instance_id=7, button=1, joy=0))
    assert pad.read()[1] == {"abort"}
    np.testing.assert_allclose(T.dead_zone([0.15, -0.15 - 0.85 / 2, 1.0], 0.15), [0.0, -0.5, 1.0])


def test_missing_gamepad_and_spacemouse_are_clear_errors(monkeypatch):
    with pytest.raises(T.DeviceError, match="no gamepad 4"):
        T.GamepadInput(4)
    monkeypatch.setitem(sys.modules, "pyspacemouse", None)  # not installed
    with pytest.raises(T.DeviceError, match="needs the 'pyspacemouse' package"):
        T.SpaceMouseInput()
    with pytest.raises(T.DeviceError, match="unknown teleoperation device"):
        T.make_device("theremin")


def test_the_terminal_display_shows_one_status_line():
    import io

    out = io.StringIO()
    display = T.TerminalDisplay(out, interval_s=0.0)
    display.show(["tip 1 mm", "force 2 N"], "episode 1/2, step 3")
    display.close()
    assert out.getvalue() == "\rtip 1 mm | force 2 N | episode 1/2, step 3\x1b[K\n"
