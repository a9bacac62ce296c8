"""Shadow-model attacks: LiRA and RMIA math on synthetic data, and the LiRA known answer on
the fixture target with 16 shadow models."""

from __future__ import annotations

import json

import numpy as np
import pytest

from privacy_audit.attacks.shadow import (
    inclusion_design,
    lira_scores,
    logit_confidence_from_loss,
    rmia_scores,
)
from privacy_audit.stats.metrics import auc, tpr_at_fpr


def test_inclusion_design_puts_every_example_in_exactly_half_the_models():
    keep = inclusion_design(16, 300, seed=3)
    assert keep.shape == (16, 300)
    assert np.all(keep.sum(axis=0) == 8)
    assert 0.4 < keep.sum(axis=1).mean() / 300 < 0.6  # random halves per model
    assert np.array_equal(keep, inclusion_design(16, 300, seed=3))
    assert not np.array_equal(keep, inclusion_design(16, 300, seed=4))
    with pytest.raises(ValueError, match="even"):
        inclusion_design(3, 10, 0)


def test_logit_confidence_is_stable_at_the_extremes():
    p = np.array([0.5, 0.9, 1e-12, 1 - 1e-12])
    phi = logit_confidence_from_loss(-np.log(p))
    assert np.allclose(phi[:2], np.log(p[:2] / (1 - p[:2])))
    assert np.isfinite(phi).all() and phi[2] < -25 and phi[3] > 25
    assert np.isfinite(logit_confidence_from_loss(np.array([0.0])))  # p_y rounded to 1


def _synthetic(n=400, m=16, seed=0, gap=1.0, hard_frac=0.5):
    """Per-example φ: OUT ~ N(μ_x, 1), IN ~ N(μ_x + gap·h_x, 1), μ_x varying a lot across
    examples (what defeats a global threshold) and h_x = 1 for a subset of examples."""
    rng = np.random.default_rng(seed)
    mu = rng.normal(0, 3, n)
    h = (rng.uniform(size=n) < hard_frac).astype(float)
    keep = inclusion_design(m, n, seed)
    shadow = mu + gap * h * keep + rng.normal(0, 1, (m, n)) * 0.5
    member = np.zeros(n, dtype=int)
    member[rng.permutation(n)[: n // 2]] = 1
    target = mu + gap * h * member + rng.normal(0, 0.5, n)
    return target, shadow, keep, member


def test_lira_beats_a_global_threshold_when_examples_differ_in_difficulty():
    target, shadow, keep, member = _synthetic(n=2000, gap=3.0)
    online = lira_scores(target, shadow, keep, online=True)
    offline = lira_scores(target, shadow, keep, online=False)
    fixed = lira_scores(target, shadow, keep, online=True, fixed_variance=True)
    for s in (online, offline, fixed):
        assert tpr_at_fpr(s, member, 0.01) > 3 * tpr_at_fpr(target, member, 0.01) + 0.05
    # the offline score is a log CDF: monotone in φ for a fixed example
    assert np.all(offline <= 0)


def test_lira_and_rmia_are_at_chance_without_membership_signal():
    target, shadow, keep, member = _synthetic(n=2000, gap=0.0)
    for s in (
        lira_scores(target, shadow, keep),
        rmia_scores(np.exp(-np.abs(target)), np.exp(-np.abs(shadow)), keep, np.arange(1500, 2000))[
            0
        ],
    ):
        assert abs(auc(s[:1500], member[:1500]) - 0.5) < 0.06


def test_rmia_counts_population_samples_it_dominates():
    # 2 reference models, 3 population samples; the target gives x twice the reference prob
    shadow_p = np.array([[0.2, 0.4, 0.2, 0.1, 0.3], [0.2, 0.4, 0.2, 0.1, 0.3]])
    keep = np.array([[True, False, True, False, True], [False, True, False, True, False]])
    target_p = np.array([0.4, 0.4, 0.2, 0.1, 0.9])
    scores, ratio = rmia_scores(target_p, shadow_p, keep, population=np.array([2, 3, 4]))
    assert np.allclose(ratio, [2.0, 1.0, 1.0, 1.0, 3.0])
    # x0: ratio 2 beats z2, z3 (ratio 1) but not z4 (3) -> 2/3; x1: beats none -> 0
    assert scores[0] == pytest.approx(2 / 3) and scores[1] == 0
    off, _ = rmia_scores(target_p, shadow_p, keep, np.array([2, 3, 4]), online=False, a=0.0)
    assert off.shape == (5,)
    with pytest.raises(ValueError, match="population"):
        rmia_scores(target_p, shadow_p, keep, np.array([], dtype=int))


def test_misaligned_shadow_outputs_are_rejected():
    with pytest.raises(ValueError, match="line up"):
        lira_scores(np.zeros(3), np.zeros((4, 5)), np.zeros((4, 5), bool))
    keep = inclusion_design(2, 3, 0)
    with pytest.raises(ValueError, match="NaN"):
        lira_scores(np.array([0.0, np.nan, 1.0]), np.zeros((2, 3)), keep)


LIRA_CONFIG = """\
title = "LiRA known answer"
seed = 0
[data]
n_members = 100
n_nonmembers = 100
n_test = 50
[target]
preset = "tiny"
max_length = 16
[train]
epochs = 8
batch_size = 20
learning_rate = 2e-3
[[defenses]]
name = "none"
label = "non-private"
[metrics]
bootstrap = 100
[shadow]
n_models = 16
population = 0
attacks = ["lira-online"]
"""


def test_lira_known_answer_on_the_fixture_target(tmp_path, cli):
    """16 shadow models: online LiRA beats every threshold attack at TPR@1%FPR on the
    non-private model, and the report shows its row."""
    cfg = tmp_path / "lira.toml"
    cfg.write_text(LIRA_CONFIG, encoding="utf-8")
    out = tmp_path / "out"
    outcome = cli(["run", str(cfg), "--out", str(out), "--quiet"])
    assert outcome.code == 0, outcome.stderr
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    (run,) = res["runs"]
    by = {a["attack"]: a for a in run["attacks"]}
    assert set(by) == {"loss", "confidence", "entropy", "modified-entropy", "lira-online"}
    # 100 non-members cannot resolve TPR at 1% FPR (one false positive): it is stored as
    # null with its reason, for LiRA as for every attack. (This test once asserted that
    # LiRA beats the threshold attacks there; at 5% FPR, the lowest rate 100 non-members
    # resolve, their intervals overlap, so that claim is not supported at this n.)
    for a in by.values():
        assert a["metrics"]["tpr_at_fpr_0.01"]["below_resolution"] is True
        assert a["metrics"]["tpr_at_fpr_0.01"]["value"] is None
    lira = by["lira-online"]["metrics"]["auc"]
    assert lira["ci_low"] > 0.5, lira  # LiRA measures membership on the non-private model
    assert lira["ci_low"] <= lira["value"] <= lira["ci_high"]
    assert by["lira-online"]["n_members"] == 100 and by["lira-online"]["n_nonmembers"] == 100
    assert "16 shadow models" in by["lira-online"]["description"]
    assert res["config"]["shadow"]["n_models"] == 16
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "lira-online" in html and "LiRA online" in html
    # 1 target + 16 shadow trainings + 1 scoring task, each kept in the run directory
    assert len(list((out / "run" / "tasks").glob("*.json"))) == 18


def test_lira_variance_default_is_global_below_64_shadow_models():
    """``[shadow] fixed_variance = "auto"`` (the default): one median σ below 64 shadow
    models, per-example σ from 64 on; an explicit true/false is kept."""
    from privacy_audit.audit.config import parse_config
    from privacy_audit.audit.scale.plan import lira_fixed_variance

    cfg = parse_config({"data": {"n_members": 10}, "defenses": [{"name": "none"}], "shadow": {}})
    assert cfg.shadow["fixed_variance"] == "auto"
    assert lira_fixed_variance("auto", 16) is True and lira_fixed_variance("auto", 64) is False
    assert lira_fixed_variance(False, 4) is False and lira_fixed_variance(True, 128) is True
