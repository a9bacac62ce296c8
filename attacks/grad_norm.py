"""Gradient-norm membership score (white box).

    score(x) = −‖∇_θ L(x; θ)‖₂,       L = mean next-token cross-entropy of the sequence,

a training text sits near a stationary point of the training loss, so its gradient norm is
small (lower norm = member); the sign makes higher = member. The gradient is the full
parameter gradient of the released weights (as in the stacked MIA's gradient feature,
Mattern et al. / DP-BloGS §4.1.1), one backward pass per text: the costliest LM signal
here (≈ 3 forward passes per text).
"""

from __future__ import annotations

import numpy as np
import torch

from privacy_audit.attacks.base import Attack
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface


def gradient_norms(release, texts: list[str]) -> np.ndarray:
    """‖∇_θ L(x)‖₂ for every text (float64)."""
    from privacy_audit.targets.lm import sequence_loss

    model = getattr(release, "model", None)
    if model is None or not hasattr(release, "encode"):
        raise ValueError("grad-norm needs white-box access to the released model's weights")
    params = [p for p in model.parameters() if p.requires_grad]
    dev = next(model.parameters()).device
    was = model.training
    model.eval()
    out = []
    try:
        for t in texts:
            ids, mask = release.encode([t])
            loss = sequence_loss(model, ids.to(dev), mask.to(dev))[0]
            grads = torch.autograd.grad(loss, params, allow_unused=True)
            sq = sum(float((g.double() ** 2).sum()) for g in grads if g is not None)
            out.append(np.sqrt(sq))
    finally:
        model.train(was)
    return np.array(out, dtype=np.float64)


class GradNormAttack(Attack):
    name = "grad-norm"
    target_kind = "lm"  # needs a causal LM release
    description = (
        "−L2 norm of the gradient of the sequence loss w.r.t. all weights (white box): a small "
        "gradient means member."
    )
    requires = frozenset({Surface.LOSS})
    summary = "Norm of the loss gradient w.r.t. the weights; small means member (white box)."
    needs = ("gradients",)
    cost = "1 forward + 1 backward pass per text (about 3 forward passes)"

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        return -gradient_norms(release, list(examples.texts))
