"""Threshold membership-inference attacks on the probability/loss surface.

Every score is oriented so that higher means "member".
- loss (Yeom et al. 2018): score = −ℓ(x, y).
- confidence (Salem et al. 2019): score = max_c p_c(x).
- entropy (Salem et al. 2019): score = −H(p(x)).
- modified entropy (Song & Mittal 2021, Eq. 5): Mentr(p, y) = −(1 − p_y) log p_y
  − Σ_{c≠y} p_c log(1 − p_c); members have lower Mentr, so score = −Mentr.
"""

from __future__ import annotations

import numpy as np

from privacy_audit.attacks.base import Attack
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface

_TINY = 1e-30  # keeps log finite at p = 0 or 1 without moving any realistic score


class LossAttack(Attack):
    name = "loss"
    description = "Loss threshold (Yeom et al. 2018): low loss on the true label means member."
    requires = frozenset({Surface.LOSS})
    summary = "Low loss on the true label means member (Yeom et al. 2018)."
    needs = ("labels",)
    cost = "1 forward pass per example"

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        return -release.loss(examples.texts, examples.labels)


class ConfidenceAttack(Attack):
    name = "confidence"
    description = "Confidence threshold: a high maximum class probability means member."
    requires = frozenset({Surface.PROBABILITIES})
    summary = "A high top-class probability means member."
    needs = ()
    cost = "1 forward pass per example"

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        return release.probabilities(examples.texts).max(axis=1)


def entropy(p: np.ndarray) -> np.ndarray:
    return -(p * np.log(np.clip(p, _TINY, 1.0))).sum(axis=1)


def modified_entropy(p: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Song & Mittal's Mentr; uses the true label, so it is monotone in correctness."""
    labels = np.asarray(labels, dtype=np.int64)
    rows = np.arange(len(labels))
    p_y = p[rows, labels]
    log_1mp = np.log(np.clip(1.0 - p, _TINY, 1.0))
    others = -(p * log_1mp).sum(axis=1) + p_y * log_1mp[rows, labels]
    return -(1.0 - p_y) * np.log(np.clip(p_y, _TINY, 1.0)) + others


class EntropyAttack(Attack):
    name = "entropy"
    description = "Prediction entropy: a confident (low-entropy) prediction means member."
    requires = frozenset({Surface.PROBABILITIES})
    summary = "A confident (low-entropy) prediction means member."
    needs = ()
    cost = "1 forward pass per example"

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        return -entropy(release.probabilities(examples.texts))


class ModifiedEntropyAttack(Attack):
    name = "modified-entropy"
    description = "Modified entropy (Song & Mittal 2021): uses the true label; low means member."
    requires = frozenset({Surface.PROBABILITIES})
    summary = "Modified prediction entropy on the true label (Song & Mittal 2021)."
    needs = ("labels",)
    cost = "1 forward pass per example"

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        p = release.probabilities(examples.texts)
        return -modified_entropy(p, examples.labels)
