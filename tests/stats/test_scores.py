"""The balanced-accuracy threshold of stats/scores.py (``best_threshold``), by hand:
the midpoint below the tie group with the largest TPR − FPR, and +inf ("nobody is a
member") when no group beats the starting point (0, 0) (gain exactly 0 does not)."""

from __future__ import annotations

import numpy as np

from privacy_audit.stats.scores import best_threshold


def test_best_threshold_known_answers():
    # scores sorted decreasing; tp / fp: members / non-members at or above each position;
    # ends: the last position of each tie group. Two members and two non-members per row.
    scores = np.array([[3.0, 3.0, 1.0, 0.0], [3.0, 2.0, 1.0, 0.0], [3.0, 2.0, 1.0, 0.0]])
    # row 0: a member and a non-member tied at 3 (gain 0), then out (−0.5), in (0)
    # row 1: in, in, out, out: gains 0.5, 1, 0.5, 0 -> best after 2.0: (2 + 1) / 2
    # row 2: out, out, in, in: gains −0.5, −1, −0.5, 0 -> nothing beats (0, 0)
    tp = np.array([[1, 1, 1, 2], [1, 2, 2, 2], [0, 0, 1, 2]])
    fp = np.array([[0, 1, 2, 2], [0, 0, 1, 2], [1, 2, 2, 2]])
    ends = np.array([[False, True, True, True], [True] * 4, [True] * 4])
    got = best_threshold(scores, tp, fp, ends, 2, 2)
    np.testing.assert_array_equal(got, [np.inf, 1.5, np.inf])


def test_confidence_zero_and_one_are_refused():
    import pytest

    from privacy_audit.stats.scores import check_confidence

    for c in (0.0, 1.0):
        with pytest.raises(ValueError, match="confidence"):
            check_confidence(c)
    assert check_confidence(0.5) == 0.5


def test_stratified_split_gives_half_a_the_floor_of_each_class():
    from privacy_audit.stats.scores import stratified_split

    members = np.array([1, 1, 1, 1, 1, 0, 0, 0], dtype=bool)  # 5 members, 3 non-members
    a, b = stratified_split(members, 0)
    assert (members[a].sum(), (~members[a]).sum()) == (2, 1)  # floor(5/2), floor(3/2)
    assert (members[b].sum(), (~members[b]).sum()) == (3, 2)
    assert sorted(np.r_[a, b].tolist()) == list(range(8))


def test_a_resample_without_a_non_member_is_nan_in_every_statistic():
    from privacy_audit.stats.scores import poisson_bootstrap

    # one non-member: it gets Poisson weight 0 in about e^-1 of the resamples, which then
    # have no FPR at all; TPR there must be NaN like the AUC, not a number over 0 negatives
    labels = np.array([True, True, False])
    out = poisson_bootstrap(labels, 400, np.random.default_rng(0), fprs=(0.1,))
    nan_auc = np.isnan(out["auc"])
    assert 0.2 < nan_auc.mean() < 0.6  # e^-1 ~ 0.37, plus the rarer no-member resamples
    assert np.array_equal(np.isnan(out["tpr_at_fpr_0.1"]), nan_auc)
    assert np.array_equal(np.isnan(out["advantage"]), nan_auc)
