"""The leakage-attack contract: results, not-applicable/error handling, config options,
aggregate-only sample dropping and the report section."""

from __future__ import annotations

import numpy as np
import pytest

from privacy_audit import attacks
from privacy_audit.attacks.base import (
    AttackContext,
    LeakageAttack,
    LeakageResult,
    mean_estimate,
    proportion_estimate,
    run_leakage_attack,
)
from privacy_audit.audit.config import parse_config
from privacy_audit.audit.results import assemble_results, run_record
from privacy_audit.defenses.base import Examples, PrivacyClaim, ReleasedModel, Surface
from privacy_audit.ground.errors import ConfigError
from privacy_audit.reports import render_html


class _Release(ReleasedModel):
    surfaces = frozenset({Surface.HIDDEN})
    claim = PrivacyClaim(
        1.0, 1e-5, "token", "local-dp", None, False, details={"central_epsilon": 0.1}
    )
    label_names = ["a", "b"]

    def hidden(self, texts):
        return np.ones((len(texts), 2))


class _Recall(LeakageAttack):
    name = "toy-recall"
    description = "toy"
    kind = "reconstruction"
    requires = frozenset({Surface.HIDDEN})
    OPTIONS = {"k": (int, 3)}

    def validate(self):
        if self.options["k"] <= 0:
            raise ValueError("k must be positive")

    def run(self, release, context):
        if context.options.get("k") == 99:
            raise ValueError("k too large for this data")
        return LeakageResult(
            self.name,
            self.kind,
            headline="token_recall",
            metrics={"token_recall": proportion_estimate(7, 10)},
            samples=[{"original": "<script>alert(1)</script>", "reconstructed": "x"}],
        )


class _NeedsTokens(_Recall):
    name = "toy-tokens"
    requires = frozenset({Surface.TOKEN_HIDDEN})


def _examples(n=4, members=None):
    return Examples(
        [f"d{i}" for i in range(n)],
        [f"t{i}" for i in range(n)],
        [0, 1] * (n // 2),
        members,
        ["x"] * n,
    )


def test_estimates_carry_intervals_and_counts():
    p = proportion_estimate(7, 10)
    assert p["value"] == 0.7 and p["n"] == 10 and p["ci_low"] < 0.7 < p["ci_high"]
    m = mean_estimate([0.0, 1.0] * 50, seed=1)
    assert m["ci_low"] < 0.5 < m["ci_high"] and m["n"] == 100
    with pytest.raises(ValueError, match="at least one trial"):
        proportion_estimate(0, 0)
    with pytest.raises(ValueError, match="NaN"):
        mean_estimate([1.0, float("nan")])


def test_result_validates_kind_and_headline():
    with pytest.raises(ValueError, match="unknown leakage kind"):
        LeakageResult("a", "membership")
    with pytest.raises(ValueError, match="headline"):
        LeakageResult("a", "reconstruction", headline="missing", metrics={})


def test_runner_helpers_never_raise_for_missing_surface_or_value_error():
    ctx = AttackContext(_examples(), _examples())
    ok = run_leakage_attack(_Recall(), _Release(), ctx)
    assert ok.status == "ok" and ok.surfaces == ["hidden"] and ok.description == "toy"
    na = run_leakage_attack(_NeedsTokens(), _Release(), ctx)
    assert na.status == "not_applicable" and "token_hidden" in na.reason
    ctx.options = {"k": 99}
    err = run_leakage_attack(_Recall(k=3), _Release(), ctx)
    assert err.status == "error" and "too large" in err.reason
    with pytest.raises(ValueError, match="unknown option"):
        _Recall(j=1)


def test_examples_keep_attributes_through_subset_and_concat():
    e = _examples(4, np.array([1, 1, 0, 0]))
    both = e.subset([0, 2]).concat(e.subset([1]))
    assert both.attributes == ["x", "x", "x"] and list(both.members) == [1, 0, 1]
    with pytest.raises(ValueError, match="attributes"):
        Examples(["a"], ["t"], [0], attributes=["x", "y"])


def test_config_options_are_validated(monkeypatch):
    monkeypatch.setitem(attacks.LEAKAGE_ATTACKS, "toy-recall", _Recall)
    monkeypatch.setattr("privacy_audit.audit.config.LEAKAGE_ATTACKS", attacks.LEAKAGE_ATTACKS)
    base = {"attacks": {"names": ["loss", "toy-recall"]}}
    cfg = parse_config(
        {**base, "attacks": {**base["attacks"], "options": {"toy-recall": {"k": 5}}}}
    )
    assert cfg.attack_options == {"toy-recall": {"k": 5}}
    for bad, msg in [
        ({"toy-recall": {"k": 0}}, "k must be positive"),
        ({"toy-recall": {"q": 1}}, "unknown config key"),
        ({"toy-recall": {"k": "5"}}, "must be"),
        ({"loss": {}}, "names no leakage attack"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            parse_config({"attacks": {"names": ["loss", "toy-recall"], "options": bad}})


def test_record_report_and_aggregate_only():
    res = run_leakage_attack(_Recall(), _Release(), AttackContext(_examples(), _examples()))
    for aggregate in (False, True):
        run = run_record(
            "r", "toy", _Release.claim, None, [], leakage=[res], aggregate_only=aggregate
        )
        leak = run["leakage"][0]
        assert leak["headline"] == "token_recall" and leak["metrics"]["token_recall"]["n"] == 10
        assert (leak["samples"] == []) is aggregate
        html = render_html(assemble_results([run], "t", 0, {}, aggregate))
        assert "Leakage beyond membership" in html and "central_epsilon" in html
        assert "<script>alert(1)" not in html
        assert ("&lt;script&gt;" in html) is (not aggregate)
