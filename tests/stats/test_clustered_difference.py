"""The attack-vs-blind AUC difference with users as clusters (split_check
``clustered_difference``) against a brute-force computation of Obuchowski's variance, and
DeLong's paired difference when every user has one text."""

from __future__ import annotations

import numpy as np
import pytest

from privacy_audit.stats.blind_baseline import clustered_difference, delong_difference


def _brute(a, b, m, users):
    """Placements by the full member x non-member comparison matrix, then per-user sums."""
    m = np.asarray(m, bool)

    def place(s):
        p, q = s[m][:, None], s[~m][None, :]
        w = (p > q) + 0.5 * (p == q)
        return w.mean(), w.mean(1), w.mean(0)

    aa, a10, a01 = place(np.asarray(a, float))
    bb, b10, b01 = place(np.asarray(b, float))
    var = 0.0
    for side, diff in ((m, a10 - b10), (~m, a01 - b01)):
        us = np.asarray(users)[side]
        names = sorted(set(us))
        tot = np.array([diff[us == u].sum() for u in names])
        n = np.array([(us == u).sum() for u in names])
        k = len(names)
        var += k / (k - 1) * ((tot - n * diff.mean()) ** 2).sum() / diff.size**2
    return aa - bb, np.sqrt(var)


def test_known_answer_and_one_text_per_user():
    rng = np.random.default_rng(3)
    users = np.repeat([f"u{i}" for i in range(30)], 4)
    m = np.repeat(np.arange(30) < 15, 4).astype(int)
    effect = np.repeat(rng.normal(0, 1, 30), 4)  # a user-level effect: texts cluster
    a = effect + m * 0.8 + rng.normal(0, 1, 120)
    b = rng.normal(0, 1, 120).round(1)  # ties too; no user effect, so a's does not cancel
    got = clustered_difference(a, b, m, users)
    d, se = _brute(a, b, m, users)
    assert got["value"] == pytest.approx(d) and got["se"] == pytest.approx(se, rel=1e-12)
    flat = clustered_difference(a, b, m, [str(i) for i in range(120)])
    ref = delong_difference(a, b, m)
    assert flat["se"] == pytest.approx(ref["se"], rel=1e-12)
    assert got["se"] > flat["se"]  # clusters widen the interval
