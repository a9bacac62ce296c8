"""Gradient inversion against the released gradient updates of the classifier defenses."""

from __future__ import annotations

import pytest

from privacy_audit import fixtures
from privacy_audit.attacks import LEAKAGE_ATTACKS
from privacy_audit.attacks.base import AttackContext, MetricSettings, run_leakage_attack
from privacy_audit.attacks.gradient_inversion import (
    GradientInversionAttack,
    recover_labels,
    rouge_n,
    token_recall,
)
from privacy_audit.defenses.base import Examples, PrivacyClaim
from privacy_audit.defenses.gradient_mechanism import GaussianGradientMechanism
from privacy_audit.targets.classifier import ClassifierRelease
from privacy_audit.targets.loading import TargetSpec


@pytest.fixture(scope="module")
def trained():
    """The tiny classifier released without privacy and through DP-SGD's gradient
    mechanism at ε = 8 (σ calibrated by Opacus for the default audit's schedule:
    q = 64/1000, 8 epochs, δ = 1e-5, clip C = 1)."""
    from opacus.accountants.utils import get_noise_multiplier

    rows = fixtures.load_corpus("private")[:120]
    labels = sorted({r["label"] for r in fixtures.load_corpus("private")})
    ex = Examples(
        [r["id"] for r in rows],
        [r["text"] for r in rows],
        [labels.index(r["label"]) for r in rows],
    )
    pub = fixtures.load_corpus("public")[:200]
    public = Examples([r["id"] for r in pub], [r["text"] for r in pub], [0] * len(pub))
    sigma = get_noise_multiplier(
        target_epsilon=8.0, target_delta=1e-5, sample_rate=64 / 1000, epochs=8, accountant="rdp"
    )
    model, tokenizer = TargetSpec("tiny", None, 32, 0).build(labels, 0)
    releases = {
        name: ClassifierRelease(
            model, tokenizer, 32, PrivacyClaim.none(), labels, gradient_mechanism=mech
        )
        for name, mech in (
            ("none", GaussianGradientMechanism(None)),
            ("dp-sgd", GaussianGradientMechanism(1.0, sigma)),
        )
    }
    ctx = AttackContext(ex, ex, public, None, MetricSettings(n_boot=300), seed=0)
    return releases, ctx


def test_metrics():
    assert token_recall([1, 2, 2, 3], [2, 3, 3, 9]) == 0.5
    assert rouge_n([1, 2, 3], [1, 2, 3], 2) == 1.0
    assert rouge_n([1, 2, 3], [3, 2, 1], 2) == 0.0
    assert rouge_n([1, 2, 3], [3, 2, 1], 1) == 1.0


def test_idlg_label_recovery():
    import torch

    assert recover_labels(torch.tensor([0.2, -0.7, 0.5]), 1) == [1]
    # batch of 4 with labels {0, 0, 2, 1} under near-uniform probabilities (C = 3)
    y = torch.tensor([0, 0, 2, 1])
    g = (torch.full((4, 3), 1 / 3) - torch.nn.functional.one_hot(y, 3)).mean(0)
    assert sorted(recover_labels(g, 4)) == [0, 0, 1, 2]


def test_non_private_recall_is_high_and_dp_sgd_markedly_lower(trained):
    releases, ctx = trained
    attack = GradientInversionAttack(sequences=20, batch_sizes=[1], steps=4, objective="tag")
    res = {name: run_leakage_attack(attack, rel, ctx) for name, rel in releases.items()}
    plain, dp = res["none"].metrics, res["dp-sgd"].metrics
    assert res["none"].status == "ok", res["none"].reason
    assert plain["token_recall_b1"]["n"] == 20 and dp["token_recall_b1"]["n"] == 20
    assert plain["token_recall_b1"]["value"] >= 0.9
    assert plain["label_recovery_b1"]["value"] >= 0.9
    # markedly lower: the CIs are disjoint, and no better than guessing frequent tokens
    assert dp["token_recall_b1"]["ci_high"] < plain["token_recall_b1"]["ci_low"]
    assert dp["token_recall_b1"]["value"] <= dp["token_recall_b1_baseline"]["ci_high"]
    assert res["none"].details["mechanism_private"] is False
    assert res["dp-sgd"].details["mechanism_private"] is True


@pytest.mark.parametrize("objective", ["l2", "cosine", "tag"])
def test_each_objective_lowers_its_gradient_mismatch(trained, objective):
    releases, ctx = trained
    attack = GradientInversionAttack(sequences=1, batch_sizes=[1], steps=12, objective=objective)
    d = attack.run(releases["none"], ctx).details
    assert d["objective_last_step_mean"] < 0.9 * d["objective_first_step_mean"]


def test_continuous_optimisation_alone_beats_guessing_frequent_tokens(trained):
    releases, ctx = trained
    attack = GradientInversionAttack(
        sequences=2, batch_sizes=[1], steps=60, objective="tag", token_prior="none"
    )
    m = attack.run(releases["none"], ctx).metrics
    assert m["token_recall_b1"]["value"] > m["token_recall_b1_baseline"]["value"]


def test_batch_of_four_reports_all_metrics(trained):
    releases, ctx = trained
    res = GradientInversionAttack(sequences=4, batch_sizes=[4], steps=2).run(releases["none"], ctx)
    for key in ("token_recall", "rouge1", "rouge2", "exact_sequence", "label_recovery"):
        assert key + "_b4" in res.metrics
    assert res.metrics["token_recall_b4"]["n"] == 4
    assert res.metrics["token_recall_b4"]["value"] >= 0.5


def test_memory_budget_and_bad_options(trained):
    releases, ctx = trained
    attack = GradientInversionAttack(batch_sizes=[100_000], memory_budget_mb=512)
    res = run_leakage_attack(attack, releases["none"], ctx)
    assert res.status == "error"
    assert "batch size 100000" in res.reason and "memory budget of 512 MiB" in res.reason
    for bad, match in (
        ({"objective": "l3"}, "objective"),
        ({"batch_sizes": [0]}, "batch_sizes"),
        ({"token_prior": "oracle"}, "token_prior"),
    ):
        with pytest.raises(ValueError, match=match):
            GradientInversionAttack(**bad)
    assert "gradient-inversion" in LEAKAGE_ATTACKS


def test_language_model_releases_are_inverted_too():
    """The LM target's releases (none, dp-blogs, phantom-dp-sgd on the LM): the causal
    loss's gradient gives the order too, so whole sequences come back without privacy."""
    from privacy_audit.targets.lm import LMRelease, build_lm_target

    rows = fixtures.load_corpus("private")[:60]
    ex = Examples([r["id"] for r in rows], [r["text"] for r in rows], [0] * len(rows))
    model, tokenizer = build_lm_target("tiny-gpt2-word", 0)
    ctx = AttackContext(ex, ex, None, None, MetricSettings(n_boot=200), seed=0)
    attack = GradientInversionAttack(sequences=4, batch_sizes=[1], steps=30)
    out = {}
    for name, mech in (
        ("none", GaussianGradientMechanism(None)),
        ("noised", GaussianGradientMechanism(1.0, 0.7)),
    ):
        rel = LMRelease(model, tokenizer, 64, PrivacyClaim.none(), gradient_mechanism=mech)
        out[name] = attack.run(rel, ctx).metrics
    assert out["none"]["token_recall_b1"]["value"] >= 0.9
    assert out["none"]["rouge2_b1"]["value"] >= 0.8
    assert "label_recovery_b1" not in out["none"]  # a language model has no labels
    assert out["noised"]["token_recall_b1"]["value"] < 0.3


def test_idlg_counts_use_the_models_mean_prediction():
    import torch

    # a confident model: mean prediction far from uniform; labels {0, 1, 1, 1}
    p = torch.tensor([[0.1, 0.8, 0.1], [0.2, 0.7, 0.1], [0.1, 0.8, 0.1], [0.1, 0.8, 0.1]])
    y = torch.tensor([0, 1, 1, 1])
    g = (p - torch.nn.functional.one_hot(y, 3)).mean(0)
    assert sorted(recover_labels(g, 4, p.mean(0).numpy())) == [0, 1, 1, 1]
    assert sorted(recover_labels(g, 4)) != [0, 1, 1, 1]  # the uniform guess gets it wrong
