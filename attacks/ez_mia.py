"""EZ-MIA, the error-zone membership score (Ilic, Stanojević and Cvejoski 2026, "Powerful
Training-Free Membership Inference Against Autoregressive Language Models",
arXiv 2601.12104).

For a text with predicted positions t = 1..T (x_t given x_<t) under the target θ and a
reference θ_ref (the pretrained base the target was fine-tuned from):

    Δ_t = log p_θ(x_t | x_<t) − log p_ref(x_t | x_<t)
    E   = { t ≥ 2 : argmax_z p_θ(z | x_<t) ≠ x_t }          (the target's error zone)
    EZ(x) = Σ_{t∈E} max(Δ_t, 0) / Σ_{t∈E} max(−Δ_t, 0)

Higher = member: fine-tuning raises the probability of a member's true token even where
the target still gets it wrong, so in the error zone the positive shifts dominate; on a
non-member the shifts there go both ways. Edge cases, as the authors' published
definition (``error_zone_pos_neg_sum_ratio``): the first predicted position is dropped
("BOS handling": with a BOS it is the first real token's prediction from BOS alone,
without one the second token's from the first); fewer than ``min_tokens`` = 2 error
positions, or no negative shift among them, give 0.

Cost: none beyond the shared forward pass of each model. Δ_t needs log p(x_t) of the target
and of the reference, the error zone needs the target's top-1 token; all three are in the
:class:`~privacy_audit.defenses.base.TokenStats` each release computes once per text (the
reference's pass is the one the ``reference`` attack already runs).
"""

from __future__ import annotations

import numpy as np

from privacy_audit.attacks.llm_membership import ReferenceAttack, token_stats
from privacy_audit.defenses.base import Examples, ReleasedModel, TokenStats

MIN_TOKENS = 2  # fewer error positions than this: score 0 (the paper's min_tokens)


def error_zone_ratio(
    target_log_probs: np.ndarray,
    reference_log_probs: np.ndarray,
    target_top1: np.ndarray,
    token_ids: np.ndarray,
    min_tokens: int = MIN_TOKENS,
    ignore_first: bool = True,
) -> float:
    """EZ(x) for one text from per-position arrays (module docstring)."""
    tlp = np.asarray(target_log_probs, dtype=np.float64)
    rlp = np.asarray(reference_log_probs, dtype=np.float64)
    top1 = np.asarray(target_top1)
    ids = np.asarray(token_ids)
    if not (tlp.shape == rlp.shape == top1.shape == ids.shape):
        raise ValueError(
            "ez-mia: target and reference statistics cover different tokens "
            f"({tlp.shape}, {rlp.shape}, {top1.shape}, {ids.shape})"
        )
    error = top1 != ids  # the target's top-1 prediction is wrong here
    if ignore_first and error.size:
        error[0] = False
    if int(error.sum()) < min_tokens:
        return 0.0
    delta = (tlp - rlp)[error]
    positive = float(delta[delta > 0].sum())
    negative = float(-delta[delta < 0].sum())
    if negative == 0.0:
        return 0.0
    return positive / negative


def ez_scores(target: list[TokenStats], reference: list[TokenStats]) -> np.ndarray:
    """EZ(x) per text from the two models' token statistics of the same encodings."""
    out = []
    for t, r in zip(target, reference, strict=True):
        if t.top1_ids is None:
            raise ValueError("ez-mia needs the target's top-1 tokens from its forward pass")
        if not np.array_equal(t.token_ids, r.token_ids):
            raise ValueError("ez-mia: the reference scored a different token sequence")
        out.append(error_zone_ratio(t.log_probs, r.log_probs, t.top1_ids, t.token_ids))
    return np.asarray(out, dtype=np.float64)


class EZMIAAttack(ReferenceAttack):
    """The reference is the user's base (``--reference`` / ``reference_dirs``, or the
    adapter's base); on a suite-trained target, the public-split reference of
    :class:`ReferenceAttack`."""

    name = "ez-mia"
    target_kind = "lm"
    description = (
        "EZ-MIA (Ilic et al. 2026): on the tokens the target predicts wrongly, the sum of "
        "positive over the sum of negative shifts of log p(true token) from the reference."
    )
    summary = "error-zone ratio of target-vs-base log-probability shifts (EZ-MIA 2026)"
    needs = ("reference",)
    cost = "shared forward pass (target and reference, one each)"

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        texts = list(examples.texts)
        return ez_scores(
            token_stats(release, texts), token_stats(self.reference_for(release), texts)
        )
