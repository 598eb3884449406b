"""Fixtures for the dataset tests (helpers live in dataset_helpers.py)."""

import pytest

pytest.importorskip("pyarrow")

from dataset_helpers import write_dataset  # noqa: E402


@pytest.fixture
def tiny(tmp_path):
    """(root, arrays written) of a 3-episode dataset (lengths 5, 6, 7) with one 32x32 camera."""
    root = tmp_path / "ds"
    return root, write_dataset(root)
