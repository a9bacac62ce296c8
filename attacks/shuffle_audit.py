"""Gradient-level ε audit of a gradient-release mechanism that permutes instead of adding
noise (DP-BloGS's block shuffle), with a Gaussian-mechanism positive control.

The DP game, white-box: the adversary knows two neighbouring batches, ``D`` (without the
canary) and ``D'`` (one example replaced by a canary), the model and the mechanism's public
parameters (clip value, block sizes). It sees ONE release of the mechanism on the batch
gradient of either ``D'`` (member world) or ``D`` (non-member world) and must say which.
Each trial is a fresh release (fresh permutation or noise), so trials are independent by
construction and the Clopper–Pearson bound's independence assumption holds exactly.

Statistic (``"sorted"``): per tensor, the sorted values of the release, compared with the
sorted values of each world's clipped gradient (which the adversary computes itself):

    score = Σ_t ‖sort(r_t) − sort(c_t(D))‖ − ‖sort(r_t) − sort(c_t(D'))‖,

``"extremes"`` (the default, O(d) per tensor) uses only the 16 largest and 16 smallest
values of each tensor, a part of the sorted values;
higher = closer to the canary world. A block permutation cannot change sorted values, so
when the block size divides the tensor size the two worlds are separated perfectly. The
threshold is fixed before any release (0: "closer to D'"), so every trial is counted:
``privacy_audit.stats.epsilon_bounds.epsilon_lower_bound_from_counts`` (Jagielski et al. 2020). With perfect
separation and ``n`` trials per side the bound is its ceiling, about ln n (5.60 at n = 10³,
δ = 1e-5). The ``"projection"`` statistic ⟨r, c(D') − c(D)⟩ is the Neyman–Pearson test for
the Gaussian control. Any statistic gives a valid bound; a good one gives a large bound.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import torch

from privacy_audit.stats.epsilon_bounds import (
    epsilon_lower_bound,
    epsilon_lower_bound_from_counts,
    gaussian_mechanism_epsilon,
)

STATISTICS = ("extremes", "sorted", "projection")
#: Largest and smallest values per tensor scored by the ``"extremes"`` statistic.
EXTREMES_K = 16


class GradientRelease(Protocol):
    """A mechanism on per-tensor batch gradients."""

    def canonical(self, grads: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """The deterministic part the adversary can compute for a known batch (e.g. clip)."""

    def release(
        self, grads: Sequence[torch.Tensor], generator: torch.Generator
    ) -> list[torch.Tensor]:
        """One randomised release."""


@dataclass(frozen=True)
class GaussianControl:
    """Positive control: clip the whole gradient (all tensors) to L2 norm ``clip_value``
    and add N(0, σ²) per coordinate. Neighbouring clipped gradients differ by at most 2C in
    L2, so the release is (ε, δ)-DP with ε = ``gaussian_mechanism_epsilon(2C/σ, δ)``."""

    clip_value: float
    sigma: float

    def canonical(self, grads):
        flat = torch.cat([g.reshape(-1) for g in grads]).double()
        scale = min(1.0, self.clip_value / max(float(flat.norm()), 1e-300))
        return [g.double() * scale for g in grads]

    def release(self, grads, generator):
        return [
            c + self.sigma * torch.randn(c.shape, generator=generator, dtype=c.dtype)
            for c in self.canonical(grads)
        ]

    def epsilon(self, delta: float) -> float:
        return gaussian_mechanism_epsilon(2.0 * self.clip_value / self.sigma, delta)


def _sorted(ts: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    return [torch.sort(t.reshape(-1).double()).values for t in ts]


def _extremes(ts: Sequence[torch.Tensor], k: int = EXTREMES_K) -> list[torch.Tensor]:
    """Per tensor, its ``k`` largest and ``k`` smallest values (sorted): part of the sorted
    values, O(d) instead of O(d log d)."""
    out = []
    for t in ts:
        flat = t.reshape(-1)
        kk = min(k, flat.numel())
        top = torch.topk(flat, kk).values
        bottom = torch.topk(flat, kk, largest=False).values
        out.append(torch.cat([top, bottom]).double())
    return out


@dataclass(frozen=True)
class ShuffleAudit:
    """Distinguish ``release(g(D'))`` from ``release(g(D))`` over ``trials`` fresh releases
    per side; Clopper–Pearson ε lower bound at a threshold fixed in advance."""

    trials: int = 1000
    seed: int = 0
    statistic: str = "extremes"

    name = "gradient-shuffle-canary"
    description = (
        "White-box gradient audit of the block shuffle: one release of the clipped, shuffled "
        "batch gradient with or without a canary per trial, scored by its largest and smallest "
        "values per tensor (which a permutation cannot change); Clopper–Pearson at a "
        "threshold fixed in advance."
    )

    def __post_init__(self) -> None:
        if self.trials < 100:
            raise ValueError(f"shuffle-audit trials must be at least 100, got {self.trials}")
        if self.statistic not in STATISTICS:
            raise ValueError(
                f"unknown audit statistic {self.statistic!r}; allowed: {', '.join(STATISTICS)}"
            )

    def _scorer(self, ref_in, ref_out) -> tuple[Callable, float]:
        if self.statistic in ("sorted", "extremes"):
            view = _sorted if self.statistic == "sorted" else _extremes
            s_in, s_out = view(ref_in), view(ref_out)

            def score(rel):
                r = view(rel)
                return sum(
                    float((a - o).norm() - (a - i).norm())
                    for a, i, o in zip(r, s_in, s_out, strict=True)
                )

            return score, 0.0
        diff = [(i.double() - o.double()).reshape(-1) for i, o in zip(ref_in, ref_out, strict=True)]
        mid = sum(
            float(((i.double() + o.double()).reshape(-1) / 2) @ d)
            for i, o, d in zip(ref_in, ref_out, diff, strict=True)
        )

        def score(rel):
            return sum(float(r.double().reshape(-1) @ d) for r, d in zip(rel, diff, strict=True))

        return score, mid

    def scores(
        self,
        grads_in: Sequence[torch.Tensor],
        grads_out: Sequence[torch.Tensor],
        mechanism: GradientRelease,
    ) -> tuple[np.ndarray, np.ndarray, float]:
        """Scores of ``trials`` member-world then ``trials`` non-member-world releases, the
        membership bits and the threshold fixed from the two known batches alone."""
        if len(grads_in) != len(grads_out) or not grads_in:
            raise ValueError("the two worlds need the same, non-empty list of gradient tensors")
        for a, b in zip(grads_in, grads_out, strict=True):
            if a.shape != b.shape:
                raise ValueError(f"gradient shapes differ between worlds: {a.shape} vs {b.shape}")
        score, threshold = self._scorer(
            mechanism.canonical(grads_in), mechanism.canonical(grads_out)
        )
        gen = torch.Generator().manual_seed(self.seed)
        out = np.empty(2 * self.trials)
        with torch.no_grad():
            for k in range(2 * self.trials):
                grads = grads_in if k < self.trials else grads_out
                out[k] = score(mechanism.release(grads, gen))
        members = np.repeat(np.array([1, 0], np.int64), self.trials)
        return out, members, threshold

    def run(
        self,
        grads_in: Sequence[torch.Tensor],
        grads_out: Sequence[torch.Tensor],
        mechanism: GradientRelease,
        delta: float,
        confidence: float = 0.95,
        claimed_epsilon: float | None = None,
    ) -> dict[str, Any]:
        s, m, thr = self.scores(grads_in, grads_out, mechanism)
        n = self.trials
        tp = int(np.sum(s[m == 1] > thr))
        fp = int(np.sum(s[m == 0] > thr))
        lb = epsilon_lower_bound_from_counts(fp, n, n - tp, n, delta, confidence)
        ceiling = epsilon_lower_bound_from_counts(0, n, 0, n, delta, confidence)
        split = epsilon_lower_bound(s, m, delta, confidence=confidence, seed=self.seed)
        rng = np.random.default_rng(self.seed)
        keep = np.sort(rng.choice(len(s), size=min(len(s), 20_000), replace=False))
        return {
            "name": self.name,
            "description": self.description,
            "status": "ok",
            "reason": None,
            "epsilon_lb": lb,
            "ceiling": ceiling,
            "point_estimate": None,
            "epsilon_lb_split_threshold": split,
            "method": "clopper-pearson, threshold fixed in advance",
            "statistic": self.statistic,
            "confidence": confidence,
            "delta": delta,
            "n_in": n,
            "n_out": n,
            "true_positives": tp,
            "false_positives": fp,
            "threshold": thr,
            "exceeds_claim": claimed_epsilon is not None and lb > claimed_epsilon,
            "examples": {"scores": s[keep].tolist(), "members": m[keep].tolist()},
        }


def batch_gradient(
    model: torch.nn.Module, loss_fn: Callable[[torch.nn.Module, Any], torch.Tensor], batch: Any
) -> list[torch.Tensor]:
    """Mean gradient of ``loss_fn(model, batch)`` for every parameter that requires grad
    (zeros for unused ones), detached, in ``parameters()`` order."""
    params = [p for p in model.parameters() if p.requires_grad]
    model.zero_grad(set_to_none=True)
    loss = loss_fn(model, batch)
    if not torch.isfinite(loss):
        raise ValueError("the audit batch gives a non-finite loss")
    grads = torch.autograd.grad(loss, params, allow_unused=True)
    return [
        torch.zeros_like(p) if g is None else g.detach().clone()
        for p, g in zip(params, grads, strict=True)
    ]


def certified_ceiling(trials: int, delta: float, confidence: float = 0.95) -> float:
    """The bound a perfect distinguisher certifies with ``trials`` per side (about ln n)."""
    return epsilon_lower_bound_from_counts(0, trials, 0, trials, delta, confidence)


__all__ = [
    "GaussianControl",
    "ShuffleAudit",
    "batch_gradient",
    "certified_ceiling",
]
