"""reports/resolution.py: the TPR-at-FPR record every surface reads (hand-built
records; each test kills a one-line mutant that survived the rest of the suite)."""

from __future__ import annotations

from privacy_audit.reports.resolution import lead_tpr, tpr_standing


def _attack(n_non, **tprs):
    return {
        "attack": "a",
        "status": "ok",
        "n_nonmembers": n_non,
        "metrics": {f"tpr_at_fpr_{k}": v for k, v in tprs.items()},
    }


def test_the_summary_leads_with_the_lowest_resolvable_fpr_and_labels_it_in_percent():
    # 5000 non-members: 1% FPR puts 50 above the threshold (>= 3) and both intervals are
    # narrow (0.1 wide <= 0.5), so both resolve; the lower FPR leads
    a = _attack(
        5000,
        **{
            "0.01": {"value": 0.3, "ci_low": 0.25, "ci_high": 0.35},
            "0.05": {"value": 0.5, "ci_low": 0.45, "ci_high": 0.55},
        },
    )
    lead = lead_tpr(a)
    assert lead["fpr"] == 0.01
    assert lead["label"] == "TPR @ 1% FPR"


def test_a_boolean_sample_size_is_not_a_sample_size():
    # True is an int in Python; read as 1 non-member it would call the TPR unresolved.
    # Unknown size: the stored record (not flagged below resolution) is trusted.
    a = _attack(True, **{"0.01": {"value": 0.3, "ci_low": 0.25, "ci_high": 0.35}})
    assert tpr_standing(a, 0.01)["resolvable"] is True


def test_a_boolean_needs_nonmembers_is_recomputed():
    # a flagged record whose needs_nonmembers is a bool: 1% FPR needs 3 / 0.01 = 300
    a = _attack(
        200, **{"0.01": {"value": None, "below_resolution": True, "needs_nonmembers": True}}
    )
    st = tpr_standing(a, 0.01)
    assert st["needs"] == 300 and not st["resolvable"]
