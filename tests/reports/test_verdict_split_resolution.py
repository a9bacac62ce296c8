"""An attack effect below the resolution of a sub-sampled split check is inconclusive
(reports/verdict.py ``split_resolution``, issue 38 item 5).

At 10^4-10^5 texts per side an attack's AUC interval is a few thousandths wide, while the
split check's blind classifier reads 1,000 texts per class and detects only a blind AUC of
about 0.556. An effect between the two is as consistent with an undetected difference
between the sets as with training, so it is neither MODERATE nor LOW."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

import privacy_audit.stats.split_check as split_check
from privacy_audit.reports.html import render_html
from privacy_audit.reports.verdict import split_resolution, verdict_for_run, verdict_level
from privacy_audit.stats.metrics import membership_metrics
from tests.stats.test_split_check import prose

# The 100,000-per-side x 256-token bench scale run of session 12 (docs/large-inputs-one-machine.md), as
# its results.json stored them: a randomly initialised model on i.i.d. random prose.
BENCH_100K_BLIND = {
    "n_members": 1000,
    "n_nonmembers": 1000,
    "auc": {"value": 0.491099, "ci_low": 0.450456, "ci_high": 0.530973, "p_value": 0.678,
            "null_sd": 0.017641924513358345},
    "detectable_auc": 0.5559,
    "subsampled": True,
}  # fmt: skip


def _attack(auc, lo, hi, n=100_000, tpr=(0.0105, 0.0098, 0.0113)):
    return {
        "attack": "lm-loss",
        "status": "ok",
        "n_members": n,
        "n_nonmembers": n,
        "metrics": {
            "auc": {"value": auc, "ci_low": lo, "ci_high": hi},
            "tpr_at_fpr_0.01": dict(zip(("value", "ci_low", "ci_high"), tpr, strict=True)),
        },
    }


def _run(attack, blind, p=0.002):
    return {
        "name": "m",
        "attacks": [attack],
        "strongest_attack": attack["attack"],
        "battery_chance": {"p_value": p, "alpha": 0.025, "permutations": 999,
                           "attacks": ["lm-loss", "zlib", "min-k", "min-k++"]},
        "split_check": {"shifted": False, "status": "ok", "confidence": 0.98, "blind": blind},
    }  # fmt: skip


def test_the_bench_scale_100k_case_is_inconclusive_not_moderate():
    run = _run(_attack(0.5047393441, 0.502209067457345, 0.5072693780025157), BENCH_100K_BLIND)
    v = verdict_for_run(run)
    assert v["level"] == "inconclusive"
    assert "below the split check's resolution" in v["text"]
    assert "0.556" in v["inconclusive"] and "1000 members and 1000 non-members" in v["inconclusive"]
    assert "Do not read this as a low-leakage result" in v["text"]
    # the same effect with a split check that read every text stays moderate
    full = {**BENCH_100K_BLIND, "subsampled": False}
    assert verdict_level(_run(run["attacks"][0], full))[0] == "moderate"
    # an effect above the check's resolution is moderate on the sub-sample too
    assert verdict_level(_run(_attack(0.58, 0.57, 0.59), BENCH_100K_BLIND))[0] == "moderate"


def test_the_rule_never_turns_an_effect_into_low_and_keeps_the_tail_routes():
    blind = {**BENCH_100K_BLIND, "detectable_auc": 0.65}  # a coarser sub-sample
    # AUC-route HIGH below the resolution: inconclusive (the interval reaches 0.6)
    lvl, why = verdict_level(_run(_attack(0.63, 0.61, 0.65), blind))
    assert lvl == "inconclusive" and why.startswith("the effect is smaller")
    # ... also when the battery's family-wise test does not reject
    assert verdict_level(_run(_attack(0.63, 0.61, 0.65), blind, p=0.5))[0] == "inconclusive"
    # TPR-route HIGH is kept: the blind AUC does not describe the tail
    tail = _attack(0.53, 0.51, 0.55, tpr=(0.09, 0.07, 0.11))
    assert verdict_level(_run(tail, blind))[0] == "high"
    # an ε lower bound > 0 keeps MODERATE
    lb = _attack(0.53, 0.51, 0.55)
    lb["metrics"]["epsilon_lower_bound"] = {"value": 0.2}
    assert verdict_level(_run(lb, blind))[0] == "moderate"
    # no effect: LOW as before (the check's resolution is about attributing an effect)
    assert verdict_level(_run(_attack(0.5005, 0.498, 0.503), blind))[0] == "low"


def test_the_reason_survives_a_missing_upper_end_and_missing_sizes():
    att = _attack(0.53, 0.51, None)
    blind = {"detectable_auc": 0.556, "subsampled": True}
    lvl, why = verdict_level(_run(att, blind))
    assert lvl == "inconclusive" and why.startswith("the effect is smaller")
    assert "the split check's sample size per side" in why
    assert verdict_for_run(_run(att, blind))["level"] == "inconclusive"


@pytest.mark.parametrize("bad", [None, float("nan"), "n/a", float("inf")])
def test_no_resolution_without_a_finite_detectable_auc(bad):
    blind = {**BENCH_100K_BLIND, "detectable_auc": bad}
    assert split_resolution(_run(_attack(0.5, 0.49, 0.51), blind)) is None
    assert split_resolution({"attacks": []}) is None


def test_a_real_sub_sampled_split_check_on_real_prose_gates_a_small_effect(monkeypatch):
    """End to end below the CLI: the split check run on 400 + 400 real paragraphs with
    its cap lowered to 150 per class (so it sub-samples as it does above 1,000 per class),
    the suite's metrics on scores with a planted effect (AUC checked against sklearn),
    then the verdict and the HTML report read from that record."""
    texts = prose(800, seed=5)
    members, nonmembers = texts[:400], texts[400:]
    rng = np.random.default_rng(0)
    y = np.r_[np.ones(400, int), np.zeros(400, int)]
    scores = rng.normal(size=800) + 0.22 * y
    m = membership_metrics(scores, y, n_boot=200, seed=0)
    assert m["auc"]["value"] == pytest.approx(roc_auc_score(y, scores), abs=1e-12)
    assert m["auc"]["ci_low"] > 0.5  # an effect the attack resolves

    def record(cap):
        monkeypatch.setattr(split_check, "MAX_BLIND_PER_CLASS", cap)
        check, _ = split_check.SplitCheck(permutations=199).run(members, nonmembers)
        att = {"attack": "lm-loss", "status": "ok", "n_members": 400, "n_nonmembers": 400,
               "metrics": m}  # fmt: skip
        return {"name": "m", "attacks": [att], "strongest_attack": "lm-loss",
                "split_check": check}  # fmt: skip

    sub = record(150)
    assert sub["split_check"]["blind"]["subsampled"] is True
    assert sub["split_check"]["shifted"] is False  # one random split of one source
    det = sub["split_check"]["blind"]["detectable_auc"]
    assert m["auc"]["ci_low"] < det  # the planted effect is below what 150 per class resolves
    v = verdict_for_run(sub)
    assert v["level"] == "inconclusive" and "split check" in v["inconclusive"]
    html = render_html({"runs": [sub]})
    assert "an effect is measured, but it is below the split check&#39;s resolution" in html

    full = record(1000)  # the check reads every text: the rule does not apply
    assert full["split_check"]["blind"]["subsampled"] is False
    assert verdict_for_run(full)["level"] == "moderate"
