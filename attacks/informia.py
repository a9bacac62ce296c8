"""InfoRMIA, scored (Tao and Shokri, ICLR 2026, "(Token-Level) InfoRMIA: Stronger Membership
Inference and Memorization Assessment for LLMs", arXiv 2510.05582), with one reference.

InfoRMIA replaces RMIA's count of dominated population samples by an information gain in
bits: for a record x, log₂ p(x|θ)/p(x) (θ the target, p(x) the reference's likelihood),
corrected for the shift between the target and the reference on the population,
D_KL(p(z) ‖ p(z|θ)) = −E_z log₂ p(z|θ)/p(z). The token-level form scores every predicted
token of a text:

    g_t(x)   = log₂ p_θ(x_t | x_<t) − log₂ p_ref(x_t | x_<t)        (bits, per token)
    ĝ        = mean of g_t(z) over every token of the population texts z
    s_t(x)   = g_t(x) − ĝ                                            (token score)
    InfoRMIA(x) = Σ_t s_t(x)                                          (sequence score)

so ĝ is the per-token estimate of −D_KL(p(z) ‖ p(z|θ)) and the sequence score is the
information x's tokens carry about θ beyond what a population token carries. Higher =
member. The s_t are the per-token map (``audit/leakage_map.py`` shades g_t); this attack
turns it into a score. It differs from ``reference`` (the *mean* of g_t, no population
term) in weighting: a long text that gains a little on every token is not ranked like a
short one that gains the same per token, but by the total bits above the population's.

The population: the texts scored (members and non-members together, unlabelled: RMIA's
choice when no other population is given; InfoRMIA is stated to need few population
samples), so no extra forward pass. What we could not check offline: the paper's exact
token aggregation (we sum token scores, the sequence-level form's log-likelihood ratio
of the whole text); docs/attacks.md says so.

Cost: the shared forward pass of the target and of the reference (one each).
"""

from __future__ import annotations

import numpy as np

from privacy_audit.attacks.llm_membership import ReferenceAttack, token_stats
from privacy_audit.defenses.base import Examples, ReleasedModel, TokenStats

_LOG2 = np.log(2.0)


def token_gains(target: list[TokenStats], reference: list[TokenStats]) -> list[np.ndarray]:
    """g_t in bits for every predicted token of every text."""
    out = []
    for t, r in zip(target, reference, strict=True):
        if not np.array_equal(t.token_ids, r.token_ids):
            raise ValueError("informia: the reference scored a different token sequence")
        out.append(
            (np.asarray(t.log_probs, np.float64) - np.asarray(r.log_probs, np.float64)) / _LOG2
        )
    return out


def population_gain(gains: list[np.ndarray]) -> float:
    """ĝ: the mean per-token gain over every token of the population texts."""
    n = sum(g.size for g in gains)
    if n == 0:
        raise ValueError("informia: the population has no scored token")
    return float(sum(g.sum() for g in gains) / n)


def informia_scores(gains: list[np.ndarray], g_pop: float) -> np.ndarray:
    """Σ_t (g_t − ĝ) per text."""
    return np.array([float((g - g_pop).sum()) for g in gains], dtype=np.float64)


class InfoRMIAAttack(ReferenceAttack):
    name = "informia"
    target_kind = "lm"
    description = (
        "Token-level InfoRMIA (Tao and Shokri 2026): the sum over tokens of the target-minus-"
        "reference log2-probability, less the population's mean per-token gain (bits)."
    )
    summary = "token-level InfoRMIA: bits each token gains over the reference, population-corrected"
    needs = ("reference",)
    cost = "shared forward pass (target and reference, one each)"

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        texts = list(examples.texts)
        gains = token_gains(
            token_stats(release, texts), token_stats(self.reference_for(release), texts)
        )
        return informia_scores(gains, population_gain(gains))
