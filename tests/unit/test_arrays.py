"""``models.arrays.unique_sorted`` is ``np.unique`` without its slow path."""

from __future__ import annotations

import numpy as np
import pytest

from models.arrays import unique_sorted


@pytest.mark.parametrize("values", [
    np.array([], dtype=np.int64), np.array([7]), np.array([3, 1, 3, 2, 1]), np.array([[2, 1], [1, 5]]),
    np.random.default_rng(0).integers(0, 40, 1000), np.random.default_rng(1).integers(-2**40, 2**40, 5000),
    np.array([0.5, -1.0, 0.5]),
])
def test_unique_sorted_equals_np_unique(values: np.ndarray) -> None:
    got = unique_sorted(values)
    assert got.dtype == np.unique(values).dtype
    np.testing.assert_array_equal(got, np.unique(values))
