"""Re-Attention (defenses/re_attention.py): moment formulas, simulation of attention
distraction and its correction, and the installed correction on the GPT-2 LM."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from privacy_audit.defenses.re_attention import (
    NoiseSetup,
    ReAttention,
    ReAttentionDefense,
    ReAttentionOptions,
    key_variances,
    linear_var,
    relu_moments,
    relu_var_printed,
    simulate_distraction,
    token_inclusion_probs,
)
from privacy_audit.targets.lm import build_lm, char_tokenizer


def test_relu_moments_match_monte_carlo_and_printed_formula_is_wrong():
    g = torch.Generator().manual_seed(0)
    for mean, std in [(0.0, 0.01), (0.0, 0.1), (0.0, 1.0), (0.7, 0.5), (-1.0, 0.5)]:
        x = mean + std * torch.randn(2_000_000, generator=g, dtype=torch.float64)
        m, v = relu_moments(torch.tensor(mean).double(), torch.tensor(std**2).double())
        assert abs(float(m) - float(x.relu().mean())) < 3e-3 * max(std, abs(mean))
        assert float(v) == pytest.approx(float(x.relu().var()), rel=1e-2)
    # Table 1's analytic column: σ²(1/2 − 1/(2π)) at zero mean
    _, v = relu_moments(torch.tensor(0.0).double(), torch.tensor(1.0).double())
    assert float(v) == pytest.approx(0.5 - 1 / (2 * np.pi), rel=1e-12)
    printed = relu_var_printed(torch.tensor(-1.0).double(), torch.tensor(0.25).double())
    assert float(printed) < 0  # the printed Eq. 31 gives a negative variance


def test_linear_variance_matches_monte_carlo():
    g = torch.Generator().manual_seed(1)
    mx, vx = torch.randn(5, dtype=torch.float64, generator=g), torch.rand(5, dtype=torch.float64)
    w = torch.randn(5, 3, dtype=torch.float64, generator=g)
    n = 400_000
    xs = mx + vx.sqrt() * torch.randn(n, 5, generator=g, dtype=torch.float64)
    ws = w + 0.3 * torch.randn(n, 5, 3, generator=g, dtype=torch.float64)
    bs = 0.3 * torch.randn(n, 3, generator=g, dtype=torch.float64)
    ys = torch.einsum("ni,nio->no", xs, ws) + bs
    pred = linear_var(mx[None], vx[None], w, 0.09, 0.09)[0]
    torch.testing.assert_close(ys.var(0), pred, rtol=0.02, atol=0)


def _rare_key_setup():
    g = torch.Generator().manual_seed(0)
    d = 16
    q = torch.randn(d, generator=g, dtype=torch.float64)
    q = q / q.norm() * 0.8**0.5
    keys = torch.randn(8, d, generator=g, dtype=torch.float64)
    for j in (6, 7):  # rare keys with low relevance: <q, k_j> = -2
        keys[j] = keys[j] - (keys[j] @ q) / (q @ q) * q - 2 * q / (q @ q)
    std = torch.tensor([0.02] * 6 + [0.35, 0.5], dtype=torch.float64)
    return q, keys, std


def test_rare_key_inflation_is_reproduced_and_corrected():
    q, keys, std = _rare_key_setup()
    r = simulate_distraction(q, keys, std, n_samples=200_000, seed=0)
    inflation = (r["uncorrected"] / r["true"])[6:]
    predicted = r["predicted_inflation"][6:]
    print(f"rare-key inflation {inflation.tolist()} vs predicted {predicted.tolist()}")
    assert (inflation > 1.03).all()
    torch.testing.assert_close(inflation, predicted, rtol=0.015, atol=0)
    bias_plain = float((r["uncorrected"] - r["true"]).abs().sum())
    bias_fixed = float((r["corrected"] - r["true"]).abs().sum())
    print(f"L1 attention bias {bias_plain:.4f} -> {bias_fixed:.4f}")
    assert bias_fixed < bias_plain / 5


def test_correction_reduces_mean_attention_bias_over_20_seeds():
    plain, fixed = [], []
    for s in range(20):
        g = torch.Generator().manual_seed(100 + s)
        keys = 0.25 * torch.randn(8, 16, generator=g, dtype=torch.float64)
        q = torch.randn(16, generator=g, dtype=torch.float64)
        q = q / q.norm() * 0.8**0.5
        std = torch.full((8,), 0.02, dtype=torch.float64)
        std[6:] = 0.3 + 0.3 * torch.rand(2, generator=g, dtype=torch.float64)  # 2 rare keys
        r = simulate_distraction(q, keys, std, n_samples=10_000, seed=s)
        plain.append(float((r["uncorrected"] - r["true"]).abs().sum()))
        fixed.append(float((r["corrected"] - r["true"]).abs().sum()))
    wins = sum(f < p for p, f in zip(plain, fixed, strict=True))
    print(f"mean L1 bias {np.mean(plain):.4f} -> {np.mean(fixed):.4f}; improved {wins}/20")
    assert np.mean(fixed) < 0.6 * np.mean(plain)
    assert wins >= 18


def test_uniform_noise_with_renormalisation_is_a_no_op_in_simulation():
    q, keys, _ = _rare_key_setup()
    std = torch.full((8,), 0.3, dtype=torch.float64)
    r = simulate_distraction(q, keys, std, n_samples=2_000, seed=1)
    # same draws, same constant shift per row: the corrected softmax equals the plain one
    torch.testing.assert_close(r["corrected"], r["uncorrected"], rtol=1e-12, atol=1e-15)


def _lm():
    tok = char_tokenizer()
    model = build_lm(tok.vocab_size, seed=0, n_embd=16, n_layer=2, n_head=2, n_positions=64)
    ids, mask = tok.encode(["hello there", "a rare Q@ token!"], 64)
    return model.double(), tok, ids, mask


def test_zero_noise_is_a_no_op_and_tracked_means_are_the_model_activations():
    model, tok, ids, mask = _lm()
    before = model(input_ids=ids, attention_mask=mask, output_hidden_states=True)
    p = torch.full((tok.vocab_size,), 0.5, dtype=torch.float64)
    zero = NoiseSetup.from_dp(0.0, 1.0, 16, p)
    _, means = key_variances(model, ids, mask, zero, ReAttentionOptions())
    # the tracked mean path is the model's own forward (last hidden state before ln_f)
    h = before.hidden_states[-1]
    ln = model.transformer.ln_f
    torch.testing.assert_close(ln(means)[mask.bool()], h[mask.bool()])
    ra = ReAttention(model, zero)
    after = model(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(after, before.logits, rtol=0, atol=1e-12)
    ra.remove()


def test_noise_changes_attention_towards_less_weight_on_rare_tokens():
    model, tok, ids, mask = _lm()
    probs = token_inclusion_probs(tok, ["hello there, the parcel"] * 50)
    assert probs[tok.index["h"]] > 0.9 and probs[tok.index["Q"]] < 0.05
    noise = NoiseSetup.from_dp(1.0, 1.0, 16, probs)
    assert noise.token_var[tok.index["Q"]] > 100 * noise.token_var[tok.index["h"]]
    kv, _ = key_variances(model, ids, mask, noise, ReAttentionOptions())
    pos_q = tok.encode(["a rare Q@ token!"], 64)[0][0].tolist().index(tok.index["Q"])
    assert kv[0][1, :, pos_q].min() > kv[0][1, :, 1].max()  # the rare key is the noisiest
    base = model(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
    ra = ReAttention(model, noise)
    out = model(input_ids=ids, attention_mask=mask, output_attentions=True)
    rows = out.attentions[0][1, :, pos_q + 1 :]  # queries after the rare token
    assert torch.allclose(rows.sum(-1), torch.ones_like(rows.sum(-1)))  # renormalised
    assert (rows[..., pos_q] < base[0][1, :, pos_q + 1 :, pos_q]).all()
    ra.remove()
    torch.testing.assert_close(
        model(input_ids=ids, attention_mask=mask).logits,
        model(input_ids=ids, attention_mask=mask).logits,
    )


def test_defense_options_are_validated():
    with pytest.raises(ValueError, match="p_source"):
        ReAttentionDefense(p_source="private-counts")
    with pytest.raises(ValueError, match="key_variance"):
        ReAttentionDefense(key_variance="max")
    with pytest.raises(ValueError, match="noise multiplier must be a finite number >= 0"):
        ReAttentionDefense(noise_multiplier=-1.0)
