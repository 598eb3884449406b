"""Robot-episode datasets in the LeRobot v3.0 on-disk layout (pyarrow + PyAV; lerobot not required).

``format``: :class:`DatasetWriter`, :func:`load` -> :class:`Dataset`, :func:`compact`, :func:`validate`.
``loader``: :class:`EpisodeDataset`, a torch Dataset with lerobot's ``delta_timestamps`` stacking.
Needs the ``datasets`` extra (pyarrow).
"""

from .format import (
    CODEBASE_VERSION,
    EMBODY_SCHEMA_VERSION,
    Dataset,
    DatasetFormatError,
    DatasetWriter,
    compact,
    feature,
    load,
    validate,
)

__all__ = [
    "CODEBASE_VERSION",
    "EMBODY_SCHEMA_VERSION",
    "Dataset",
    "DatasetFormatError",
    "DatasetWriter",
    "EpisodeDataset",
    "compact",
    "feature",
    "load",
    "validate",
]


def __getattr__(name: str):
    if name == "EpisodeDataset":  # torch is imported only when the loader is used
        from .loader import EpisodeDataset

        return EpisodeDataset
    raise AttributeError(name)
