"""`privacy-audit epsilon` end to end on the fixture corpus: claimed vs audited ε for
non-private training, Opacus DP-SGD, and a deliberately broken DP-SGD that adds 10× less
noise to its released updates than its claim accounts for. The alarm must fire for the
broken defense and only for it."""

import json

import pytest

from privacy_audit.audit.cli import main
from privacy_audit.defenses import DEFENSES
from privacy_audit.defenses.dp_sgd import DPSGD
from privacy_audit.defenses.gradient_mechanism import GaussianGradientMechanism


class SilentlyBrokenDPSGD(DPSGD):
    """DP-SGD whose released updates carry 10× less noise than the claim accounts for."""

    name = "broken-dp-sgd"

    def fit(self, target, train, training, seed):
        release, report = super().fit(target, train, training, seed)
        honest = release.gradient_mechanism
        release.gradient_mechanism = GaussianGradientMechanism(
            honest.clip_norm, honest.noise_multiplier / 10
        )
        return release, report  # the claim still states the original ε


CONFIG = """
title = "epsilon audit test"
seed = 0
[data]
n_members = 200
n_nonmembers = 200
n_test = 100
[target]
preset = "tiny"
max_length = 32
[train]
epochs = 2
batch_size = 32
[[defenses]]
name = "none"
label = "non-private"
[[defenses]]
name = "dp-sgd"
label = "dp-sgd (eps=8)"
epsilon = 8.0
[[defenses]]
name = "broken-dp-sgd"
label = "broken dp-sgd (claims eps=8)"
epsilon = 8.0
[attacks]
names = ["loss", "confidence"]
[metrics]
bootstrap = 200
[epsilon]
gradient_trials = 100000
canaries = 60
"""


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("epsilon")
    cfg = tmp / "eps.toml"
    cfg.write_text(CONFIG)
    DEFENSES[SilentlyBrokenDPSGD.name] = SilentlyBrokenDPSGD
    try:
        assert main(["epsilon", str(cfg), "--out", str(tmp / "out"), "--quiet"]) == 0
    finally:
        del DEFENSES[SilentlyBrokenDPSGD.name]
    results = json.loads((tmp / "out" / "results.json").read_text())
    runs = {r["defense"]: r for r in results["runs"]}
    return runs, (tmp / "out" / "report.html").read_text()


def _audit(run, name):
    (a,) = [a for a in run["epsilon_audit"]["audits"] if a["name"].startswith(name)]
    return a


def test_opacus_dp_sgd_bound_is_positive_below_the_claim_and_raises_no_alarm(audited):
    runs, _ = audited
    dp = runs["dp-sgd"]
    audit = dp["epsilon_audit"]
    claimed = dp["claim"]["epsilon"]
    assert 0 < claimed <= 8
    grad = _audit(dp, "gradient-canary")
    assert 0 < grad["epsilon_lb"] < claimed
    assert _audit(dp, "input-canaries")["epsilon_lb"] < claimed
    # the one-run white-box canaries rode inside Opacus's own DPOptimizer (its add_noise)
    thr = _audit(dp, "one-run white-box (thresholded)")
    assert thr["source"] == "recorded in training" and 0 <= thr["epsilon_lb"] < claimed
    assert thr["steps_recorded"] == thr["sampling"]["steps"]  # one reading per noisy step
    assert dp["training"]["white_box_canaries"] == 1000
    # the signals carry the run's noise: their separation is near the mechanism's own
    # q·√T/σ (read before the noise, or without it, it would be far above)
    gauss = _audit(dp, "one-run Gaussian (asymptotic)")
    q, steps = thr["sampling"]["sample_rate"], thr["sampling"]["steps"]
    expected = q * steps**0.5 / dp["training"]["noise_multiplier"]
    assert 0.5 * expected < gauss["mu_hat"] < 1.5 * expected
    assert audit["status"] == "consistent" and audit["evidence"] == []
    assert audit["tradeoff"] is not None and audit["tradeoff"]["violated"] is False


def test_non_private_bound_is_high_and_hits_the_ceiling(audited):
    runs, _ = audited
    grad = _audit(runs["none"], "gradient-canary")
    assert grad["epsilon_lb"] == pytest.approx(grad["ceiling"], rel=1e-3)
    assert grad["epsilon_lb"] > 5
    assert runs["none"]["epsilon_audit"]["status"] == "no-claim"


def test_silently_broken_defense_is_caught(audited):
    runs, html = audited
    broken = runs["broken-dp-sgd"]
    audit = broken["epsilon_audit"]
    assert broken["claim"]["epsilon"] <= 8 and broken["claim"]["proven"] is True
    assert audit["status"] == "violated"
    grad = _audit(broken, "gradient-canary")
    assert grad["exceeds_claim"] is True and grad["epsilon_lb"] > broken["claim"]["epsilon"]
    assert any("gradient-canary" in e for e in audit["evidence"])
    assert "VIOLATED" in html


def test_input_canaries_are_recorded(audited):
    runs, _ = audited
    canary = _audit(runs["none"], "input-canaries")
    assert canary["status"] == "ok"
    assert canary["canaries"] == 60 and canary["n_in"] + canary["n_out"] == 60
    assert 0 <= canary["correct"] <= canary["guesses"] <= 60
    # which one-run estimator gave the bound is recorded (Steinke et al. or the f-DP audit)
    assert canary["estimator"] in ("steinke", "fdp") and canary["method"]


@pytest.mark.parametrize(
    ("section", "message"),
    [
        ({"canary_kind": "emoji"}, "epsilon.canary_kind' must be one of random-token, pii"),
        (
            {"gradient_trials": 5},
            "epsilon.gradient_trials' must be an integer in [1000, 100,000,000]",
        ),
        ({"canaries": 5}, "epsilon.canaries' must be 0 (off) or an integer in [20, 100,000]"),
        ({"trails": 5}, "unknown config key 'epsilon.trails'"),
    ],
)
def test_epsilon_config_is_validated(section, message):
    from privacy_audit.audit.config import parse_config
    from privacy_audit.ground.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        parse_config({"epsilon": section})
    assert message in str(err.value)
