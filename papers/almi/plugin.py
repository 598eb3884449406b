"""ALMI's registration with embody (the ``embody.plugins`` entry point ``almi``)."""


def register(api) -> None:
    """Add ALMI's tasks."""
    api.task("almi-lower", "embody.papers.almi.lower:AlmiLower")
