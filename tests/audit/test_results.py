"""The battery's family-wise test of "no attack beats chance" (audit/results.py
``battery_chance_test``) and the MODERATE rule that reads it (reports/verdict.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import binom
from sklearn.metrics import roc_auc_score

from privacy_audit.audit.results import FAMILY_ALPHA, battery_chance_test
from privacy_audit.reports.verdict import verdict_for_run, verdict_level


def _attack(name, ids, scores, members, **metrics):
    return {
        "attack": name,
        "status": "ok",
        "n_members": int(sum(members)),
        "n_nonmembers": int(len(members) - sum(members)),
        "metrics": metrics,
        "examples": {"ids": list(ids), "scores": list(scores), "members": list(members)},
    }


def _battery(scores: np.ndarray, y: np.ndarray) -> list[dict]:
    ids = [f"x{i}" for i in range(scores.shape[1])]
    return [_attack(f"a{j}", ids, scores[j].tolist(), y.tolist()) for j in range(scores.shape[0])]


def test_battery_test_equals_a_brute_force_loop_with_sklearn():
    """Each relabelling's AUCs recomputed with sklearn, their maximum counted by hand:
    the same AUCs, the same p-value; ties between scores count 1/2 as in sklearn."""
    rng = np.random.default_rng(3)
    n = 50
    y = np.r_[np.ones(24, int), np.zeros(26, int)]
    scores = rng.normal(size=(3, n))
    scores[1] = np.round(scores[1], 1)  # ties
    scores[2] += 0.4 * y
    relab = np.stack([rng.permutation(y) for _ in range(200)])
    got = battery_chance_test(_battery(scores, y), relabellings=relab)
    want_aucs = [roc_auc_score(y, s) for s in scores]
    np.testing.assert_allclose(got["aucs"], want_aucs, atol=1e-12)
    t = max(want_aucs)
    null = [max(roc_auc_score(r, s) for s in scores) for r in relab]
    want_p = (1 + sum(v >= t - 1e-12 for v in null)) / (1 + len(relab))
    assert got["p_value"] == pytest.approx(want_p, abs=1e-12)
    assert got["max_auc"] == pytest.approx(t, abs=1e-12)


def test_battery_test_aligns_ids_and_drops_non_finite_or_inconsistent_examples():
    y = np.r_[np.ones(10, int), np.zeros(10, int)]
    rng = np.random.default_rng(0)
    s = rng.normal(size=(2, 20))
    a = _attack("a", [f"x{i}" for i in range(20)], s[0].tolist(), y.tolist())
    order = np.random.default_rng(1).permutation(20)  # same examples, another order
    b = _attack("b", [f"x{i}" for i in order], s[1][order].tolist(), y[order].tolist())
    b["examples"]["scores"][0] = float("nan")
    got = battery_chance_test([a, b])
    assert got["n_members"] + got["n_nonmembers"] == 19
    keep = [i for i in range(20) if i != order[0]]
    assert got["aucs"][1] == pytest.approx(roc_auc_score(y[keep], s[1][keep]), abs=1e-12)
    assert battery_chance_test([a]) is None  # one attack needs no correction
    assert battery_chance_test([a, {**b, "status": "error"}]) is None


def test_family_wise_rate_holds_at_its_level_where_the_best_interval_does_not():
    """No leakage (labels at random), four correlated attack scores: the strongest
    attack's own 95% interval excludes 0.5 far more often than 2.5%; the family-wise test
    rejects at most at its level (binomial 99.9% quantile)."""
    from privacy_audit.stats.blind_baseline import delong_auc

    rng = np.random.default_rng(7)
    n, m, splits = 400, 60, 300
    common = rng.normal(size=n)
    scores = np.stack([0.8 * common + 0.6 * rng.normal(size=n) for _ in range(3)])
    scores = np.vstack([scores, rng.normal(size=n)])  # one unrelated attack
    fam = best = 0
    for t in range(splits):
        idx = rng.permutation(n)[: 2 * m]
        y = np.r_[np.ones(m, int), np.zeros(m, int)]
        sub = scores[:, idx]
        test = battery_chance_test(_battery(sub, y), permutations=199, seed=t)
        fam += test["p_value"] <= FAMILY_ALPHA
        lows = [delong_auc(s, y)["ci_low"] for s in sub]
        best += max(lows) > 0.5
    limit = binom.ppf(0.999, splits, FAMILY_ALPHA)
    assert fam <= limit, (fam, limit)
    assert best > fam and best >= 2 * splits * 0.025, (best, fam)


def _run(auc, auc_lo, auc_hi, p=None, tpr_hi=0.03):
    att = {
        "attack": "min-k",
        "status": "ok",
        # 400 non-members: TPR at 1% FPR is resolvable (≥ 3 non-members above its threshold)
        "n_members": 400,
        "n_nonmembers": 400,
        "metrics": {
            "auc": {"value": auc, "ci_low": auc_lo, "ci_high": auc_hi},
            "tpr_at_fpr_0.01": {"value": 0.01, "ci_low": 0.0, "ci_high": tpr_hi},
        },
    }
    run = {"name": "m", "attacks": [att], "strongest_attack": "min-k"}
    if p is not None:
        run["battery_chance"] = {
            "p_value": p,
            "alpha": FAMILY_ALPHA,
            "permutations": 999,
            "attacks": ["lm-loss", "zlib", "min-k", "min-k++"],
        }
    return run


def test_moderate_needs_the_family_wise_test_but_high_does_not():
    # the best of four attacks excludes 0.5 on its own, the battery does not
    assert verdict_level(_run(0.55, 0.51, 0.59, p=0.2))[0] == "low"
    v = verdict_for_run(_run(0.55, 0.51, 0.59, p=0.2))
    assert v["level"] == "low" and "family-wise" in v["text"] and "p = 0.2" in v["text"]
    # the interval reaches the HIGH range: inconclusive, never low
    assert verdict_level(_run(0.57, 0.51, 0.63, p=0.2))[0] == "inconclusive"
    # the battery agrees: moderate
    assert verdict_level(_run(0.55, 0.51, 0.59, p=0.01))[0] == "moderate"
    # no family-wise test in the record (one attack, or an older record): as before
    assert verdict_level(_run(0.55, 0.51, 0.59))[0] == "moderate"
    # HIGH is never demoted by the AUC-only family test (a tail leak may keep AUCs near 0.5)
    assert verdict_level(_run(0.7, 0.65, 0.75, p=0.5))[0] == "high"


def test_every_run_of_a_cli_audit_carries_the_family_wise_test(tiny_run_dir):
    """End to end: results.json's ``battery_chance`` equals the test recomputed from the
    run's own per-example scores."""
    doc = json.loads((tiny_run_dir / "results.json").read_text(encoding="utf-8"))
    checked = 0
    for run in doc["runs"]:
        assert "battery_chance" in run
        want = battery_chance_test(run["attacks"])
        if want is None:
            assert run["battery_chance"] is None
            continue
        checked += 1
        assert run["battery_chance"]["p_value"] == pytest.approx(want["p_value"])
        assert run["battery_chance"]["attacks"] == want["attacks"]
    assert checked >= 1
