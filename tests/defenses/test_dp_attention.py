"""dp-attention: samplers, the theorem's constants, attention error bounds, the assumption
checker, the drop-in module and the defense's claim."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest
import torch
from scipy.stats import chi2, ks_2samp

from privacy_audit.defenses.dp_attention import (
    RHO_CONSTANT,
    DPAttentionConfig,
    DPSymmetricAttention,
    attention_error_bound_paper,
    attention_error_bound_relative,
    attention_from_logits,
    beta_max,
    check_assumptions,
    delta_cap,
    gaussian_sampling_from_factor,
    gaussian_sampling_mechanism,
    k_min,
    measured_sensitivity,
    rho,
    sensitivity_bound,
    swap_attention,
    validate_theorem_range,
)
from privacy_audit.defenses.dp_attention_privacy_loss import privacy_loss_mean, privacy_loss_samples


def _good_X(n: int, d: int, r: float, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    X = torch.randn(n, d, generator=g, dtype=torch.float64)
    return X / X.norm(dim=1, keepdim=True) * math.sqrt(0.99 * r)


def _inv_sqrt(A: torch.Tensor) -> torch.Tensor:
    w, V = torch.linalg.eigh(A)
    return V @ torch.diag_embed(w.rsqrt()) @ V.transpose(-1, -2)


# ----------------------------------------------------------------------------- samplers


@pytest.mark.parametrize("method", ["wishart", "explicit"])
def test_release_is_symmetric_psd_with_rank_min_n_k(method):
    A = (X := _good_X(6, 12, 0.09, 0)) @ X.T
    g = torch.Generator().manual_seed(1)
    for k in (3, 6, 50):
        B = gaussian_sampling_mechanism(A, k, g, method)
        assert torch.allclose(B, B.T, atol=1e-14)
        ev = torch.linalg.eigvalsh(B)
        assert ev.min() >= -1e-10 * ev.max()
        assert int(torch.linalg.matrix_rank(B)) == min(6, k)


def test_unbiased_with_wishart_variance():
    n, k, T = 4, 20, 20000
    A = (X := _good_X(n, 8, 0.09, 2)) @ X.T
    g = torch.Generator().manual_seed(3)
    B = gaussian_sampling_mechanism(A.expand(T, n, n).contiguous(), k, g)
    mean, var = B.mean(0), B.var(0)
    wishart_var = (A**2 + torch.outer(A.diagonal(), A.diagonal())) / k
    se = (wishart_var / T).sqrt()
    assert ((mean - A).abs() <= 5 * se).all()
    # the variance of a sample variance: relative SE ≈ sqrt(2/T) × kurtosis factor < 5%
    assert ((var / wishart_var - 1).abs() < 0.08).all()


def test_three_samplers_agree_in_distribution():
    n, d, k, T = 3, 5, 7, 4000
    X = _good_X(n, d, 0.09, 4)
    A = X @ X.T
    g = torch.Generator().manual_seed(5)
    Ab = A.expand(T, n, n).contiguous()
    wish = gaussian_sampling_mechanism(Ab, k, g, "wishart")
    expl = gaussian_sampling_mechanism(Ab, k, g, "explicit")
    proj = torch.stack([gaussian_sampling_from_factor(X, k, g) for _ in range(T)])
    Ai = _inv_sqrt(A)
    stats = {}
    for name, B in (("wishart", wish), ("explicit", expl), ("projection", proj)):
        W = Ai @ B @ Ai
        stats[name] = {
            "b00": B[:, 0, 0].numpy(),
            "b01": B[:, 0, 1].numpy(),
            "frob": (W - torch.eye(n, dtype=W.dtype)).norm(dim=(-2, -1)).numpy(),
        }
    pvals = []
    for a, b in (("wishart", "explicit"), ("wishart", "projection"), ("explicit", "projection")):
        for key in ("b00", "b01", "frob"):
            pvals.append(ks_2samp(stats[a][key], stats[b][key]).pvalue)
    assert min(pvals) > 0.001 / len(pvals)  # Bonferroni over 9 tests
    # and a wrong sampler (k off by 2) is told apart, so the test can fail
    wrong = gaussian_sampling_mechanism(Ab, k + 2, g, "wishart")
    assert (
        ks_2samp(
            stats["wishart"]["frob"], ((Ai @ wrong @ Ai) - torch.eye(n)).norm(dim=(-2, -1)).numpy()
        ).pvalue
        < 1e-6
    )


def test_sampling_error_tracks_sqrt_n2_plus_n_over_k_and_rho_covers_quantile():
    n, T = 8, 1500
    A = (X := _good_X(n, 16, 0.09, 6)) @ X.T
    Ai = _inv_sqrt(A)
    g = torch.Generator().manual_seed(7)
    for k in (10**2, 10**3, 10**4, 10**5):
        B = gaussian_sampling_mechanism(A.expand(T, n, n).contiguous(), k, g)
        err = (Ai @ B @ Ai - torch.eye(n, dtype=B.dtype)).norm(dim=(-2, -1)).numpy()
        predicted = math.sqrt((n * n + n) / k)
        assert abs(err.mean() / predicted - 1) < 0.15, (k, err.mean(), predicted)
        for gamma in (0.01, 0.05):
            assert np.quantile(err, 1 - gamma) <= rho(n, k, gamma)
    # the constant is needed: with C = 1 the 99% quantile at n = 2, k = 1e4 exceeds rho
    A2 = A[:2, :2]
    B2 = gaussian_sampling_mechanism(A2.expand(4000, 2, 2).contiguous(), 10**4, g)
    e2 = (_inv_sqrt(A2) @ B2 @ _inv_sqrt(A2) - torch.eye(2, dtype=B2.dtype)).norm(dim=(-2, -1))
    assert np.quantile(e2.numpy(), 0.99) > rho(2, 10**4, 0.01, constant=1.0)
    assert np.quantile(e2.numpy(), 0.99) <= rho(2, 10**4, 0.01)
    # the constant is the Gaussian limit's worst ratio with a margin
    limit = math.sqrt(2 * chi2.ppf(0.99, 3) / (4 + math.log(100)))
    assert limit < RHO_CONSTANT


def test_sampler_gradients_flow():
    torch.manual_seed(0)
    X = _good_X(3, 5, 0.09, 8).requires_grad_(True)

    def f(X):
        g = torch.Generator().manual_seed(9)  # same W every call: a smooth function of X
        return gaussian_sampling_mechanism(X @ X.T, 50, g)

    assert torch.autograd.gradcheck(f, (X,), eps=1e-6, atol=1e-6)


# ------------------------------------------------------------------------ bad input


@pytest.mark.parametrize("k", [0, -3, 2.5, True])
def test_k_must_be_positive_integer(k):
    with pytest.raises(ValueError, match="k .*positive integer"):
        gaussian_sampling_mechanism(torch.eye(2, dtype=torch.float64), k)
    with pytest.raises(ValueError, match="positive integer"):
        gaussian_sampling_from_factor(torch.eye(2, dtype=torch.float64), k)


def test_non_square_and_non_psd_inputs_are_refused():
    with pytest.raises(ValueError, match="square"):
        gaussian_sampling_mechanism(torch.ones(2, 3, dtype=torch.float64), 5)
    with pytest.raises(ValueError, match="not positive definite"):
        gaussian_sampling_mechanism(torch.tensor([[1.0, 2.0], [2.0, 1.0]]), 5)
    with pytest.raises(ValueError, match="symmetric"):
        gaussian_sampling_mechanism(torch.tensor([[1.0, 0.5], [0.0, 1.0]]), 5)
    with pytest.raises(ValueError, match="method"):
        gaussian_sampling_mechanism(torch.eye(2), 5, method="magic")
    with pytest.raises(ValueError, match="XXᵀ is not positive definite"):
        gaussian_sampling_from_factor(torch.ones(3, 2), 5)  # rank 1 < n


def test_theorem_range_errors_and_forced_warnings():
    for kwargs in ({"r": 0.2}, {"eps": 1.0}, {"delta": 0.1}):
        with pytest.raises(ValueError, match="outside Theorem 4.1's range.*force"):
            validate_theorem_range(**kwargs)
        with pytest.warns(UserWarning, match="outside Theorem 4.1's range.*heuristic"):
            reasons = validate_theorem_range(force=True, **kwargs)
        assert len(reasons) == 1
    with pytest.raises(ValueError, match="outside"):
        DPAttentionConfig(eps=0.5).validate()
    with pytest.warns(UserWarning, match="eps=0.5"):
        DPAttentionConfig(eps=0.5, force=True).validate()


# --------------------------------------------------------------------- the constants


def test_delta_cap_variants_and_kmin_beta_max_consistency():
    eps, delta = 0.09, 1e-5
    for k in (10, 10**4, 10**7):
        thm, defn = delta_cap(eps, delta, k, "thm4.1"), delta_cap(eps, delta, k, "def5.5")
        assert thm < defn  # Theorem 4.1's is the smaller and safer
    with pytest.raises(ValueError, match="variant"):
        delta_cap(eps, delta, 10, "other")
    ks = [k_min(n, eps, 0.01) for n in (4, 8, 16)]
    for n, k in zip((4, 8, 16), ks, strict=True):
        assert rho(n, k, 0.01) < 0.1 * eps <= rho(n, k - 1, 0.01)
    assert ks[0] < ks[1] < ks[2]
    assert 3.5 < ks[2] / ks[1] < 4.5  # ~ n²
    assert 3.5 < k_min(8, eps / 2, 0.01) / ks[1] < 4.5  # ~ 1/eps²
    n, alpha, eta = 8, 0.3, 0.01
    b = beta_max(n, alpha, eta, eps, delta, ks[1])
    cap = delta_cap(eps, delta, ks[1])
    assert sensitivity_bound(n, alpha, b, eta) < cap <= sensitivity_bound(n, alpha, b * 1.001, eta)
    assert beta_max(n, alpha, eta, eps, delta, 4 * ks[1]) == pytest.approx(b / 2, rel=1e-3)


def test_corrected_sensitivity_bound_holds_in_both_orders_and_paper_form_can_fail():
    n, d, r = 6, 10, 0.09
    rng = np.random.default_rng(10)
    paper_failures = 0
    for trial in range(60):
        X = _good_X(n, d, r, 100 + trial).numpy()
        A = X @ X.T
        eta = float(np.linalg.eigvalsh(A).min())
        alpha = float(np.linalg.norm(X, axis=0).max()) * 1.2
        beta = eta / (2 * alpha) * rng.uniform(0.05, 0.6)
        i = rng.integers(d)
        w, V = np.linalg.eigh(A)
        direction = V[:, 0] if trial % 2 else rng.normal(size=n)  # worst case: smallest eigvec
        Xt = X.copy()
        Xt[:, i] += beta * direction / np.linalg.norm(direction)
        if np.linalg.norm(Xt[:, i]) > alpha:
            continue
        At = Xt @ Xt.T
        c = 2 * alpha * beta / eta
        ev = np.linalg.eigvalsh(
            np.linalg.solve(np.linalg.cholesky(A), np.linalg.solve(np.linalg.cholesky(A), At).T)
        )
        assert ev.min() >= 1 - c - 1e-9 and ev.max() <= 1 + c + 1e-9  # Lemma D.1 sandwich
        m1, m2 = measured_sensitivity(A, At)
        bound = sensitivity_bound(n, alpha, beta, eta)
        assert max(m1, m2) <= bound + 1e-12
        paper_failures += max(m1, m2) > sensitivity_bound(n, alpha, beta, eta, corrected=False)
    # single-column worst case: the uncorrected form is not a bound on the inverse (P3)
    X = np.array([[1.0, 0.0], [0.0, 1.0]]) * 0.2
    A = X @ X.T
    eta, alpha, beta = 0.04, 0.2, 0.09
    Xt = X.copy()
    Xt[1, 1] -= beta
    m = max(measured_sensitivity(A, Xt @ Xt.T))
    assert m > sensitivity_bound(2, alpha, beta, eta, corrected=False)
    assert m <= sensitivity_bound(2, alpha, beta, eta)


# ------------------------------------------------------------------ attention bounds


@pytest.mark.parametrize("f", ["exp", "cosh"])
def test_attention_error_bounds_hold_on_random_and_adversarial_cases(f):
    rng = np.random.default_rng(11 if f == "exp" else 12)
    worst_paper = worst_rel = 0.0
    cases = 0
    for _ in range(1200):
        n = int(rng.integers(2, 12))
        d = int(rng.integers(n, 2 * n + 2))
        r = float(rng.uniform(0.005, 0.099))
        eps = float(rng.uniform(0.005, 0.099))
        X = rng.normal(size=(n, d))
        X *= np.sqrt(r * rng.uniform(0.3, 1.0, size=(n, 1))) / np.linalg.norm(
            X, axis=1, keepdims=True
        )
        A = X @ X.T
        w, V = np.linalg.eigh(A)
        half = V @ np.diag(np.sqrt(np.maximum(w, 0))) @ V.T
        # S with eigenvalues anywhere in, or at the ends of, the sandwich (1 ± 0.1 eps)
        Q, _ = np.linalg.qr(rng.normal(size=(n, n)))
        s = (
            rng.choice([1 - 0.1 * eps, 1 + 0.1 * eps], size=n)
            if cases % 2
            else rng.uniform(1 - 0.1 * eps, 1 + 0.1 * eps, size=n)
        )
        B = half @ Q @ np.diag(s) @ Q.T @ half
        PA = attention_from_logits(torch.from_numpy(A), f).numpy()
        PB = attention_from_logits(torch.from_numpy(B), f).numpy()
        err = np.abs(PA - PB)
        worst_paper = max(worst_paper, err.max() / attention_error_bound_paper(eps, r))
        rel = attention_error_bound_relative(PA, PB, eps, r)
        worst_rel = max(worst_rel, float((err / rel).max()))
        cases += 1
    assert cases >= 1000
    assert worst_paper <= 1.0 and worst_rel <= 1.0
    # the paper's bound is loose by orders of magnitude (P6); the relative one is tighter
    assert worst_paper < worst_rel


def test_attention_masks_are_post_processing():
    B = torch.tensor(
        [[0.05, 0.01, 0.02], [0.01, 0.04, 0.0], [0.02, 0.0, 0.03]], dtype=torch.float64
    )
    keep = torch.tensor([[True, True, False]] * 3)
    for f in ("exp", "cosh"):
        P = attention_from_logits(B, f, keep)
        assert torch.allclose(P.sum(-1), torch.ones(3, dtype=P.dtype))
        assert (P[:, 2] == 0).all()
        Q = attention_from_logits(B[:, :2], f)
        assert torch.allclose(P[:, :2], Q)


# ------------------------------------------------------------------- privacy loss


def test_privacy_loss_tail_at_def55_cap_is_below_delta():
    from scipy.stats import binomtest

    eps, delta, k, n = 0.09, 0.05, 3, 4
    cap = delta_cap(eps, delta, k, "def5.5")
    S1 = np.eye(n)
    lam = np.ones(n)
    lam[0] = 1 + cap * 0.999  # ‖Σ1^{1/2}Σ2^{-1}Σ1^{1/2} − I‖_F just below Δ (and the swap)
    S2 = np.diag(1 / lam)
    Z = privacy_loss_samples(S1, S2, k, 200_000, torch.Generator().manual_seed(13))
    assert Z.mean() <= eps / 2
    assert Z.mean() == pytest.approx(privacy_loss_mean(S1, S2, k), abs=5e-4)
    hits = int((Z > eps).sum())
    upper = binomtest(hits, Z.size).proportion_ci(0.95, "exact").high
    assert upper <= delta


# ------------------------------------------------------------------ assumption checker


def test_assumption_checker_names_exactly_the_failing_conditions():
    n, d, r, eps, delta = 6, 12, 0.09, 0.09, 1e-5
    X = _good_X(n, d, r, 14)
    eta = float(torch.linalg.eigvalsh(X @ X.T).min()) * 0.99
    alpha = float(X.norm(dim=0).max()) * 1.01
    k = k_min(n, eps, 0.01)
    b = beta_max(n, alpha, eta, eps, delta, k)
    kw = dict(r=r, alpha=alpha, eta=eta, eps=eps, delta=delta, gamma=0.01)
    good = check_assumptions(X, beta=b, k=k, **kw)
    assert good.all_hold, good.summary()
    assert check_assumptions(X, beta=10 * b, k=k, **kw).failed() == ["sensitivity < Delta"]
    assert check_assumptions(X, beta=b / 10, k=k // 2, **kw).failed() == ["rho < 0.1 eps"]
    assert check_assumptions(X.T[:, :n], beta=b, k=k, **kw).failed() != []
    assert "d >= n" in check_assumptions(X[:, :3], beta=b, k=k, **kw).failed()
    assert check_assumptions(2 * X, beta=b, k=k, **kw).failed()[:1] == ["max row norm^2 <= r"]
    assert "eps in (0, 0.1)" in check_assumptions(X, beta=b, k=k, **{**kw, "eps": 0.5}).failed()


# -------------------------------------------------------------------------- module


def _tiny_bert(layers: int = 2):
    from transformers import BertConfig, BertForSequenceClassification

    torch.manual_seed(0)
    cfg = BertConfig(
        vocab_size=50,
        hidden_size=32,
        num_hidden_layers=layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=32,
        num_labels=2,
    )
    return BertForSequenceClassification(cfg)


def test_module_drop_in_trains_with_padding_mask_and_gradients_flow():
    model = _tiny_bert()
    cfg = DPAttentionConfig(max_tokens=16)
    assert swap_attention(model, [0], cfg) == [0]
    mod = model.bert.encoder.layer[0].attention.self
    assert isinstance(mod, DPSymmetricAttention)
    assert mod.report.all_hold, mod.report.summary()
    mod.generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1, 50, (3, 10))
    mask = torch.ones(3, 10, dtype=torch.long)
    mask[1, 6:] = 0
    model.train()
    out = model(input_ids=ids, attention_mask=mask, labels=torch.tensor([0, 1, 0]))
    out.loss.backward()
    assert mod.qk.weight.grad is not None and mod.qk.weight.grad.abs().sum() > 0
    assert mod.value.weight.grad.abs().sum() > 0
    assert mod.stats["releases"] == 3 * 2
    # padding is post-processing: the padded sequence attends exactly like its trimmed self
    model.eval()
    mod.generator = torch.Generator().manual_seed(1)
    captured = []
    handle = mod.register_forward_hook(lambda m, a, o: captured.append(o[1]))
    with torch.no_grad():
        model(input_ids=ids[1:2], attention_mask=mask[1:2])
    handle.remove()
    P = captured[0][0]
    assert torch.allclose(P.sum(-1), torch.ones_like(P.sum(-1)))
    assert (P[:, :, 6:] == 0).all()
    # logits are within the theorem's r: near-uniform attention (P7)
    assert (P[:, :6, :6] - 1 / 6).abs().max() < 0.06


def test_swap_rejects_missing_layer_and_strict_refuses_failing_parameters():
    with pytest.raises(ValueError, match="layer 5 does not exist.*2 layers"):
        swap_attention(_tiny_bert(), [5], DPAttentionConfig())
    with pytest.raises(ValueError, match="strict.*sensitivity < Delta"):
        DPSymmetricAttention(32, 2, DPAttentionConfig(beta=1.0, strict=True, max_tokens=8))


def test_paper_mode_flags_rank_deficient_inputs():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = DPSymmetricAttention(8, 2, DPAttentionConfig(mode="paper", max_tokens=16))
    x = torch.randn(1, 10, 8)  # d_head = 4 < n = 10: XXᵀ is singular
    mod(x)
    assert mod.stats["data_violations"] == 1
    strict = DPSymmetricAttention(8, 2, DPAttentionConfig(mode="paper", max_tokens=4, strict=True))
    with pytest.raises(ValueError, match="paper mode.*ridge"):
        strict(torch.randn(1, 4, 8) * 0.0)


def test_bench_times_one_and_all_layers_against_non_private():
    from privacy_audit.audit.benchmarks.dp_attention import run
    from privacy_audit.audit.benchmarks.timing import BenchSettings

    res = run(BenchSettings(repeats=2, warmup=1, quick=True))
    assert res.reference == "non-private" and res.ratios["non-private"] == 1.0
    assert set(res.ratios) == {"non-private", "dp-attention (1 layer)", "dp-attention (2 layers)"}
    assert all(v > 0 for v in res.ratios.values())
    assert res.setup["k"] == DPAttentionConfig(max_tokens=32).samples
