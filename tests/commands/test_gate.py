"""The gate never fails open (issue 17).

A metric the gate was asked to hold that is missing, null or non-finite, zero measured
results, a VIOLATED claim, an ε-audit bound above ``--max-epsilon-lb``, a leakage
headline above ``--max-leakage`` and (with ``--strict``) an inconclusive verdict all fail
(exit 1) with a ``FAIL:`` line; thresholds outside their metric's range are bad input
(exit 2). Results here are small hand-written results.json files, plus the recorded
results of a real ``privacy-audit run dp-blogs`` (tests/data/dp-blogs-results.json).
"""

from __future__ import annotations

import copy
import json
import math
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from privacy_audit.audit.integrations.gate_rules import LEAKAGE_GATES
from privacy_audit.reports.epsilon_readout import tradeoff_epsilon_lb

DATA = Path(__file__).parents[1] / "data"


def _m(v, lo=None, hi=None):
    return {"value": v, "ci_low": lo, "ci_high": hi}


def _attack(name="loss", auc=(0.55, 0.45, 0.58), tpr=(0.01, 0.0, 0.03), lb=0.0, status="ok"):
    if status != "ok":
        return {"attack": name, "status": status, "reason": "not applicable: needs loss"}
    return {
        "attack": name,
        "status": "ok",
        "n_members": 500,
        "n_nonmembers": 500,
        "metrics": {
            "auc": _m(*auc),
            "tpr_at_fpr_0.01": _m(*tpr),
            "tpr_at_fpr_0.001": _m(0.0, 0.0, 0.01),
            "advantage": _m(0.05, 0.0, 0.1),
            "epsilon_lower_bound": {"value": lb, "ci_low": lb, "ci_high": None},
        },
    }


def _results(*runs) -> dict:
    return {"schema_version": 1, "tool": {"name": "privacy-audit"}, "runs": list(runs)}


def _run(name="non-private", attacks=None, **extra) -> dict:
    run = {
        "name": name,
        "defense": "none",
        "claim": {"notion": "none", "epsilon": None},
        "attacks": [_attack()] if attacks is None else attacks,
        "leakage": [],
    }
    run.update(extra)
    return run


def _write(tmp_path: Path, res, name="results.json") -> str:
    p = tmp_path / name
    p.write_text(res if isinstance(res, str) else json.dumps(res), encoding="utf-8")
    return str(p)


def _fails(outcome) -> list[str]:
    return [line for line in outcome.stdout.splitlines() if line.startswith("FAIL:")]


def assert_exit2(outcome, *words):
    assert outcome.code == 2, (outcome.code, outcome.stdout, outcome.stderr)
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("privacy-audit: error: "), outcome.stderr
    assert outcome.stdout == "" and "Traceback" not in outcome.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


# --------------------------------------------------------------------------- #
# requested metric missing, null or non-finite
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_number_is_bad_input(tmp_path, cli, raw):
    """The suite writes null for an unmeasured number, never NaN or ∞: a file that holds
    one was not written by it (or was edited), and is refused before any decision."""
    text = json.dumps(_results(_run())).replace('"auc": {"value": 0.55', f'"auc": {{"value": {raw}')
    assert raw in text
    out = cli(["gate", _write(tmp_path, text), "--max-auc", "0.9"])
    assert out.code == 2, out.stdout + out.stderr
    assert out.stderr.count("\n") == 1 and "never a non-finite one" in out.stderr
    assert "passed" not in out.stdout


@pytest.mark.parametrize("raw, why", [("null", "null")])
def test_non_finite_or_null_auc_fails(tmp_path, cli, raw, why):
    text = json.dumps(_results(_run())).replace('"auc": {"value": 0.55', f'"auc": {{"value": {raw}')
    assert raw in text
    out = cli(["gate", _write(tmp_path, text), "--max-auc", "0.9"])
    assert out.code == 1, out.stdout + out.stderr
    (line,) = _fails(out)
    assert "AUC of attack 'loss' on 'non-private'" in line and why in line
    assert "1 requested metric(s) not measured" in out.stdout
    assert "passed" not in out.stdout


def test_missing_tpr_and_below_resolution_tpr_fail(tmp_path, cli):
    res = _results(_run(attacks=[_attack("a"), _attack("b")]))
    del res["runs"][0]["attacks"][0]["metrics"]["tpr_at_fpr_0.01"]
    res["runs"][0]["attacks"][1]["metrics"]["tpr_at_fpr_0.01"]["below_resolution"] = True
    out = cli(["gate", _write(tmp_path, res), "--max-tpr-at-1pct-fpr", "0.5"])
    assert out.code == 1
    fails = _fails(out)
    assert any("attack 'a'" in f and "is missing" in f for f in fails), fails
    assert any("attack 'b'" in f and "below the resolution" in f for f in fails), fails


def test_strict_without_an_upper_ci_fails(tmp_path, cli):
    res = _results(_run(attacks=[_attack(auc=(0.55, None, None))]))
    out = cli(["gate", _write(tmp_path, res), "--max-auc", "0.9", "--strict"])
    assert out.code == 1 and "no finite upper CI end" in out.stdout


def test_nan_in_results_with_baseline_is_a_failure_not_not_comparable(tmp_path, cli):
    base = _results(_run())
    new = copy.deepcopy(base)
    new["runs"][0]["attacks"][0]["metrics"]["auc"]["value"] = None
    out = cli(["gate", _write(tmp_path, new), "--baseline", _write(tmp_path, base, "b.json")])
    assert out.code == 1, out.stdout
    assert any("null or not finite in the results" in f for f in _fails(out))


# --------------------------------------------------------------------------- #
# nothing measured
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(
    "runs",
    [
        [],
        [_run(attacks=[_attack(status="error"), _attack("b", status="not_applicable")])],
        [_run(attacks=[])],
    ],
    ids=["no-runs", "all-errored", "no-attacks"],
)
def test_nothing_measured_fails_unless_allowed(tmp_path, cli, runs):
    path = _write(tmp_path, _results(*runs))
    out = cli(["gate", path, "--max-auc", "0.9"])
    assert out.code == 1, out.stdout
    assert any("nothing was measured" in f for f in _fails(out))
    ok = cli(["gate", path, "--max-auc", "0.9", "--allow-empty"])
    assert ok.code == 0 and "nothing was measured (--allow-empty)" in ok.stdout


# --------------------------------------------------------------------------- #
# violated claims and ε-audit bounds
# --------------------------------------------------------------------------- #
def _audited_run(status="violated", lb=9.51, claimed=3.13, tradeoff=None) -> dict:
    audit = {
        "claimed_epsilon": claimed,
        "claimed_delta": 1e-5,
        "comparable": True,
        "status": status,
        "evidence": [
            f"gradient-canary: ε ≥ {lb:.3g} (95% confidence, δ=1e-05) exceeds the claimed ε = {claimed:.3g}"
        ]
        if status == "violated"
        else [],
        "audits": [
            {"name": "gradient-canary", "status": "ok", "epsilon_lb": lb, "ceiling": 12.0},
            {"name": "input-canaries (one-run)", "status": "ok", "epsilon_lb": 0.4, "ceiling": 3.0},
            {"name": "skipped", "status": "not_applicable"},
        ],
        "tradeoff": tradeoff,
    }
    claim = {"notion": "central-dp", "unit": "example", "epsilon": claimed, "delta": 1e-5}
    return _run("dp-blogs", defense="dp-blogs", claim=claim, epsilon_audit=audit)


def test_violated_claim_fails_with_its_evidence_whatever_the_thresholds(tmp_path, cli):
    path = _write(tmp_path, _results(_audited_run()))
    out = cli(["gate", path, "--max-auc", "1.0"])  # a threshold nothing exceeds
    assert out.code == 1, out.stdout
    (line,) = [f for f in _fails(out) if "VIOLATED" in f]
    assert "privacy claim of 'dp-blogs'" in line and "gradient-canary: ε ≥ 9.51" in line
    assert "1 privacy claim(s) VIOLATED" in out.stdout


def test_consistent_claim_does_not_fail(tmp_path, cli):
    path = _write(tmp_path, _results(_audited_run(status="consistent", lb=1.0, claimed=8.0)))
    assert cli(["gate", path, "--max-auc", "1.0"]).code == 0


def test_max_epsilon_lb_holds_every_audit_bound_by_name(tmp_path, cli):
    path = _write(tmp_path, _results(_audited_run(status="consistent", lb=9.51, claimed=20.0)))
    out = cli(["gate", path, "--max-epsilon-lb", "1.0"])
    assert out.code == 1, out.stdout
    fails = _fails(out)
    assert any("'gradient-canary' on 'dp-blogs' is 9.51" in f for f in fails), fails
    assert not any("input-canaries" in f for f in fails)  # 0.4 <= 1.0
    assert cli(["gate", path, "--max-epsilon-lb", "10"]).code == 0


def test_non_finite_audit_bound_fails(tmp_path, cli):
    run = _audited_run(status="consistent", lb=1.0, claimed=20.0)
    run["epsilon_audit"]["audits"][0]["epsilon_lb"] = None
    out = cli(["gate", _write(tmp_path, _results(run)), "--max-epsilon-lb", "5"])
    assert out.code == 1 and "not a finite number" in out.stdout


def test_tradeoff_bound_known_answer_and_gate(tmp_path, cli):
    tr = {
        "attack": "loss",
        "violated": True,
        "delta": 1e-5,
        "points": [
            {"fpr_hi": 0.01, "tpr_lo": 0.5, "max_tpr_allowed": 0.2},
            {"fpr_hi": 0.2, "tpr_lo": 0.9, "max_tpr_allowed": 0.8},
        ],
    }
    # TPR <= e^ε FPR + δ and 1 - FPR <= e^ε (1 - TPR) + δ at each point; the larger wins
    want = max(
        math.log((0.5 - 1e-5) / 0.01),
        math.log((1 - 0.01 - 1e-5) / 0.5),
        math.log((0.9 - 1e-5) / 0.2),
        math.log((1 - 0.2 - 1e-5) / 0.1),
    )
    assert tradeoff_epsilon_lb(tr) == pytest.approx(want)
    assert tradeoff_epsilon_lb({**tr, "violated": False, "points": []}) is None
    run = _audited_run(status="consistent", lb=0.1, claimed=20.0, tradeoff=tr)
    out = cli(["gate", _write(tmp_path, _results(run)), "--max-epsilon-lb", "3.0"])
    assert out.code == 1
    assert any("trade-off test (loss attack)" in f for f in _fails(out)), out.stdout


# --------------------------------------------------------------------------- #
# leakage thresholds
# --------------------------------------------------------------------------- #
def _leak(attack="prompt-extraction", head="extraction_rate", value=0.2):
    return {
        "attack": attack,
        "kind": "extraction",
        "status": "ok",
        "headline": head,
        "metrics": {
            head: _m(value, max(value - 0.05, 0), value + 0.05) if value is not None else _m(None)
        },
    }


def test_max_leakage_fails_above_and_passes_below(tmp_path, cli):
    path = _write(tmp_path, _results(_run(leakage=[_leak(value=0.2)])))
    out = cli(["gate", path, "--max-leakage", "extraction-rate=0.1"])
    assert out.code == 1, out.stdout
    assert any("extraction rate (extraction_rate)" in f and "0.2" in f for f in _fails(out))
    assert cli(["gate", path, "--max-leakage", "extraction-rate=0.3"]).code == 0
    # --strict holds the upper CI end (0.25)
    assert cli(["gate", path, "--max-leakage", "extraction-rate=0.22", "--strict"]).code == 1
    # an attack's own name works too
    assert cli(["gate", path, "--max-leakage", "prompt-extraction=0.1"]).code == 1


def test_max_leakage_with_nothing_to_hold_fails(tmp_path, cli):
    path = _write(tmp_path, _results(_run(leakage=[_leak(value=0.2)])))
    out = cli(["gate", path, "--max-leakage", "mi=0.5"])
    assert out.code == 1 and "no run has a measured mutual-information result" in out.stdout
    null = _write(tmp_path, _results(_run(leakage=[_leak(value=None)])), "null.json")
    out = cli(["gate", null, "--max-leakage", "extraction-rate=0.5"])
    assert out.code == 1 and "is null" in out.stdout


def test_leakage_gate_names_cover_every_leakage_attack():
    from privacy_audit.attacks import LEAKAGE_ATTACKS

    covered = {a for attacks, _, _ in LEAKAGE_GATES.values() for a in attacks}
    assert set(LEAKAGE_ATTACKS) <= covered, set(LEAKAGE_ATTACKS) - covered


# --------------------------------------------------------------------------- #
# thresholds out of range: exit 2
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(
    "args, words",
    [
        (["--max-auc", "60"], ("--max-auc", "[0, 1]", "did you mean 0.6")),
        (["--max-tpr-at-1pct-fpr", "5"], ("--max-tpr-at-1pct-fpr", "[0, 1]")),
        (["--max-auc", "-1"], ("--max-auc", "[0, 1]")),
        (["--max-auc", "inf"], ("--max-auc", "finite")),
        (["--max-auc", "nan"], ("--max-auc", "finite")),
        (["--max-epsilon-lb", "-1"], ("--max-epsilon-lb", ">= 0")),
        (["--max-leakage", "extraction-rate=2"], ("extraction-rate", "[0, 1]")),
        (["--max-leakage", "exposure=-3"], ("exposure", ">= 0")),
        (["--max-leakage", "nonsense=0.1"], ("unknown leakage metric", "extraction-rate")),
        (["--max-leakage", "mi"], ("NAME=VALUE",)),
        (["--max-leakage", "mi=abc"], ("not a number",)),
        (["--max-leakage", "mi=1", "--max-leakage", "mi=2"], ("twice",)),
    ],
)
def test_out_of_range_thresholds_are_bad_input(tmp_path, cli, args, words):
    path = _write(tmp_path, _results(_run()))
    junit = tmp_path / "j.xml"
    assert_exit2(cli(["gate", path, *args, "--junit", str(junit)]), *words)
    assert not junit.exists()


# --------------------------------------------------------------------------- #
# JUnit and summary carry every failure; --strict fails an inconclusive verdict
# --------------------------------------------------------------------------- #
def test_junit_and_summary_carry_failures(tmp_path, cli):
    run = _audited_run()
    run["attacks"][0]["metrics"]["auc"]["value"] = None
    path = _write(tmp_path, _results(run))
    junit, summ = tmp_path / "j.xml", tmp_path / "s.json"
    out = cli(["gate", path, "--max-auc", "0.9", "--junit", str(junit), "--summary", str(summ)])
    assert out.code == 1
    s = json.loads(summ.read_text())
    assert s["passed"] is False
    kinds = sorted(f["kind"] for f in s["failures"])
    assert kinds == ["claim-violated", "unmeasured"], s["failures"]
    root = ET.parse(junit).getroot()
    types = [f.get("type") for f in root.iter("failure")]
    assert "privacy-claim-violated" in types and "privacy-unmeasured" in types
    assert int(root.get("failures")) == len(types) >= 2


def test_strict_fails_an_inconclusive_verdict(tmp_path, cli):
    small = _attack(auc=(0.548, 0.430, 0.665), tpr=(0.033, 0.0, 0.172))
    small["n_members"] = small["n_nonmembers"] = 30
    path = _write(tmp_path, _results(_run(attacks=[small])))
    assert cli(["gate", path, "--max-auc", "0.7"]).code == 0
    out = cli(["gate", path, "--max-auc", "0.7", "--strict"])
    assert out.code == 1
    assert any("inconclusive (fails --strict)" in f for f in _fails(out)), out.stdout


# --------------------------------------------------------------------------- #
# the real dp-blogs run's recorded results
# --------------------------------------------------------------------------- #
def test_recorded_dp_blogs_results_fail_the_gate(tmp_path, cli):
    """``privacy-audit run dp-blogs`` (recorded, trimmed): its DP-BloGS claim is VIOLATED
    by the gradient-canary audit; the old gate passed it with --max-epsilon-lb 3.0."""
    path = DATA / "dp-blogs-results.json"
    res = json.loads(path.read_text(encoding="utf-8"))
    violated = [
        r["name"] for r in res["runs"] if (r.get("epsilon_audit") or {}).get("status") == "violated"
    ]
    assert violated, "the recorded run has no violated claim"
    out = cli(["gate", str(path), "--max-epsilon-lb", "3.0"])
    assert out.code == 1, out.stdout
    fails = _fails(out)
    for name in violated:
        assert any(f"privacy claim of '{name}' is VIOLATED" in f for f in fails), fails
    # even a threshold nothing reaches cannot pass a violated claim
    assert cli(["gate", str(path), "--max-auc", "1.0", "--max-epsilon-lb", "1000"]).code == 1


def test_report_summary_shows_the_audit_bound_beside_violated():
    """The Summary row of the violated dp-blogs run shows the audit's ε ≥ 5.60 and names
    the audit, never the strongest attack's "≥ 0" beside the VIOLATED badge."""
    import re

    from privacy_audit.reports.html import render_html

    res = json.loads((DATA / "dp-blogs-results.json").read_text(encoding="utf-8"))
    html = render_html(res)
    summary = html[html.index('id="summary"') : html.index('id="verdicts"')]
    rows = summary.split("<tr>")[2:]
    (row,) = [r for r in rows if "dp-blogs (target eps=1)" in r]
    assert "VIOLATED" in row
    assert "≥ 5.60" in row and "ε audit: gradient-shuffle-canary" in row
    assert not re.search(r">\s*≥ 0\s*<", row)
