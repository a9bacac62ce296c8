"""Tests of the ε-audit part of the report: "Claimed vs audited ε" section, its plots,
the per-run audit tables and the verdict's use of ``run["epsilon_audit"]``."""

from __future__ import annotations

import base64
import copy
import math
import re

import numpy as np
import pytest

from privacy_audit.reports import plots, render_html, verdict_for_run
from privacy_audit.reports.verdict import audit_evidence, check_claim

XSS = "<script>alert(1)</script>"
XSS_ESC = "&lt;script&gt;alert(1)&lt;/script&gt;"
PNG = b"\x89PNG\r\n\x1a\n"
BADGE = 'class="tag violated">VIOLATED<'


# --------------------------------------------------------------------------- #
# Synthetic results
# --------------------------------------------------------------------------- #
def _m(value, lo, hi):
    return {"value": value, "ci_low": lo, "ci_high": hi}


def _loss_attack(rng, shift, n=300):
    members = np.r_[np.ones(n, dtype=int), np.zeros(n, dtype=int)]
    scores = rng.normal(size=2 * n) + shift * members
    return {
        "attack": "loss",
        "description": "loss attack",
        "surfaces": ["loss"],
        "status": "ok",
        "reason": None,
        "n_members": n,
        "n_nonmembers": n,
        "metrics": {
            "auc": _m(0.55, 0.52, 0.58),
            "tpr_at_fpr_0.01": _m(0.02, 0.01, 0.03),
            "epsilon_lower_bound": {
                "value": 0.4,
                "ci_low": 0.4,
                "ci_high": None,
                "delta": 1e-5,
                "confidence": 0.95,
                "method": "clopper-pearson",
                "threshold": "split",
                "ceiling": 3.3,
            },
        },
        "examples": {
            "ids": [f"ex-{i}" for i in range(2 * n)],
            "scores": scores.tolist(),
            "members": members.tolist(),
        },
    }


def _max_tpr(fpr, eps, delta):
    fpr = np.asarray(fpr, dtype=float)
    return np.clip(
        np.minimum(math.exp(eps) * fpr + delta, 1 - math.exp(-eps) * (1 - delta - fpr)), 0, 1
    )


def _tradeoff(eps, delta, power, violated):
    fpr = np.r_[0.0, np.logspace(-5, 0, 120)]
    tpr = np.minimum(1.0, fpr**power)
    grid = np.r_[0.0, np.logspace(-6, 0, 200)]
    points = []
    if violated:
        bound = _max_tpr(fpr, eps, delta)
        for f, t, b in zip(fpr, tpr, bound, strict=True):
            if f > 0 and t * 0.7 > _max_tpr(f * 1.6, eps, delta) and t > b:
                points.append(
                    {
                        "threshold": float(-math.log(f)),
                        "fpr": float(f),
                        "tpr": float(t),
                        "fpr_hi": float(f * 1.6),
                        "tpr_lo": float(t * 0.7),
                        "max_tpr_allowed": float(b),
                    }
                )
    return {
        "attack": "loss",
        "violated": violated,
        "confidence": 0.95,
        "n_thresholds": 100,
        "points": points,
        "roc": {"fpr": fpr.tolist(), "tpr": tpr.tolist()},
        "curve": {"fpr": grid.tolist(), "max_tpr": _max_tpr(grid, eps, delta).tolist()},
    }


def _canary_examples(rng, shift, n=500):
    members = np.r_[np.ones(n, dtype=int), np.zeros(n, dtype=int)]
    return {
        "scores": (rng.normal(size=2 * n) + shift * members).tolist(),
        "members": members.tolist(),
    }


def _gradient_canary(lb, ceiling=10.2, exceeds=False, name="gradient-canary", examples=None):
    audit = {
        "name": name,
        "description": "White-box Dirac gradient canary",
        "status": "ok",
        "reason": None,
        "epsilon_lb": lb,
        "ceiling": ceiling,
        "point_estimate": lb + 0.7,
        "method": "clopper-pearson, split threshold",
        "confidence": 0.95,
        "delta": 1e-5,
        "n_in": 100000,
        "n_out": 100000,
        "exceeds_claim": exceeds,
    }
    if examples is not None:
        audit["examples"] = examples
    return audit


def _one_run(lb, ceiling=3.1, exceeds=False):
    return {
        "name": "input-canaries (one-run)",
        "description": "Steinke et al. 2023 one-run audit",
        "status": "ok",
        "reason": None,
        "epsilon_lb": lb,
        "ceiling": ceiling,
        "point_estimate": None,
        "method": "one-run, abstaining guesser",
        "confidence": 0.95,
        "delta": 1e-5,
        "canaries": 200,
        "guesses": 40,
        "correct": 30,
        "n_in": 101,
        "n_out": 99,
        "exceeds_claim": exceeds,
    }


def _dp_claim(eps=8.0):
    return {
        "epsilon": eps,
        "delta": 1e-5,
        "unit": "example",
        "notion": "central-dp",
        "accountant": "prv",
        "proven": True,
        "note": "",
    }


def make_audit_results(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    dp = {
        "name": "dp-sgd",
        "defense": "dp-sgd",
        "claim": _dp_claim(),
        "utility": {"metric": "accuracy", "value": 0.8, "ci_low": 0.77, "ci_high": 0.83, "n": 500},
        "attacks": [_loss_attack(rng, 0.1)],
        "strongest_attack": "loss",
        "epsilon_audit": {
            "claimed_epsilon": 8.0,
            "claimed_delta": 1e-5,
            "comparable": True,
            "status": "consistent",
            "evidence": ["gradient-canary: ε ≥ 2.31 (95%, δ=1e-5) is below the claimed ε = 8"],
            "audits": [
                _gradient_canary(2.31, examples=_canary_examples(rng, 1.0)),
                _one_run(0.8),
            ],
            "tradeoff": _tradeoff(8.0, 1e-5, 0.5, violated=False),
        },
    }
    broken = {
        "name": "broken",
        "defense": "dp-sgd-broken",
        "claim": _dp_claim(),
        "utility": {"metric": "accuracy", "value": 0.84, "ci_low": 0.81, "ci_high": 0.87, "n": 500},
        "attacks": [_loss_attack(rng, 0.3)],
        "strongest_attack": "loss",
        "epsilon_audit": {
            "claimed_epsilon": 8.0,
            "claimed_delta": 1e-5,
            "comparable": True,
            "status": "violated",
            "evidence": [
                "gradient-canary: ε ≥ 10.2 (95%, δ=1e-5) exceeds the claimed ε = 8",
                f"loss ROC crosses the trade-off bound {XSS}",
            ],
            "audits": [
                _gradient_canary(10.2, exceeds=True, examples=_canary_examples(rng, 4.0)),
                _one_run(0.9),
                _gradient_canary(1.0, ceiling=2.0, name=f"planted {XSS} audit"),
            ],
            "tradeoff": _tradeoff(8.0, 1e-5, 0.15, violated=True),
        },
    }
    none = {
        "name": "none",
        "defense": "none",
        "claim": {"epsilon": None, "delta": None, "unit": None, "notion": "none", "proven": False},
        "utility": {"metric": "accuracy", "value": 0.86, "ci_low": 0.83, "ci_high": 0.89, "n": 500},
        "attacks": [_loss_attack(rng, 1.0)],
        "strongest_attack": "loss",
        "epsilon_audit": {
            "claimed_epsilon": None,
            "claimed_delta": None,
            "comparable": False,
            "status": "no-claim",
            "evidence": [],
            "audits": [
                {
                    "name": "gradient-canary",
                    "description": "White-box Dirac gradient canary",
                    "status": "not_applicable",
                    "reason": "not applicable: needs gradients",
                },
                _one_run(2.9),
            ],
            "tradeoff": None,
        },
    }
    assert broken["epsilon_audit"]["tradeoff"]["points"], "synthetic violation has points"
    return {
        "schema_version": 1,
        "tool": {"name": "privacy-audit", "version": "0.1.0"},
        "created": "2026-11-22T03:00:00Z",
        "title": "ε audit",
        "seed": 0,
        "config": {},
        "environment": {},
        "aggregate_only": False,
        "runs": [none, dp, broken],
    }


@pytest.fixture(scope="module")
def results():
    return make_audit_results()


@pytest.fixture(scope="module")
def html(results):
    return render_html(results)


@pytest.fixture
def fast_plots(monkeypatch):
    stub = PNG + b"stub"
    for name in (
        "roc_loglog",
        "score_histogram",
        "metric_bars",
        "privacy_utility",
        "roc_vs_tradeoff",
        "claimed_vs_audited",
        "canary_histogram",
    ):
        monkeypatch.setattr(plots, name, lambda *args, **kwargs: stub)


def _section(html: str, anchor: str) -> str:
    m = re.search(rf'<section class="card" id="{anchor}">(.*?)</section>', html, flags=re.S)
    assert m, anchor
    return m.group(1)


def _tbodies(section: str) -> dict[str, str]:
    """The audit table's per-run ``<tbody>`` blocks, by run name."""
    out = {}
    for body in re.findall(r'<tbody class="audit-run[^"]*"[^>]*>(.*?)</tbody>', section, re.S):
        name = re.search(r'<td class="name group"[^>]*><a href="#run-\d+">(.*?)</a>', body, re.S)
        out[name.group(1)] = body
    return out


def _rows(block: str) -> list[str]:
    return re.findall(r"<tr class=\"audit-row[^\"]*\">.*?</tr>", block, flags=re.S)


def _status(row: str) -> str:
    m = re.search(
        r'<td class="audit-cell audit-status"><span class="tag ([^"]+)">(.*?)</span>', row
    )
    assert m, row
    return m.group(2)


# --------------------------------------------------------------------------- #
# Section
# --------------------------------------------------------------------------- #
def test_section_renders_after_verdicts(html):
    assert "Claimed vs audited ε" in html
    assert html.index('id="verdicts"') < html.index('id="epsilon-audit"') < html.index('id="guide"')
    assert 'href="#epsilon-audit"' in html
    section = _section(html, "epsilon-audit")
    bodies = _tbodies(section)
    assert set(bodies) == {"none", "dp-sgd", "broken"}
    # One row per audit, plus one for the trade-off test when there is one.
    assert len(_rows(bodies["none"])) == 2
    assert len(_rows(bodies["dp-sgd"])) == 3
    assert len(_rows(bodies["broken"])) == 4
    # Claim, bound, confidence, method, δ, ceiling, sample sizes.
    dp = bodies["dp-sgd"]
    for text in (
        "ε = 8.00 (δ = 1e-5)",
        "proven",
        "ε ≥ 2.31",
        "95% confidence",
        "clopper-pearson, split threshold · δ = 1e-5",
        "10.2",
        "100,000 in / 100,000 out",
        "200 canaries, 40 guesses, 30 correct",
    ):
        assert text in dp, text
    assert "no claim" in bodies["none"]
    assert "not applicable: needs gradients" in bodies["none"]
    # Explanation of what a bound above / below the claim means.
    assert "does not prove the claim" in section
    assert "claim is false" in section


def test_violated_per_run_and_per_row(html):
    bodies = _tbodies(_section(html, "epsilon-audit"))
    assert "VIOLATED" in bodies["broken"]
    assert "VIOLATED" not in bodies["dp-sgd"]
    assert "VIOLATED" not in bodies["none"]
    rows = _rows(bodies["broken"])
    statuses = [_status(r) for r in rows]
    # gradient-canary (exceeds), one-run (ceiling 3.1 ≤ 8), planted (ceiling 2 ≤ 8), trade-off.
    assert statuses == ["VIOLATED", "untestable", "untestable", "VIOLATED"]
    assert [("exceeds" in r.split(">", 1)[0]) for r in rows] == [True, False, False, True]
    assert [_status(r) for r in _rows(bodies["dp-sgd"])] == [
        "consistent",
        "untestable",
        "consistent",
    ]
    assert [_status(r) for r in _rows(bodies["none"])] == ["not applicable", "no claim"]
    # Run-level badges.
    assert BADGE in bodies["broken"]
    assert 'class="tag ok">consistent<' in bodies["dp-sgd"]
    assert 'class="tag muted">no claim<' in bodies["none"]


def test_evidence_callout_escaped(html):
    section = _section(html, "epsilon-audit")
    callouts = re.findall(r'<div class="callout violated">(.*?)</div>', section, flags=re.S)
    assert len(callouts) == 1
    assert "broken" in callouts[0]
    assert "gradient-canary: ε ≥ 10.2 (95%, δ=1e-5) exceeds the claimed ε = 8" in callouts[0]
    assert f"loss ROC crosses the trade-off bound {XSS_ESC}" in callouts[0]
    # The planted audit name is escaped wherever it appears.
    assert f"planted {XSS_ESC} audit" in section
    assert XSS not in html
    assert "<script" not in html.lower()


def test_self_contained_with_audit(html):
    refs = re.findall(r"""(?:src|href)\s*=\s*["']?([^"'\s>]*)""", html, flags=re.I)
    for ref in refs:
        assert ref.startswith(("#", "data:image/png;base64,")), ref
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    for b64 in images:
        assert base64.b64decode(b64).startswith(PNG)
    # 3 overview + 1 claimed-vs-audited + 2 trade-off plots (dp-sgd, broken)
    # + 2 canary histograms + 3 attack histograms.
    assert len(images) == 3 + 1 + 2 + 2 + 3


def test_per_run_section(html):
    broken = _section(html, "run-2")
    assert "Privacy-claim audit" in broken
    assert 'class="audit-table"' in broken
    assert "Empirical ROC of the strongest membership attack (loss)" in broken
    assert '<div class="callout violated">' in broken
    dp = _section(html, "run-1")
    assert "Empirical ROC of the strongest membership attack (loss)" in dp
    assert "VIOLATED" not in dp
    # No trade-off test for the run without a claim: no trade-off figure.
    none = _section(html, "run-0")
    assert "Privacy-claim audit" in none and "Empirical ROC of the strongest" not in none


def test_summary_claim_badge(html):
    summary = _section(html, "summary")
    rows = re.findall(r"<tr>\s*<td class=\"name\">(.*?)</tr>", summary, flags=re.S)
    by_name = {re.search(r">([^<]+)</a>", r).group(1): r for r in rows}
    assert BADGE in by_name["broken"]
    assert BADGE not in by_name["dp-sgd"]
    assert BADGE not in by_name["none"]


# --------------------------------------------------------------------------- #
# Verdict
# --------------------------------------------------------------------------- #
def test_verdict_says_violated_with_evidence(results):
    none, dp, broken = results["runs"]
    v = verdict_for_run(broken)
    assert v["claim_status"] == "violated"
    assert "VIOLATED" in v["text"]
    assert "gradient-canary: ε ≥ 10.2" in v["text"]
    for run in (dp, none):
        v = verdict_for_run(run)
        assert "VIOLATED" not in v["text"]
        assert v["claim_status"] != "violated"
    # Without the audit the broken run's claim is not contradicted by its attack.
    plain = copy.deepcopy(broken)
    del plain["epsilon_audit"]
    assert verdict_for_run(plain)["claim_status"] != "violated"
    # The verdict level stays a statement about the membership attacks.
    assert verdict_for_run(broken)["level"] == verdict_for_run(plain)["level"]


def test_verdict_in_html(html):
    verdicts = _section(html, "verdicts")
    blocks = re.findall(r'<div class="verdict [^"]*">(.*?)</div>', verdicts, flags=re.S)
    by_name = {re.search(r'<span class="who">(.*?)</span>', b).group(1): b for b in blocks}
    assert "Privacy claim VIOLATED" in by_name["broken"]
    assert "VIOLATED" not in by_name["dp-sgd"]
    assert "VIOLATED" not in by_name["none"]


def test_evidence_derived_when_missing(results):
    broken = copy.deepcopy(results["runs"][2])
    broken["epsilon_audit"]["evidence"] = []
    ev = audit_evidence(broken)
    assert any(e.startswith("gradient-canary: ε ≥ 10.2") for e in ev)
    assert any("trade-off" in e for e in ev)
    assert "gradient-canary: ε ≥ 10.2" in check_claim(broken)["text"]


def test_stored_verdict_gets_violation(results, fast_plots):
    res = copy.deepcopy(results)
    res["runs"][2]["verdict"] = {"level": "low", "text": "Stored verdict."}
    out = render_html(res)
    verdicts = _section(out, "verdicts")
    assert "Stored verdict. Privacy claim VIOLATED" in verdicts


def test_verdict_violated_without_measured_attacks(results):
    broken = copy.deepcopy(results["runs"][2])
    broken["attacks"] = []
    v = verdict_for_run(broken)
    assert v["level"] == "not-measured"
    assert v["claim_status"] == "violated" and "VIOLATED" in v["text"]


# --------------------------------------------------------------------------- #
# Runs without epsilon_audit
# --------------------------------------------------------------------------- #
def test_runs_without_audit_render_unchanged(results, fast_plots):
    res = copy.deepcopy(results)
    for run in res["runs"]:
        del run["epsilon_audit"]
    out = render_html(res)
    assert "Claimed vs audited ε" not in out
    assert "epsilon-audit" not in out and "audit-table" not in out and "callout" not in out
    # A run's section does not depend on whether other runs have audits.
    mixed = copy.deepcopy(results)
    del mixed["runs"][0]["epsilon_audit"]
    out_mixed = render_html(mixed)
    assert _section(out_mixed, "run-0") == _section(out, "run-0")
    assert "Claimed vs audited ε" in out_mixed
    assert len(_tbodies(_section(out_mixed, "epsilon-audit"))) == 2


def test_odd_audit_inputs_render(results, fast_plots):
    res = copy.deepcopy(results)
    none, dp, broken = res["runs"]
    dp["epsilon_audit"]["audits"] = []  # no audits, only the trade-off test
    none["epsilon_audit"] = {"status": "no-claim"}  # minimal
    broken["epsilon_audit"]["audits"].append({"name": "failed", "status": "error", "reason": None})
    broken["epsilon_audit"]["audits"].append("not a dict")
    broken["epsilon_audit"]["evidence"] = None
    res["runs"].append({"name": "weird", "epsilon_audit": {"status": "strange", "audits": None}})
    out = render_html(res)
    bodies = _tbodies(_section(out, "epsilon-audit"))
    assert "No audits ran for this run." in bodies["none"]
    assert "strange" in bodies["weird"]
    assert "no reason given" in bodies["broken"]
    assert len(_rows(bodies["dp-sgd"])) == 1


# --------------------------------------------------------------------------- #
# Plots
# --------------------------------------------------------------------------- #
def _is_png(data):
    return isinstance(data, bytes) and data.startswith(PNG)


def test_roc_vs_tradeoff_png(results):
    none, dp, broken = results["runs"]
    for run in (none, dp, broken):
        assert _is_png(plots.roc_vs_tradeoff(run))
    assert _is_png(plots.roc_vs_tradeoff({"name": "no audit"}))
    odd = copy.deepcopy(broken)
    tr = odd["epsilon_audit"]["tradeoff"]
    tr["points"] = []
    tr["violated"] = False
    assert _is_png(plots.roc_vs_tradeoff(odd))
    del tr["curve"]  # computed from the claim
    assert _is_png(plots.roc_vs_tradeoff(odd))
    odd["epsilon_audit"]["claimed_epsilon"] = None
    assert _is_png(plots.roc_vs_tradeoff(odd))
    tr["roc"] = {"fpr": [None, float("nan")], "tpr": [1, 2]}
    assert _is_png(plots.roc_vs_tradeoff(odd))
    tr["points"] = [{"fpr": 0.0, "tpr": 0.1}, {"fpr": 1e-4, "tpr": 0.5}, "junk"]
    tr["curve"] = {"fpr": [0, 1e-4, 1], "max_tpr": [1e-5, 0.3, 1]}
    assert _is_png(plots.roc_vs_tradeoff(odd))


def test_claimed_vs_audited_png(results):
    runs = results["runs"]
    assert _is_png(plots.claimed_vs_audited(runs))
    assert _is_png(plots.claimed_vs_audited([]))
    assert _is_png(plots.claimed_vs_audited([{"name": "x"}]))  # no audits at all
    assert _is_png(plots.claimed_vs_audited([runs[0]]))  # only a run without a claim
    assert _is_png(plots.claimed_vs_audited([runs[1]]))  # only one claim
    no_audits = copy.deepcopy(runs[1])
    no_audits["epsilon_audit"]["audits"] = []
    assert _is_png(plots.claimed_vs_audited([no_audits]))
    small = copy.deepcopy(runs[1])
    small["epsilon_audit"]["claimed_epsilon"] = 0.5
    small["epsilon_audit"]["audits"][0]["ceiling"] = float("inf")
    assert _is_png(plots.claimed_vs_audited([small, runs[2], runs[0]]))


def test_canary_histogram_png(results):
    audit = results["runs"][1]["epsilon_audit"]["audits"][0]
    assert _is_png(plots.canary_histogram(audit))
    assert _is_png(plots.canary_histogram({"name": f"{XSS} $x$"}))


def test_tradeoff_max_tpr_formula():
    fpr = np.array([0.0, 1e-4, 0.5, 1.0])
    got = plots.tradeoff_max_tpr(fpr, 1.0, 1e-5)
    want = np.minimum(np.e * fpr + 1e-5, 1 - np.exp(-1.0) * (1 - 1e-5 - fpr))
    np.testing.assert_allclose(got, np.clip(want, 0, 1))
    assert got[0] == pytest.approx(1e-5) and got[-1] == pytest.approx(1.0)


def test_exceeding_but_not_violated_is_not_red(results, fast_plots):
    res = copy.deepcopy(results)
    dp = res["runs"][1]
    dp["claim"]["unit"] = "token"  # not comparable with example-level audits
    dp["epsilon_audit"]["comparable"] = False
    dp["epsilon_audit"]["audits"][0]["epsilon_lb"] = 9.0
    dp["epsilon_audit"]["audits"][0]["exceeds_claim"] = True
    out = render_html(res)
    body = _tbodies(_section(out, "epsilon-audit"))["dp-sgd"]
    rows = _rows(body)
    assert _status(rows[0]) == "exceeds claim"
    assert "exceeds" not in rows[0].split(">", 1)[0]
    assert "VIOLATED" not in body
    assert "not comparable with these audits" in body
    assert "VIOLATED" not in verdict_for_run(dp)["text"]
    # Non-violation evidence is listed, as a plain note, in the run's section.
    assert "is below the claimed ε = 8" in _section(out, "run-1")
