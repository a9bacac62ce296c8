"""User-level DP-SGD (defenses/user_dp_sgd.py), canary users and their audits.

Known answers: the released sum is recomputed with numpy/pandas from the closed-form
gradient of a linear softmax model; ε with dp-accounting and Opacus called directly."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from privacy_audit.defenses.user_dp_sgd import (
    UserDPConfig,
    train_user_dp,
    user_clipped_sum,
)


def _loss(logits, y):
    return torch.nn.functional.cross_entropy(logits, y)


def _toy(n_users=5, seed=0, d_in=3, classes=2):
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, 5, n_users)
    users = np.repeat(np.array([f"u{i}" for i in range(n_users)]), counts)
    x = rng.normal(size=(len(users), d_in)).astype(np.float64) * 2.0
    y = rng.integers(0, classes, len(users))
    return torch.tensor(x), torch.tensor(y), users


def _numpy_grads(w, b, x, y):
    """Closed-form per-example gradient of CE(softmax(Wx + b), y): ((p − e_y) xᵀ, p − e_y),
    flattened as [W row-major, b] (the order of nn.Linear's parameters)."""
    z = x @ w.T + b
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    r = p - np.eye(w.shape[0])[y]
    gw = np.einsum("nc,nd->ncd", r, x).reshape(len(x), -1)
    return np.concatenate([gw, r], axis=1)


def _numpy_release(grads, users, clip, unit="user", aggregate="sum"):
    frame = pd.DataFrame(grads)
    if unit == "example":
        n = np.linalg.norm(grads, axis=1)
        return (grads * np.minimum(1.0, clip / (n + 1e-6))[:, None]).sum(0)
    agg = frame.groupby(users).sum() if aggregate == "sum" else frame.groupby(users).mean()
    s = agg.to_numpy()
    n = np.linalg.norm(s, axis=1)
    return (s * np.minimum(1.0, clip / (n + 1e-6))[:, None]).sum(0)


@pytest.mark.parametrize(
    ("unit", "aggregate"), [("user", "sum"), ("user", "mean"), ("example", "sum")]
)
def test_release_equals_independent_per_user_computation(unit, aggregate):
    x, y, users = _toy()
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2).double()
    w0, b0 = model.weight.detach().numpy().copy(), model.bias.detach().numpy().copy()
    seen = []
    cfg = UserDPConfig(
        users_per_step=5, epochs=1, learning_rate=0.3, clip=0.7, aggregate=aggregate
    )  # q = 1, T = 1: every user in the one step
    run = train_user_dp(
        model,
        _loss,
        x,
        y,
        users,
        cfg,
        0,
        clip_unit=unit,
        noise_multiplier=0.0,
        observer=lambda t, r: seen.append(r.numpy().copy()),
    )
    assert run.steps == 1 and run.sample_rate == 1.0
    want = _numpy_release(_numpy_grads(w0, b0, x.numpy(), y.numpy()), users, 0.7, unit, aggregate)
    np.testing.assert_allclose(seen[0], want, rtol=1e-9, atol=1e-12)
    # the update: θ − η R / (q N_users)
    np.testing.assert_allclose(model.weight.detach().numpy(), w0 - 0.3 * want[:6].reshape(2, 3) / 5)
    np.testing.assert_allclose(model.bias.detach().numpy(), b0 - 0.3 * want[6:] / 5)


def test_user_clip_differs_from_example_clip():
    """A mutant that clips rows instead of users fails the per-user known answer."""
    x, y, users = _toy(seed=3)
    g = _numpy_grads(np.ones((2, 3)), np.zeros(2), x.numpy(), y.numpy())
    uid = torch.as_tensor(pd.factorize(users)[0])
    per_user = user_clipped_sum(torch.tensor(g), uid, 0.5, "user")[0].numpy()
    per_row = user_clipped_sum(torch.tensor(g), uid, 0.5, "example")[0].numpy()
    assert np.allclose(per_user, _numpy_release(g, users, 0.5, "user"))
    assert not np.allclose(per_row, _numpy_release(g, users, 0.5, "user"))


def test_noise_is_gaussian_with_std_sigma_c():
    """With noise on, the release minus the clipped sum is N(0, σ²C²) per coordinate."""
    rng = np.random.default_rng(1)
    users = np.repeat(np.arange(20), 3)
    x = torch.tensor(rng.normal(size=(60, 100)))
    y = torch.tensor(rng.integers(0, 10, 60))
    torch.manual_seed(0)
    model = torch.nn.Linear(100, 10).double()
    w0, b0 = model.weight.detach().numpy().copy(), model.bias.detach().numpy().copy()
    seen = []
    cfg = UserDPConfig(users_per_step=20, epochs=1, clip=0.5)
    train_user_dp(
        model,
        _loss,
        x,
        y,
        users,
        cfg,
        4,
        noise_multiplier=2.0,
        observer=lambda t, r: seen.append(r.numpy().copy()),
    )
    clipped = _numpy_release(_numpy_grads(w0, b0, x.numpy(), y.numpy()), users, 0.5)
    resid = seen[0] - clipped
    sd = resid.std()
    # 1010 draws: sd within ±10 % of σC = 1 (the sample sd's relative error is ≈ 2.2 %)
    assert 0.9 < sd < 1.1 and abs(resid.mean()) < 0.15


def test_claim_is_user_level_and_matches_dp_accounting():
    import dp_accounting
    from opacus.accountants import create_accountant

    x, y, users = _toy(n_users=40, seed=2)
    cfg = UserDPConfig(target_epsilon=2.0, users_per_step=8, epochs=2, delta=1e-5)
    run = train_user_dp(torch.nn.Linear(3, 2).double(), _loss, x, y, users, cfg, 0)
    q = 8 / 40
    assert run.sample_rate == pytest.approx(q)
    assert run.steps == round(2 / q)
    assert run.claim.unit == "user" and run.claim.notion == "central-dp"
    sigma = run.noise_multiplier
    event = dp_accounting.SelfComposedDpEvent(
        dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), run.steps
    )
    pld = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-3)
    pld.compose(event)
    prv = create_accountant("prv")
    prv.history = [(sigma, q, run.steps)]
    want = max(pld.get_epsilon(1e-5), prv.get_epsilon(1e-5))
    assert run.claim.epsilon == pytest.approx(want, rel=1e-9)
    assert run.claim.epsilon <= 2.0 * 1.01  # calibrated to the target


def test_canary_users_go_through_the_trainers_clipping():
    """k rows of C·e_j per canary user: a per-user clip keeps C, a per-row clip k·C."""
    from privacy_audit.defenses.dp_sgd_with_canaries import CanaryUsers

    cu = CanaryUsers(50, 10, 6, 1.0, seed=0)
    present = cu.present_count
    cu.set_batch(torch.ones(present, dtype=torch.bool))
    rows, uid = cu.rows(50, torch.float64)
    assert rows.shape == (6 * present, 50)
    per_user = user_clipped_sum(rows, uid, 1.0, "user")[0]
    per_row = user_clipped_sum(rows, uid, 1.0, "example")[0]
    coords = cu.coords[cu.present]
    assert torch.allclose(per_user[coords], torch.ones(present, dtype=torch.float64), atol=1e-5)
    assert torch.allclose(per_row[coords], torch.full((present,), 6.0, dtype=torch.float64))
    assert per_user.abs().sum() == pytest.approx(present, rel=1e-5)


def test_canary_user_scores_are_the_likelihood_ratio():
    from privacy_audit.defenses.dp_sgd_with_canaries import CanaryUsers

    cu = CanaryUsers(20, 4, 2, 1.0, seed=1)
    obs = np.array([[0.3, 1.2, -0.5, 2.0], [1.0, 0.0, 0.1, -1.0]])
    for o in obs:
        released = torch.zeros(20, dtype=torch.float64)
        released[cu.coords] = torch.tensor(o)
        cu.observe(released)
    s, q = 1.5, 0.2
    want = np.log(1 - q + q * np.exp((obs.T - 0.5) / s**2)).sum(axis=1)
    np.testing.assert_allclose(cu.scores(s, q), want, rtol=1e-12)


def _audit_seed(clip_unit, seed, m=200, k=8):
    from privacy_audit.audit.benchmarks.user_dp import synthetic_users
    from privacy_audit.audit.epsilon.canary_users import one_run_user_audit
    from privacy_audit.defenses.dp_sgd_with_canaries import CanaryUsers

    x, y, users = synthetic_users(60, seed=0)
    x = x[:, :64].contiguous()
    torch.manual_seed(seed)
    model = torch.nn.Linear(64, 4)
    cfg = UserDPConfig(target_epsilon=1.0, users_per_step=16, epochs=4)
    cu = CanaryUsers(260, m, k, 1.0, seed)
    run = train_user_dp(model, _loss, x, y % 4, users, cfg, seed, cu, clip_unit)
    rec = cu.record(run.noise_multiplier, run.sample_rate)
    return one_run_user_audit(rec["scores"], rec["included"], run.claim, 1e-5, k, seed=seed)


def test_one_run_canary_users_pass_correct_trainer_and_catch_per_example_clip():
    """Small end to end: the correct trainer is not VIOLATED in 3 seeds; the trainer that
    clips per example while claiming per user is VIOLATED in each of them (in the
    benchmark: 0/100 and 100/100, docs/records/bench-user-dp.json)."""
    good = [_audit_seed("user", s) for s in range(3)]
    bad = [_audit_seed("example", s) for s in range(3)]
    assert all(a["status"] == "consistent" for a in good), [a["epsilon_lb"] for a in good]
    assert all(a["status"] == "violated" for a in bad), [a["epsilon_lb"] for a in bad]
    assert all(a["unit"] == "user" and a["canary_users"] == 200 for a in good + bad)


def test_audit_refuses_a_claim_on_another_unit():
    from privacy_audit.audit.epsilon.canary_users import one_run_user_audit

    rng = np.random.default_rng(0)
    inc = rng.integers(0, 2, 100)
    scores = inc + rng.normal(size=100) * 0.01
    a = one_run_user_audit(scores, inc, {"epsilon": 0.1, "unit": "token"}, 1e-5, 4)
    assert a["status"] == "not-comparable" and "unit" in a["reason"]


def test_example_claim_is_tested_through_group_privacy():
    """A per-example claim: canary users of k records are groups of k; the bound is on the
    per-example ε (smaller than the user-level one from the same scores) and the record
    states (kε, δ Σ_{i<k} e^{iε}) for a user."""
    import math

    from privacy_audit.audit.epsilon.canary_users import one_run_user_audit

    rng = np.random.default_rng(0)
    inc = rng.integers(0, 2, 500)
    scores = inc + rng.normal(size=500) * 0.01  # perfect separation
    user = one_run_user_audit(scores, inc, {"epsilon": 0.2, "unit": "user"}, 1e-5, 4)
    ex = one_run_user_audit(
        scores, inc, {"epsilon": 0.2, "delta": 1e-5, "unit": "example"}, 1e-5, 4
    )
    assert user["status"] == "violated" and ex["status"] == "violated"
    assert 0.2 < ex["epsilon_lb"] < user["epsilon_lb"]
    assert ex["implied_user_claim"]["epsilon"] == pytest.approx(0.8)
    want = 1e-5 * sum(math.exp(i * 0.2) for i in range(4))
    assert ex["implied_user_claim"]["delta"] == pytest.approx(want, rel=1e-12)
    assert ex["implied_user_claim"]["delta"] <= 4 * math.exp(3 * 0.2) * 1e-5


def test_per_example_clipping_is_sound_for_an_example_claim():
    """The planted bug's trainer IS example-level DP at the claimed ε (each record moves a
    step by ≤ C and is drawn with its user's rate q): audited against the same ε per
    EXAMPLE through group privacy, it is not VIOLATED."""
    import dataclasses

    from privacy_audit.audit.benchmarks.user_dp import synthetic_users
    from privacy_audit.audit.epsilon.canary_users import one_run_user_audit
    from privacy_audit.defenses.dp_sgd_with_canaries import CanaryUsers

    x, y, users = synthetic_users(60, seed=0)
    x = x[:, :64].contiguous()
    for seed in range(2):
        torch.manual_seed(seed)
        cfg = UserDPConfig(target_epsilon=1.0, users_per_step=16, epochs=4)
        cu = CanaryUsers(130, 120, 8, 1.0, seed)
        run = train_user_dp(torch.nn.Linear(64, 2), _loss, x, y, users, cfg, seed, cu, "example")
        rec = cu.record(run.noise_multiplier, run.sample_rate)
        claim = dataclasses.replace(run.claim, unit="example")
        a = one_run_user_audit(rec["scores"], rec["included"], claim, 1e-5, 8, seed=seed)
        assert a["status"] != "violated", a["epsilon_lb"]
        assert a["unit"].startswith("example")


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError, match="clip unit"):
        user_clipped_sum(torch.zeros(2, 3), torch.tensor([0, 1]), 1.0, "token")
    with pytest.raises(ValueError, match="aggregate"):
        UserDPConfig(aggregate="median")
    x, y, users = _toy()
    with pytest.raises(ValueError, match="one user per row"):
        train_user_dp(torch.nn.Linear(3, 2).double(), _loss, x, y, users[:-1], UserDPConfig())


def _classifier_target(seq_len=16):
    from privacy_audit import fixtures
    from privacy_audit.defenses.base import Examples
    from privacy_audit.targets.loading import Target, TargetSpec

    rows = fixtures.load_corpus("private")[:48]
    labels = sorted({r["label"] for r in rows})
    target = Target(TargetSpec("tiny", None, seq_len, 0), tuple(labels), None, "cpu", False)
    ex = Examples(
        ids=[str(i) for i in range(len(rows))],
        texts=[r["text"] for r in rows],
        labels=np.array([labels.index(r["label"]) for r in rows]),
    )
    return target, ex


def test_dp_sgd_unit_user_trains_the_classifier_with_a_user_claim():
    """The suite's dp-sgd defense with unit = "user": users from the examples' groups,
    q over users, the claim per user and equal to the accountant over users."""
    from privacy_audit.defenses.dp_engine import epsilon_opacus, epsilon_pld
    from privacy_audit.defenses.dp_sgd import DPSGD
    from privacy_audit.targets.classifier import TrainingConfig

    target, ex = _classifier_target()
    ex.groups = [f"user{i // 4}" for i in range(len(ex.texts))]  # 12 users x 4 texts
    training = TrainingConfig(epochs=1, batch_size=16, max_length=16, progress=False)
    release, report = DPSGD(epsilon=4.0, unit="user").fit(target, ex, training, 0)
    info = report.info
    assert release.claim.unit == "user" and info["unit"] == "user"
    assert info["users_per_step"] == pytest.approx(16 * 12 / 48)  # batch / texts per user
    assert info["sample_rate"] == pytest.approx(4 / 12)
    q, sigma, steps = info["sample_rate"], info["noise_multiplier"], info["steps"]
    assert steps == round(1 / q)
    want = max(epsilon_opacus(sigma, q, steps, 1e-5), epsilon_pld(sigma, q, steps, 1e-5))
    assert release.claim.epsilon == pytest.approx(want) and release.claim.epsilon <= 4.0 * 1.01
    assert release.schedule.sample_rate == pytest.approx(q)


def test_dp_sgd_unit_user_without_groups_is_refused():
    from privacy_audit.defenses.dp_sgd import DPSGD
    from privacy_audit.targets.classifier import TrainingConfig

    target, ex = _classifier_target()
    with pytest.raises(ValueError, match=r"\[data\] group"):
        DPSGD(unit="user").fit(target, ex, TrainingConfig(epochs=1, progress=False), 0)
    with pytest.raises(ValueError, match="unit"):
        DPSGD(unit="token")


def test_input_canaries_join_grouped_training_data_as_canary_users():
    """Text canaries in grouped data: each canary (all its copies) is one user of its own."""
    from privacy_audit.audit.epsilon.input_canaries import CanarySet, with_canaries
    from privacy_audit.defenses.base import Examples

    train = Examples(["a", "b", "c"], ["x y", "y z", "z x"], np.array([0, 1, 0]))
    train.groups = ["u1", "u1", "u2"]
    canaries = CanarySet(
        Examples(["c0", "c1", "c2"], ["p q", "q r", "r s"], np.array([1, 0, 1])),
        np.array([1, 0, 1]),
        "random-token",
        repeat=3,
    )
    out = with_canaries(train, canaries)
    assert out.groups == ["u1", "u1", "u2"] + ["canary:c0"] * 3 + ["canary:c2"] * 3
    assert out.texts[3:6] == ["p q"] * 3
    plain = with_canaries(Examples(["a"], ["x"], np.array([0])), canaries)
    assert getattr(plain, "groups", None) is None
