"""The optimal LRT against dp-attention releases, and the dp-attention defense end to end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privacy_audit import fixtures
from privacy_audit.attacks import LEAKAGE_ATTACKS
from privacy_audit.attacks.attention_lrt import (
    AttentionLRTAttack,
    audit_pair,
    distinguishing_game,
    lrt_statistic,
    make_neighbour,
)
from privacy_audit.attacks.base import AttackContext, MetricSettings, run_leakage_attack
from privacy_audit.defenses import DEFENSES
from privacy_audit.defenses.base import Examples
from privacy_audit.defenses.dp_attention import DPAttentionConfig, gaussian_sampling_mechanism
from privacy_audit.defenses.dp_attention_privacy_loss import privacy_loss_samples
from privacy_audit.targets.classifier import TrainingConfig
from privacy_audit.targets.loading import Target, TargetSpec


def _good(rng, n, d, cfg):
    X = rng.normal(size=(n, d))
    X *= np.sqrt(cfg.r - cfg.eta) * 0.95 / np.linalg.norm(X, axis=1, keepdims=True)
    return X * np.minimum(1, cfg.alpha / np.linalg.norm(X, axis=0))


def _sigma(X, eta):
    return X @ X.T + eta * np.eye(X.shape[0])


def test_lrt_statistic_is_the_log_likelihood_ratio():
    from scipy.stats import wishart

    rng = np.random.default_rng(0)
    S1 = _sigma(rng.normal(size=(3, 5)) * 0.1, 0.01)
    S2 = _sigma(rng.normal(size=(3, 5)) * 0.1, 0.01)
    k = 9
    B = gaussian_sampling_mechanism(torch.as_tensor(S1), k, torch.Generator().manual_seed(1))
    direct = wishart(k, S1 / k).logpdf(B.numpy()) - wishart(k, S2 / k).logpdf(B.numpy())
    assert lrt_statistic(B.numpy(), S1, S2, k) == pytest.approx(direct, rel=1e-8)
    # its law under Σ1 is the exact privacy-loss law of Lemma C.4
    g = torch.Generator().manual_seed(2)
    s, m = distinguishing_game(S1, S2, k, 3000, g)
    z = privacy_loss_samples(S1, S2, k, 3000, g)
    from scipy.stats import ks_2samp

    assert ks_2samp(s[m == 1], z).pvalue > 1e-3


def test_beta_close_neighbours_respect_the_claim_and_realistic_ones_are_enormous():
    cfg = DPAttentionConfig(max_tokens=8)
    rng = np.random.default_rng(3)
    X, other = _good(rng, 8, 16, cfg), _good(rng, 8, 16, cfg)
    S1 = _sigma(X, cfg.eta)
    out = {}
    for kind in ("beta-close", "token-swap", "column-removed"):
        Xt = make_neighbour(X, kind, rng, other, cfg.radius, cfg.eta)
        out[kind] = audit_pair(
            S1, _sigma(Xt, cfg.eta), cfg.samples, cfg.eps, cfg.delta, 500, 5000, seed=4
        )
    close = out["beta-close"]
    assert close["sensitivity"]["value"] < cfg.delta_cap
    assert close["epsilon_lb"]["value"] <= cfg.eps
    assert close["privacy_loss_mean"]["ci_high"] <= cfg.eps / 2  # Lemma C.5
    assert 0 <= close["privacy_loss_expected"]["value"] <= cfg.eps / 2
    assert close["privacy_loss_exceeds_eps"]["successes"] == 0
    for kind in ("token-swap", "column-removed"):
        o = out[kind]
        # the optimal test separates perfectly: the bound sits at the sample-size ceiling
        assert o["epsilon_lb"]["value"] == pytest.approx(o["epsilon_lb"]["ceiling"])
        assert o["epsilon_lb"]["value"] > 10 * cfg.eps
        # the note's finding: a realistic neighbour costs ~1e3 nats or more per release
        assert o["privacy_loss_mean"]["ci_low"] > 1000
        assert o["privacy_loss_expected"]["value"] == pytest.approx(
            o["privacy_loss_mean"]["value"], rel=0.01
        )
        assert o["privacy_loss_exceeds_eps"]["value"] == 1.0
    with pytest.raises(ValueError, match="neighbour"):
        make_neighbour(X, "row-removed", rng)


@pytest.fixture(scope="module")
def dp_release():
    rows = fixtures.load_corpus("private")[:96]
    labels = sorted({r["label"] for r in fixtures.load_corpus("private")})
    ex = Examples(
        [r["id"] for r in rows], [r["text"] for r in rows], [labels.index(r["label"]) for r in rows]
    )
    target = Target(TargetSpec("tiny", None, 32, 0), tuple(labels), None, "cpu", False)
    training = TrainingConfig(epochs=1, batch_size=32, max_length=32, progress=False)
    release, report = DEFENSES["dp-attention"]().fit(target, ex, training, seed=0)
    ctx = AttackContext(ex, ex, None, ex, MetricSettings(n_boot=200), seed=0)
    return release, report, ctx, target, ex, training


def test_defense_claim_is_honest_and_proven_only_when_every_condition_holds(dp_release):
    release, report, ctx, target, ex, training = dp_release
    claim = release.claim
    assert claim.proven and claim.details["status"] == "proven"
    assert claim.unit is None  # not a token, sequence, example or user
    assert "feature column" in claim.details["protected"]
    assert any("V " in x or x.startswith("V") for x in claim.details["not_protected"])
    assert any("training set" in x for x in claim.details["not_protected"])
    assert claim.details["assumptions"]["all_hold"]
    assert report.info["dp_attention_releases_in_training"] > 0
    util = release.evaluate_utility(ctx.test)
    assert 0 <= util["ci_low"] <= util["value"] <= util["ci_high"] <= 1
    # β beyond β_max: the same layer runs, but the claim is heuristic with the reason
    loose = DEFENSES["dp-attention"](beta=1e-3)
    rel2, _ = loose.fit(target, ex.subset(range(32)), training, seed=0)
    assert not rel2.claim.proven and rel2.claim.details["status"] == "heuristic"
    assert "sensitivity < Delta" in rel2.claim.note
    with pytest.warns(UserWarning, match="outside Theorem 4.1"):
        rel3, _ = DEFENSES["dp-attention"](epsilon=1.0, force=True).fit(
            target, ex.subset(range(32)), training, seed=0
        )
    assert not rel3.claim.proven
    # the clipped, non-private ablation claims nothing and offers no LRT target
    rel4, _ = DEFENSES["dp-attention"](sampling=False).fit(
        target, ex.subset(range(32)), training, seed=0
    )
    assert rel4.claim.notion == "none" and not hasattr(rel4, "attention_mechanism")


def test_bad_defense_parameters_are_one_line_errors():
    for params, match in (
        ({"epsilon": 0.5}, "eps=0.5 is outside.*force"),
        ({"r": 0.3}, "r=0.3 is outside"),
        ({"mode": "magic"}, "mode"),
        ({"layers": []}, "layers"),
        ({"eta": 0.2}, "outside|eta"),
    ):
        with pytest.raises(ValueError, match=match):
            DEFENSES["dp-attention"](**params)


def test_lrt_attack_on_a_dp_attention_release_and_not_applicable_elsewhere(dp_release):
    release, _, ctx, *_ = dp_release
    res = run_leakage_attack(AttentionLRTAttack(trials=200, loss_draws=2000), release, ctx)
    assert res.status == "ok", res.reason
    assert res.metrics["epsilon_lb_beta_close"]["value"] <= release.claim.epsilon
    assert res.metrics["epsilon_lb_token_swap"]["value"] > 1.0
    assert res.metrics["privacy_loss_mean_token_swap"]["value"] > 1000
    assert "enormous" in res.details["finding"]

    class Plain:
        surfaces = frozenset()

    other = run_leakage_attack(AttentionLRTAttack(), Plain(), ctx)
    assert other.status == "not_applicable" and "dp-attention" in other.reason
    assert "attention-lrt" in LEAKAGE_ATTACKS


def test_report_states_the_enormous_realistic_privacy_loss(dp_release):
    from privacy_audit.audit.results import assemble_results, run_record
    from privacy_audit.reports.html import render_html

    release, _, ctx, *_ = dp_release
    res = run_leakage_attack(AttentionLRTAttack(trials=50, loss_draws=500), release, ctx)
    run = run_record("dp-attention", "dp-attention", release.claim, None, [], leakage=[res])
    html = render_html(assemble_results([run], "t", 0, {}))
    assert "privacy loss of one release is enormous" in html
    assert "feature column" in html  # the protected unit, from the claim


def test_bundled_dp_attention_config_is_valid():
    from privacy_audit.audit.config import bundled_configs, load_config

    assert "dp-attention" in bundled_configs()
    cfg = load_config("dp-attention")
    assert [d.name for d in cfg.defenses] == ["none", "dp-sgd", "dp-attention", "dp-attention"]
    assert {"gradient-inversion", "attention-lrt"} <= set(cfg.attacks)
    assert cfg.attack_options["gradient-inversion"]["batch_sizes"] == [1, 4]


def test_config_with_out_of_range_epsilon_is_a_one_line_config_error(tmp_path):
    from privacy_audit.audit.config import load_config
    from privacy_audit.ground.errors import ConfigError

    path = tmp_path / "c.toml"
    path.write_text('[[defenses]]\nname = "dp-attention"\nepsilon = 0.5\n')
    with pytest.raises(ConfigError, match=r"defenses\[0\]: eps=0.5 is outside .*force = true"):
        load_config(path)
    path.write_text('[[defenses]]\nname = "dp-attention"\nepsilon = 0.5\nforce = true\n')
    with pytest.warns(UserWarning, match="eps=0.5 is outside"):
        DEFENSES["dp-attention"](epsilon=0.5, force=True).config(8).validate()
    assert load_config(path).defenses[0].params["force"] is True


def test_membership_bounds_are_not_called_consistent_with_a_feature_column_claim(dp_release):
    from privacy_audit.reports.verdict import check_attack_claim

    release, *_ = dp_release
    for value in (0.01, 5.0):  # below and above the claimed 0.09
        run = {
            "claim": release.claim.to_dict(),
            "attacks": [
                {
                    "attack": "loss",
                    "status": "ok",
                    "metrics": {
                        "auc": {"value": 0.6, "ci_low": 0.55, "ci_high": 0.65},
                        "epsilon_lower_bound": {"value": value, "ceiling": 6.0, "delta": 1e-5},
                    },
                }
            ],
        }
        out = check_attack_claim(run)
        assert out["status"] == "not-comparable", out
        assert "no example, sequence or user unit" in out["text"]
