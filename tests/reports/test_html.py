"""Tests of the reporting layer (reports/): verdicts, comparison, plots, HTML."""

from __future__ import annotations

import base64
import copy
import os
import re

import numpy as np
import pytest

from privacy_audit.reports import compare_runs, plots, render_html, verdict_for_run, write_report
from privacy_audit.reports.formatting import ci, num, small

XSS = "<script>alert(1)</script>"
XSS_ESC = "&lt;script&gt;alert(1)&lt;/script&gt;"


# --------------------------------------------------------------------------- #
# Synthetic results
# --------------------------------------------------------------------------- #
def _m(value, lo, hi):
    return {"value": value, "ci_low": lo, "ci_high": hi}


def _attack(name, rng, shift, n=200, ids_prefix="ex", metrics=None):
    members = np.r_[np.ones(n, dtype=int), np.zeros(n, dtype=int)]
    scores = rng.normal(size=2 * n) + shift * members
    ids = [f"{ids_prefix}-{i}" for i in range(2 * n)]
    return {
        "attack": name,
        "description": f"{name} attack",
        "surfaces": ["loss"],
        "status": "ok",
        "reason": None,
        "n_members": n,
        "n_nonmembers": n,
        "metrics": metrics
        or {
            "auc": _m(0.71, 0.68, 0.74),
            "tpr_at_fpr_0.001": _m(0.02, 0.005, 0.04),
            "tpr_at_fpr_0.01": _m(0.098, 0.062, 0.131),
            "advantage": _m(0.3, 0.25, 0.35),
            "balanced_accuracy": _m(0.65, 0.62, 0.68),
            "epsilon_lower_bound": {
                "value": 1.2,
                "ci_low": 1.2,
                "ci_high": None,
                "delta": 1e-5,
                "confidence": 0.95,
                "method": "clopper-pearson",
                "threshold": "split",
                "ceiling": 5.3,
                "point_estimate": 1.9,
            },
        },
        "examples": {
            "ids": ids,
            "scores": scores.tolist(),
            "members": members.tolist(),
        },
    }


def _na_attack(name="extraction"):
    return {
        "attack": name,
        "description": "prefix extraction",
        "surfaces": ["generate"],
        "status": "not_applicable",
        "reason": "not applicable: needs generation",
        "n_members": 0,
        "n_nonmembers": 0,
    }


def make_results(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    base_loss = _attack("loss", rng, 1.0)
    base_loss["examples"]["ids"][0] = f"id-{XSS}-end"
    base_loss["examples"]["scores"][0] = 6.0  # most exposed member: always listed
    base_zlib = _attack(
        "zlib",
        rng,
        0.5,
        metrics={
            "auc": _m(0.62, 0.58, 0.66),
            "tpr_at_fpr_0.01": _m(0.03, 0.01, 0.05),
            "custom_metric": _m(0.4, 0.3, 0.5),
        },
    )
    dp_loss = _attack(
        "loss",
        rng,
        0.05,
        metrics={
            "auc": _m(0.51, 0.48, 0.54),
            "tpr_at_fpr_0.001": _m(0.0, 0.0, 0.01),
            "tpr_at_fpr_0.01": _m(0.012, 0.003, 0.03),
            "advantage": _m(0.02, 0.0, 0.06),
            "balanced_accuracy": _m(0.51, 0.49, 0.53),
            "epsilon_lower_bound": {
                "value": 0.0,
                "ci_low": 0.0,
                "ci_high": None,
                "delta": 1e-5,
                "confidence": 0.95,
                "method": "clopper-pearson",
                "threshold": "split",
                "ceiling": 5.3,
                "point_estimate": 0.1,
            },
        },
    )
    return {
        "schema_version": 1,
        "tool": {"name": "privacy-audit", "version": "0.1.0"},
        "created": "2026-11-22T03:00:00Z",
        "title": f"Audit {XSS} title",
        "seed": 0,
        "config": {
            "model": {"name": "tiny-gpt", "note": f"cfg-{XSS}"},
            "data": {"source": "https://example.org/data.txt"},
            f"key-{XSS}": [1, 2.5, None],
        },
        "environment": {
            "python": "3.11.7",
            "platform": "Linux-x86_64",
            "packages": {"torch": "2.13.0", "numpy": "2.4.6"},
        },
        "aggregate_only": False,
        "runs": [
            {
                "name": "baseline",
                "defense": "none",
                "claim": {
                    "epsilon": None,
                    "delta": None,
                    "unit": None,
                    "notion": "none",
                    "accountant": None,
                    "proven": False,
                    "note": "no defense",
                },
                "utility": {
                    "metric": "accuracy",
                    "value": 0.85,
                    "ci_low": 0.82,
                    "ci_high": 0.88,
                    "n": 500,
                },
                "training": {"epochs": 8, "seconds": 42.1},
                "attacks": [base_loss, base_zlib, _na_attack()],
                "strongest_attack": "loss",
            },
            {
                "name": f"dp-sgd {XSS} (eps=8)",
                "defense": "dp-sgd",
                "claim": {
                    "epsilon": 8.0,
                    "delta": 1e-5,
                    "unit": "example",
                    "notion": "central-dp",
                    "accountant": "opacus-prv",
                    "proven": True,
                    "note": "",
                },
                "utility": {
                    "metric": "accuracy",
                    "value": 0.79,
                    "ci_low": 0.75,
                    "ci_high": 0.83,
                    "n": 500,
                },
                "training": {"epochs": 8, "noise_multiplier": 0.9, "max_grad_norm": 1.0},
                "attacks": [dp_loss, _na_attack()],
                "strongest_attack": "loss",
            },
        ],
    }


def _run(auc, tpr=None, eps_lb=None, claim=None, n=500, defense="x", name=None, ceiling=5.3):
    metrics = {"auc": _m(*auc)}
    if tpr is not None:
        metrics["tpr_at_fpr_0.01"] = _m(*tpr)
    if eps_lb is not None:
        metrics["epsilon_lower_bound"] = {
            "value": eps_lb,
            "ci_low": eps_lb,
            "ci_high": None,
            "delta": 1e-5,
            "confidence": 0.95,
            "ceiling": ceiling,
        }
    return {
        "name": name or defense,
        "defense": defense,
        "claim": claim or {"epsilon": None, "notion": "none", "proven": False},
        "attacks": [
            {
                "attack": "loss",
                "status": "ok",
                "n_members": n,
                "n_nonmembers": n,
                "metrics": metrics,
            }
        ],
        "strongest_attack": "loss",
    }


def _dp_claim(eps, delta=1e-5, unit="example", notion="central-dp"):
    return {"epsilon": eps, "delta": delta, "unit": unit, "notion": notion, "proven": True}


@pytest.fixture
def fast_plots(monkeypatch):
    """Replace the (slow) figure functions with a stub for text-only tests."""
    stub = b"\x89PNG\r\n\x1a\nstub"
    for name in ("roc_loglog", "score_histogram", "metric_bars", "privacy_utility"):
        monkeypatch.setattr(plots, name, lambda *args, **kwargs: stub)


@pytest.fixture(scope="module")
def results():
    return make_results()


@pytest.fixture(scope="module")
def html(results):
    return render_html(results)


# --------------------------------------------------------------------------- #
# Formatting
# --------------------------------------------------------------------------- #
def test_number_formatting():
    assert num(0.7123) == "0.712"
    assert num(0.7) == "0.700"
    assert num(12.345) == "12.3"
    assert num(None) == "—"
    assert ci(_m(0.7123, 0.6812, 0.7444)) == "0.712 [0.681, 0.744]"
    assert small(1e-5) == "1e-5"
    assert small(2.5e-6) == "2.5e-6"


# --------------------------------------------------------------------------- #
# HTML rendering
# --------------------------------------------------------------------------- #
def test_render_has_all_sections(html, results):
    assert html.startswith("<!DOCTYPE html>")
    for heading in (
        "Summary",
        "Verdicts",
        "How to read this report",
        "Plots",
        "Run configuration",
        "Most exposed training examples",
    ):
        assert heading in html, heading
    assert "2026-11-22T03:00:00Z" in html
    assert "0.1.0" in html
    # Numbers with CIs, 3 significant digits.
    assert "0.710 [0.680, 0.740]" in html
    assert "0.850 [0.820, 0.880]" in html
    # Claim display: proven DP claim, heuristic baseline, package versions.
    assert "ε = 8.00, δ = 1e-5" in html
    assert "proven" in html
    assert "2.13.0" in html
    # The input is not mutated by rendering.
    assert results == make_results()


def test_self_contained(html):
    refs = re.findall(r"""(?:src|href)\s*=\s*["']?([^"'\s>]*)""", html, flags=re.I)
    assert refs, "expected some src/href attributes"
    for ref in refs:
        assert not re.match(r"(?i)\s*(https?:)?//", ref), ref
        assert ref.startswith(("#", "data:image/png;base64,")), ref
    assert not re.search(r"(?i)<(script|link|iframe|object|embed)\b", html)
    assert "@import" not in html
    assert not re.search(r"(?i)url\(\s*['\"]?\s*(https?:)?//", html)
    # The config's URL is shown as escaped text only, never as a reference.
    assert "https://example.org/data.txt" in html


def test_hostile_strings_escaped(html):
    assert XSS not in html
    assert "<script" not in html.lower()
    # Each planted location shows up, escaped.
    assert f"Audit {XSS_ESC} title" in html  # title
    assert f"dp-sgd {XSS_ESC} (eps=8)" in html  # run name
    assert f"id-{XSS_ESC}-end" in html  # example id
    assert f"cfg-{XSS_ESC}" in html  # config value
    assert f"key-{XSS_ESC}" in html  # config key


def test_template_never_marks_data_safe():
    from privacy_audit.reports.html import TEMPLATE_DIR

    text = (TEMPLATE_DIR / "report.html.j2").read_text(encoding="utf-8")
    assert "|safe" not in text.replace(" ", "")
    assert "autoescape false" not in text


def test_images_embedded(html):
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    # 3 overview plots + per-run ROC for the baseline (2 ok attacks) + 3 histograms.
    assert len(images) == 3 + 1 + 3
    for b64 in images:
        assert base64.b64decode(b64).startswith(b"\x89PNG\r\n\x1a\n")


def test_not_applicable_reason_shown(html):
    assert "not applicable: needs generation" in html
    assert "not applicable" in html


def test_extra_metrics_and_strongest_marked(html):
    assert "custom_metric: 0.400 [0.300, 0.500]" in html
    assert 'class="strongest"' in html


def test_aggregate_only_hides_ids(results, html, fast_plots):
    agg = copy.deepcopy(results)
    agg["aggregate_only"] = True  # ids still present in the data on purpose
    out = render_html(agg)
    assert "Aggregate-only report" in out
    assert "Most exposed training examples" not in out
    for run in agg["runs"]:
        for attack in run["attacks"]:
            for ident in (attack.get("examples") or {}).get("ids", [])[:50]:
                assert ident not in out and ident.replace("<", "&lt;") not in out
    assert "id-&lt;script" not in out
    # The check can fail: without aggregate_only the exposed ids do appear.
    assert f"id-{XSS_ESC}-end" in html


def test_given_verdict_and_comparison_are_used(results, fast_plots):
    res = copy.deepcopy(results)
    res["runs"][0]["verdict"] = {"level": "moderate", "text": "Given verdict text."}
    res["comparison"] = {"text": "Given comparison text."}
    out = render_html(res)
    assert "Given verdict text." in out
    assert "Given comparison text." in out


def test_render_without_examples_or_measured_attacks(results):
    res = copy.deepcopy(results)
    for run in res["runs"]:
        for attack in run["attacks"]:
            attack.pop("examples", None)
    res["runs"].append(
        {"name": "broken", "defense": "dedup", "attacks": [_na_attack()], "strongest_attack": None}
    )
    res["runs"].append({"name": "empty"})
    out = render_html(res)
    assert "not-measured" in out
    assert "Most exposed training examples" not in out


def test_schema_version_warning(results, fast_plots):
    res = copy.deepcopy(results)
    res["schema_version"] = 99
    assert "schema version 1" in render_html(res)


# --------------------------------------------------------------------------- #
# write_report
# --------------------------------------------------------------------------- #
def test_write_report_atomic(results, tmp_path, fast_plots):
    out_dir = tmp_path / "nested" / "out"
    path = write_report(results, out_dir)
    assert path == out_dir / "report.html"
    assert sorted(os.listdir(out_dir)) == ["report.html"]
    text = path.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and text.rstrip().endswith("</html>")


def test_write_report_failure_keeps_old_report(results, tmp_path, monkeypatch, fast_plots):
    path = write_report(results, tmp_path)
    before = path.read_bytes()

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_report(make_results(seed=1), tmp_path)
    assert sorted(os.listdir(tmp_path)) == ["report.html"]
    assert path.read_bytes() == before


# --------------------------------------------------------------------------- #
# Verdict rules
# --------------------------------------------------------------------------- #
def test_verdict_high_by_auc():
    v = verdict_for_run(_run((0.71, 0.68, 0.74), (0.098, 0.062, 0.131)))
    assert v["level"] == "high"
    assert "AUC 0.710 [0.680, 0.740]" in v["text"]
    assert "9.8% [6.2, 13.1]" in v["text"]
    assert "not safe to assume private" in v["text"]


def test_verdict_high_by_tpr_only():
    v = verdict_for_run(_run((0.56, 0.53, 0.59), (0.07, 0.05, 0.09)))
    assert v["level"] == "high"


def test_verdict_moderate():
    v = verdict_for_run(_run((0.56, 0.53, 0.59), (0.02, 0.01, 0.03)))
    assert v["level"] == "moderate"
    # Boundary: AUC ci_low exactly 0.6 is high, just below is moderate.
    assert verdict_for_run(_run((0.63, 0.6, 0.66)))["level"] == "high"
    assert verdict_for_run(_run((0.63, 0.599, 0.66)))["level"] == "moderate"
    # A positive certified epsilon alone is evidence of leakage.
    assert verdict_for_run(_run((0.52, 0.49, 0.55), eps_lb=0.3))["level"] == "moderate"


def test_verdict_low():
    v = verdict_for_run(_run((0.51, 0.48, 0.54), (0.011, 0.004, 0.02), eps_lb=0.0, n=500))
    assert v["level"] == "low"
    assert "No leakage detected" in v["text"]
    assert "includes 0.5" in v["text"]
    assert "not proof of privacy" in v["text"]
    assert "500 members" in v["text"]
    # Boundary: AUC ci_low exactly 0.5 is not above chance; without a measured TPR@1%FPR
    # the attacks could not have seen a high leak, so it is inconclusive, not low.
    assert verdict_for_run(_run((0.53, 0.5, 0.56)))["level"] == "inconclusive"
    assert verdict_for_run(_run((0.53, 0.5, 0.56), (0.01, 0.0, 0.03)))["level"] == "low"


def test_verdict_not_measured():
    run = {
        "name": "r",
        "defense": "x",
        "attacks": [_na_attack(), {"attack": "e", "status": "error"}],
    }
    v = verdict_for_run(run)
    assert v["level"] == "not-measured"
    assert "1 not applicable, 1 failed" in v["text"]
    assert verdict_for_run({"name": "empty"})["level"] == "not-measured"


def test_verdict_uses_strongest_by_auc_when_unnamed():
    run = _run((0.51, 0.48, 0.54))
    run["strongest_attack"] = None
    strong = copy.deepcopy(run["attacks"][0])
    strong["attack"] = "ref"
    strong["metrics"]["auc"] = _m(0.8, 0.77, 0.83)
    run["attacks"].append(strong)
    v = verdict_for_run(run)
    assert v["level"] == "high" and "(ref)" in v["text"]


def test_claim_violated():
    v = verdict_for_run(_run((0.7, 0.67, 0.73), eps_lb=1.2, claim=_dp_claim(0.5)))
    assert "VIOLATED" in v["text"]
    assert v["claim_status"] == "violated"


def test_claim_not_violated_when_bound_below_claim():
    v = verdict_for_run(_run((0.7, 0.67, 0.73), eps_lb=1.2, claim=_dp_claim(2.0)))
    assert "VIOLATED" not in v["text"]
    assert v["claim_status"] == "consistent"
    assert "never confirm" in v["text"]


def test_claim_untestable_when_ceiling_below_claim():
    v = verdict_for_run(_run((0.7, 0.67, 0.73), eps_lb=1.2, claim=_dp_claim(8.0), ceiling=5.3))
    assert "VIOLATED" not in v["text"]
    assert v["claim_status"] == "untestable"


def test_claim_exceeded_but_not_comparable():
    for claim in (
        _dp_claim(0.5, unit="token"),
        _dp_claim(0.5, notion="metric-dp"),
        _dp_claim(0.5, delta=1e-3),  # claim at a larger delta than the audit's 1e-5
    ):
        v = verdict_for_run(_run((0.7, 0.67, 0.73), eps_lb=1.2, claim=claim))
        assert "VIOLATED" not in v["text"], claim
        assert v["claim_status"] == "not-comparable"
    # Pure epsilon-DP (no delta) and user-level claims are contradicted.
    for claim in (_dp_claim(0.5, delta=None), _dp_claim(0.5, unit="user")):
        v = verdict_for_run(_run((0.7, 0.67, 0.73), eps_lb=1.2, claim=claim))
        assert "VIOLATED" in v["text"], claim


def test_no_claim_never_violated():
    v = verdict_for_run(_run((0.9, 0.88, 0.92), eps_lb=4.0))
    assert "VIOLATED" not in v["text"]
    assert "No formal privacy guarantee" in v["text"]


def test_violated_shown_in_html(results, html, fast_plots):
    res = copy.deepcopy(results)
    res["runs"][1]["claim"]["epsilon"] = 0.1
    res["runs"][1]["attacks"][0]["metrics"]["epsilon_lower_bound"]["value"] = 0.9
    out = render_html(res)
    badge = 'class="tag violated">VIOLATED<'
    # One badge more than the unviolated report (whose guide also shows one).
    assert out.count(badge) >= html.count(badge) + 2  # summary row and run section
    assert "Privacy claim VIOLATED" in out
    assert "Privacy claim VIOLATED" not in html


# --------------------------------------------------------------------------- #
# Comparison
# --------------------------------------------------------------------------- #
def test_compare_overlapping():
    runs = [_run((0.6, 0.55, 0.65), defense="none"), _run((0.58, 0.53, 0.63), defense="dp-sgd")]
    out = compare_runs(runs)
    assert len(out["pairs"]) == 1
    pair = out["pairs"][0]
    assert pair["overlap"] is True
    assert pair["more_vulnerable"] == "none"
    assert "overlap" in out["text"]
    assert "cannot separate them" in out["text"]


def test_compare_disjoint():
    runs = [_run((0.75, 0.72, 0.78), defense="none"), _run((0.52, 0.49, 0.55), defense="dp-sgd")]
    out = compare_runs(runs)
    pair = out["pairs"][0]
    assert pair["overlap"] is False
    assert pair["more_vulnerable"] == "none"
    assert "overlap" not in out["text"]
    assert "cannot separate" not in out["text"]
    assert "more vulnerable" in out["text"]


def test_compare_defense_worse_and_missing_cases():
    runs = [_run((0.52, 0.49, 0.55), defense="none"), _run((0.75, 0.72, 0.78), defense="weird")]
    out = compare_runs(runs)
    assert out["pairs"][0]["more_vulnerable"] == "weird"
    assert "more exposed" in out["text"]
    assert compare_runs([_run((0.6, 0.5, 0.7), defense="dp-sgd")])["pairs"] == []
    assert "No undefended baseline" in compare_runs([_run((0.6, 0.5, 0.7))])["text"]
    na = {"name": "na", "defense": "dedup", "attacks": [_na_attack()]}
    out = compare_runs([_run((0.6, 0.55, 0.65), defense="none"), na])
    assert out["pairs"][0]["overlap"] is None and "not compared" in out["text"]


# --------------------------------------------------------------------------- #
# Plots
# --------------------------------------------------------------------------- #
def _brute_auc(scores, members):
    s = np.asarray(scores, dtype=float)
    m = np.asarray(members).astype(bool)
    pos, neg = s[m][:, None], s[~m][None, :]
    return float(np.mean((pos > neg) + 0.5 * (pos == neg)))


def test_roc_curve_ties_and_auc():
    fpr, tpr = plots.roc_curve([1, 1, 0, 0], [1, 0, 1, 0])
    np.testing.assert_allclose(fpr, [0, 0.5, 1])
    np.testing.assert_allclose(tpr, [0, 0.5, 1])
    rng = np.random.default_rng(3)
    scores = np.round(rng.normal(size=300), 1)  # many ties
    members = rng.integers(0, 2, size=300)
    scores = scores + 0.3 * members
    fpr, tpr = plots.roc_curve(scores, members)
    assert fpr[0] == 0 and tpr[0] == 0 and fpr[-1] == 1 and tpr[-1] == 1
    assert np.all(np.diff(fpr) >= 0) and np.all(np.diff(tpr) >= 0)
    assert plots.roc_auc(fpr, tpr) == pytest.approx(_brute_auc(scores, members))
    # Higher score = member: perfectly separated scores give AUC 1.
    fpr, tpr = plots.roc_curve([0.9, 0.8, 0.1, 0.2], [1, 1, 0, 0])
    assert plots.roc_auc(fpr, tpr) == pytest.approx(1.0)
    assert plots.roc_curve([1, 2], [1, 1]) is None


def _is_png(data):
    return isinstance(data, bytes) and data.startswith(b"\x89PNG\r\n\x1a\n")


def test_plots_return_png(results):
    runs = results["runs"]
    assert _is_png(plots.roc_loglog(runs))
    assert _is_png(plots.roc_loglog(runs, all_attacks_for=0))
    assert _is_png(plots.score_histogram(runs[0]["attacks"][0], "loss $x^2$ <b>"))
    assert _is_png(plots.metric_bars(runs))
    assert _is_png(plots.privacy_utility(runs))


def test_plots_handle_missing_data():
    no_eps = [
        {"name": "a", "attacks": []},
        {"name": "b", "claim": {"notion": "central-dp", "epsilon": None}},
        _run((0.6, 0.55, 0.65), defense="none"),
        _run((0.55, 0.5, 0.6), claim=_dp_claim(float("inf"))),
    ]
    for fn in (plots.roc_loglog, plots.metric_bars, plots.privacy_utility):
        assert _is_png(fn(no_eps))
        assert _is_png(fn([]))
    assert _is_png(plots.score_histogram({"attack": "x", "status": "ok"}, "empty"))
    outliers = {
        "examples": {
            "scores": [0.1, 0.2, 0.3, 1e9, float("inf"), None],
            "members": [1, 0, 1, 0, 1, 0],
        }
    }
    assert _is_png(plots.score_histogram(outliers, "outliers"))
    same = {"examples": {"scores": [1.0] * 4, "members": [1, 0, 1, 0]}}
    assert _is_png(plots.score_histogram(same, "constant"))
    assert _is_png(
        plots.roc_loglog(
            [
                {
                    "name": "c",
                    "attacks": [
                        dict(same, status="ok", attack="a", metrics={"auc": _m(0.5, 0.4, 0.6)})
                    ],
                }
            ]
        )
    )
