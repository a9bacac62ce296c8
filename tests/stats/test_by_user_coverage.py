"""Coverage of the user-level intervals on real grouped text, small version of
experiments/user_coverage.py (docs/users.md, docs/records/users-coverage.json).

Debian changelog entries grouped by maintainer, score = zlib ratio (it clusters by
maintainer: ICC ~0.2), 150 random user splits of 150 + 150 users with no effect, so the
true AUC is 0.5 and the true TPR at 10 % FPR is 0.1.  A 95 % interval covers in
~142 of 150 splits (sd ~2.7 splits), so the bar of 0.88 (132) is ~4 sd below a correct
interval (measured: AUC 0.953, TPR@10 % 0.940, user-level AUC 0.947); the text-level
DeLong interval covers 0.673, and a user bootstrap that resamples texts instead of users
covers TPR@10 % in 0.800 (checked by applying that mutant), below the bar.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from experiments import user_coverage as uc
from privacy_audit.stats import by_user as ul

BAR = 0.88
SPLITS = 150


@functools.cache
def _debian():
    s, g = uc.population(uc.debian_users(), seed=0)
    return s, g


@functools.cache
def _null_coverage():
    s, g = _debian()
    if g.max() + 1 < 300:
        pytest.skip(f"only {g.max() + 1} Debian maintainers with >= 2 entries on this machine")
    return uc.coverage(s, g, 150, SPLITS, 0.0, 0.0, n_boot=200, seed=1)["intervals"]


def test_the_corpus_clusters_by_user():
    s, g = _debian()
    assert uc.icc(s, g) > 0.1  # else this test could not tell user from text resampling


@pytest.mark.parametrize(
    "name",
    ["user_resampled/auc", "user_resampled/tpr_at_fpr_0.1", "user_level/auc"],
)
def test_user_level_intervals_cover(name):
    c = _null_coverage()[name]
    assert c["n"] == SPLITS
    assert c["coverage"] >= BAR, c


def test_text_resampled_auc_undercovers_on_clustered_text():
    c = _null_coverage()["text_resampled/auc"]
    assert c["coverage"] <= 0.80, c


def test_user_pvalues_null_rate_on_real_users():
    s, g = _debian()
    r = uc.di_null(s, g, 200, 100, 300, 0.05, seed=2)
    # one independent user per split: p <= 0.05 at most 5 % (+ ~3 sd of 300 trials)
    assert r["one_user_p_le_0.05"]["rate"] <= 0.09
    assert r["all_users_p_le_0.05"]["rate"] <= 0.065
    assert r["bh_any_found"]["rate"] <= 0.09


def test_population_truths_by_hand():
    # two users per side of the population formula: pairs of different users only
    s = np.array([0.0, 1.0, 2.0])
    g = np.array([0, 0, 1])
    # pairs of different users: (0,2), (1,2), (2,0), (2,1): P(x + mu > y) with tau -> 0
    assert uc._pair_auc(s, g, s, g, 0.5, 0.0) == pytest.approx((0 + 0 + 1 + 1) / 4)
    assert ul.user_pvalues([3.0], s)[0] == pytest.approx(0.25)
