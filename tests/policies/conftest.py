"""Fixtures for the policy tests (helpers live in policy_helpers.py)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _deterministic():
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny networks: threads only add noise and overhead
    yield
    torch.set_num_threads(threads)
