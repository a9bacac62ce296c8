"""Hand-built runs pinning single rules of reports/verdict.py (each test kills a mutant
that survived the rest of the suite)."""

from __future__ import annotations

import pytest

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


# --------------------------------------------------------------------------- #
# issue 49: one-line mutants of reports/verdict.py that survived the suite
# --------------------------------------------------------------------------- #
def _claimed(*attacks, eps=2.0, delta=1e-5, unit="example"):
    run = _run(*attacks)
    run["claim"] = {"notion": "central-dp", "epsilon": eps, "delta": delta, "unit": unit}
    return run


def _tpr_attack(tpr, lo, hi, auc=(0.55, 0.52, 0.58), n=5000):
    a = _attack("lm-loss", *auc, n=n)
    a["metrics"]["tpr_at_fpr_0.01"] = {"value": tpr, "ci_low": lo, "ci_high": hi}
    return a


def test_audit_exceeds_needs_a_bound_strictly_above_the_claim():
    from privacy_audit.reports.verdict import audit_exceeds

    assert audit_exceeds({"status": "ok", "epsilon_lb": 1.0}, 1.0) is False
    assert audit_exceeds({"status": "ok", "epsilon_lb": 1.01}, 1.0) is True


def test_tradeoff_epsilon_lb_by_hand():
    import math

    from privacy_audit.reports.epsilon_readout import tradeoff_epsilon_lb

    # TPR <= e^ε FPR + δ: ε >= log((0.5 - 0.01) / 0.1) = log 4.9; the second inequality
    # gives log((1 - 0.1 - 0.01) / 0.5) = log 1.78, smaller: the larger one is the bound
    tr = {"delta": 0.01, "points": [{"fpr_hi": 0.1, "tpr_lo": 0.5}]}
    assert tradeoff_epsilon_lb(tr) == pytest.approx(math.log(4.9), rel=1e-12)
    # TPR = 1: only the first inequality is defined (1 - TPR = 0)
    tr = {"delta": 0.0, "points": [{"fpr_hi": 0.1, "tpr_lo": 1.0}]}
    assert tradeoff_epsilon_lb(tr) == pytest.approx(math.log(10.0), rel=1e-12)


def _audit_entry(name, eps):
    return {"name": name, "status": "ok", "epsilon_lb": eps, "ceiling": 10.0}


def test_headline_larger_lists_only_strictly_larger_bounds_and_attack_leads_without_claim():
    run = _run(_attack("lm-loss", 0.9, 0.88, 0.92, eps=2.0, ceiling=6.0))
    run["strongest_attack"] = "lm-loss"
    run["epsilon_audit"] = {"audits": [_audit_entry("input-canaries", 2.0)]}
    h = epsilon_headline(run)
    # no claim: the attack the verdict names leads, even with an ε audit beside it
    assert h["kind"] == "attack" and h["value"] == 2.0
    assert h["larger"] == []  # the audit's equal bound is not "larger"
    run["epsilon_audit"]["audits"][0]["epsilon_lb"] = 2.5
    assert [b["value"] for b in epsilon_headline(run)["larger"]] == [2.5]


def test_claim_check_boundaries_at_the_claimed_epsilon_and_delta():
    from privacy_audit.reports.verdict import check_attack_claim

    # bound equal to the claim: not a violation; a ceiling above it: consistent
    run = _claimed(_attack("lm-loss", 0.9, 0.88, 0.92, eps=2.0, ceiling=6.0))
    assert check_attack_claim(run)["status"] == "consistent"
    # the ceiling equal to the claim: no violation could have been detected
    run = _claimed(_attack("lm-loss", 0.9, 0.88, 0.92, eps=1.0, ceiling=2.0))
    assert check_attack_claim(run)["status"] == "untestable"
    # the claim stated at the audit's own δ (1e-5) is comparable: a bound above it violates
    run = _claimed(_attack("lm-loss", 0.9, 0.88, 0.92, eps=3.0, ceiling=6.0), delta=1e-5)
    assert check_attack_claim(run)["status"] == "violated"
    run = _claimed(_attack("lm-loss", 0.9, 0.88, 0.92, eps=3.0, ceiling=6.0), delta=1e-4)
    assert check_attack_claim(run)["status"] == "not-comparable"


def test_needed_n_names_more_than_the_cap_when_it_is_exceeded():
    from privacy_audit.reports.verdict import MAX_NAMED_SAMPLE, needed_n

    # 10^6 per class, half-width 0.1 shrinking to 0.001: 10^6 * 100^2 = 10^10 > the cap
    assert needed_n(10**6, 0.5, 0.1, 0.001) > MAX_NAMED_SAMPLE
    assert needed_n(1000, 0.55, 0.05, 0.01) == 25_000  # 1000 * (0.05 / 0.01)^2


def test_battery_test_rejects_at_p_equal_to_alpha():
    from privacy_audit.reports.verdict import battery_beats_chance

    assert battery_beats_chance({"battery_chance": {"p_value": 0.05, "alpha": 0.05}})
    assert not battery_beats_chance({"battery_chance": {"p_value": 0.0501, "alpha": 0.05}})


def test_level_boundaries_at_exactly_the_thresholds():
    # AUC interval ending exactly at 0.5: not entirely below chance, so not invalid
    assert verdict_level(_run(_attack("lm-loss", 0.45, 0.40, 0.50)))[0] != "invalid-attack"
    # TPR@1%FPR ci_low exactly 0.05: HIGH (AUC route alone would say moderate)
    assert verdict_level(_run(_tpr_attack(0.07, 0.05, 0.09)))[0] == "high"
    # AUC interval starting exactly at the split check's detectable AUC: resolved
    check = {
        "shifted": False,
        "status": "ok",
        "blind": {"detectable_auc": 0.556, "subsampled": True, "n_members": 1000},
    }
    run = _run(_attack("lm-loss", 0.58, 0.556, 0.59), split_check=check)
    assert verdict_level(run)[0] == "moderate"
    # AUC ci_low exactly 0.6: HIGH
    assert verdict_level(_run(_attack("lm-loss", 0.62, 0.60, 0.64)))[0] == "high"
    # AUC ci_low exactly 0.5 does not exclude chance: not MODERATE
    assert verdict_level(_run(_attack("lm-loss", 0.53, 0.50, 0.56)))[0] != "moderate"
    # AUC ci_high exactly 0.6 and TPR ci_high exactly 0.05 still reach HIGH: not LOW
    lvl = verdict_level(_run(_tpr_attack(0.02, 0.0, 0.04, auc=(0.55, 0.49, 0.60))))[0]
    assert lvl == "inconclusive"
    lvl = verdict_level(_run(_tpr_attack(0.02, 0.0, 0.05, auc=(0.52, 0.48, 0.56))))[0]
    assert lvl == "inconclusive"
    # both below: LOW; only one below: not LOW
    assert verdict_level(_run(_tpr_attack(0.02, 0.0, 0.04, auc=(0.52, 0.48, 0.56))))[0] == "low"
    assert verdict_level(_run(_attack("lm-loss", 0.52, 0.48, 0.56)))[0] == "inconclusive"


def test_an_auc_interval_above_chance_needs_the_battery_test_for_moderate():
    run = _run(_attack("lm-loss", 0.55, 0.52, 0.58))
    assert verdict_level(run)[0] == "moderate"
    run["battery_chance"] = {"p_value": 0.2, "alpha": 0.05}  # the family does not beat chance
    assert verdict_level(run)[0] != "moderate"


def test_strongest_attack_without_a_name_is_the_highest_auc():
    from privacy_audit.reports.verdict import strongest_attack

    run = _run(_attack("a", 0.6, 0.55, 0.65), _attack("b", 0.7, 0.65, 0.75))
    assert strongest_attack(run)["attack"] == "b"


def test_compare_runs_touching_intervals_overlap_and_equal_aucs_name_no_run():
    from privacy_audit.reports.run_comparison import compare_runs

    base = {**_run(_attack("a", 0.70, 0.65, 0.75)), "name": "none", "defense": "none"}
    touching = {**_run(_attack("a", 0.60, 0.55, 0.65)), "name": "dp", "defense": "dp"}
    pair = compare_runs([base, touching])["pairs"][0]
    assert pair["overlap"] is True  # [0.55, 0.65] and [0.65, 0.75] share 0.65
    assert pair["more_vulnerable"] == "none"
    # touching on the other side: the defended run's interval starts where the baseline's ends
    above = {**_run(_attack("a", 0.80, 0.75, 0.85)), "name": "dp", "defense": "dp"}
    assert compare_runs([base, above])["pairs"][0]["overlap"] is True
    equal = {**_run(_attack("a", 0.70, 0.66, 0.74)), "name": "dp", "defense": "dp"}
    assert compare_runs([base, equal])["pairs"][0]["more_vulnerable"] is None


def test_a_shifted_split_leaves_the_claim_unmeasured_by_the_attacks():
    from privacy_audit.reports.verdict import check_attack_claim, split_shifted

    shifted = {"shifted": True, "status": "ok", "blind": {"auc": {"value": 0.9}}}
    run = _claimed(_attack("lm-loss", 0.9, 0.88, 0.92, eps=3.0, ceiling=6.0))
    assert check_attack_claim(run)["status"] == "violated"
    run["split_check"] = shifted
    assert check_attack_claim(run)["status"] == "unmeasured"
    assert split_shifted(run)["claim_status"] == "unmeasured"
    unclaimed = _run(_attack("lm-loss", 0.9, 0.88, 0.92), split_check=shifted)
    assert split_shifted(unclaimed)["claim_status"] == "no-claim"
