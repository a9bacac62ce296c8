"""Tied scores: the exact TPR@FPR interval holds its value and its coverage (issue 26, V1).

A tie block at the top of the non-member scores used to be counted whole by the lower
limit: 500 + 500 scores all equal to 0.5 gave TPR@1%FPR 0 with interval [0.99, 1.00]
and a HIGH verdict at AUC 0.5."""

from __future__ import annotations

import numpy as np
from scipy.stats import norm

from privacy_audit.reports.verdict import verdict_for_run
from privacy_audit.stats.metrics import membership_metrics, tpr_at_fpr, tpr_interval_exact


def _run_from(metrics: dict) -> dict:
    return {"attacks": [{"attack": "loss", "status": "ok", "metrics": metrics}]}


def test_all_tied_scores_give_a_wide_interval_holding_the_value_and_no_high_verdict():
    scores = np.full(1000, 0.5)
    members = np.r_[np.ones(500, dtype=int), np.zeros(500, dtype=int)]
    out = membership_metrics(scores, members, n_boot=200)
    t = out["tpr_at_fpr_0.01"]
    # every resolution of the tie is possible, from "no member first" to "all members
    # first": the exact interval is [0, 1], so the TPR is stored as not resolvable
    from privacy_audit.stats.metrics import tpr_interval_exact

    lo, hi = tpr_interval_exact(
        np.sort(scores[members == 1])[::-1][None],
        np.sort(scores[members == 0])[::-1][None],
        0.01,
        0.05,
    )
    assert (lo[0], hi[0]) == (0.0, 1.0)
    assert t["value"] is None and t["below_resolution"] is True
    assert t["reason"].startswith("not resolvable at this n")
    v = verdict_for_run(_run_from(out))
    assert v["level"] == "inconclusive", v
    # more data cannot narrow an interval that every tie resolution spans: say so, and
    # name no deciding sample size
    assert "every member and non-member score" in v["text"] and "tied" in v["text"], v
    assert "would decide" not in v["text"].replace("no sample size would decide", ""), v
    # what the old interval said: [0.99, 1.00] around 0
    assert not (lo[0] >= 0.99)


def test_a_top_tie_block_among_continuous_scores():
    # 3 % of each class saturates at the top score (e.g. softmax confidence 1.0)
    rng = np.random.default_rng(7)
    n = 1000
    s_in, s_out = rng.normal(0.0, 1.0, n), rng.normal(0.0, 1.0, n)
    s_in[:30] = s_out[:30] = 10.0
    scores = np.r_[s_in, s_out]
    members = np.r_[np.ones(n), np.zeros(n)]
    out = membership_metrics(scores, members, n_boot=200)
    t = out["tpr_at_fpr_0.01"]
    assert t["value"] == tpr_at_fpr(scores, members, 0.01) == 0.0
    assert t["ci_low"] <= t["value"] <= t["ci_high"]
    assert t["ci_low"] < 0.01  # the 30 tied members need not come before any non-member
    assert verdict_for_run(_run_from(out))["level"] != "high"


def _discrete_truth(step: float, mu: float, x: float) -> float:
    """TPR* = sup{TPR(t) : FPR(t) <= x} for scores round(N(mu, 1) / step) * step."""
    levels = np.arange(-10.0, 10.0 + step / 2, step)
    fpr = norm.sf(levels - step / 2)  # P(round(Z) >= level) = P(Z >= level - step/2)
    ok = fpr <= x
    return float(norm.sf(levels[ok][0] - step / 2 - mu))


def test_exact_interval_covers_on_heavily_tied_scores():
    # Scores on a grid of 0.5: the non-member tie block at 2.5 holds ~1.2 % of them, so
    # the k1-th largest non-member usually sits in it. 300 seeded trials at 1,000 per side.
    step, mu, x, n, trials = 0.5, 1.0, 0.01, 1000, 300
    truth = _discrete_truth(step, mu, x)
    rng = np.random.default_rng(26)
    s_in = np.round(rng.normal(mu, 1.0, (trials, n)) / step) * step
    s_out = np.round(rng.normal(0.0, 1.0, (trials, n)) / step) * step
    lo, hi = tpr_interval_exact(-np.sort(-s_in, axis=1), -np.sort(-s_out, axis=1), x, 0.05)
    covered = np.mean((lo <= truth) & (truth <= hi))
    assert covered >= 0.93, (covered, truth, float(np.median(lo)))
    # and the plug-in value sits inside its interval in every trial
    for i in range(20):
        sc = np.r_[s_in[i], s_out[i]]
        mem = np.r_[np.ones(n), np.zeros(n)]
        v = tpr_at_fpr(sc, mem, x)
        assert lo[i] <= v <= hi[i]
