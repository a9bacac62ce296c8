"""``privacy-audit gate --baseline``: CI-aware regressions against a committed baseline.

The baseline and the new results start from the shared tiny run's ``results.json`` (a
real audit); each test edits a copy's metric values and CIs to create exactly the
situation it checks. The regression rule under test (see ``audit/integrations/gate.py``):

- two-sided metrics: regression iff ``new - base > tolerance`` and ``new.ci_low >
  base.ci_high``;
- the ε lower bound: regression iff ``new > base + tolerance``.
"""

from __future__ import annotations

import copy
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from privacy_audit.audit.integrations.gate import (
    BASELINE_METRICS,
    IMPROVED,
    NOT_COMPARABLE,
    REGRESSION,
    UNCHANGED_CI,
    UNCHANGED_TOL,
    Estimate,
    classify,
)

RUN, ATTACK = "non-private", "loss"
HOSTILE_RUN = 'evil <&"> run'
HOSTILE_ATTACK = "a<b>&'\"\x01"


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #
@pytest.fixture
def base(tiny_run_dir) -> dict:
    """A fresh copy of the real tiny run's results, for each test to edit."""
    return json.loads((tiny_run_dir / "results.json").read_text(encoding="utf-8"))


def _write(path: Path, obj) -> Path:
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj, encoding="utf-8")
    return path


def _attack(res: dict, run: str = RUN, attack: str = ATTACK) -> dict:
    (r,) = [r for r in res["runs"] if r["name"] == run]
    (a,) = [a for a in r["attacks"] if a["attack"] == attack]
    return a


def _set(res: dict, metric: str, value, ci_low=None, ci_high=None, run=RUN, attack=ATTACK):
    a = _attack(res, run, attack)
    m = a["metrics"][metric]
    m["value"], m["ci_low"], m["ci_high"] = value, ci_low, ci_high
    if metric.startswith("tpr_at_fpr_"):
        # a TPR is a number only where the sample resolves it: ≥ 3 non-members above
        # the threshold (the edited file says so, as a run on 1,000 non-members would)
        a["n_nonmembers"] = 1000
        m["below_resolution"] = False
    return res


def _pair(tmp_path: Path, baseline: dict, new: dict) -> tuple[str, str]:
    return (
        str(_write(tmp_path / "new.json", new)),
        str(_write(tmp_path / "baseline.json", baseline)),
    )


def _gate(cli, tmp_path, baseline: dict, new: dict, *extra: str):
    new_path, base_path = _pair(tmp_path, baseline, new)
    return cli(["gate", new_path, "--baseline", base_path, *extra])


def _row(stdout: str, run: str, attack: str, metric: str) -> str:
    """The diff-table line of one run × attack × metric."""
    hits = [
        line
        for line in stdout.splitlines()
        if line.startswith(run + "  ") and f"  {attack}  " in line and f"  {metric}  " in line
    ]
    assert len(hits) == 1, (run, attack, metric, stdout)
    return hits[0]


def _n_both(base: dict, new: dict) -> int:
    """Metrics measured (not null) on both sides, over runs and attacks ok in both."""
    runs = {r["name"]: r for r in new["runs"]}
    n = 0
    for rb in base["runs"]:
        rn = runs.get(rb["name"])
        if rn is None:
            continue
        atts = {a["attack"]: a for a in rn["attacks"]}
        for ab in rb["attacks"]:
            an = atts.get(ab["attack"])
            if an is None or ab["status"] != "ok" or an["status"] != "ok":
                continue
            n += sum(
                ab["metrics"][m]["value"] is not None and an["metrics"][m]["value"] is not None
                for m in BASELINE_METRICS
            )
    return n


def _n_compared(res: dict) -> int:
    return len(BASELINE_METRICS) * sum(
        1 for r in res["runs"] for a in r["attacks"] if a["status"] == "ok"
    )


def assert_bad_input(outcome, *keywords: str, untouched: tuple[Path, ...] = ()) -> str:
    assert outcome.code == 2, (outcome.code, outcome.stdout, outcome.stderr)
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, outcome.stderr
    assert lines[0].startswith("privacy-audit: error: "), lines[0]
    for kw in keywords:
        assert kw in lines[0], (kw, lines[0])
    assert "Traceback" not in outcome.stderr
    assert outcome.stdout == "", outcome.stdout  # no partial output
    for p in untouched:
        assert not p.exists(), p
    return lines[0]


# --------------------------------------------------------------------------- #
# the rule itself
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize(
    ("metric", "b", "n", "tol", "verdict"),
    [
        ("auc", (0.55, 0.50, 0.60), (0.55, 0.50, 0.60), 0.0, UNCHANGED_CI),
        ("auc", (0.55, 0.50, 0.60), (0.58, 0.53, 0.63), 0.0, UNCHANGED_CI),  # overlapping
        ("auc", (0.55, 0.50, 0.60), (0.75, 0.70, 0.80), 0.0, REGRESSION),  # disjoint
        ("auc", (0.55, 0.50, 0.60), (0.66, 0.60, 0.70), 0.0, UNCHANGED_CI),  # touching
        ("auc", (0.55, 0.50, 0.60), (0.75, 0.70, 0.80), 0.25, UNCHANGED_CI),  # tolerance
        ("auc", (0.55, 0.50, 0.60), (0.75, 0.70, 0.80), 0.15, REGRESSION),
        ("auc", (0.75, 0.70, 0.80), (0.55, 0.50, 0.60), 0.0, IMPROVED),
        ("advantage", (0.1, None, None), (0.2, None, None), 0.05, REGRESSION),  # no CI
        ("advantage", (0.1, None, None), (0.2, None, None), 0.5, UNCHANGED_CI),
        ("tpr_at_fpr_0.01", (None, None, None), (0.9, 0.8, 1.0), 0.0, NOT_COMPARABLE),
        ("epsilon_lower_bound", (0.5, 0.5, None), (0.75, 0.75, None), 0.0, REGRESSION),
        ("epsilon_lower_bound", (0.5, 0.5, None), (0.75, 0.75, None), 0.25, UNCHANGED_TOL),
        ("epsilon_lower_bound", (0.5, 0.5, None), (0.75, 0.75, None), 0.2, REGRESSION),
        ("epsilon_lower_bound", (0.75, 0.75, None), (0.5, 0.5, None), 0.0, IMPROVED),
    ],
)
def test_classify(metric, b, n, tol, verdict):
    assert classify(metric, Estimate(*b), Estimate(*n), tol) == verdict


# --------------------------------------------------------------------------- #
# the command on real results
# --------------------------------------------------------------------------- #
def test_identical_results_pass(base, tmp_path, cli):
    out = _gate(cli, tmp_path, base, copy.deepcopy(base))
    assert out.code == 0, out.stdout + out.stderr
    n = _n_compared(base)
    assert n == 40
    both = sum(
        1
        for r in base["runs"]
        for a in r["attacks"]
        if a["status"] == "ok"
        for m in BASELINE_METRICS
        if a["metrics"][m]["value"] is not None
    )
    assert 0 < both < n
    assert out.stdout.splitlines()[-1] == (
        f"privacy gate passed: {both} metric(s) compared with the baseline "
        f"({n - both} null on a side, not comparable), no regression"
    )
    for header in ("run", "attack", "metric", "baseline [95% CI]", "new [95% CI]", "Δ", "verdict"):
        assert header in out.stdout
    row = _row(out.stdout, RUN, ATTACK, "auc")
    assert "+0.0000" in row and row.endswith("unchanged within CI")
    assert "REGRESSION" not in out.stdout and "FAIL" not in out.stdout


def test_rise_inside_the_cis_passes(base, tmp_path, cli):
    m = _attack(base)["metrics"]["auc"]
    width = m["ci_high"] - m["ci_low"]
    assert width > 0.1  # 40 + 40 examples: wide intervals
    new = _set(
        copy.deepcopy(base), "auc", m["value"] + 0.05, m["ci_low"] + 0.05, m["ci_high"] + 0.05
    )
    out = _gate(cli, tmp_path, base, new)
    assert out.code == 0, out.stdout
    row = _row(out.stdout, RUN, ATTACK, "auc")
    assert "+0.0500" in row and row.endswith("unchanged within CI")


def test_rise_with_disjoint_cis_fails_naming_run_attack_metric(base, tmp_path, cli):
    baseline = _set(copy.deepcopy(base), "auc", 0.55, 0.50, 0.60)
    new = _set(copy.deepcopy(base), "auc", 0.75, 0.70, 0.80)
    out = _gate(cli, tmp_path, baseline, new)
    assert out.code == 1, out.stdout + out.stderr
    assert _row(out.stdout, RUN, ATTACK, "auc").endswith("REGRESSION")
    fails = [line for line in out.stdout.splitlines() if line.startswith("FAIL:")]
    assert len(fails) == 1
    assert f"auc of attack '{ATTACK}' on '{RUN}' regressed" in fails[0]
    assert "0.5500 [0.5000, 0.6000] -> 0.7500 [0.7000, 0.8000]" in fails[0]
    assert out.stdout.splitlines()[-1] == (
        "privacy gate failed: 1 regression(s) against the baseline"
    )
    # the same change the other way round is an improvement, and passes
    back = _gate(cli, tmp_path, new, baseline)
    assert back.code == 0, back.stdout
    assert _row(back.stdout, RUN, ATTACK, "auc").endswith("improved")


@pytest.mark.parametrize(("tolerance", "code"), [("0.25", 0), ("0.15", 1)])
def test_tolerance_absorbs_a_smaller_rise(base, tmp_path, cli, tolerance, code):
    baseline = _set(copy.deepcopy(base), "tpr_at_fpr_0.01", 0.05, 0.0, 0.1)
    new = _set(copy.deepcopy(base), "tpr_at_fpr_0.01", 0.25, 0.15, 0.35)  # Δ = 0.2, disjoint
    out = _gate(cli, tmp_path, baseline, new, "--tolerance", tolerance)
    assert out.code == code, out.stdout
    assert f"(tolerance {float(tolerance):g}; runs paired by name)" in out.stdout
    verdict = "REGRESSION" if code else "unchanged within CI"
    assert _row(out.stdout, RUN, ATTACK, "tpr_at_fpr_0.01").endswith(verdict)


def test_epsilon_bound_rise_beyond_tolerance_fails(base, tmp_path, cli):
    run, attack = "dp-sgd (eps=8)", "confidence"
    baseline = _set(copy.deepcopy(base), "epsilon_lower_bound", 0.5, 0.5, None, run, attack)
    new = _set(copy.deepcopy(base), "epsilon_lower_bound", 0.75, 0.75, None, run, attack)
    out = _gate(cli, tmp_path, baseline, new, "--tolerance", "0.2")
    assert out.code == 1, out.stdout
    (fail,) = [line for line in out.stdout.splitlines() if line.startswith("FAIL:")]
    assert f"epsilon_lower_bound of attack '{attack}' on '{run}' regressed" in fail
    ok = _gate(cli, tmp_path, baseline, new, "--tolerance", "0.25")
    assert ok.code == 0, ok.stdout
    assert _row(ok.stdout, run, attack, "epsilon_lower_bound").endswith(
        "unchanged within tolerance"
    )


def test_missing_and_new_results_are_reported_not_failed(base, tmp_path, cli):
    new = copy.deepcopy(base)
    dp = new["runs"][1]
    dp["attacks"] = [a for a in dp["attacks"] if a["attack"] != "entropy"]
    new["runs"][0]["attacks"][1]["status"] = "error"  # confidence on non-private
    new["runs"].append(copy.deepcopy(new["runs"][0]) | {"name": "brand-new"})
    out = _gate(cli, tmp_path, base, new)
    assert out.code == 0, out.stdout
    lines = out.stdout.splitlines()
    assert (
        "MISSING: attack 'entropy' of run 'dp-sgd (eps=8)': in the baseline, not in the results"
        in lines
    )
    assert any(
        line.startswith("MISSING: attack 'confidence' of run 'non-private'") and "'error'" in line
        for line in lines
    )
    assert "NEW: run 'brand-new': in the results, not in the baseline" in lines
    assert lines[-1].startswith(f"privacy gate passed: {_n_both(base, new)} metric(s) compared")

    strict = _gate(cli, tmp_path, base, new, "--fail-on-missing")
    assert strict.code == 1
    assert any(line.startswith("FAIL: attack 'entropy'") for line in strict.stdout.splitlines())
    assert strict.stdout.splitlines()[-1] == "privacy gate failed: 2 baseline result(s) missing"

    # a whole run missing from the results
    gone = copy.deepcopy(base)
    gone["runs"] = gone["runs"][:1]
    out = _gate(cli, tmp_path, base, gone)
    assert out.code == 0
    assert "MISSING: run 'dp-sgd (eps=8)': in the baseline, not in the results" in out.stdout


# --------------------------------------------------------------------------- #
# bad input: exit 2, one line, nothing written
# --------------------------------------------------------------------------- #
def test_schema_mismatch_is_bad_input(base, tmp_path, cli):
    baseline = copy.deepcopy(base) | {"schema_version": 2}
    junit, summary = tmp_path / "junit.xml", tmp_path / "summary.json"
    out = _gate(cli, tmp_path, baseline, base, "--junit", str(junit), "--summary", str(summary))
    line = assert_bad_input(out, "schema_version 2", "does not know", untouched=(junit, summary))
    assert "baseline.json" in line
    no_version = {k: v for k, v in base.items() if k != "schema_version"}
    assert_bad_input(_gate(cli, tmp_path, no_version, base), "schema_version None")


@pytest.mark.parametrize(
    ("mutate", "keywords"),
    [
        (lambda b: '{"runs": [', ("baseline file", "not valid JSON")),
        (lambda b: {"schema_version": 1, "hello": 1}, ("baseline file", "'runs'")),
        (lambda b: {"schema_version": 1, "runs": [1, 2]}, ("baseline file", "run #1")),
        (lambda b: b | {"runs": [{"name": "x", "attacks": ["loss"]}]}, ("'attacks'",)),
        (lambda b: _set(b, "auc", "high", 0.1, 0.9), ("baseline file", "'auc'", "'high'")),
        (lambda b: _set(b, "auc", True, 0.1, 0.9), ("must be a number",)),
        (lambda b: _drop_metric(b, "advantage"), ("baseline file", "no 'advantage' metric")),
        (lambda b: b | {"runs": b["runs"] + b["runs"][:1]}, ("two entries named 'non-private'",)),
    ],
)
def test_malformed_baseline_is_bad_input(base, tmp_path, cli, mutate, keywords):
    bad = mutate(copy.deepcopy(base))
    summary = tmp_path / "summary.json"
    out = _gate(cli, tmp_path, bad, base, "--summary", str(summary))
    assert_bad_input(out, *keywords, untouched=(summary,))


def _drop_metric(res: dict, metric: str) -> dict:
    del _attack(res)["metrics"][metric]
    return res


def test_missing_baseline_file_is_bad_input(base, tmp_path, cli):
    new = str(_write(tmp_path / "new.json", base))
    out = cli(["gate", new, "--baseline", str(tmp_path / "nope.json")])
    assert_bad_input(out, "baseline file", "nope.json", "does not exist")


@pytest.mark.parametrize(
    ("args", "keywords"),
    [
        (["--tolerance", "0.1"], ("--tolerance", "--baseline")),
        (["--max-auc", "0.9", "--fail-on-missing"], ("--fail-on-missing", "--baseline")),
        (["--baseline", "B", "--tolerance", "-0.1"], ("--tolerance", ">= 0")),
        (["--baseline", "B", "--tolerance", "nan"], ("--tolerance",)),
        (["--baseline", "B", "--tolerance", "inf"], ("--tolerance",)),
        (["--baseline", "B", "--junit", "x.xml", "--summary", "x.xml"], ("different files",)),
    ],
)
def test_bad_gate_options(base, tmp_path, cli, args, keywords):
    new, baseline = _pair(tmp_path, base, base)
    args = [baseline if a == "B" else a for a in args]
    assert_bad_input(cli(["gate", new, *args]), *keywords)


# --------------------------------------------------------------------------- #
# JUnit XML and the JSON summary
# --------------------------------------------------------------------------- #
def test_junit_xml_parses_counts_failures_and_escapes_names(base, tmp_path, cli):
    def hostile(res: dict) -> dict:
        res["runs"][0]["name"] = HOSTILE_RUN
        res["runs"][0]["attacks"][0]["attack"] = HOSTILE_ATTACK
        return res

    baseline = hostile(copy.deepcopy(base))
    new = hostile(copy.deepcopy(base))
    _set(baseline, "auc", 0.55, 0.50, 0.60, HOSTILE_RUN, HOSTILE_ATTACK)
    _set(new, "auc", 0.75, 0.70, 0.80, HOSTILE_RUN, HOSTILE_ATTACK)
    _set(baseline, "advantage", 0.1, 0.05, 0.15, "dp-sgd (eps=8)", "entropy")
    _set(new, "advantage", 0.4, 0.3, 0.5, "dp-sgd (eps=8)", "entropy")
    others = [a["metrics"]["auc"]["value"] for r in new["runs"][1:] for a in r["attacks"]]
    others += [a["metrics"]["auc"]["value"] for a in new["runs"][0]["attacks"][1:]]
    assert max(others) <= 0.7  # only the hostile attack's auc is above the threshold
    junit = tmp_path / "ci" / "junit.xml"  # the folder is created
    out = _gate(cli, tmp_path, baseline, new, "--junit", str(junit), "--max-auc", "0.7")
    assert out.code == 1, out.stdout + out.stderr

    text = junit.read_text(encoding="utf-8")
    assert HOSTILE_RUN not in text and "<&" not in text  # escaped, not raw
    root = ET.fromstring(text.encode("utf-8"))  # parses
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    (suite,) = suites
    assert suite.get("name") == "privacy-gate"
    cases = suite.findall("testcase")
    assert len(cases) == int(suite.get("tests")) == _n_compared(base)  # auc is also thresholded
    failed = [c for c in cases if c.find("failure") is not None]
    # the hostile auc (regression and above 0.7) and the entropy advantage (regression)
    assert len(failed) == int(suite.get("failures")) == 2
    names = {(c.get("classname"), c.get("name")) for c in failed}
    hostile_attack = HOSTILE_ATTACK.replace("\x01", "\ufffd")  # not representable in XML 1.0
    assert (f"privacy-gate.{HOSTILE_RUN}", f"{hostile_attack} auc") in names
    assert ("privacy-gate.dp-sgd (eps=8)", "entropy advantage") in names
    msg = next(c for c in failed if c.get("classname").endswith(HOSTILE_RUN)).find("failure")
    assert f"on '{HOSTILE_RUN}' regressed" in msg.get("message")
    assert "above the threshold 0.7" in msg.get("message")


def test_junit_for_thresholds_only(base, tmp_path, cli):
    new = str(_write(tmp_path / "new.json", base))
    junit = tmp_path / "junit.xml"
    out = cli(["gate", new, "--max-auc", "0.0", "--max-epsilon-lb", "1000", "--junit", str(junit)])
    assert out.code == 1
    suite = ET.parse(junit).getroot().find("testsuite")
    n_ok = _n_compared(base) // len(BASELINE_METRICS)
    assert int(suite.get("tests")) == 2 * n_ok  # auc and ε bound of every attack
    assert int(suite.get("failures")) == n_ok  # every auc > 0


def test_junit_skips_missing_unless_fail_on_missing(base, tmp_path, cli):
    new = copy.deepcopy(base)
    new["runs"] = new["runs"][:1]
    junit = tmp_path / "junit.xml"
    assert _gate(cli, tmp_path, base, new, "--junit", str(junit)).code == 0
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("0", "1")
    assert _gate(cli, tmp_path, base, new, "--junit", str(junit), "--fail-on-missing").code == 1
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("failures"), suite.get("skipped")) == ("1", "0")


def test_summary_json(base, tmp_path, cli):
    baseline = _set(copy.deepcopy(base), "auc", 0.55, 0.50, 0.60)
    new = _set(copy.deepcopy(base), "auc", 0.75, 0.70, 0.80)
    new["runs"][1]["attacks"].pop()  # modified-entropy of dp-sgd
    # The tiny run's 40 non-members cannot resolve 1% FPR ("below resolution"); give the
    # new results measured TPR@1%FPR values so that the threshold has numbers to check.
    for r in new["runs"]:
        for a in r["attacks"]:
            a["metrics"]["tpr_at_fpr_0.01"].update(
                value=0.05, ci_low=0.01, ci_high=0.1, below_resolution=False
            )
            a["n_nonmembers"] = 1000  # where a TPR at 1% FPR is resolvable
    summary = tmp_path / "summary.json"
    out = _gate(
        cli, tmp_path, baseline, new, "--summary", str(summary), "--max-tpr-at-1pct-fpr", "0.0"
    )
    assert out.code == 1
    s = json.loads(summary.read_text(encoding="utf-8"))
    assert s["passed"] is False
    assert s["compared"] == _n_compared(base) - len(BASELINE_METRICS)
    (reg,) = s["regressions"]
    assert (reg["run"], reg["attack"], reg["metric"]) == (RUN, ATTACK, "auc")
    assert reg["baseline"] == {"value": 0.55, "ci_low": 0.5, "ci_high": 0.6}
    assert reg["new"] == {"value": 0.75, "ci_low": 0.7, "ci_high": 0.8}
    assert reg["delta"] == pytest.approx(0.2)
    assert reg["verdict"] == "regression"
    tprs = [
        a["metrics"]["tpr_at_fpr_0.01"]["value"]
        for r in new["runs"]
        for a in r["attacks"]
        if a["status"] == "ok"
    ]
    assert len(s["threshold_violations"]) == sum(v > 0 for v in tprs) > 0
    assert {v["metric"] for v in s["threshold_violations"]} == {"tpr_at_fpr_0.01"}
    (miss,) = s["missing"]
    assert (miss["run"], miss["attack"], miss["present_in"]) == (
        "dp-sgd (eps=8)",
        "modified-entropy",
        "baseline",
    )
    assert s["added"] == []
    assert s["tolerance"] == 0.0
    assert len(s["comparisons"]) == s["compared"]

    # and a passing gate says so
    ok = _gate(cli, tmp_path, base, copy.deepcopy(base), "--summary", str(summary))
    assert ok.code == 0
    s = json.loads(summary.read_text(encoding="utf-8"))
    assert s["passed"] is True and s["regressions"] == [] and s["missing"] == []
    assert s["threshold_violations"] == [] and s["compared"] == _n_compared(base)


def test_thresholds_and_baseline_together(base, tmp_path, cli):
    aucs = [a["metrics"]["auc"]["value"] for r in base["runs"] for a in r["attacks"]]
    limit = max(aucs) + 0.01
    assert limit < 0.95
    # no regression, no violation
    ok = _gate(cli, tmp_path, base, copy.deepcopy(base), "--max-auc", str(limit))
    assert ok.code == 0, ok.stdout
    n, both = _n_compared(base), _n_both(base, base)
    assert ok.stdout.splitlines()[-1] == (
        f"privacy gate passed: {both} metric(s) compared with the baseline "
        f"({n - both} null on a side, not comparable), no regression; "
        f"{n // len(BASELINE_METRICS)} attack result(s) within every threshold"
    )
    # a threshold violation alone fails, even with no regression
    lower = _gate(cli, tmp_path, base, copy.deepcopy(base), "--max-auc", str(min(aucs) - 0.01))
    assert lower.code == 1
    assert "REGRESSION" not in lower.stdout
    assert lower.stdout.splitlines()[-1] == (
        f"privacy gate failed: {len(aucs)} threshold(s) exceeded"
    )
    # both at once: both named
    baseline = _set(copy.deepcopy(base), "auc", 0.55, 0.50, 0.60)
    new = _set(copy.deepcopy(base), "auc", 0.95, 0.90, 1.0)
    both = _gate(cli, tmp_path, baseline, new, "--max-auc", str(limit))
    assert both.code == 1
    fails = [line for line in both.stdout.splitlines() if line.startswith("FAIL:")]
    assert any("regressed" in f for f in fails)
    assert any(f"AUC of attack '{ATTACK}' on '{RUN}' is 0.95" in f for f in fails)
    assert both.stdout.splitlines()[-1] == (
        "privacy gate failed: 1 regression(s) against the baseline, 1 threshold(s) exceeded"
    )


def test_gate_needs_a_baseline_or_a_threshold(base, tmp_path, cli):
    new = str(_write(tmp_path / "new.json", base))
    assert_bad_input(cli(["gate", new]), "--baseline", "--max-auc")


# --------------------------------------------------------------------------- #
# a baseline gate that compares nothing, run pairing, impossible values
# --------------------------------------------------------------------------- #
def _renamed(res: dict, names: list[str]) -> dict:
    out = copy.deepcopy(res)
    out["runs"] = [dict(r, name=n) for r, n in zip(out["runs"], names, strict=True)]
    return out


def test_a_baseline_gate_that_compares_nothing_fails_unless_allowed(base, tmp_path, cli):
    """Runs whose names differ (and more than one run per file): nothing pairs, nothing is
    compared; a regression could hide there, so the gate fails (exit 1), or passes with
    --allow-empty saying so."""
    assert len(base["runs"]) >= 2
    new = _renamed(base, [f"other-{i}" for i in range(len(base["runs"]))])
    out = _gate(cli, tmp_path, base, new)
    assert out.code == 1, out.stdout
    assert "no metric was compared with the baseline" in out.stdout
    assert out.stdout.splitlines()[-1] == (
        "privacy gate failed: nothing was compared with the baseline"
    )
    ok = _gate(cli, tmp_path, base, new, "--allow-empty")
    assert ok.code == 0, ok.stdout
    assert "0 metric(s) compared with the baseline" in ok.stdout
    assert "nothing compared (--allow-empty)" in ok.stdout


def test_the_only_run_of_each_file_pairs_whatever_its_name(base, tmp_path, cli):
    """``score`` names a run after its CSV: two one-run files with different names are
    the same run, and a rise from the baseline is caught."""
    one = copy.deepcopy(base)
    one["runs"] = one["runs"][:1]
    old, new = _renamed(one, ["scores-monday"]), _renamed(one, ["scores-tuesday"])
    att = new["runs"][0]["attacks"][0]
    att["metrics"]["auc"] = {"value": 0.99, "ci_low": 0.98, "ci_high": 1.0}
    old["runs"][0]["attacks"][0]["metrics"]["auc"] = {"value": 0.3, "ci_low": 0.2, "ci_high": 0.4}
    out = _gate(cli, tmp_path, old, new)
    assert out.code == 1, out.stdout
    assert "runs paired the only run of each file" in out.stdout
    assert "1 regression(s) against the baseline" in out.stdout.splitlines()[-1]


def test_match_pairs_runs_by_hand_and_names_unknown_runs(base, tmp_path, cli):
    names = [r["name"] for r in base["runs"]]
    new = _renamed(base, [f"{n} (new)" for n in names])
    pairs = [f"{n} (new)={n}" for n in names]
    args = [a for p in pairs for a in ("--match", p)]
    out = _gate(cli, tmp_path, base, new, *args)
    assert out.code == 0, out.stdout
    assert f"privacy gate passed: {_n_both(base, base)} metric(s) compared" in out.stdout
    bad = _gate(cli, tmp_path, base, new, "--match", f"nope={names[0]}")
    assert_bad_input(bad, "--match", "'nope'")
    assert_bad_input(_gate(cli, tmp_path, base, new, "--match", "x"), "NEW_RUN=BASELINE_RUN")
    only = cli(
        ["gate", str(_write(tmp_path / "n.json", new)), "--max-auc", "0.9", "--match", "a=b"]
    )
    assert_bad_input(only, "--match only applies together with --baseline")


@pytest.mark.parametrize(
    "edit, words",
    [
        (lambda r: r.update(schema_version=999), ("schema_version 999", "does not know")),
        (lambda r: r.update(schema_version=True), ("schema_version True",)),
        (
            lambda r: r["runs"][0]["attacks"][0]["metrics"]["auc"].update(value=-5.0),
            ("value -5.0", "outside the metric's range [0, 1]"),
        ),
        (
            lambda r: r["runs"][0]["attacks"][0]["metrics"]["tpr_at_fpr_0.01"].update(ci_high=1.5),
            ("ci_high 1.5", "outside"),
        ),
        (
            lambda r: r["runs"][0]["attacks"][0]["metrics"]["auc"].update(ci_low=0.9, ci_high=0.1),
            ("ci_low 0.9 is above ci_high 0.1",),
        ),
        (
            lambda r: r["runs"][0]["attacks"][0]["metrics"]["epsilon_lower_bound"].update(
                value=-1.0
            ),
            ("value -1.0", "outside"),
        ),
    ],
)
@pytest.mark.parametrize("side", ["results", "baseline"])
def test_impossible_values_are_bad_input_on_either_side(base, tmp_path, cli, edit, words, side):
    bad = copy.deepcopy(base)
    edit(bad)
    if side == "baseline" and "schema_version" in words[0]:
        new = copy.deepcopy(base)  # the results' own version is known
    else:
        new = copy.deepcopy(base)
    out = _gate(cli, tmp_path, bad, new) if side == "baseline" else _gate(cli, tmp_path, base, bad)
    assert_bad_input(out, f"{side if side == 'baseline' else 'results'} file", *words)


def test_a_nan_baseline_auc_is_bad_input_not_a_pass(base, tmp_path, cli):
    text = json.dumps(base)
    i = text.index('"auc": {"value": ') + len('"auc": {"value": ')
    j = text.index(",", i)
    nan_text = text[:i] + "NaN" + text[j:]
    new_path = _write(tmp_path / "new.json", base)
    base_path = _write(tmp_path / "base.json", nan_text)
    out = cli(["gate", str(new_path), "--baseline", str(base_path)])
    assert_bad_input(out, "baseline file", "value is nan", "never a non-finite one")


@pytest.mark.parametrize("kind", ["directory", "device"])
def test_a_results_path_that_is_not_a_file_is_named_for_what_it_is(tmp_path, cli, kind):
    path = str(tmp_path) if kind == "directory" else "/dev/null"
    out = cli(["gate", path, "--max-auc", "0.9"])
    want = "is a directory" if kind == "directory" else "is not a regular file"
    assert_bad_input(out, want)
    assert "does not exist" not in out.stderr
