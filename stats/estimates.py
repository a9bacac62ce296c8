"""One estimate as every result record stores it: a point value, its interval (or None)
and the sample size it rests on."""

from __future__ import annotations

from typing import Any

import numpy as np


def estimate(
    value: float,
    ci_low: float | None = None,
    ci_high: float | None = None,
    n: int | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """One leakage metric: a point value with its CI (or None) and sample size."""
    out = {"value": float(value), "ci_low": ci_low, "ci_high": ci_high, "n": n}
    for key in ("ci_low", "ci_high"):
        if out[key] is not None:
            out[key] = float(out[key])
    out.update(extra)
    return out


def proportion_estimate(successes: int, n: int, confidence: float = 0.95, **extra) -> dict:
    """A success rate with its exact (Clopper–Pearson) two-sided interval.

    Assumes the ``n`` trials are independent; ``successes`` and ``n`` are stored with it.
    """
    from scipy.stats import binomtest

    if n <= 0:
        raise ValueError("a rate needs at least one trial")
    if not 0 <= successes <= n:
        raise ValueError(f"successes ({successes}) must lie in [0, n={n}]")
    ci = binomtest(int(successes), int(n)).proportion_ci(confidence, method="exact")
    return estimate(successes / n, ci.low, ci.high, n, successes=int(successes), **extra)


def mean_estimate(
    values: Any, confidence: float = 0.95, n_boot: int = 1000, seed: int = 0, **extra
) -> dict:
    """A mean of per-item values with a percentile-bootstrap interval over the items.

    Assumes the items are independent draws (e.g. one recall per sequence).
    """
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    if v.size == 0:
        raise ValueError("a mean needs at least one value")
    if not np.all(np.isfinite(v)):
        raise ValueError("values contain NaN or infinity")
    rng = np.random.default_rng(seed)
    boots = v[rng.integers(0, v.size, size=(n_boot, v.size))].mean(axis=1)
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(boots, [alpha, 1 - alpha])
    return estimate(v.mean(), lo, hi, int(v.size), **extra)
