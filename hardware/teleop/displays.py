"""Teleoperation displays: what the human is shown, as lines of text (``show(lines, status)``).

``TerminalDisplay`` writes one status line to a stream a few times a second; ``PygameDisplay`` draws the
lines in the pygame window the keyboard reads (``devices.init_pygame``).
"""

from __future__ import annotations

import math
import sys
import time
from typing import Protocol

from .devices import init_pygame


class Display(Protocol):
    """Where teleoperation shows its status lines."""

    def show(self, lines: list[str], status: str = "") -> None:
        """Show ``lines`` (and a ``status`` line) now, or skip if shown too recently."""

    def close(self) -> None: ...


class TerminalDisplay:
    """The learner's view as one status line on stderr, a few times a second."""

    def __init__(self, stream=sys.stderr, interval_s: float = 0.2):
        self.stream, self.interval, self.last = stream, interval_s, -math.inf

    def show(self, lines: list[str], status: str = "") -> None:
        """Rewrite one terminal line with ``lines`` and ``status`` joined by " | ", at most every ``interval``
        seconds."""
        now = time.monotonic()
        if now - self.last >= self.interval:
            self.last = now
            self.stream.write("\r" + " | ".join(lines + ([status] if status else [])) + "\x1b[K")
            self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")


class PygameDisplay:
    """The learner's view in the pygame window the keyboard reads."""

    def __init__(self):
        self.pg = pg = init_pygame()
        self.font = pg.font.Font(None, 24)

    def show(self, lines: list[str], status: str = "") -> None:
        """Draw ``lines`` and ``status`` in the pygame window (nothing without one)."""
        pg = self.pg
        surface = pg.display.get_surface()
        if surface is None:
            return
        surface.fill((20, 20, 28))
        for i, text in enumerate(lines + ([status] if status else [])):
            surface.blit(self.font.render(text, True, (230, 230, 230)), (10, 10 + 26 * i))
        pg.display.flip()

    def close(self) -> None:
        pass


__all__ = ["Display", "PygameDisplay", "TerminalDisplay"]
