"""The LM defenses end to end: phantom-dp-sgd, re-attention, Opacus dp-sgd and none on the
tied GPT-2 target, through the config and runner, plus the report's cost-of-privacy table."""

from __future__ import annotations

import json

import pytest

from privacy_audit.audit.config import load_config, parse_config
from privacy_audit.audit.runner import run_audit
from privacy_audit.defenses.base import Examples
from privacy_audit.defenses.phantom_dp_sgd import PhantomDPSGD
from privacy_audit.ground.errors import AuditError
from privacy_audit.targets.classifier import TrainingConfig


def test_bundled_lm_config_lists_the_four_runs():
    cfg = load_config("lm")
    assert [d.name for d in cfg.defenses] == ["none", "dp-sgd", "phantom-dp-sgd", "re-attention"]
    assert cfg.target.preset == "tiny-gpt2-word"


def test_small_lm_audit_attacks_every_defense(tmp_path):
    raw = {
        "seed": 0,
        "data": {"n_members": 24, "n_nonmembers": 24, "n_test": 12},
        "target": {"preset": "tiny-gpt2-word", "max_length": 40},
        "train": {"epochs": 2, "batch_size": 8, "learning_rate": 3e-3},
        "defenses": [
            {"name": "none"},
            {"name": "dp-sgd", "epsilon": 8.0, "accountant": "rdp"},  # fast calibration
            {"name": "phantom-dp-sgd", "noise_multiplier": 0.85, "accountant": "rdp"},
            {"name": "re-attention", "noise_multiplier": 0.85, "accountant": "rdp"},
        ],
        "attacks": {"names": ["loss", "confidence"]},
        "metrics": {"bootstrap": 100},
    }
    res = run_audit(parse_config(raw), progress=False)
    runs = {r["defense"]: r for r in res["runs"]}
    assert set(runs) == {"none", "dp-sgd", "phantom-dp-sgd", "re-attention"}
    for name, run in runs.items():
        assert run["utility"]["metric"] == "perplexity"
        assert run["utility"]["ci_low"] <= run["utility"]["value"] <= run["utility"]["ci_high"]
        assert all(a["status"] == "ok" for a in run["attacks"]), name
        if name != "none":
            claim = run["claim"]
            assert claim["unit"] == "sequence" and claim["proven"]
            if name == "dp-sgd":  # calibrated to ε = 8
                assert 7.5 < claim["epsilon"] <= 8.0 * 1.01
            else:  # σ given: ε is accounted; RDP is the looser bound, so it is the claim
                rdp = run["training"]["epsilon_opacus_rdp"]
                assert claim["epsilon"] == rdp and 1.0 < rdp < 20.0
            pld = claim["details"]["epsilon_dp_accounting_pld"]
            assert claim["epsilon"] >= pld  # the claim is the larger accountant
    assert "UNTIED" in runs["dp-sgd"]["claim"]["note"]
    assert runs["re-attention"]["training"]["re_attention"]["p_source"] == "public"
    assert runs["phantom-dp-sgd"]["training"]["norms"] == "phantom"


def test_phantom_defense_refuses_a_classifier_target():
    from privacy_audit.targets.loading import Target, TargetSpec

    target = Target(TargetSpec("tiny", None, 32, 0), ("a", "b"), None, "cpu", False)
    ex = Examples(["0"], ["hello"], [0])
    with pytest.raises(ValueError, match="preset = 'tiny-gpt2'"):
        PhantomDPSGD().fit(target, ex, TrainingConfig(epochs=1), 0)
    with pytest.raises(ValueError, match="noise multiplier must be a finite number >= 0"):
        PhantomDPSGD(noise_multiplier=-1)


def _bench_json(path, quick=False):
    rows = [
        {
            "vocab": v,
            "phantom_time_x_nonprivate": 1.2 + i,
            "explicit_time_x_nonprivate": 3.5 + i,
            "opacus_time_x_nonprivate": 4.0,
            "explicit_over_phantom_time": 2.9,
            "opacus_over_phantom_time": 3.3,
            "phantom_memory_x_nonprivate": 1.1,
            "explicit_memory_x_nonprivate": 3.0,
            "opacus_memory_x_nonprivate": 2.5,
        }
        for i, v in enumerate((2048, 16384))
    ]
    bench = {"name": "cost-of-privacy", "setup": {"batch_size": 32, "cost_of_privacy_table": rows}}
    path.write_text(json.dumps({"settings": {"quick": quick}, "benchmarks": [bench]}))
    return rows


def test_report_gains_a_cost_of_privacy_table(tmp_path):
    from privacy_audit.audit.cost_of_privacy_table import cost_table_from_bench_json
    from privacy_audit.reports import render_html

    bench = tmp_path / "bench.json"
    rows = _bench_json(bench)
    table = cost_table_from_bench_json(bench)
    assert table["rows"] == rows and table["setup"] == {"batch_size": 32}
    results = {"schema_version": 1, "runs": [], "cost_of_privacy": table}
    html = render_html(results)
    assert 'id="cost-of-privacy"' in html and "3.50\u00d7" in html and "16384" in html
    (tmp_path / "other.json").write_text(json.dumps({"benchmarks": [{"name": "dp-sgd"}]}))
    with pytest.raises(AuditError, match="no cost-of-privacy result"):
        cost_table_from_bench_json(tmp_path / "other.json")
    with pytest.raises(AuditError, match="does not exist"):
        cost_table_from_bench_json(tmp_path / "missing.json")
    cfg = parse_config({"report": {"bench": "bench.json"}}, base_dir=tmp_path)
    assert cfg.bench == str(bench)
