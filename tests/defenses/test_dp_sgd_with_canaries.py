"""White-box Dirac gradient canaries recorded inside real DP-SGD training runs
(defenses/dp_sgd_with_canaries.py) and the one-run audits read from them."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from transformers import GPT2Config, GPT2LMHeadModel

from privacy_audit.audit.epsilon.gradient_canary_audit import OneRunWhiteBoxAudit
from privacy_audit.defenses.dp_engine import DPSGDEngine, gradient_canaries_for
from privacy_audit.defenses.dp_sgd_with_canaries import GradientCanaries
from privacy_audit.targets.classifier import TrainingConfig

DELTA = 1e-5


def _tiny_lm(seed=0):
    torch.manual_seed(seed)
    cfg = GPT2Config(
        vocab_size=40,
        n_positions=16,
        n_embd=16,
        n_layer=1,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
    )
    return GPT2LMHeadModel(cfg)


def _run(sigma: float, steps: int, m: int = 300, q: float = 0.3, seed: int = 0):
    model = _tiny_lm(seed)
    engine = DPSGDEngine(model, 1.0, sigma, expected_batch_size=4, norms="phantom")
    engine.canaries = GradientCanaries(engine.params, m, 1.0, q, seed=seed)
    opt = torch.optim.SGD(engine.params, lr=0.1)
    gen = torch.Generator().manual_seed(seed + 1)
    data = torch.Generator().manual_seed(seed + 2)
    for _ in range(steps):
        ids = torch.randint(0, 40, (4, 8), generator=data)
        engine.step(opt, ids, torch.ones_like(ids), gen)
    return engine.canaries


def test_without_noise_the_signal_is_interference_plus_the_canary_appearances():
    """Known answer (σ = 0): the released value at a canary's coordinate is the real
    examples' clipped sum there plus C per appearance, so signal − interference counts
    the canary's appearances exactly, and an absent canary never appears."""
    can = _run(sigma=0.0, steps=12)
    rec = can.record()
    own = rec["signals"] - can.interference
    np.testing.assert_allclose(own, can.appearances.astype(float), atol=1e-4)
    inc = rec["included"].astype(bool)
    assert can.appearances[~inc].sum() == 0
    assert can.appearances[inc].mean() == pytest.approx(12 * 0.3, rel=0.2)
    assert rec["steps"] == 12 and rec["interference_sd"] > 0  # real gradients touch j


def test_with_noise_the_canary_free_part_has_the_mechanisms_variance():
    """σ = 0.7, T = 10: signal − interference − appearances is the noise summed over the
    steps at each coordinate, N(0, T σ²); its sample variance over 300 canaries must sit
    in the 99.9 % chi-square interval (fails if noise is read before it is added, or
    twice)."""
    sigma, steps, m = 0.7, 10, 300
    can = _run(sigma=sigma, steps=steps, m=m)
    noise = can.record()["signals"] - can.interference - can.appearances
    var = steps * sigma**2
    lo = var * stats.chi2.ppf(0.0005, m) / m
    hi = var * stats.chi2.ppf(0.9995, m) / m
    assert lo <= float(np.mean(noise**2)) <= hi


def test_gaussian_audit_in_its_regime_on_signals_recorded_in_training():
    """A real training loop (tiny GPT-2, DPSGDEngine, σ = 1, q = 0.1, T = 150) with 400
    recorded canaries: the diagnostics accept the Gaussian regime, the Gaussian bound
    stays below the accountant's ε and above the thresholded bound on the same signals."""
    from privacy_audit.defenses.dp_engine import epsilon_pld
    from privacy_audit.stats.canary_bounds import gaussian_one_run_epsilon, one_run_group_best

    sigma, q, steps = 1.0, 0.1, 150
    rec = _run(sigma=sigma, steps=steps, m=400, q=q).record()
    s, inc = rec["signals"], rec["included"]
    g = gaussian_one_run_epsilon(s, inc, DELTA)
    thr = one_run_group_best(s, inc, DELTA)
    assert g["regime"]["ok"], g["regime"]
    assert thr["epsilon"] < g["epsilon"] < epsilon_pld(sigma, q, steps, DELTA)


def test_canaries_are_distinct_seeded_and_validated():
    model = _tiny_lm()
    params = [p for p in model.parameters() if p.requires_grad]
    a = GradientCanaries(params, 500, 1.0, 0.1, seed=3)
    b = GradientCanaries(params, 500, 1.0, 0.1, seed=3)
    zero = {p: torch.zeros_like(p) for p in params}
    for c in (a, b):
        c.inject({p: t.clone() for p, t in zero.items()})
        c.observe(zero)
    coords = [(k, int(i)) for k, local, _ in a._slots for i in local]
    assert len(set(coords)) == 500
    assert coords == [(k, int(i)) for k, local, _ in b._slots for i in local]
    assert torch.equal(a.included, b.included)
    assert 200 < int(a.included.sum()) < 300
    with pytest.raises(ValueError, match="at least 2"):
        GradientCanaries(params, 1, 1.0, 0.1)
    with pytest.raises(ValueError, match="sample rate"):
        GradientCanaries(params, 10, 1.0, 0.0)
    with pytest.raises(RuntimeError, match="without inject"):
        a.observe(zero)
    assert gradient_canaries_for(TrainingConfig(), params, 1.0, 0.1, 0) is None


def test_coordinates_come_from_the_pilot_not_from_training_data():
    """A pilot that is zero on one parameter and large elsewhere puts every canary there.
    The pilot of a real GPT-2 (random tokens, no training data) finds coordinates no
    input moves; the first real step plays no part in the choice (the same canaries come
    out whatever is injected later), and the model's gradients are left as they were."""
    from privacy_audit.defenses.dp_sgd_with_canaries import pilot_gradient

    model = _tiny_lm()
    params = [p for p in model.parameters() if p.requires_grad]
    quiet = max(params, key=lambda p: p.numel())  # the embedding: enough room for 300
    pilot = {p: (torch.zeros_like(p) if p is quiet else torch.full_like(p, 5.0)) for p in params}
    can = GradientCanaries(params, 300, 1.0, 0.5, seed=1, pilot=pilot)
    assert [params[k] is quiet for k, _, _ in can._slots] == [True]
    assert can.record()["selected_pilot_magnitude"] == 0.0

    real = pilot_gradient(model, params, 40, 8, "causal-lm", seed=0)
    assert all(p.grad is None for p in params)  # nothing left behind
    key_bias = [  # c_attn.bias = [q | k | v]: the key part cannot move any output
        p for n, p in model.named_parameters() if n.endswith("attn.c_attn.bias")
    ][0]
    assert float(real[key_bias][16:32].abs().max()) == pytest.approx(0.0, abs=1e-6)
    a = GradientCanaries(params, 20, 1.0, 0.5, seed=2, pilot=real)
    b = GradientCanaries(params, 20, 1.0, 0.5, seed=2, pilot=real)
    a.inject({p: torch.randn_like(p) for p in params})  # a real step: no effect on the choice
    assert [(k, loc.tolist()) for k, loc, _ in a._slots] == [
        (k, loc.tolist()) for k, loc, _ in b._slots
    ]
    assert a.record()["selected_pilot_magnitude"] < 1e-5


def _lm_target_and_data(n=48):
    from privacy_audit.audit.config import parse_config
    from privacy_audit.audit.scale.tasks import task_data, task_target

    cfg = parse_config(
        {
            "seed": 0,
            "data": {"n_members": n, "n_nonmembers": n, "n_test": 12},
            "target": {"preset": "tiny-gpt2-word", "max_length": 24},
            "defenses": [{"name": "none"}],
        }
    )
    data = task_data(cfg)
    return task_target(cfg, data), data.members


@pytest.mark.slow
@pytest.mark.parametrize("defense", ["phantom-dp-sgd", "dp-sgd"])
def test_dpsgd_trainers_record_canaries_and_the_audit_reads_them(defense):
    """The suite's DP-SGD trainers (own engine, and the Opacus loop) carry the canaries in
    their real updates; the one-run audit reads the recorded signals, not a simulation.
    With σ = 0 the canaries that entered a batch separate perfectly; at a claim of ε the
    thresholded bound stays below it."""
    from privacy_audit.defenses import DEFENSES

    target, train = _lm_target_and_data()
    training = TrainingConfig(
        epochs=2,
        batch_size=12,
        learning_rate=3e-3,
        max_length=24,
        progress=False,
        gradient_canaries=400,
    )
    eps_params = {"epsilon": 4.0, "accountant": "rdp"}
    release, report = DEFENSES[defense](**eps_params).fit(target, train, training, 0)
    rec = release.gradient_canary_record
    assert report.info["white_box_canaries"] == 400 and len(rec["signals"]) == 400
    assert rec["steps"] == release.schedule.steps
    claimed = release.claim.epsilon
    thr, gauss = OneRunWhiteBoxAudit(400).run(release, DELTA, claimed_epsilon=claimed)
    assert thr["source"] == gauss["source"] == "recorded in training"
    assert thr["steps_recorded"] == release.schedule.steps
    assert 0.0 <= thr["epsilon_lb"] <= claimed and not thr["exceeds_claim"]
    assert math.isfinite(gauss["epsilon_lb"]) and gauss["asymptotic"]
    # the signals carry the run's noise: separation near the mechanism's q·√T/σ
    q, steps = release.schedule.sample_rate, release.schedule.steps
    expected = q * steps**0.5 / report.info["noise_multiplier"]
    assert 0.5 * expected < gauss["mu_hat"] < 1.5 * expected, (gauss["mu_hat"], expected)

    if defense == "phantom-dp-sgd":  # σ = 0 through the same engine: nothing hides them
        plain, _ = DEFENSES[defense](noise_multiplier=0.0, accountant="rdp").fit(
            target, train, training, 0
        )
        rec0 = plain.gradient_canary_record
        # the pilot (random tokens, no data) found coordinates no input moves here (key
        # biases, positions past the training length): no interference, and every canary
        # that entered a batch outranks every absent one; a present canary Poisson
        # sampling never picked ties with them
        assert rec0["interference_sd"] == pytest.approx(0.0, abs=1e-6)
        s0, inc0 = rec0["signals"], rec0["included"].astype(bool)
        entered = s0 > 0.5
        assert not (entered & ~inc0).any() and entered[inc0].mean() > 0.8
        thr0, _ = OneRunWhiteBoxAudit(400).run(plain, DELTA)
        assert thr0["source"] == "recorded in training"
        assert thr0["epsilon_lb"] > max(2.5, thr["epsilon_lb"])


def test_a_release_without_a_record_is_labelled_simulated():
    from privacy_audit.defenses.gradient_mechanism import (
        GaussianGradientMechanism,
        SamplingSchedule,
    )

    class Release:
        gradient_mechanism = GaussianGradientMechanism(1.0, 1.0)
        schedule = SamplingSchedule(0.05, 100)

    thr, gauss = OneRunWhiteBoxAudit(200).run(Release(), DELTA)
    assert thr["source"] == gauss["source"] == "simulated from the mechanism"
    assert "not read from training" in thr["description"]


@pytest.mark.slow
def test_dp_sgd_on_a_users_llama_records_canaries_and_keeps_the_claim(tmp_path):
    """target.model_dir = a user's untied Llama saved to disk: `dp-sgd` (ε = 8) fine-tunes
    it through the config path with 300 white-box canaries recorded in the run; the claim
    is proven, the one-run audits read the recorded signals and stay within the claim,
    and the ε audit's status is never a false "consistent" from an untestable audit."""
    from privacy_audit import fixtures
    from privacy_audit.audit.config import parse_config
    from privacy_audit.audit.runner import run_audit
    from tests.own_models import build_causal_lm, word_tokenizer

    texts = [r["text"].lower() for r in fixtures.load_corpus("private")[:200]]
    hf = word_tokenizer(sorted({w for t in texts for w in t.split()}))
    build_causal_lm("llama", len(hf), d=32).save_pretrained(str(tmp_path))
    hf.save_pretrained(str(tmp_path))
    raw = {
        "seed": 0,
        "data": {"n_members": 32, "n_nonmembers": 32, "n_test": 12},
        "target": {"model_dir": str(tmp_path), "max_length": 32},
        "train": {"epochs": 2, "batch_size": 8, "learning_rate": 3e-3},
        "defenses": [{"name": "dp-sgd", "epsilon": 8.0, "accountant": "rdp"}],
        "attacks": {"names": ["loss"]},
        "metrics": {"bootstrap": 100},
        "epsilon": {"enabled": True, "canaries": 0, "white_box_canaries": 300},
    }
    (run,) = run_audit(parse_config(raw), progress=False)["runs"]
    claim = run["claim"]
    assert claim["proven"] and 7.5 < claim["epsilon"] <= 8.0 * 1.01
    assert run["training"]["white_box_canaries"] == 300
    audits = {a["name"]: a for a in run["epsilon_audit"]["audits"]}
    thr = audits["one-run white-box (thresholded)"]
    assert thr["source"] == "recorded in training" and thr["canaries"] == 300
    assert 0 <= thr["epsilon_lb"] < claim["epsilon"]
    ea = run["epsilon_audit"]
    assert ea["status"] in ("consistent", "untestable") and not ea["evidence"]
    if ea["status"] == "consistent":  # some non-asymptotic audit could have caught it
        assert any(
            a["status"] == "ok" and not a.get("asymptotic") and a["ceiling"] > claim["epsilon"]
            for a in audits.values()
        )


def test_report_row_states_the_gaussian_audits_sampling_level():
    from privacy_audit.reports.epsilon_audit_view import audit_row

    row = audit_row(
        {
            "name": "one-run Gaussian (asymptotic)",
            "status": "ok",
            "asymptotic": True,
            "epsilon_lb": 3.3,
            "ceiling": None,
            "confidence": 0.95,
            "sampling_confidence": 0.975,
            "source": "recorded in training",
        },
        "consistent",
        8.0,
    )
    assert "μ bound at 97.5%" in row["bound_detail"]
    assert "signals recorded in training" in row["method"]
    assert row["badge"] == "asymptotic · informational"


def test_pilot_leaves_the_global_rng_and_training_mode_alone():
    from privacy_audit.defenses.dp_sgd_with_canaries import pilot_gradient

    model = _tiny_lm()
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    pilot_gradient(model, params, 40, 8, "causal-lm", seed=0)
    assert torch.equal(torch.rand(3), before) and model.training
