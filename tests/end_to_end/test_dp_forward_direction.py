"""Small-scale reproduction of the DP-Forward paper's direction on the fixture corpus, and the
bundled-report integration (dp-forward beside none and dp-sgd, privacy-utility plot).

One tiny BERT is pretrained on the public split (shared by every run), then fine-tuned on
400 members without privacy and under dp-forward at several positions and ε. Comparisons
use the 95% intervals the suite reports, or a one-sided two-proportion z-test.
"""

from __future__ import annotations

import json
import math

import pytest
from scipy.stats import norm

from privacy_audit.attacks import (
    ATTACKS,
    LEAKAGE_ATTACKS,
    AttackContext,
    MetricSettings,
    run_attack,
)
from privacy_audit.attacks.base import run_leakage_attack
from privacy_audit.audit.data import load_audit_data
from privacy_audit.defenses.dp_forward import DPForward
from privacy_audit.defenses.none import NonPrivate
from privacy_audit.targets.classifier import TrainingConfig
from privacy_audit.targets.loading import Target, TargetSpec

N = 400


@pytest.fixture(scope="module")
def direction():
    data_cfg = {
        "corpus": "fixtures",
        "members": None,
        "nonmembers": None,
        "test": None,
        "public": None,
        "n_members": N,
        "n_nonmembers": N,
        "n_test": N,
        "text_column": "text",
        "label_column": "label",
        "id_column": "id",
    }
    data = load_audit_data(data_cfg, 0, True)
    target = Target(
        TargetSpec("tiny", None, 32, 4), tuple(data.label_names), data.public, "cpu", False
    )
    training = TrainingConfig(epochs=4, batch_size=32, max_length=32, progress=False)
    settings = MetricSettings(n_boot=300)
    context = AttackContext(data.members, data.nonmembers, data.public, data.test, settings)
    runs = {
        "none": NonPrivate(),
        # trained with noise, but inference uploads are clean: the inversion/attribute baseline
        "embedding-clean": DPForward(position="embedding", noise_at_inference=False),
        "embedding": DPForward(position="embedding", epsilon=8.0),
        "pooled-8": DPForward(position="pooled", epsilon=8.0),
        "pooled-32": DPForward(position="pooled", epsilon=32.0),
    }
    out = {}
    for name, defense in runs.items():
        release, _ = defense.fit(target, data.members, training, 0)
        rec = {"utility": release.evaluate_utility(data.test)}
        rec["loss"] = run_attack(ATTACKS["loss"](), release, data.attack_set(), settings).metrics
        # leakage attacks only where a test reads them (time budget)
        attacks = ("inversion-nn",) if name in ("none", "pooled-8") else ()
        if name.startswith("embedding"):
            attacks = ("inversion-nn", "inversion-relaxed", "attribute-inference")
        for attack in attacks:
            opts = {"n_sequences": 8, "steps": 100} if attack == "inversion-relaxed" else {}
            rec[attack] = run_leakage_attack(LEAKAGE_ATTACKS[attack](**opts), release, context)
        out[name] = rec
    for name, rec in out.items():  # the figures quoted in docs/dp-forward.md (pytest -s)
        cells = [f"utility {_fmt(rec['utility'])}", f"loss-AUC {_fmt(rec['loss']['auc'])}"]
        for attack in ("inversion-nn", "inversion-relaxed", "attribute-inference"):
            r = rec.get(attack)
            if r is None:
                continue
            cells.append(f"{attack} {_fmt(r.metrics[r.headline]) if r.status == 'ok' else 'n/a'}")
        print(f"{name:16s} " + "; ".join(cells))
    return out


def _fmt(m: dict) -> str:
    return f"{m['value']:.3f} [{m['ci_low']:.3f}, {m['ci_high']:.3f}]"


def _better(a: dict, b: dict) -> float:
    """One-sided p-value that accuracy a > accuracy b (two-proportion z-test)."""
    pa, pb, na, nb = a["value"], b["value"], a["n"], b["n"]
    p = (a["correct"] + b["correct"]) / (na + nb)
    z = (pa - pb) / math.sqrt(p * (1 - p) * (1 / na + 1 / nb))
    return float(norm.sf(z))


def _headline(result):
    assert result.status == "ok", result.reason
    return result.metrics[result.headline]


def test_inversion_recall_is_near_one_clean_and_collapses_under_dp_forward(direction):
    for attack in ("inversion-nn", "inversion-relaxed"):
        clean = _headline(direction["embedding-clean"][attack])
        noisy = _headline(direction["embedding"][attack])
        assert clean["value"] >= 0.95 and clean["ci_low"] >= 0.9, (attack, clean)
        assert noisy["ci_high"] <= 0.1, (attack, noisy)
    # releases without per-token rows are not attacked (not applicable, not an error)
    assert direction["none"]["inversion-nn"].status == "not_applicable"
    assert direction["pooled-8"]["inversion-nn"].status == "not_applicable"


def test_attribute_inference_falls_to_chance(direction):
    clean = _headline(direction["embedding-clean"]["attribute-inference"])
    noisy_res = direction["embedding"]["attribute-inference"]
    noisy = _headline(noisy_res)
    chance = noisy_res.metrics["chance_balanced_baseline"]["value"]
    assert clean["ci_low"] > chance  # clean uploads leak the attribute
    assert noisy["value"] < clean["ci_low"]  # noise pulls it down ...
    assert noisy["ci_low"] <= chance + 0.02  # ... to (about) chance
    assert "majority_accuracy_baseline" in noisy_res.metrics


def test_utility_rises_with_epsilon_and_with_depth(direction):
    u = {k: v["utility"] for k, v in direction.items()}
    assert u["pooled-32"]["ci_low"] > u["pooled-8"]["ci_high"]
    assert _better(u["pooled-8"], u["embedding"]) < 0.05  # deep (pooled) beats embedding


def test_membership_auc_near_half_at_deep_position(direction):
    none_auc = direction["none"]["loss"]["auc"]
    deep = direction["pooled-8"]["loss"]["auc"]
    assert none_auc["ci_low"] > 0.5
    assert deep["ci_low"] <= 0.5 <= deep["ci_high"]
    assert deep["value"] < none_auc["value"]


REPORT_CONFIG = """\
title = "dp-forward report test"
seed = 0
device = "cpu"
[data]
corpus = "fixtures"
n_members = 48
n_nonmembers = 48
n_test = 48
[target]
preset = "tiny"
max_length = 32
[train]
epochs = 1
batch_size = 16
[[defenses]]
name = "none"
[[defenses]]
name = "dp-sgd"
epsilon = 8.0
[[defenses]]
name = "dp-forward"
label = "dpf eps=2"
epsilon = 2.0
position = "embedding"
[[defenses]]
name = "dp-forward"
label = "dpf eps=16"
epsilon = 16.0
position = "embedding"
[attacks]
names = ["loss", "inversion-nn"]
[metrics]
bootstrap = 100
"""


def test_report_shows_dp_forward_beside_none_and_dp_sgd(cli, tmp_path):
    cfg = tmp_path / "dpf.toml"
    cfg.write_text(REPORT_CONFIG)
    out = cli(["run", str(cfg), "--out", str(tmp_path / "out")])
    assert out.code == 0, out.stderr[-2000:]
    res = json.loads((tmp_path / "out" / "results.json").read_text())
    runs = {r["name"]: r for r in res["runs"]}
    assert {r["defense"] for r in res["runs"]} == {"none", "dp-sgd", "dp-forward"}
    dpf = runs["dpf eps=16"]
    assert dpf["claim"]["notion"] == "local-dp" and dpf["claim"]["epsilon"] == 16.0
    assert 0 < dpf["claim"]["details"]["central_epsilon_shuffled"]
    leak = {x["attack"]: x for x in dpf["leakage"]}
    assert leak["inversion-nn"]["status"] == "ok"
    html = next((tmp_path / "out").glob("*.html")).read_text()
    assert "dpf eps=2" in html and "dpf eps=16" in html and "dp-sgd" in html
    assert "Privacy / utility trade-off" in html  # utility and AUC vs claimed ε, per run
