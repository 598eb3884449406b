"""Normalizer: running statistics over batches equal numpy's over all the data."""

import numpy as np
import torch

from embody.policies.networks import Normalizer


def test_running_statistics_match_numpy():
    rng = np.random.default_rng(0)
    batches = [rng.normal(loc=[5.0, -2.0, 0.0], scale=[3.0, 0.1, 1.0], size=(n, 3)) for n in (1, 7, 64, 3, 200)]
    norm = Normalizer(3)
    for b in batches:
        norm.update(torch.as_tensor(b, dtype=torch.float32))
    data = np.concatenate(batches)
    np.testing.assert_allclose(norm.mean.numpy(), data.mean(0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(norm.var.numpy(), data.var(0), rtol=1e-4, atol=1e-6)
    assert abs(float(norm.count) - len(data)) < 1e-6


def test_update_with_leading_batch_dims_and_normalize():
    x = torch.randn(4, 10, 2) * torch.tensor([2.0, 0.5]) + torch.tensor([1.0, -1.0])
    norm = Normalizer(2, clip=3.0)
    norm.update(x)
    flat = x.reshape(-1, 2).double().numpy()
    np.testing.assert_allclose(norm.mean.numpy(), flat.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norm.var.numpy(), flat.var(0), rtol=1e-4)
    y = norm(x)
    expected = ((x - norm.mean) / torch.sqrt(norm.var + norm.eps)).clamp(-3.0, 3.0)
    torch.testing.assert_close(y, expected)
    assert y.abs().max() <= 3.0


def test_empty_feature_size_is_a_no_op():
    norm = Normalizer(0)
    norm.update(torch.zeros(5, 0))
    assert norm(torch.zeros(5, 0)).shape == (5, 0)
