"""audit/epsilon/claimed_vs_audited.py: the VIOLATED / untestable / consistent status of the ε audit
and the diagnosis of a VIOLATED claim, on hand-built audit records (each test kills a
one-line mutant that survived the rest of the suite)."""

from __future__ import annotations

from types import SimpleNamespace

from privacy_audit.audit.epsilon.claimed_vs_audited import (
    REALISED,
    EpsilonAuditSettings,
    diagnose,
    epsilon_audit,
    realised_schedule_audit,
)
from privacy_audit.defenses.base import Surface

CLAIM = {"notion": "central-dp", "epsilon": 2.0, "delta": 1e-5, "unit": "example"}


def _audit(name, exceeds, lb=3.0, ceiling=5.0, **kw):
    return {
        "name": name,
        "status": "ok",
        "exceeds_claim": exceeds,
        "epsilon_lb": lb,
        "ceiling": ceiling,
        "confidence": 0.95,
        "delta": 1e-5,
        **kw,
    }


def _status(*audits):
    """epsilon_audit() on a release that brings its own audits (no canaries, no attack)."""
    release = SimpleNamespace(gradient_audits=lambda d, c, claimed: list(audits), surfaces=set())
    settings = EpsilonAuditSettings(white_box_canaries=0)
    return epsilon_audit({"claim": dict(CLAIM), "attacks": []}, release, None, settings)


def test_one_exceeding_audit_is_a_violation_with_a_diagnosis():
    ea = _status(_audit("gradient-canary", True))
    assert ea["status"] == "violated" and len(ea["evidence"]) == 1
    assert ea["diagnosis"]["caught_by"][0]["audit"] == "gradient-canary"


def test_an_asymptotic_bound_is_never_evidence():
    ea = _status(_audit("one-run Gaussian", True, asymptotic=True))
    assert ea["evidence"] == [] and ea["status"] == "untestable"
    assert "diagnosis" not in ea


def test_a_ceiling_equal_to_the_claim_is_untestable_and_carries_no_diagnosis():
    # the most this design could certify is ε = 2.0, the claim itself: no violation was
    # detectable
    ea = _status(_audit("gradient-canary", False, lb=0.5, ceiling=2.0))
    assert ea["status"] == "untestable"
    ea = _status(_audit("gradient-canary", False, lb=0.5, ceiling=2.5))
    assert ea["status"] == "consistent" and "diagnosis" not in ea


def test_the_realised_schedule_audit_runs_only_when_the_run_contradicts_the_schedule():
    sched = SimpleNamespace(steps=100, sample_rate=0.01)
    release = SimpleNamespace(
        realised_schedule=sched,
        schedule=sched,
        gradient_mechanism=object(),  # never used: no audit when nothing is contradicted
        surfaces={Surface.GRADIENTS},
    )
    assert realised_schedule_audit(release, EpsilonAuditSettings(), 2.0) is None


def test_diagnosis_classes_by_which_audits_caught_the_violation():
    # the realised-schedule audit simulates the declared mechanism: accounting
    d = diagnose([_audit(REALISED, True)], None)
    assert len(d["bug_classes"]) == 1 and d["bug_classes"][0].startswith("accounting")
    # a declared-mechanism audit and a white-box canary audit: accounting AND noise
    d = diagnose([_audit("gradient-canary", True), _audit("one-run white-box (t)", True)], None)
    assert [c.split(":")[0] for c in d["bug_classes"]] == [
        "accounting",
        "noise or parameter groups",
    ]
    # input canaries alone (black-box, no trade-off test): gross
    d = diagnose([_audit("input-canaries (one-run)", True)], None)
    assert [c.split(":")[0] for c in d["bug_classes"]] == ["gross"]
    # white-box AND black-box: gross only (the noise class is folded into it)
    d = diagnose(
        [_audit("one-run white-box (t)", True), _audit("input-canaries (one-run)", True)], None
    )
    assert [c.split(":")[0] for c in d["bug_classes"]] == ["gross"]


def test_input_canaries_exceed_the_claim_only_strictly_above_it():
    import numpy as np

    from privacy_audit.audit.epsilon.claimed_vs_audited import input_canary_audit
    from privacy_audit.audit.epsilon.input_canaries import CanarySet
    from privacy_audit.defenses.base import Examples

    inc = np.r_[np.ones(100, int), np.zeros(100, int)]
    loss = np.where(inc == 1, 0.1, 2.0) + np.linspace(0.0, 0.01, 200)  # present: low loss
    ex = Examples([f"c{i}" for i in range(200)], [f"t{i}" for i in range(200)], np.zeros(200))
    canaries = CanarySet(examples=ex, included=inc, kind="random-token")
    release = SimpleNamespace(surfaces={Surface.LOSS}, loss=lambda texts, labels: loss)
    settings = EpsilonAuditSettings()
    eps = input_canary_audit(release, canaries, settings, None)["epsilon_lb"]
    assert eps > 0
    assert input_canary_audit(release, canaries, settings, eps)["exceeds_claim"] is False
    assert input_canary_audit(release, canaries, settings, 0.99 * eps)["exceeds_claim"] is True
