"""The DP-Forward paper-setting experiment's learning-rate selection and its claims row
(experiments/claims.py reading docs/records/dp-forward-paper-setting.json)."""

from __future__ import annotations

import json

import pytest

from experiments.claims import NOT_COMPARABLE, SETTING_DIFFERS, build_claims, follow
from experiments.dp_forward_paper_setting import select_learning_rate

SOURCE = "docs/records/dp-forward-paper-setting.json"


def _cell(val: float, test: tuple[float, float, float]) -> dict:
    v, lo, hi = test
    return {
        "validation": {"value": val, "ci_low": val - 0.05, "ci_high": val + 0.05, "n": 300},
        "test": {"value": v, "ci_low": lo, "ci_high": hi, "n": 1000},
        "central_epsilon_claimed": 7.99,
    }


def _doc(dpf, sgd, nonpriv=(0.80, 0.77, 0.82), majority=(0.31, 0.28, 0.34)) -> dict:
    """A recorded run in the experiment's schema: one seed, a 3-point grid per arm."""
    lrs = [1e-4, 3e-4, 1e-3]

    def arm(test, best):
        grid = {
            f"{lr:g}": {
                "per_seed": [_cell(0.6 if i == best else 0.4, test)],
                "validation": {"mean": 0.6 if i == best else 0.4, "n_seeds": 1},
                "test": {"mean": test[0], "n_seeds": 1},
            }
            for i, lr in enumerate(lrs)
        }
        sel = select_learning_rate(grid, lrs)
        t = {"value": test[0], "ci_low": test[1], "ci_high": test[2], "n": 1000}
        return {**sel, "test_accuracy": t, "grid": grid}

    rows = {"non-private": arm(nonpriv, 0), "dp-forward": arm(dpf, 2), "dp-sgd": arm(sgd, 1)}
    v, lo, hi = majority
    return {
        "command": "privacy-audit experiment dp-forward-paper-setting --seeds 1 --n-train 1500",
        "setup": {
            "preset": "minilm",
            "n_train": 1500,
            "n_val": 300,
            "n_test": 1000,
            "max_length": 32,
            "lr_grid": lrs,
            "seeds": [0],
            "delta": 1e-5,
            "classes": ["a", "b", "c", "d"],
            "shuffle_assumption": "shuffling modelled as Poisson subsampling with q = 1/N",
            "majority_class": {"value": v, "ci_low": lo, "ci_high": hi, "n": 1000, "class": "a"},
        },
        "dp_forward_accounting": {
            "noise_multiplier_z": 0.48,
            "local_epsilon_per_release_joint": 12.6,
            "central_epsilon_claimed": 7.99,
            "paper_separate_composition": {"sum": 4.41},
        },
        "rows": rows,
        "comparison": {"dp_forward_minus_dp_sgd": dpf[0] - sgd[0]},
    }


def _row(tmp_path, doc):
    (tmp_path / "dp-forward-paper-setting.json").write_text(json.dumps(doc))
    return next(r for r in build_claims(tmp_path) if r["source"] == SOURCE)


def test_lr_selection_takes_the_best_validation_rate_and_flags_the_grid_edge():
    def grid(vals):
        return {
            f"{lr:g}": {"validation": {"mean": v}} for lr, v in zip([1, 2, 3], vals, strict=True)
        }

    assert select_learning_rate(grid([0.5, 0.7, 0.6]), [1, 2, 3]) == {
        "selected_lr": 2,
        "selected_at_grid_edge": False,
        "edge": None,
    }
    top = select_learning_rate(grid([0.5, 0.6, 0.7]), [1, 2, 3])
    assert top["selected_lr"] == 3 and top["selected_at_grid_edge"] and top["edge"] == "highest"
    tie = select_learning_rate(grid([0.7, 0.7, 0.6]), [1, 2, 3])
    assert tie["selected_lr"] == 1 and tie["edge"] == "lowest"  # ties: the smaller rate


def test_dp_forward_at_chance_makes_the_paper_setting_row_not_comparable(tmp_path):
    r = _row(tmp_path, _doc(dpf=(0.30, 0.27, 0.33), sgd=(0.60, 0.57, 0.63)))
    assert r["verdict"] == NOT_COMPARABLE  # the interval alone says refuted
    assert r["verdict_reason"] == "arm DP-Forward did not learn"
    assert {c["arm"]: c["cleared"] for c in r["floor_checks"]} == {
        "DP-Forward": False,
        "DP-SGD": True,
        "non-private": True,
    }
    # the floor is the majority class with its CI, not a bare rate
    assert {c["baseline_ci_high"] for c in r["floor_checks"]} == {0.34}
    assert "refuted" in r["detail"]


def test_paper_setting_row_names_what_still_differs_and_its_assumptions(tmp_path):
    doc = _doc(dpf=(0.70, 0.67, 0.73), sgd=(0.60, 0.57, 0.63))
    r = _row(tmp_path, doc)
    assert r["verdict"] == SETTING_DIFFERS
    reason = r["verdict_reason"]
    for words in ("MiniLM", "fixture corpus", "N = 1500", "composed before subsampling", "4.41"):
        assert words in reason, words
    assert "learning rate chosen per arm" in reason
    # the measurement alone, the shuffle assumption and each arm's rate are in the detail
    assert "(the measurement alone: reproduced)" in r["detail"]
    assert "Poisson subsampling" in r["detail"]
    assert "DP-Forward 0.700 [0.670, 0.730] (lr 0.001)" in r["detail"]
    assert "DP-SGD 0.600 [0.570, 0.630] (lr 0.0003)" in r["detail"]
    assert "at the grid's edge: DP-Forward, non-private" in r["detail"]
    assert r["ours"] == pytest.approx(0.10) == follow(doc, r["pointer"])
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((0.67 - 0.63, 0.73 - 0.57))
    assert r["command"].startswith("privacy-audit experiment dp-forward-paper-setting")
    assert "--out docs/records/dp-forward-paper-setting.json" in r["command"]


def test_far_end_difference_of_two_paired_exact_cis_covers_at_least_90_percent():
    # The paper-setting row quotes DP-Forward − DP-SGD as [lo_F − hi_S, hi_F − lo_S] from the
    # two arms' 95% Clopper–Pearson intervals over the SAME test texts (paired, correlated).
    # The union bound promises >= 90%; measure it by simulation at the recorded n and rates.
    import numpy as np
    from scipy.stats import binomtest

    rng = np.random.default_rng(0)
    n, p_f, p_s, reps = 1000, 0.706, 0.681, 200
    covered = 0
    for _ in range(reps):
        # correlated correctness: a shared "easy text" component
        easy = rng.random(n) < 0.6
        f = np.where(easy, rng.random(n) < p_f + 0.15, rng.random(n) < p_f - 0.225)
        s = np.where(easy, rng.random(n) < p_s + 0.15, rng.random(n) < p_s - 0.225)
        cf = binomtest(int(f.sum()), n).proportion_ci(0.95, method="exact")
        cs = binomtest(int(s.sum()), n).proportion_ci(0.95, method="exact")
        covered += cf.low - cs.high <= p_f - p_s <= cf.high - cs.low
    assert covered / reps >= 0.90, covered
