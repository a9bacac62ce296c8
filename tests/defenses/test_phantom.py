"""Phantom Clipping and the DP-SGD engine (defenses/phantom.py, defenses/dp_engine.py)."""

from __future__ import annotations

import pytest
import torch

from privacy_audit.defenses.dp_engine import (
    DPSGDEngine,
    account,
    calibrate_noise,
    clip_weights,
    epsilon_opacus,
    epsilon_pld,
)
from privacy_audit.defenses.phantom import (
    PhantomCapture,
    UntiedModelError,
    explicit_per_sample_grad_norms,
    explicit_per_sample_grads,
    per_sample_grad_norms,
    per_sample_token_loss,
    phantom_embedding_sq_norms,
    phantom_sq_norms_dense,
)
from privacy_audit.targets.lm import build_lm, sequence_loss


def _model(seed=0, tie=True, n_positions=32):
    return build_lm(
        20, seed=seed, n_embd=8, n_layer=2, n_head=2, n_positions=n_positions, tie=tie
    ).double()


def _batch(length: int, seed: int = 0):
    """Repeated tokens within a sequence, right padding, and two identical sequences."""
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(4, 20, (5, length), generator=g)
    ids[0, 1] = ids[0, 3] = ids[0, 5] = 9  # a token repeated three times
    ids[1, : length // 2] = 7  # a run of one token
    mask = torch.ones_like(ids)
    mask[2, length - 3 :] = 0  # padding
    ids[2, length - 3 :] = 0
    ids[4] = ids[3]  # identical sequences
    return ids, mask


def _loop_norms(model, ids, mask):
    """Per-sample autograd, one sequence at a time (no padding in the single-row batch)."""
    out = []
    for i in range(len(ids)):
        n = int(mask[i].sum())
        model.zero_grad()
        sequence_loss(model, ids[i : i + 1, :n], mask[i : i + 1, :n])[0].backward()
        out.append(torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters())))
    model.zero_grad()
    return torch.stack(out)


@pytest.mark.parametrize("length", [6, 12])  # T <= d (Gram form) and T > d (chunked form)
@pytest.mark.parametrize("linear_mode", ["ghost", "instantiate", "auto"])
def test_phantom_equals_explicit_per_sample_norms_float64(length, linear_mode):
    model = _model()
    ids, mask = _batch(length)
    phantom = per_sample_grad_norms(model, ids, mask, linear_mode=linear_mode)
    explicit = explicit_per_sample_grad_norms(model, ids, mask)
    torch.testing.assert_close(phantom, explicit, rtol=1e-5, atol=0)
    torch.testing.assert_close(phantom, _loop_norms(model, ids, mask), rtol=1e-5, atol=0)
    assert phantom[3] == phantom[4]  # identical sequences, identical norms


def test_printed_squared_inner_product_fails_the_comparison():
    model = _model()
    ids, mask = _batch(12)
    printed = per_sample_grad_norms(model, ids, mask, variant="printed")
    explicit = explicit_per_sample_grad_norms(model, ids, mask)
    rel = ((printed - explicit).abs() / explicit).max()
    print(f"printed <A,B>^2 form: max relative error {rel:.3g}")
    assert rel > 1e-3
    with pytest.raises(AssertionError):
        torch.testing.assert_close(printed, explicit, rtol=1e-5, atol=0)


@pytest.mark.parametrize("length", [4, 40])
def test_dense_algorithm1_equals_low_rank_form(length):
    g = torch.Generator().manual_seed(1)
    b, m, d = 3, 30, 16
    ids = torch.randint(0, m, (b, length), generator=g)
    ids[:, 1] = ids[:, 0]
    g_in = torch.randn(b, length, d, generator=g, dtype=torch.float64)
    big_g = torch.randn(b, length, m, generator=g, dtype=torch.float64)
    h = torch.randn(b, length, d, generator=g, dtype=torch.float64)
    a_s = torch.nn.functional.one_hot(ids, m).double()
    grad_ec = big_g.mT @ h  # per-sample ∇e_C, only for the dense reference
    dense = phantom_sq_norms_dense(a_s, g_in, grad_ec)
    explicit = (a_s.mT @ g_in + grad_ec).pow(2).sum((1, 2))  # ‖a_Sᵀ∇e_S + ∇e_C‖²
    low = phantom_embedding_sq_norms(ids, g_in, big_g, h)
    torch.testing.assert_close(dense, explicit, rtol=1e-10, atol=1e-10)
    torch.testing.assert_close(low, explicit, rtol=1e-10, atol=1e-10)
    assert not torch.allclose(phantom_sq_norms_dense(a_s, g_in, grad_ec, printed=True), explicit)


def test_bookkeeping_weighted_sum_equals_explicit():
    model = _model(seed=2)
    ids, mask = _batch(10, seed=2)
    w = torch.rand(5, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with PhantomCapture(model) as cap:
        cap.backward(cap.forward(ids, mask))
        sums = cap.weighted_grads(w)
    per = explicit_per_sample_grads(model, ids, mask)
    for name, p in model.named_parameters():
        torch.testing.assert_close(sums[p], torch.einsum("b,b...->...", w, per[name]))


def test_clipped_noised_update_equals_explicit_dp_sgd_update():
    model = _model(seed=3)
    ids, mask = _batch(12, seed=3)
    kw = dict(max_grad_norm=0.5, noise_multiplier=1.3, expected_batch_size=4.0)
    upd = {
        norms: DPSGDEngine(model, norms=norms, **kw).private_gradients(
            ids, mask, torch.Generator().manual_seed(11)
        )
        for norms in ("phantom", "explicit")
    }
    for p in upd["phantom"]:
        torch.testing.assert_close(upd["phantom"][p], upd["explicit"][p], rtol=1e-10, atol=1e-12)
    # σ = 0: the update is exactly (Σ clip(g_i)) / B from the explicit per-sample gradients
    per = explicit_per_sample_grads(model, ids, mask)
    norms = torch.stack([g.flatten(1).pow(2).sum(1) for g in per.values()]).sum(0).sqrt()
    w = clip_weights(norms, 0.5)
    assert (norms > 0.5).any()  # clipping is active
    quiet = DPSGDEngine(model, 0.5, 0.0, 4.0).private_gradients(ids, mask)
    for name, p in model.named_parameters():
        torch.testing.assert_close(quiet[p], torch.einsum("b,b...->...", w, per[name]) / 4.0)


@pytest.mark.parametrize(("q", "steps"), [(0.02, 300), (0.064, 150)])
def test_accountant_agrees_with_a_second_accountant(q, steps):
    sigma = calibrate_noise(3.0, 1e-5, q, steps, "prv")
    acc = account(sigma, q, steps, 1e-5)
    print(f"q={q} T={steps} sigma={sigma:.4f} {acc}")
    assert acc["epsilon_opacus_prv"] <= 3.0 + 1e-9  # calibration hits the target from below
    assert acc["relative_difference"] < 0.01
    assert acc["claimed"] == max(acc["epsilon_opacus_prv"], acc["epsilon_dp_accounting_pld"])
    # more noise, less ε, in both accountants
    assert epsilon_opacus(1.2 * sigma, q, steps, 1e-5) < acc["epsilon_opacus_prv"]
    assert epsilon_pld(1.2 * sigma, q, steps, 1e-5) < acc["epsilon_dp_accounting_pld"]


def test_bad_inputs_give_clear_errors():
    untied = _model(tie=False)
    ids, mask = _batch(8)
    with pytest.raises(UntiedModelError, match="tied.*explicit.*Opacus"):
        per_sample_grad_norms(untied, ids, mask)
    with pytest.raises(UntiedModelError, match="tie them"):
        DPSGDEngine(untied)
    DPSGDEngine(untied, norms="explicit")  # the named alternative works
    model = _model(n_positions=8)
    with pytest.raises(ValueError, match="noise multiplier must be a finite number >= 0"):
        DPSGDEngine(model, noise_multiplier=-0.5)
    long_ids, long_mask = _batch(12)
    with pytest.raises(ValueError, match="exceed the model's context length 8"):
        per_sample_grad_norms(model, long_ids, long_mask)
    with pytest.raises(ValueError, match="exceed the model's context length 8"):
        DPSGDEngine(model).private_gradients(long_ids, long_mask)

    def mean_loss(logits, i, m):
        return per_sample_token_loss(logits, i, m).mean()

    for norms in ("phantom", "explicit"):
        with pytest.raises(ValueError, match=r"reduction='none'.*mean"):
            DPSGDEngine(model, norms=norms, loss_fn=mean_loss).private_gradients(ids, mask)
