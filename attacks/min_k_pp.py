"""Min-K%++ (Zhang et al. 2024, "Min-K%++: Improved baseline for detecting pre-training
data from large language models").

For every predicted token x_t of a sequence,

    z_t = (log p(x_t | x_<t) − μ_t) / σ_t,
    μ_t = E_{z ~ p(·|x_<t)} log p(z | x_<t),   σ_t² = Var_{z ~ p(·|x_<t)} log p(z | x_<t),

i.e. how far the true token's log-probability sits above the model's own expectation at
that position (a training point is a local maximum of the likelihood along the
vocabulary). The score is the mean of the ⌈k·T⌉ *lowest* z_t, ``k = 0.2`` by default;
higher = member. μ_t and σ_t² come from the full next-token distribution of the release's
single cached forward pass (``TokenStats``); no extra model call.
"""

from __future__ import annotations

import numpy as np

from privacy_audit.attacks.base import Attack
from privacy_audit.attacks.llm_membership import token_stats
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface, TokenStats

#: σ_t below this (a one-hot next-token distribution) is floored so z_t stays finite.
SIGMA_FLOOR = 1e-6


def token_z_scores(stats: TokenStats) -> np.ndarray:
    """z_t = (log p(x_t|x_<t) − μ_t) / σ_t for every predicted token of one sequence."""
    sigma = np.sqrt(np.maximum(np.asarray(stats.var_log_prob, dtype=np.float64), 0.0))
    return (np.asarray(stats.log_probs) - np.asarray(stats.mean_log_prob)) / np.maximum(
        sigma, SIGMA_FLOOR
    )


def min_k_pp_scores(stats: list[TokenStats], k: float = 0.2) -> np.ndarray:
    """Mean of the ⌈k·T⌉ smallest z_t per sequence (0 for an empty sequence)."""
    if not 0 < k <= 1:
        raise ValueError(f"min-k++ fraction must be in (0, 1], got {k}")
    out = []
    for s in stats:
        z = token_z_scores(s)
        if z.size == 0:
            out.append(0.0)
            continue
        n = max(1, int(np.ceil(k * z.size)))
        out.append(float(np.sort(z)[:n].mean()))
    return np.array(out)


class MinKPlusPlusAttack(Attack):
    name = "min-k++"
    target_kind = "lm"  # needs a causal LM release
    description = (
        "Mean of the 20% lowest standardised token log-probabilities "
        "(log p − μ_t)/σ_t under the next-token distribution (Min-K%++, Zhang et al. 2024)."
    )
    summary = "Min-K%++: mean of the 20% lowest standardised token log-probabilities"
    cost = "shared forward pass"
    requires = frozenset({Surface.PROBABILITIES})
    summary = "Min-K% on log-probabilities standardised by the next-token distribution (Zhang et al. 2024)."
    needs = ()
    cost = "none beyond the shared forward pass (its next-token mean and variance)"
    OPTIONS = {"k": (float, 0.2)}

    def __init__(self, k: float = 0.2) -> None:
        if not 0 < k <= 1:
            raise ValueError(f"min-k++ k must be in (0, 1], got {k}")
        self.k = k

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        return min_k_pp_scores(token_stats(release, examples.texts), self.k)
