"""The bundled default audit end to end: the acceptance run of the foundation.

It trains the tiny target without privacy and with DP-SGD (ε = 8) on the fixture corpus
and checks the direction the report must show, with the numbers' own CIs.
"""

import json

import pytest

from privacy_audit.audit.cli import main


@pytest.fixture(scope="module")
def default_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("default-audit")
    assert main(["run", "--out", str(out), "--quiet"]) == 0
    results = json.loads((out / "results.json").read_text())
    html = (out / "report.html").read_text()
    return results, html


def _run(results, defense):
    (run,) = [r for r in results["runs"] if r["defense"] == defense]
    return run


def _strongest(run):
    (att,) = [a for a in run["attacks"] if a["attack"] == run["strongest_attack"]]
    return att["metrics"]


@pytest.mark.slow
def test_non_private_is_measurably_more_vulnerable_than_dp_sgd(default_results):
    results, _ = default_results
    none, dp = _run(results, "none"), _run(results, "dp-sgd")
    m_none, m_dp = _strongest(none), _strongest(dp)
    # Disjoint 95% CIs: the non-private model leaks measurably more.
    assert m_none["auc"]["ci_low"] > m_dp["auc"]["ci_high"]
    assert m_none["auc"]["ci_low"] > 0.55
    # DP-SGD at ε = 8 leaves the attacks near chance and certifies no large ε.
    assert m_dp["auc"]["ci_low"] < 0.5 < m_dp["auc"]["ci_high"] or m_dp["auc"]["value"] < 0.56
    assert m_dp["epsilon_lower_bound"]["value"] <= dp["claim"]["epsilon"]
    assert m_none["epsilon_lower_bound"]["value"] > 0
    assert results["comparison"]["pairs"][0]["overlap"] is False


@pytest.mark.slow
def test_default_audit_claims_and_utility(default_results):
    results, html = default_results
    none, dp = _run(results, "none"), _run(results, "dp-sgd")
    assert none["claim"]["epsilon"] is None and none["claim"]["proven"] is False
    claim = dp["claim"]
    assert 0 < claim["epsilon"] <= 8.0
    assert claim["delta"] == 1e-5 and claim["unit"] == "example" and claim["notion"] == "central-dp"
    assert claim["proven"] is True and claim["accountant"] == "opacus-prv"
    # the dp-accounting cross-check is recorded and of the same order
    cross = dp["training"]["epsilon_rdp_dp_accounting"]
    assert claim["epsilon"] <= cross * 1.05
    # both models are useful classifiers (4 classes: chance is about 0.25-0.3)
    assert none["utility"]["ci_low"] > 0.6 and dp["utility"]["ci_low"] > 0.6
    assert "non-private" in html and "dp-sgd (eps=8)" in html


@pytest.mark.slow
def test_default_audit_includes_claimed_vs_audited_epsilon(default_results):
    results, html = default_results
    none, dp = _run(results, "none"), _run(results, "dp-sgd")
    grad_dp = [a for a in dp["epsilon_audit"]["audits"] if a["name"] == "gradient-canary"][0]
    assert 0 < grad_dp["epsilon_lb"] < dp["claim"]["epsilon"] < grad_dp["ceiling"]
    assert dp["epsilon_audit"]["status"] == "consistent"
    grad_none = [a for a in none["epsilon_audit"]["audits"] if a["name"] == "gradient-canary"][0]
    assert grad_none["epsilon_lb"] == pytest.approx(grad_none["ceiling"], rel=1e-3)
    assert "Claimed vs audited" in html
    assert "VIOLATED" not in dp["verdict"]["text"]
