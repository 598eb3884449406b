"""ALMI's registration with embody (the ``embody.plugins`` entry point ``almi``)."""


def register(api) -> None:
    """Add ALMI's tasks."""
    api.task("almi", "embody.papers.almi.tasks:AlmiWholeBody")
    api.task("almi-lower", "embody.papers.almi.tasks:AlmiLower")
    api.task("almi-upper", "embody.papers.almi.tasks:AlmiUpper")
