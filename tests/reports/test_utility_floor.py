"""The utility floor on comparisons in reports (issue 27): a defended run whose utility does
not clear its trivial baseline (unigram perplexity, majority class) makes the comparison
"not comparable", in the single-run report and in ``privacy-audit compare``."""

from __future__ import annotations

import json

import numpy as np

from privacy_audit.audit.commands.compare import compare_runs_cli
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface
from privacy_audit.reports.compare_view import utility_floor_checks
from privacy_audit.reports.run_comparison import compare_runs, did_not_learn


def _attack(auc, lo, hi):
    return {
        "attack": "loss",
        "status": "ok",
        "metrics": {"auc": {"value": auc, "ci_low": lo, "ci_high": hi}},
    }


def _lm_run(name, defense, ppl, lo, hi, auc, floor=217.0):
    return {
        "name": name,
        "defense": defense,
        "utility": {
            "metric": "perplexity",
            "value": ppl,
            "ci_low": lo,
            "ci_high": hi,
            "higher_is_better": False,
            "unigram_floor": floor,
        },
        "attacks": [_attack(*auc)],
    }


def _clf_run(name, defense, acc, lo, hi, auc, majority=0.313):
    return {
        "name": name,
        "defense": defense,
        "utility": {
            "metric": "accuracy",
            "value": acc,
            "ci_low": lo,
            "ci_high": hi,
            "higher_is_better": True,
            "majority_rate": majority,
        },
        "attacks": [_attack(*auc)],
    }


def test_a_defended_lm_worse_than_unigram_is_not_compared_on_leakage():
    # dp-blogs.toml as recorded: DP-SGD at perplexity 481, above the unigram model's ~217
    runs = [
        _lm_run("non-private", "none", 75.2, 59.8, 96.8, (1.0, 1.0, 1.0)),
        _lm_run("dp-sgd", "dp-sgd", 481.0, 473.0, 488.0, (0.59, 0.51, 0.66)),
    ]
    out = compare_runs(runs)
    pair = out["pairs"][0]
    assert pair["comparable"] is False
    assert "not comparable" in pair["text"] and "dp-sgd did not learn" in pair["text"]
    assert "measurably reduces" not in out["text"]
    # the same leakage numbers with a model that learned: the ordinary verdict
    runs[1] = _lm_run("dp-sgd", "dp-sgd", 90.0, 85.0, 95.0, (0.59, 0.51, 0.66))
    pair = compare_runs(runs)["pairs"][0]
    assert "comparable" not in pair and "measurably reduces" in pair["text"]


def test_a_classifier_at_the_majority_rate_did_not_learn():
    # DP-Forward as recorded: 0.272 [0.240, 0.304] with a majority rate of 0.313
    assert "did not learn" in did_not_learn(
        _clf_run("dp-forward", "dp-forward", 0.272, 0.240, 0.304, (0.5, 0.45, 0.55))
    )
    # the CI, not the point estimate, must clear the baseline
    assert did_not_learn(_clf_run("x", "x", 0.33, 0.30, 0.36, (0.5, 0.45, 0.55))) is not None
    assert did_not_learn(_clf_run("x", "x", 0.45, 0.42, 0.48, (0.5, 0.45, 0.55))) is None
    assert did_not_learn({"name": "no utility"}) is None
    # split-n-denoise records the same baseline as majority_class_rate
    snd = _clf_run("snd", "split-n-denoise", 0.30, 0.25, 0.35, (0.5, 0.45, 0.55))
    snd["utility"]["majority_class_rate"] = snd["utility"].pop("majority_rate")
    assert "did not learn" in did_not_learn(snd)


def test_evaluate_utility_records_the_majority_rate_it_must_clear():
    class Constant(ReleasedModel):
        surfaces = frozenset({Surface.PROBABILITIES})

        def probabilities(self, texts):
            return np.tile([0.9, 0.1, 0.0], (len(texts), 1))

    labels = np.array([0, 1, 1, 1, 2, 2, 1, 0])
    test = Examples([str(i) for i in range(8)], ["t"] * 8, labels)
    u = Constant().evaluate_utility(test)
    assert u["majority_rate"] == 4 / 8  # label 1, counted by hand
    assert u["value"] == 2 / 8  # always class 0: below the majority rate
    run = {"name": "constant", "utility": u}
    assert "did not learn" in did_not_learn(run)


def _results(runs, floor=None):
    res = {
        "tool": {"name": "privacy-audit"},
        "schema_version": 1,
        "title": "t",
        "runs": runs,
    }
    if floor is not None:
        res["utility_floor"] = {"floor": floor}
    return res


def test_compare_command_flags_defended_arms_at_chance(tmp_path, capsys):
    a = _results(
        [
            _lm_run("non-private", "none", 6.9, 6.7, 7.2, (0.67, 0.63, 0.71)),
            _lm_run("dp-sgd", "dp-sgd", 250.0, 240.0, 260.0, (0.51, 0.47, 0.55)),
        ],
        floor=217.0,
    )
    b = _results(
        [
            _lm_run("non-private", "none", 7.0, 6.8, 7.3, (0.66, 0.62, 0.70)),
            _lm_run("dp-sgd", "dp-sgd", 9.0, 8.7, 9.3, (0.52, 0.48, 0.56)),
        ],
        floor=217.0,
    )
    checks = utility_floor_checks([("a", a), ("b", b)])
    assert {(c["source"], c["run"]): c["learned"] for c in checks} == {
        ("a", "non-private"): True,
        ("a", "dp-sgd"): False,
        ("b", "non-private"): True,
        ("b", "dp-sgd"): True,
    }
    for name, res in (("a", a), ("b", b)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(res))
    page, _ = compare_runs_cli([str(tmp_path / "a"), str(tmp_path / "b")], tmp_path / "out")
    assert "a/dp-sgd: perplexity 250" in capsys.readouterr().out
    html = page.read_text()
    assert "Not comparable:" in html and "did not learn: not comparable" in html
    saved = json.loads((tmp_path / "out" / "compare.json").read_text())
    assert [c["learned"] for c in saved["utility_floor"]] == [True, False, True, True]
    # no baseline recorded: reported as not checked, never as learned
    c = utility_floor_checks([("c", _results([{"name": "x", "utility": {"value": 0.5}}]))])
    assert c[0]["learned"] is None


def test_a_pretrained_lm_that_does_not_end_below_its_public_start_did_not_learn():
    # dp-blogs in the bundled run: 9.50 [9.18, 9.84] against the public start 9.35
    # [9.05, 9.67] — far below the unigram floor, yet it learned nothing from the members,
    # so its LOW leakage is not a finding about the defense
    start = {"value": 9.35, "ci_low": 9.05, "ci_high": 9.67}
    base = _lm_run("non-private", "none", 6.67, 6.50, 6.84, (0.546, 0.521, 0.570))
    blogs = _lm_run("dp-blogs", "dp-blogs", 9.50, 9.18, 9.84, (0.516, 0.491, 0.541))
    sgd = _lm_run("dp-sgd", "dp-sgd", 8.19, 7.95, 8.42, (0.528, 0.503, 0.552))
    for r in (base, blogs, sgd):
        r["utility"]["public_start"] = dict(start)
    why = did_not_learn(blogs)
    assert why is not None and "public-only start 9.35 [9.05, 9.67]" in why
    assert did_not_learn(sgd) is None and did_not_learn(base) is None
    pairs = {p["run"]: p for p in compare_runs([base, blogs, sgd])["pairs"]}
    assert (
        pairs["dp-blogs"]["comparable"] is False and "not comparable" in pairs["dp-blogs"]["text"]
    )
    assert "comparable" not in pairs["dp-sgd"]
