"""Model files, PDDL domains and motion clips authored by this project."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent


def asset_path(relative: str) -> Path:
    """The absolute path of ``relative`` under the assets folder (whether or not it exists)."""
    return ROOT / relative
