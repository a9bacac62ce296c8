"""The privacy loss of one release of dp-attention's Gaussian sampling mechanism.

B = (1/k) Σ_{i≤k} g_i g_iᵀ with g_i ~ N(0, Σ) (:mod:`privacy_audit.defenses.dp_attention`);
for two neighbouring Gram matrices Σ1, Σ2 the privacy loss Z = log(p_Σ1(B)/p_Σ2(B)) depends
only on the eigenvalues λ of Σ1^{1/2}Σ2⁻¹Σ1^{1/2} (Gao, Song, Yang & Zhou, Lemma C.4), so it
is drawn exactly from χ²_k variables and its mean is closed-form (Lemma C.5). The
likelihood-ratio attack on the mechanism (:mod:`privacy_audit.attacks.attention_lrt`) and
the tests read it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from privacy_audit.defenses.dp_attention import check_k, check_psd_input, numpy_rng


def privacy_loss_eigenvalues(S1: Any, S2: Any) -> np.ndarray:
    """Eigenvalues λ of Σ1^{1/2}Σ2⁻¹Σ1^{1/2} (generalised eigenproblem, float64)."""
    from scipy.linalg import eigh

    a = check_psd_input(S1, "Sigma1").detach().double().numpy()
    b = check_psd_input(S2, "Sigma2").detach().double().numpy()
    return eigh(a, b, eigvals_only=True)


def privacy_loss_samples(
    S1: Any,
    S2: Any,
    k: int,
    trials: int,
    generator: torch.Generator | None = None,
    under: str = "S1",
) -> np.ndarray:
    """Exact draws of the privacy loss Z = log(p_Σ1(B)/p_Σ2(B)) of one release of k
    samples, Z = ½ Σ_j ((λ_j − 1)·Q_j − k·ln λ_j) with Q_j ~ χ²_k (B drawn under Σ1,
    Lemma C.4) or Q_j ~ χ²_k/λ_j (B drawn under Σ2)."""
    k = check_k(k)
    trials = check_k(trials)
    lam = privacy_loss_eigenvalues(S1, S2)
    u = lam - 1
    rng = numpy_rng(generator)
    q = rng.chisquare(k, size=(trials, lam.size))
    if under == "S2":
        q = q / lam
    elif under != "S1":
        raise ValueError("under must be 'S1' or 'S2'")
    centred = (q - k) @ u
    const = k * float(np.sum(u - np.log1p(u)))
    return 0.5 * (centred + const)


def privacy_loss_mean(S1: Any, S2: Any, k: int) -> float:
    """E[Z] under Σ1: (k/2) Σ_j (λ_j − 1 − ln λ_j) (Lemma C.5), computed stably."""
    u = privacy_loss_eigenvalues(S1, S2) - 1
    return 0.5 * check_k(k) * float(np.sum(u - np.log1p(u)))
