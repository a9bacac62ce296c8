"""LLM membership signals, stacked MIA, extraction and the dp-blogs adapter on the small
causal LM: a deliberately memorising non-private model against Opacus DP-SGD at ε = 8."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from privacy_audit import fixtures
from privacy_audit.attacks.base import AttackContext, MetricSettings, run_attack, run_leakage_attack
from privacy_audit.attacks.extraction import CanaryExposure, PromptExtraction, find_secret
from privacy_audit.attacks.llm_membership import (
    LMLossAttack,
    MinKAttack,
    ReferenceAttack,
    ZlibAttack,
    train_reference,
)
from privacy_audit.attacks.stacked import StackedAttack, splits_are_disjoint
from privacy_audit.defenses.base import Examples, PrivacyClaim
from privacy_audit.targets.lm import LMRelease, build_lm_target, build_tokenizer, train_lm

pytestmark = pytest.mark.filterwarnings("ignore::privacy_audit.defenses.dp_blogs.AccountantWarning")

N = 100
MAX_LEN = 128
SETTINGS = MetricSettings(n_boot=300)


def _examples(rows, member: int) -> Examples:
    return Examples(
        [r["id"] for r in rows],
        [r["text"] for r in rows],
        np.zeros(len(rows), np.int64),
        members=np.full(len(rows), member, np.int64),
    )


@pytest.fixture(scope="module")
def data():
    rows = fixtures.load_corpus("private")
    public = fixtures.load_corpus("public")[:120]
    mem, non = _examples(rows[:N], 1), _examples(rows[N : 2 * N], 0)
    return mem, non, _examples(public, 0)


@pytest.fixture(scope="module")
def memorising(data):
    mem, _, _ = data
    model, tok = build_lm_target("tiny-gpt2-word", seed=0)
    train_lm(
        model, tok, mem.texts, epochs=40, batch_size=10, learning_rate=4e-3, max_length=MAX_LEN
    )
    return LMRelease(model, tok, MAX_LEN, PrivacyClaim.none())


@pytest.fixture(scope="module")
def dp_sgd(data):
    from privacy_audit.defenses.dp_blogs_baselines import train_lm_dp_sgd

    mem, _, _ = data
    release, info = train_lm_dp_sgd(
        build_tokenizer("word"),
        mem.texts,
        epsilon=8.0,
        epochs=6,
        batch_size=25,
        learning_rate=4e-3,
        max_length=MAX_LEN,
    )
    assert info["epsilon_spent"] <= 8.0 + 1e-6
    return release


def _auc(release, attack, data):
    mem, non, _ = data
    return run_attack(attack, release, mem.concat(non), SETTINGS).metrics["auc"]


@pytest.fixture(scope="module")
def exposure_np(memorising, data):
    return CanaryExposure(candidates=1000, canaries=10).run(memorising, _context(data))


def _context(data):
    mem, non, public = data
    return AttackContext(mem, non, public, None, SETTINGS, 0)


def test_signals_on_memorising_lm_are_strong(memorising, data):
    ref = ReferenceAttack()
    ref.prepare(public=data[2], seed=0)
    aucs = {
        a.name: _auc(memorising, a, data) for a in (LMLossAttack(), ZlibAttack(), MinKAttack(), ref)
    }
    assert aucs["lm-loss"]["value"] > 0.8 and aucs["lm-loss"]["ci_low"] > 0.7
    for name, auc in aucs.items():
        assert auc["ci_low"] > 0.5, name  # every signal is oriented higher = member
    # the reference model is trained on the public split only, and cached
    assert train_reference(memorising, data[2], 0) is ref.reference_for(memorising)


def test_exposure_near_maximum_on_memorising_lm(exposure_np):
    r = exposure_np
    top = math.log2(1000)
    e, base = r.metrics["exposure"], r.metrics["exposure_baseline"]
    assert e["value"] >= 0.9 * top and e["max"] == pytest.approx(top)
    assert base["ci_high"] < e["ci_low"]  # non-member records: a random rank, about 1.44 bits
    assert r.metrics["exposure_extrapolated"]["value"] >= e["value"] - 0.5
    assert r.details["member_canaries"] == 10


def test_dp_sgd_lowers_loss_auc_and_exposure(memorising, dp_sgd, data, exposure_np):
    auc_np = _auc(memorising, LMLossAttack(), data)
    auc_dp = _auc(dp_sgd, LMLossAttack(), data)
    assert auc_dp["ci_high"] < auc_np["ci_low"]
    ctx = _context(data)
    e_np = exposure_np.metrics["exposure"]
    e_dp = CanaryExposure(canaries=10).run(dp_sgd, ctx).metrics["exposure"]
    assert e_dp["ci_high"] < e_np["ci_low"]


def test_stacked_mia_splits_and_strength(memorising, data):
    mem, non, public = data
    attack = StackedAttack(folds=2, n_iter=2, inner_folds=2)
    attack.prepare(public=public, seed=0)
    res = run_attack(attack, memorising, mem.concat(non), SETTINGS)
    n = 2 * N
    assert splits_are_disjoint(attack.last_splits, n)
    for s in attack.last_splits:  # calibration never touches the evaluation fold
        assert not set(s["calibration"]) & set(s["evaluation"])
        assert len(s["calibration"]) > 0 and len(s["fit"]) > len(s["calibration"])
    assert attack.feature_names[:4] == ["loss", "zlib", "min_k", "reference"]
    best = max(
        _auc(memorising, a, data)["value"] for a in (LMLossAttack(), ZlibAttack(), MinKAttack())
    )
    assert res.metrics["auc"]["ci_high"] >= best
    # a leaking split is detected
    bad = [dict(attack.last_splits[0]), *attack.last_splits[1:]]
    bad[0]["calibration"] = bad[0]["evaluation"][:3]
    assert not splits_are_disjoint(bad, n)


def test_prompt_extraction_and_context_errors(memorising, data):
    ctx = _context(data)
    r = PromptExtraction(records=15).run(memorising, ctx)
    rate, base = r.metrics["extraction_rate"], r.metrics["extraction_rate_baseline"]
    assert rate["value"] > base["value"] and rate["n"] == 15
    long = run_leakage_attack(PromptExtraction(prompt_tokens=600), memorising, ctx)
    assert long.status == "error" and "context length" in long.reason
    with pytest.raises(ValueError, match="exceeds the model's context length"):
        memorising.generate(["word " * 600], max_new_tokens=5)
    assert find_secret("account AC-1234567 ok", 4) == ("account AC-", "1234567")


def test_dp_blogs_defense_claim_and_violated_audit(data):
    from privacy_audit.audit.epsilon.claimed_vs_audited import EpsilonAuditSettings, epsilon_audit
    from privacy_audit.defenses import DEFENSES
    from privacy_audit.targets.classifier import TrainingConfig
    from privacy_audit.targets.loading import Target, TargetSpec

    mem, _, _ = data
    target = Target(TargetSpec("tiny-gpt2-word", None, MAX_LEN, 0), ("x",), None, "cpu", False)
    cfg = TrainingConfig(
        epochs=1, batch_size=5, learning_rate=3e-3, max_length=MAX_LEN, progress=False
    )
    defense = DEFENSES["dp-blogs"](epsilon=1.0, audit_trials=100, audit_batch=10)
    release, report = defense.fit(target, mem, cfg, 0)
    claim = release.claim
    assert claim.proven is False and "not a valid DP guarantee" in claim.details["guarantee"]
    assert report.info["steps"] == 2  # T = epochs · ⌊100 / (5 · 10)⌋
    assert claim.details["overshoot"] == (claim.epsilon > 1.0)
    update = release.gradient_update(mem.texts[:4], seed=1)
    assert update.shape == (sum(p.numel() for p in release.model.parameters()),)
    run = {"claim": claim.to_dict(), "strongest_attack": None, "attacks": []}
    audit = epsilon_audit(run, release, None, EpsilonAuditSettings(delta=1e-5))
    (shuffle,) = audit["audits"]
    assert shuffle["name"] == "gradient-shuffle-canary" and shuffle["epsilon_lb"] > claim.epsilon
    assert audit["status"] == "violated" and "gradient-shuffle-canary" in audit["evidence"][0]


def test_defense_bad_inputs():
    from privacy_audit.defenses import DEFENSES

    for params, msg in (
        ({"epsilon": 0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"clip_value": 0}, "clip value"),
        ({"mode": "loose"}, "mode"),
        ({"accumulation_steps": 0}, "accumulation_steps"),
    ):
        with pytest.raises(ValueError, match=msg):
            DEFENSES["dp-blogs"](**params)
    from privacy_audit.audit.config import parse_config
    from privacy_audit.ground.errors import ConfigError

    for bad, msg in (({"epsilon": 0.0}, "epsilon"), ({"clip_value": -1.0}, "clip value")):
        with pytest.raises(ConfigError, match=msg):
            parse_config({"defenses": [{"name": "dp-blogs", **bad}]})
    from privacy_audit.targets.loading import Target, TargetSpec

    bert = Target(TargetSpec("tiny", None, 32, 0), ("a", "b"), None, "cpu", False)
    with pytest.raises(ConfigError, match="causal LM target"):
        DEFENSES["dp-blogs"]().fit(bert, Examples(["a"], ["a"], np.zeros(1)), None, 0)
    cfg = parse_config({"attacks": {"names": ["lm-loss", "stacked", "canary-exposure"]}})
    assert cfg.attacks == ("lm-loss", "stacked", "canary-exposure")
    with pytest.raises(ValueError, match="at least 2 folds"):
        StackedAttack(folds=1)
    with pytest.raises(ValueError, match="causal language model"):
        LMLossAttack().score(object(), Examples(["a"], ["a"], np.zeros(1)))
    torch.manual_seed(0)
