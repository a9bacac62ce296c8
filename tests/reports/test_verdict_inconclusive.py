"""A verdict says when the sample is too small (issue 17): "low" only when the AUC
interval ends below 0.6 and the TPR@1%FPR interval below 5%; otherwise "inconclusive",
naming the sample size that would decide. Never a green LOW on 30 + 30 examples."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privacy_audit.attacks import AttackResult, MetricSettings
from privacy_audit.reports.html import render_html
from privacy_audit.reports.verdict import HIGH_AUC_CI_LOW, verdict_for_run, verdict_level


def _run_from_scores(scores, members, name="loss") -> dict:
    ids = [f"ex-{i}" for i in range(len(scores))]
    res = AttackResult.from_scores(
        name, np.asarray(scores), list(members), ids, MetricSettings(n_boot=200, seed=0)
    )
    return {
        "name": "r",
        "defense": "none",
        "claim": {"notion": "none"},
        "attacks": [res.to_dict()],
        "strongest_attack": name,
    }


def test_issue_example_reads_inconclusive_not_low():
    """The issue's run: 30 members, 30 non-members, AUC 0.548 [0.430, 0.665]."""
    run = {
        "name": "r",
        "claim": {"notion": "none"},
        "strongest_attack": "loss",
        "attacks": [
            {
                "attack": "loss",
                "status": "ok",
                "n_members": 30,
                "n_nonmembers": 30,
                "metrics": {
                    "auc": {"value": 0.548, "ci_low": 0.430, "ci_high": 0.665},
                    "tpr_at_fpr_0.01": {"value": 0.033, "ci_low": 0.0, "ci_high": 0.172},
                },
            }
        ],
    }
    v = verdict_for_run(run)
    assert v["level"] == "inconclusive"
    assert "0.665" in v["text"] and "30 per class" in v["text"]
    # names the size that would decide: half-width 0.117 must shrink to 0.052 (152 per
    # class), and TPR at 1% FPR must become resolvable (the one rule: 300 non-members),
    # the larger of the two
    need = max(int(np.ceil(30 * (0.117 / 0.052) ** 2)), 300)
    assert f"about {need:,} members" in v["text"], v["text"]
    assert "(1% FPR needs about 300 non-members)" in v["text"]
    assert "low-leakage" in v["text"]


@pytest.mark.parametrize("seed", range(8))
def test_thirty_plus_thirty_is_never_low(seed):
    """Real metrics on 30 + 30 scores with a weak signal: never "low". With 30
    non-members the FPR grid's step is 1/30, so TPR at 1% FPR cannot be measured at all
    (bootstrap intervals of it collapse to [0, 0] and used to read as "no leak")."""
    rng = np.random.default_rng(seed)
    members = [1] * 30 + [0] * 30
    scores = rng.normal(0, 1, 60) + 0.3 * np.asarray(members)
    run = _run_from_scores(scores, members)
    auc = run["attacks"][0]["metrics"]["auc"]
    v = verdict_for_run(run)
    assert v["level"] != "low", v["text"]
    if auc["ci_low"] <= 0.5:
        assert v["level"] == "inconclusive", v["text"]
        if auc["ci_high"] >= HIGH_AUC_CI_LOW:
            assert f"reaches {auc['ci_high']:.3f}" in v["text"]


def test_large_null_sample_is_low():
    """2000 + 2000 scores without signal: both intervals end below the HIGH thresholds."""
    rng = np.random.default_rng(1)
    members = [1] * 2000 + [0] * 2000
    run = _run_from_scores(rng.normal(0, 1, 4000), members)
    m = run["attacks"][0]["metrics"]
    assert m["auc"]["ci_high"] < 0.6 and m["tpr_at_fpr_0.01"]["ci_high"] < 0.05
    assert verdict_level(run)[0] == "low"


def test_tpr_below_resolution_is_not_measured():
    m = {"value": 0.5, "ci_low": 0.45, "ci_high": 0.55}
    tpr = {"value": 0.0, "ci_low": 0.0, "ci_high": 0.01, "below_resolution": True}
    att = {"attack": "loss", "status": "ok", "n_members": 500, "n_nonmembers": 500}
    run = {"name": "r", "attacks": [{**att, "metrics": {"auc": m, "tpr_at_fpr_0.01": tpr}}]}
    level, why = verdict_level(run)
    assert level == "inconclusive" and "below this sample's resolution" in why
    assert "at least 300 members" in why  # the one rule: 3 / 1% non-members
    del tpr["below_resolution"]
    assert verdict_level(run)[0] == "low"
    att["n_nonmembers"] = 99  # 1% FPR is finer than the FPR grid: not measured
    run["attacks"][0]["n_nonmembers"] = 99
    assert verdict_level(run)[0] == "inconclusive"


def test_inconclusive_in_results_report_and_stdout(tmp_path, cli):
    """results.json (via assemble_results), the report's badge and the CLI verdict line."""
    from privacy_audit.audit.commands.common import verdict_line
    from privacy_audit.audit.results import assemble_results

    rng = np.random.default_rng(0)
    run = _run_from_scores(rng.normal(0, 1, 60), [1] * 30 + [0] * 30)
    res = assemble_results([run], "t", 0, {})
    assert res["runs"][0]["verdict"]["level"] == "inconclusive"
    assert "members" in res["runs"][0]["verdict"]["inconclusive"]
    json.dumps(res)
    html = render_html(res)
    assert '<span class="badge inconclusive">inconclusive</span>' in html
    line = verdict_line(res["runs"][0])
    assert line.startswith("VERDICT r: INCONCLUSIVE; strongest loss; AUC ")
    assert "TPR@1%FPR" in line and "ε_lb" in line and "claim no-claim" in line


def test_verdict_text_says_below_resolution_instead_of_a_dash():
    """60 non-members cannot resolve 1% FPR: the sentence says so, with no number or dash."""
    rng = np.random.default_rng(0)
    scores = np.concatenate([rng.normal(3, 1, 60), rng.normal(0, 1, 60)])
    run = _run_from_scores(scores, [1] * 60 + [0] * 60)
    v = verdict_for_run(run)
    assert v["level"] == "high"
    assert (
        "its TPR at 1% false positives is not resolvable at this n (needs about 300 "
        "non-members)" in v["text"]
    ), v["text"]
    # no number at 1% FPR and no dash; the text leads with the lowest FPR the sample
    # resolves instead (issue 37)
    assert "of members at 1% false positives" not in v["text"] and "—" not in v["text"]
    assert "the lowest rate this sample resolves" in v["text"], v["text"]
