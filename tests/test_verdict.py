"""Hand-built runs pinning single rules of reports/verdict.py (each test kills a mutant
that survived the rest of the suite)."""

from __future__ import annotations

from privacy_audit.reports.verdict import (
    AT_CEILING,
    epsilon_headline,
    verdict_for_run,
    verdict_level,
)


def _attack(name, auc, lo, hi, eps=None, ceiling=None, n=5000):
    metrics = {"auc": {"value": auc, "ci_low": lo, "ci_high": hi}}
    if eps is not None:
        metrics["epsilon_lower_bound"] = {
            "value": eps,
            "ceiling": ceiling,
            "delta": 1e-5,
            "confidence": 0.95,
        }
    return {
        "attack": name,
        "status": "ok",
        "n_members": n,
        "n_nonmembers": n,
        "metrics": metrics,
    }


def _run(*attacks, split_check=None):
    run = {"name": "r", "attacks": list(attacks), "claim": {"notion": "none"}}
    if split_check is not None:
        run["split_check"] = split_check
    return run


def test_split_resolution_compares_the_lower_end_of_the_auc_interval():
    # sub-sampled split check detecting blind AUC 0.556; the attack's point AUC 0.58 lies
    # above it but its interval starts at 0.53, below it: an undetected difference between
    # the sets could carry the effect, so not MODERATE
    check = {
        "shifted": False,
        "status": "ok",
        "blind": {
            "detectable_auc": 0.556,
            "subsampled": True,
            "n_members": 1000,
            "n_nonmembers": 1000,
        },
    }
    straddles = _attack("lm-loss", 0.58, 0.53, 0.59)
    lvl, why = verdict_level(_run(straddles, split_check=check))
    assert lvl == "inconclusive"
    assert why.startswith("the effect is smaller than the split check resolves")
    # the whole interval above the detectable AUC: moderate (AUC 0.57-0.59 < 0.6)
    above = _attack("lm-loss", 0.58, 0.57, 0.59)
    assert verdict_level(_run(above, split_check=check))[0] == "moderate"


def test_no_attack_epsilon_headline_under_a_shifted_split():
    # the attack certifies ε >= 2.0, but the split check found the two sets of texts
    # shifted: that bound measures the texts, so there is no headline and no certified loss
    shifted = {"shifted": True, "status": "ok", "blind": {"auc": {"value": 0.9}}}
    run = _run(_attack("lm-loss", 0.9, 0.88, 0.92, eps=2.0, ceiling=6.0), split_check=shifted)
    run["strongest_attack"] = "lm-loss"
    assert epsilon_headline(run) is None
    v = verdict_for_run(run)
    assert v["level"] == "split-shifted"
    assert "Certified privacy loss" not in v["text"]
    assert "2.00" not in v["text"]
    # the same run without the shift headlines the attack's bound
    unshifted = {**run, "split_check": {"shifted": False, "status": "ok"}}
    assert epsilon_headline(unshifted)["value"] == 2.0


def test_at_ceiling_includes_a_bound_equal_to_the_ceiling():
    # a bound that reaches its ceiling exactly (within the 1e-6 relative tolerance) is
    # "at the ceiling": the sample could not certify more
    for eps, ceiling, expected in (
        (4.0, 4.0, True),
        (4.0 * (1 - 1e-6), 4.0, True),  # the tolerance's edge
        (3.9, 4.0, False),
    ):
        h = epsilon_headline(_run(_attack("lm-loss", 0.9, 0.88, 0.92, eps=eps, ceiling=ceiling)))
        assert h["at_ceiling"] is expected, (eps, ceiling)
    run = _run(_attack("lm-loss", 0.9, 0.88, 0.92, eps=4.0, ceiling=4.0))
    assert AT_CEILING in verdict_for_run(run)["text"]
