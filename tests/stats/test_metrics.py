"""Known-answer tests for privacy_audit.stats.metrics (sklearn is used only as a cross-check)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import norm
from sklearn.metrics import roc_auc_score
from sklearn.metrics import roc_curve as sk_roc_curve

from privacy_audit.stats.epsilon_bounds import (
    epsilon_ceiling,
    epsilon_lower_bound,
    epsilon_point_estimate,
)
from privacy_audit.stats.metrics import (
    CI_METHODS,
    advantage,
    auc,
    balanced_accuracy_split,
    bootstrap_ci,
    membership_metrics,
    roc_curve,
    tpr_at_fpr,
)
from privacy_audit.stats.scores import POISSON, SortedScores, poisson_bootstrap


def gaussian_scores(mu: float, n_in: int, n_out: int, seed: int):
    rng = np.random.default_rng(seed)
    scores = np.concatenate([rng.normal(mu, 1.0, n_in), rng.normal(0.0, 1.0, n_out)])
    members = np.concatenate([np.ones(n_in, dtype=int), np.zeros(n_out, dtype=int)])
    return scores, members


def brute_force_auc(scores, members) -> float:
    s = np.asarray(scores, dtype=float)
    m = np.asarray(members).astype(bool)
    diff = s[m][:, None] - s[~m][None, :]
    return float(np.mean((diff > 0) + 0.5 * (diff == 0)))


# --------------------------------------------------------------------------- extremes


def test_perfect_separation():
    scores = np.r_[np.arange(10, 20), np.arange(0, 10)].astype(float)
    members = np.r_[np.ones(10), np.zeros(10)]
    assert auc(scores, members) == 1.0
    assert advantage(scores, members) == 1.0
    assert tpr_at_fpr(scores, members, 0.001) == 1.0
    fpr, tpr, thr = roc_curve(scores, members)
    assert (fpr[0], tpr[0], thr[0]) == (0.0, 0.0, np.inf)
    assert (fpr[-1], tpr[-1]) == (1.0, 1.0)


def test_reversed_scores():
    scores = np.r_[np.arange(0, 10), np.arange(10, 20)].astype(float)
    members = np.r_[np.ones(10), np.zeros(10)]
    assert auc(scores, members) == 0.0
    assert advantage(scores, members) == 0.0
    assert tpr_at_fpr(scores, members, 0.5) == 0.0


def test_all_ties():
    scores = np.full(12, 3.5)
    members = np.r_[np.ones(5), np.zeros(7)]
    assert auc(scores, members) == 0.5
    assert advantage(scores, members) == 0.0
    fpr, tpr, thr = roc_curve(scores, members)
    np.testing.assert_array_equal(fpr, [0.0, 1.0])
    np.testing.assert_array_equal(tpr, [0.0, 1.0])
    np.testing.assert_array_equal(thr, [np.inf, 3.5])
    assert tpr_at_fpr(scores, members, 0.99) == 0.0


# --------------------------------------------------------------------------- hand examples


def test_hand_example_no_ties():
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    members = [1, 0, 1, 1, 0, 0]
    fpr, tpr, thr = roc_curve(scores, members)
    np.testing.assert_allclose(fpr, [0, 0, 1 / 3, 1 / 3, 1 / 3, 2 / 3, 1])
    np.testing.assert_allclose(tpr, [0, 1 / 3, 1 / 3, 2 / 3, 1, 1, 1])
    np.testing.assert_array_equal(thr, [np.inf, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4])
    assert tpr_at_fpr(scores, members, 0.0) == pytest.approx(1 / 3)
    assert tpr_at_fpr(scores, members, 0.3) == pytest.approx(1 / 3)
    assert tpr_at_fpr(scores, members, 1 / 3) == pytest.approx(1.0)
    assert advantage(scores, members) == pytest.approx(2 / 3)
    assert auc(scores, members) == pytest.approx(7 / 9)


def test_hand_example_ties_move_together():
    # The tie at 1.0 holds one member and one non-member: it cannot be split.
    scores = [2.0, 1.0, 1.0, 0.0]
    members = [1, 1, 0, 0]
    fpr, tpr, thr = roc_curve(scores, members)
    np.testing.assert_allclose(fpr, [0, 0, 0.5, 1])
    np.testing.assert_allclose(tpr, [0, 0.5, 1, 1])
    np.testing.assert_array_equal(thr, [np.inf, 2.0, 1.0, 0.0])
    assert tpr_at_fpr(scores, members, 0.4) == 0.5
    assert advantage(scores, members) == 0.5
    # Mann-Whitney with ties counted 1/2: (1 + 1 + 0.5 + 1) / 4.
    assert auc(scores, members) == pytest.approx(3.5 / 4)
    # Order of the tied examples does not matter.
    assert auc([2.0, 1.0, 1.0, 0.0], [1, 0, 1, 0]) == pytest.approx(3.5 / 4)


def test_bool_and_float_labels_agree():
    scores, members = gaussian_scores(0.7, 40, 60, seed=3)
    a = auc(scores, members)
    assert auc(scores, members.astype(bool)) == a
    assert auc(list(scores), [float(x) for x in members]) == a


# --------------------------------------------------------------------------- sklearn cross-checks


@pytest.mark.parametrize("seed", range(5))
def test_auc_matches_sklearn_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = 400
    members = rng.integers(0, 2, n)
    scores = np.round(rng.normal(members * 0.6, 1.0), 1)  # many ties
    assert len(np.unique(scores)) < n / 2
    expected = roc_auc_score(members, scores)
    assert auc(scores, members) == pytest.approx(expected, abs=1e-12)
    assert auc(scores, members) == pytest.approx(brute_force_auc(scores, members), abs=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_roc_matches_sklearn(seed):
    rng = np.random.default_rng(100 + seed)
    n = 300
    members = rng.integers(0, 2, n)
    scores = np.round(rng.normal(members * 0.8, 1.0), 1)
    fpr, tpr, thr = roc_curve(scores, members)
    # Without dropping points sklearn returns exactly one point per distinct score.
    sk_fpr, sk_tpr, sk_thr = sk_roc_curve(members, scores, drop_intermediate=False)
    np.testing.assert_allclose(fpr, sk_fpr, rtol=0, atol=1e-15)
    np.testing.assert_allclose(tpr, sk_tpr, rtol=0, atol=1e-15)
    np.testing.assert_array_equal(thr[1:], sk_thr[1:])
    assert thr[0] == np.inf
    # tpr_at_fpr is the step function "best TPR with FPR <= x" of sklearn's points.
    for x in np.linspace(0.0, 1.0, 501):
        theirs = sk_tpr[sk_fpr <= x].max()
        assert tpr_at_fpr(scores, members, x) == pytest.approx(theirs, abs=1e-15)
    # sklearn's default drops collinear points: the kept points are a subset of
    # ours, in order, and every point of ours lies on the kept polyline.
    d_fpr, d_tpr, _ = sk_roc_curve(members, scores)
    ours = list(zip(fpr, tpr, strict=True))
    kept = [ours.index(p) for p in zip(d_fpr, d_tpr, strict=True)]
    assert kept == sorted(kept) and kept[0] == 0 and kept[-1] == len(ours) - 1
    for a, b in zip(kept[:-1], kept[1:], strict=True):
        for i in range(a, b + 1):
            cross = (fpr[b] - fpr[a]) * (tpr[i] - tpr[a]) - (tpr[b] - tpr[a]) * (fpr[i] - fpr[a])
            assert abs(cross) < 1e-12
    assert advantage(scores, members) == pytest.approx(np.max(d_tpr - d_fpr), abs=1e-15)
    assert auc(scores, members) == pytest.approx(np.trapezoid(d_tpr, d_fpr), abs=1e-12)


def test_tpr_at_fpr_resolution_is_zero_false_positives():
    # 500 non-members: FPR steps of 0.2%, so "TPR at 0.1% FPR" is TPR at zero FP.
    scores, members = gaussian_scores(2.0, 500, 500, seed=7)
    s_in, s_out = scores[members == 1], scores[members == 0]
    expected = np.mean(s_in > s_out.max())
    assert tpr_at_fpr(scores, members, 0.001) == pytest.approx(expected)
    # At 1% FPR five false positives are allowed: threshold just above the 6th largest.
    sixth = np.sort(s_out)[-6]
    assert tpr_at_fpr(scores, members, 0.01) == pytest.approx(np.mean(s_in > sixth))


# --------------------------------------------------------------------------- Gaussian truths


def test_gaussian_large_sample_known_answers():
    mu, n = 1.0, 20_000
    scores, members = gaussian_scores(mu, n, n, seed=11)
    true_auc = norm.cdf(mu / math.sqrt(2.0))
    value = auc(scores, members)
    lo, hi = bootstrap_ci("auc", scores, members, n_boot=300, seed=1)
    assert lo <= true_auc <= hi
    assert abs(value - true_auc) < 0.01
    assert hi - lo < 0.02
    true_adv = 2.0 * norm.cdf(mu / 2.0) - 1.0
    assert abs(advantage(scores, members) - true_adv) < 0.02
    assert abs(balanced_accuracy_split(scores, members, seed=0) - norm.cdf(mu / 2.0)) < 0.012


def test_balanced_accuracy_split_is_out_of_sample():
    # No signal: the in-sample optimum is > 0.5, the split estimate is not biased up.
    vals = []
    for seed in range(40):
        scores, members = gaussian_scores(0.0, 100, 100, seed=seed)
        vals.append(balanced_accuracy_split(scores, members, seed=seed))
        assert (1 + advantage(scores, members)) / 2 > 0.5
    assert abs(np.mean(vals) - 0.5) < 0.015


def test_balanced_accuracy_split_seeded():
    scores, members = gaussian_scores(1.0, 200, 300, seed=2)
    a = balanced_accuracy_split(scores, members, seed=5)
    assert a == balanced_accuracy_split(scores, members, seed=5)
    assert 0.5 < a < 0.8


# --------------------------------------------------------------------------- bootstrap


@pytest.mark.parametrize("ties", [False, True])
def test_poisson_bootstrap_equals_weighted_resamples(ties):
    # Each replicate equals the statistic recomputed (by sklearn and by the plain
    # functions) on the resample it stands for: every example repeated by its weight.
    scores, members = gaussian_scores(1.0, 60, 90, seed=4)
    if ties:
        scores = np.round(scores, 1)
    ss = SortedScores(scores, members)
    n_boot = 40
    names = ("auc", "advantage", "tpr_at_fpr_0.01", "tpr_at_fpr_0.05")
    reps = poisson_bootstrap(
        ss.labels,
        n_boot,
        np.random.default_rng(9),
        fprs=(0.01, 0.05),
        group_starts=ss.group_starts if ss.has_ties else None,
    )
    w = POISSON[np.random.default_rng(9).integers(0, 65536, (n_boot, 150), dtype=np.uint16)]
    for b in range(n_boot):
        s_b = np.repeat(ss.scores, w[b])
        m_b = np.repeat(ss.labels, w[b])
        assert reps["auc"][b] == pytest.approx(roc_auc_score(m_b, s_b), abs=1e-12)
        assert reps["advantage"][b] == pytest.approx(advantage(s_b, m_b), abs=1e-12)
        for x in (0.01, 0.05):
            got = reps[f"tpr_at_fpr_{x:g}"][b]
            assert got == pytest.approx(tpr_at_fpr(s_b, m_b, x), abs=1e-12)
    assert set(reps) == set(names)


def test_poisson_table_is_poisson_one():
    counts = np.bincount(POISSON, minlength=16) / POISSON.size
    k = np.arange(16)
    pmf = np.exp(-1.0) / np.array([math.factorial(int(i)) for i in k])
    assert np.max(np.abs(counts - pmf)) <= 2.0**-16


def test_bootstrap_is_stratified_and_seeded():
    scores, members = gaussian_scores(1.0, 30, 70, seed=4)
    seen, values = [], []

    def count_members(s, m):
        seen.append((len(s), int(np.sum(m))))
        values.append(float(np.mean(s[m.astype(bool)])))
        return values[-1]

    lo, hi = bootstrap_ci(count_members, scores, members, n_boot=50, seed=1)
    assert set(seen) == {(100, 30)}
    assert lo < np.mean(scores[members == 1]) < hi
    # the 2.5 % and 97.5 % quantiles of the replicates it was handed
    assert (lo, hi) == pytest.approx(tuple(np.quantile(values, [0.025, 0.975])), abs=1e-15)
    # named statistic, seeded: the percentile interval of sklearn's AUC on the same
    # Poisson(1)-weighted resamples (weights drawn on the decreasing-score order)
    order = np.argsort(-scores)
    w = POISSON[np.random.default_rng(3).integers(0, POISSON.size, (100, 100), np.uint16)]
    reps = [roc_auc_score(members[order], scores[order], sample_weight=w[i]) for i in range(100)]
    assert bootstrap_ci("auc", scores, members, n_boot=100, seed=3) == pytest.approx(
        tuple(np.quantile(reps, [0.025, 0.975])), abs=1e-12
    )
    a = bootstrap_ci("auc", scores, members, n_boot=100, confidence=0.5, seed=3)
    b = bootstrap_ci("auc", scores, members, n_boot=100, confidence=0.99, seed=3)
    assert b[0] <= a[0] <= a[1] <= b[1]


def test_bootstrap_balanced_accuracy_interval():
    scores, members = gaussian_scores(1.0, 500, 500, seed=8)
    lo, hi = bootstrap_ci("balanced_accuracy", scores, members, n_boot=300, seed=0)
    assert lo < norm.cdf(0.5) < hi
    assert hi - lo < 0.1


# --------------------------------------------------------------------------- validation

BAD_INPUTS = [
    ([0.1, np.nan, 0.3], [1, 0, 1], "finite"),
    ([0.1, np.inf, 0.3], [1, 0, 1], "finite"),
    ([0.1, 0.2, 0.3], [1, 1, 1], "both classes"),
    ([0.1, 0.2, 0.3], [0, 0, 0], "both classes"),
    ([], [], "empty"),
    ([0.1, 0.2, 0.3], [1, 0], "same length"),
    ([0.1, 0.2, 0.3], [1, 0, 2], "0/1"),
    ([[0.1, 0.2]], [[1, 0]], "1-D"),
    (["a", "b"], [1, 0], "real numbers"),
]


@pytest.mark.parametrize("scores, members, message", BAD_INPUTS)
@pytest.mark.parametrize(
    "fn",
    [
        roc_curve,
        auc,
        advantage,
        lambda s, m: tpr_at_fpr(s, m, 0.01),
        balanced_accuracy_split,
        lambda s, m: bootstrap_ci("auc", s, m, n_boot=10),
        lambda s, m: membership_metrics(s, m, n_boot=10),
    ],
)
def test_invalid_inputs_raise(fn, scores, members, message):
    with pytest.raises(ValueError, match=message):
        fn(scores, members)


def test_invalid_parameters_raise():
    scores, members = gaussian_scores(1.0, 20, 20, seed=0)
    with pytest.raises(ValueError, match="max_fpr"):
        tpr_at_fpr(scores, members, 1.5)
    with pytest.raises(ValueError, match="max_fpr"):
        tpr_at_fpr(scores, members, float("nan"))
    with pytest.raises(ValueError, match="confidence"):
        bootstrap_ci("auc", scores, members, confidence=1.0)
    with pytest.raises(ValueError, match="n_boot"):
        bootstrap_ci("auc", scores, members, n_boot=0)
    with pytest.raises(ValueError, match="'auc'"):
        bootstrap_ci("gini", scores, members)
    with pytest.raises(ValueError, match="delta"):
        membership_metrics(scores, members, delta=0.0, n_boot=10)
    with pytest.raises(ValueError, match="at least 2 members"):
        balanced_accuracy_split([0.3, 0.2, 0.1], [1, 0, 0])


# --------------------------------------------------------------------------- membership_metrics

CI_KEYS = (
    "auc",
    "tpr_at_fpr_0.001",
    "tpr_at_fpr_0.01",
    "tpr_at_fpr_0.05",
    "tpr_at_fpr_0.1",
    "tpr_at_fpr_0.2",
    "advantage",
    "balanced_accuracy",
)


def test_membership_metrics_keys_and_values():
    scores, members = gaussian_scores(1.5, 300, 400, seed=21)
    out = membership_metrics(scores, members, delta=1e-5, n_boot=200, seed=3)
    assert set(out) == set(CI_KEYS) | {"epsilon_lower_bound", "n_members", "n_nonmembers"}
    for key in ("auc", "tpr_at_fpr_0.01", "advantage", "balanced_accuracy"):
        assert {"value", "ci_low", "ci_high", "method"} <= set(out[key])
        assert all(isinstance(out[key][k], float) for k in ("value", "ci_low", "ci_high"))
        assert out[key]["ci_low"] <= out[key]["value"] <= out[key]["ci_high"]
    assert out["auc"]["value"] == auc(scores, members)
    assert out["auc"]["method"] == CI_METHODS["auc"]
    assert out["advantage"]["value"] == advantage(scores, members)
    assert out["tpr_at_fpr_0.01"]["value"] == tpr_at_fpr(scores, members, 0.01)
    assert out["tpr_at_fpr_0.01"]["below_resolution"] is False
    # 0.1 % FPR with 400 non-members is below the resolution 1/400: no number at all.
    low = out["tpr_at_fpr_0.001"]
    assert low["below_resolution"] is True and low["resolution"] == 1 / 400
    assert low["value"] is None and low["ci_low"] is None and low["ci_high"] is None
    assert out["balanced_accuracy"]["value"] == balanced_accuracy_split(scores, members, seed=3)
    eps = out["epsilon_lower_bound"]
    assert set(eps) == {
        "value",
        "ci_low",
        "ci_high",
        "delta",
        "confidence",
        "method",
        "threshold",
        "ceiling",
        "point_estimate",
        "point_estimate_note",
    }
    assert eps["point_estimate_note"] == "point estimate, not a bound"
    assert eps["value"] == epsilon_lower_bound(scores, members, 1e-5, seed=3)
    assert eps["ci_low"] == eps["value"]
    assert eps["ci_high"] is None
    assert (eps["method"], eps["threshold"]) == ("clopper-pearson", "split")
    assert (eps["delta"], eps["confidence"]) == (1e-5, 0.95)
    assert eps["ceiling"] == epsilon_ceiling(300, 400, 1e-5)
    assert 0.0 < eps["value"] <= eps["ceiling"]
    assert eps["point_estimate"] == epsilon_point_estimate(scores, members, 1e-5) >= 0.0
    assert out["n_members"] == 300 and type(out["n_members"]) is int
    assert out["n_nonmembers"] == 400 and type(out["n_nonmembers"]) is int
    assert out == membership_metrics(scores, members, delta=1e-5, n_boot=200, seed=3)
    json.dumps(out)  # plain Python types only


def test_membership_metrics_n2000_nboot1000():
    scores, members = gaussian_scores(0.5, 2000, 2000, seed=5)
    out = membership_metrics(scores, members, n_boot=1000)
    for key in CI_KEYS:
        v = out[key]
        if key == "tpr_at_fpr_0.001":  # 2 false positives at 2,000: not resolvable
            assert v["value"] is None and v["below_resolution"] is True
            assert v["needs_nonmembers"] == 3000
            continue
        assert all(np.isfinite([v["value"], v["ci_low"], v["ci_high"]]))
        assert 0.0 <= v["ci_low"] <= v["ci_high"] <= 1.0
    true_auc = norm.cdf(0.5 / math.sqrt(2))
    assert out["auc"]["ci_low"] < true_auc < out["auc"]["ci_high"]
    assert out["auc"]["ci_high"] - out["auc"]["ci_low"] < 0.05


def test_advantage_bootstrap_on_runs_equals_the_general_path():
    from privacy_audit.stats.scores import advantage_bootstrap

    scores, members = gaussian_scores(0.7, 300, 500, seed=12)
    ss = SortedScores(scores, members)
    general = poisson_bootstrap(ss.labels, 250, np.random.default_rng(2), want_auc=False)
    runs = advantage_bootstrap(ss.labels, 250, np.random.default_rng(2))
    np.testing.assert_allclose(runs, general["advantage"], rtol=0, atol=1e-14)


@pytest.mark.parametrize("decimals", [0, 1, 2])
def test_advantage_bootstrap_with_ties_equals_the_general_path(decimals):
    # float32-like ties (few), and coarse grids where tie groups span many blocks
    from privacy_audit.stats.scores import advantage_bootstrap

    scores, members = gaussian_scores(0.7, 300, 500, seed=13)
    scores = np.round(scores, decimals)
    ss = SortedScores(scores, members)
    assert ss.has_ties
    general = poisson_bootstrap(
        ss.labels, 250, np.random.default_rng(2), group_starts=ss.group_starts, want_auc=False
    )
    fast = advantage_bootstrap(ss.labels, 250, np.random.default_rng(2), ends=ss.ends)
    np.testing.assert_allclose(fast, general["advantage"], rtol=0, atol=1e-14)
    # and each replicate is the advantage sklearn computes on its weighted resample
    w = POISSON[np.random.default_rng(2).integers(0, POISSON.size, (3, ss.scores.size), np.uint16)]
    for i in range(3):
        fpr, tpr, _ = sk_roc_curve(ss.labels, ss.scores, sample_weight=w[i])
        assert fast[i] == pytest.approx(max(0.0, float(np.max(tpr - fpr))), abs=1e-12)


def test_known_answers_at_one_million_scores_and_n_equals_two():
    scores, members = gaussian_scores(0.5, 500_000, 500_000, seed=3)
    scores = np.round(scores, 3)  # many ties
    assert auc(scores, members) == pytest.approx(roc_auc_score(members, scores), abs=1e-12)
    ss = SortedScores(scores, members)
    assert ss.auc() == auc(scores, members)
    fpr, tpr, _ = sk_roc_curve(members, scores, drop_intermediate=False)
    for x in (0.001, 0.01):
        assert ss.tpr_at_fpr(x) == pytest.approx(np.max(tpr[fpr <= x]), abs=1e-12)
    assert ss.advantage() == pytest.approx(np.max(tpr - fpr), abs=1e-12)
    two = membership_metrics([0.2, 0.9, 0.1, 0.8], [0, 1, 0, 1], n_boot=100)
    assert two["auc"]["value"] == roc_auc_score([0, 1, 0, 1], [0.2, 0.9, 0.1, 0.8]) == 1.0
    assert two["auc"]["ci_low"] < 1.0 == two["auc"]["ci_high"]
    assert two["tpr_at_fpr_0.01"]["below_resolution"] is True
