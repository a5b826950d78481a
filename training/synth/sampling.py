"""Vectorised categorical sampling with a different distribution per draw."""

from __future__ import annotations

import numpy as np


def row_cdf(weights: np.ndarray) -> np.ndarray:
    """``(R, C)`` float64 weights -> ``(R * C,)`` flat CDF where row ``r`` spans ``(r, r + 1]``.

    Every row needs a positive total. The flat layout lets :func:`sample_rows` draw from any
    mix of rows with one ``searchsorted``.
    """
    cum = np.cumsum(weights, axis=1, dtype=np.float64)
    total = cum[:, -1:]
    if not (total > 0).all():
        raise ValueError("every row of weights needs a positive total")
    cum = cum / total
    cum[:, -1] = 1.0  # exact, so row r never bleeds into row r + 1
    return (cum + np.arange(len(weights))[:, None]).ravel()


def sample_rows(flat_cdf: np.ndarray, num_cols: int, rows: np.ndarray, u: np.ndarray) -> np.ndarray:
    """One category per draw: draw ``i`` from row ``rows[i]`` of a :func:`row_cdf`.

    Args:
        flat_cdf: ``(R * C,)`` from :func:`row_cdf`.
        num_cols: ``C``.
        rows: ``(n,)`` int64 row of each draw.
        u: ``(n,)`` uniforms in ``[0, 1)``.

    Returns:
        ``(n,)`` int64 column indices; zero-weight columns are never drawn.
    """
    pos = np.searchsorted(flat_cdf, rows + u, side="right")
    return np.minimum(pos - rows * num_cols, num_cols - 1)


def sample_in_ranges(cum0: np.ndarray, lo: np.ndarray, hi: np.ndarray, u: np.ndarray) -> np.ndarray:
    """Draw ``i`` picks an index ``j`` in ``[lo[i], hi[i])`` with probability proportional to its mass.

    Args:
        cum0: ``(M + 1,)`` float64 running total of the masses, starting at 0.
        lo, hi: ``(n,)`` int64 ranges; each needs a positive total mass.
        u: ``(n,)`` uniforms in ``[0, 1)``.

    Returns:
        ``(n,)`` int64 indices into the masses.
    """
    target = cum0[lo] + u * (cum0[hi] - cum0[lo])
    pos = np.searchsorted(cum0, target, side="right") - 1
    return np.clip(pos, lo, hi - 1)
