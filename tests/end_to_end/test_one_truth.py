"""One truth per number: the report, results.json, ``score``'s stdout, the VERDICT line and
the gate say the same thing about TPR at 1% FPR, its value and whether this sample
resolves it, including where deduplication moves n across the threshold (298 and 300
non-members after 3 non-member rows that copy a member text are removed)."""

from __future__ import annotations

import csv
import html
import json
import re

import numpy as np
import pytest

from privacy_audit.stats.metrics import MIN_FALSE_POSITIVES

WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho "
    "sigma tau"
).split()


def _scores_csv(path, n_non: int, n_copies: int = 3, sep: float = 5.0) -> None:
    rng = np.random.default_rng(n_non)

    def text() -> str:
        return " ".join(rng.choice(WORDS, 12))

    members = [text() for _ in range(300)]
    rows = [(rng.normal(sep, 1), 1, t) for t in members]
    rows += [(rng.normal(0, 1), 0, text()) for _ in range(n_non)]
    rows += [(rng.normal(0, 1), 0, members[k]) for k in range(n_copies)]  # removed by score
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["score", "member", "text"])
        w.writerows(rows)


@pytest.mark.parametrize(
    "n_non, sep, resolvable", [(298, 5.0, False), (300, 5.0, False), (2000, 2.0, True)]
)
def test_every_surface_says_the_same_about_tpr_at_1pct_fpr(tmp_path, cli, n_non, sep, resolvable):
    from privacy_audit.audit.commands.common import verdict_line

    src = tmp_path / "scores.csv"
    _scores_csv(src, n_non, sep=sep)
    out = tmp_path / "out"
    score = cli(["score", str(src), "--out", str(out)])
    assert score.code == 0, score.stderr
    res = json.loads((out / "results.json").read_text("utf-8"))
    run = res["runs"][0]
    attack = run["attacks"][0]
    assert attack["n_nonmembers"] == n_non  # the copies were removed first
    m = attack["metrics"]["tpr_at_fpr_0.01"]
    page = html.unescape((out / "report.html").read_text("utf-8"))
    line = verdict_line(run)
    gate = cli(["gate", str(out / "results.json"), "--max-tpr-at-1pct-fpr", "0.99"])
    assert m["below_resolution"] is (not resolvable)
    if not resolvable:
        # not resolvable: null in results.json with its reason, and that reason everywhere
        assert m["value"] is None and m["ci_low"] is None and m["ci_high"] is None
        reason = m["reason"]
        need = m["needs_nonmembers"]
        assert reason == f"not resolvable at this n (needs about {need:,} non-members)"
        assert f"TPR@1%FPR {reason}" in score.stdout
        assert f"TPR@1%FPR {reason}" in line
        assert reason in page
        assert gate.code == 1, gate.stdout
        assert f"{reason} (not measured)" in gate.stdout
        assert "1 requested metric(s) not measured" in gate.stdout
        if n_non * 0.01 < MIN_FALSE_POSITIVES:  # 298: fewer than 3 non-members above
            assert need >= 300
    else:
        v, lo, hi = m["value"], m["ci_low"], m["ci_high"]
        assert v is not None and hi - lo <= 0.5
        triple = f"{v:.3f} [{lo:.3f}, {hi:.3f}]"
        assert f"TPR@1%FPR {triple}" in score.stdout
        assert f"TPR@1%FPR {triple}" in line
        assert f"{100 * v:.1f}% [{100 * lo:.1f}, {100 * hi:.1f}]" in page
        assert "not resolvable at this n (needs" not in page.split("TPR @ 1% FPR")[1][:400]
        assert gate.code == (1 if v > 0.99 else 0), gate.stdout
    # no surface prints a TPR at 1% FPR that results.json does not hold
    for text in (score.stdout, line):
        for num in re.findall(r"TPR@1%FPR (\d\.\d{3})", text):
            assert m["value"] is not None and f"{m['value']:.3f}" == num


def test_the_gate_reads_an_old_record_by_the_same_rule(tmp_path, cli):
    """A results.json written before the rule was stored (a number at 298 non-members,
    ``below_resolution: false``) is read by the same rule: not measured, in the gate as in
    the report."""
    from privacy_audit.reports.resolution import tpr_view

    src = tmp_path / "scores.csv"
    _scores_csv(src, 2000, sep=2.0)
    out = tmp_path / "out"
    assert cli(["score", str(src), "--out", str(out)]).code == 0
    res = json.loads((out / "results.json").read_text("utf-8"))
    attack = res["runs"][0]["attacks"][0]
    attack["n_nonmembers"] = 298  # as the old record of issue 49 said
    m = attack["metrics"]["tpr_at_fpr_0.01"]
    m.update(value=0.0303, ci_low=0.0, ci_high=0.2, below_resolution=False)
    m.pop("reason", None)
    m.pop("needs_nonmembers", None)
    (out / "old.json").write_text(json.dumps(res), encoding="utf-8")
    view = tpr_view(attack, 0.01)
    assert not view["resolvable"] and view["text"].startswith("not resolvable at this n")
    gate = cli(["gate", str(out / "old.json"), "--max-tpr-at-1pct-fpr", "0.2"])
    assert gate.code == 1, gate.stdout
    assert f"{view['text']}: not measured" in gate.stdout


def test_the_readme_schema_names_every_metric_membership_metrics_stores():
    """The README's results.json schema against the code: the metric keys of an attack's
    record (the TPR ladder included) are the ones membership_metrics writes."""
    from pathlib import Path

    from privacy_audit.stats.metrics import membership_metrics

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text("utf-8")
    start = readme.index('"metrics": {                   # only when status == "ok"')
    block = readme[start + len('"metrics": {') :]
    block = block[: block.index('"n_members": int, "n_nonmembers": int}')]
    # a metric's key opens its record: "name": {...}
    listed = set(re.findall(r'"([a-z_]+(?:_[0-9.]+)?)":\s*\{', block))
    rng = np.random.default_rng(0)
    m = np.r_[np.ones(400, dtype=int), np.zeros(400, dtype=int)]
    stored = set(membership_metrics(rng.normal(size=800) + m, m, n_boot=50)) - {
        "n_members",
        "n_nonmembers",
    }
    assert listed == stored, listed ^ stored
