"""The gradient release of one training step, kept apart from per-sample gradients and
from the accountant (as in Opacus).

A step of DP-SGD (Abadi et al. 2016) releases
    ĝ = (Σ_i clip_C(g_i) + N(0, σ²C² I)) / B,
with clip_C(g) = g · min(1, C/‖g‖₂) and B the expected batch size. Non-private SGD
releases the plain mean gradient (no clipping, no noise). The white-box gradient-canary
audit (``privacy_audit.audit.epsilon.gradient_canary_audit``) drives ``release`` directly, so a defense whose
release does not match its claim is caught.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class SamplingSchedule:
    """How often an example can influence a release: the sampling model of training.

    ``steps`` is the number of releases T an adversary observes. With Poisson sampling
    (DP-SGD, what its accountant analyses) an example enters each step independently with
    probability ``sample_rate``. With shuffled epochs (plain training), ``appearances`` is
    set: an example enters exactly that many of the T steps (once per epoch).
    """

    sample_rate: float
    steps: int
    appearances: int | None = None


@dataclass(frozen=True)
class GaussianGradientMechanism:
    """Clip per-example gradients to ``clip_norm``, sum, add Gaussian noise of std
    ``noise_multiplier * clip_norm`` per coordinate. ``clip_norm=None`` means no
    clipping and no noise (the non-private release)."""

    clip_norm: float | None
    noise_multiplier: float = 0.0

    def __post_init__(self) -> None:
        if self.clip_norm is not None and not self.clip_norm > 0:
            raise ValueError(f"clip_norm must be > 0, got {self.clip_norm}")
        if self.noise_multiplier < 0:
            raise ValueError(f"noise_multiplier must be >= 0, got {self.noise_multiplier}")

    @property
    def private(self) -> bool:
        return self.clip_norm is not None and self.noise_multiplier > 0

    def clip(self, per_example: torch.Tensor) -> torch.Tensor:
        """Rows of ``per_example`` (shape [B, P]) scaled to L2 norm at most ``clip_norm``."""
        if self.clip_norm is None:
            return per_example
        norms = per_example.norm(dim=1, keepdim=True)
        return per_example * torch.clamp(self.clip_norm / (norms + 1e-12), max=1.0)

    def noise_std(self) -> float:
        return 0.0 if self.clip_norm is None else self.noise_multiplier * self.clip_norm

    def add_noise(
        self, summed: torch.Tensor, generator: torch.Generator | None = None
    ) -> torch.Tensor:
        """``summed`` plus i.i.d. N(0, (σC)²) per coordinate (any shape)."""
        std = self.noise_std()
        if std == 0:
            return summed
        noise = torch.randn(
            summed.shape, generator=generator, dtype=summed.dtype, device=summed.device
        )
        return summed + std * noise

    def release(
        self,
        per_example: torch.Tensor,
        batch_size: int | None = None,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """The update released for one batch of per-example gradients ([B, P] → [P])."""
        b = batch_size if batch_size is not None else max(per_example.shape[0], 1)
        return self.add_noise(self.clip(per_example).sum(dim=0), generator) / b


def realised_schedule(rows_sampled: int, rows: int, steps: int, confidence: float = 0.975):
    """The Poisson schedule a run REALISED: T = the steps it ran, q = the one-sided lower
    confidence bound (Clopper–Pearson) of rows drawn / (rows × steps). A correct run's q
    is over-stated with probability ≤ 1 − ``confidence``, so a gradient-canary audit of
    the declared noise under this schedule stays sound; a claim accounted with a wrong
    N, q or step count is then below the audited ε (docs/dp-bugs.md)."""
    from scipy.stats import beta

    n = int(rows) * int(steps)
    k = int(rows_sampled)
    if n <= 0 or not 0 <= k <= n:
        raise ValueError(f"invalid counts: {k} rows drawn of {rows} rows × {steps} steps")
    q_lo = float(beta.ppf(1 - confidence, k, n - k + 1)) if k else 0.0
    return SamplingSchedule(max(q_lo, 1e-12), int(steps))
