"""dp-check's noise findings: the released noise's law, scale, freshness and independence.

The noise is measured on releases of batches whose gradients are all zero, so what is
released is the noise alone (:class:`.mechanism.NoiseStats`). The accountant's ε holds
for fresh, independent Gaussian noise on every coordinate of every released tensor; each
finding here names one way the noise departs from that.
"""

from __future__ import annotations

import math
from typing import Any

from privacy_audit.audit.epsilon.dp_check.contract import Claim
from privacy_audit.audit.epsilon.dp_check.finding import Finding, Ledger, eps_view
from privacy_audit.audit.epsilon.dp_check.mechanism import NoiseStats

#: non-Gaussian noise is reported below this Kolmogorov–Smirnov p-value
GAUSSIAN_P = 1e-3


def noise_std_summary(noise: NoiseStats, scale: float | None, claim: Claim) -> dict[str, Any]:
    """The measured noise std per coordinate in gradient-sum units (smallest and largest
    over the tensors that carry noise) beside the declared σ·C.

    Assumes ``scale`` converts a release back into gradient-sum units (a release divided
    by it); empty when there is no scale or no noisy tensor with a defined std."""
    sigma_d = claim.noise_multiplier
    C = claim.max_grad_norm
    per = noise.per_tensor
    stds = [p["std"] for p in per.values() if not p.get("zero") and p["std"] == p["std"]]
    if stds and scale:
        measured_noise = {
            "noise_std_gradient_units": {
                "min": min(stds) / scale,
                "max": max(stds) / scale,
                "expected": sigma_d * C,
            }
        }
        return measured_noise
    return {}


def noise_findings(
    noise: NoiseStats, claim: Claim, scale: float | None, led: Ledger
) -> dict[str, Any]:
    """The noise check over its own releases: passed when two or more were drawn, then a
    finding for noise that is not Gaussian and for noise that repeats from one step to the
    next (lag-1 correlation's lower end above 0.5; exact repetition is a violation with
    ε = ∞). Returns :func:`noise_std_summary` (empty when fewer than two releases)."""
    measured_noise: dict[str, Any] = {}
    if noise.steps >= 2:
        led.status["noise"] = "passed"
        measured_noise = noise_std_summary(noise, scale, claim)
        if noise.gaussian_p is not None and noise.gaussian_p < GAUSSIAN_P:
            led.status["noise"] = "inconclusive"
            led.findings.append(
                Finding(
                    "noise",
                    "noise: not Gaussian",
                    "inconclusive",
                    "the released noise is not Gaussian",
                    f"Kolmogorov–Smirnov p = {noise.gaussian_p:.2g} against a normal",
                    "Gaussian noise (the accountant's mechanism)",
                    "the noise generator in add_noise: the accountant's ε holds for Gaussian "
                    "noise only",
                )
            )
        lag = noise.lag1
        if lag and lag["lo"] == lag["lo"] and lag["lo"] > 0.5:
            led.status["noise"] = "violated" if lag["rho"] > 0.999999 else "inconclusive"
            led.findings.append(
                Finding(
                    "noise",
                    "noise: reused across steps",
                    "violation" if lag["rho"] > 0.999999 else "inconclusive",
                    "the noise of one step repeats in the next",
                    f"correlation of consecutive releases' noise {lag['rho']:.3f} "
                    f"[{lag['lo']:.3f}, {lag['hi']:.3f}] over {lag['n']:,} coordinate pairs",
                    "0 (fresh noise every step)",
                    "where the noise tensor is created: it must be drawn anew at every step, "
                    "not cached",
                    eps_view(math.inf, "sound lower bound") if lag["rho"] > 0.999999 else None,
                )
            )
    else:
        led.why_untested["noise"] = "fewer than two releases were drawn"
    return measured_noise


def reuse_findings(noise: NoiseStats, led: Ledger) -> None:
    """Findings for noise shared between two steps of one tensor (the same noise twice
    cancels: ε = ∞ when the correlation is exact) and for noise with a part common to all
    of a tensor's coordinates (their differences then carry little noise)."""
    reuse = noise.reuse or {}
    if reuse.get("max_correlation", 0.0) > reuse.get("limit", 1.0):
        exact_reuse = reuse["max_correlation"] > 0.999999
        led.status["noise"] = "violated" if exact_reuse else "inconclusive"
        led.findings.append(
            Finding(
                "noise",
                "noise: reused between steps",
                "violation" if exact_reuse else "inconclusive",
                "two steps' noise in the same tensor is correlated",
                f"correlation {reuse['max_correlation']:.3f} between two steps' noise in "
                f"`{reuse['tensor']}` (independent noise stays below {reuse['limit']:.3f})",
                "fresh noise every step",
                "a noise tensor cached or drawn from a pool: draw it anew at every step",
                eps_view(math.inf, "sound lower bound", "the same noise twice cancels")
                if exact_reuse
                else None,
            )
        )
    for c in noise.common:
        led.status["noise"] = (
            "inconclusive" if led.status["noise"] == "passed" else led.status["noise"]
        )
        led.findings.append(
            Finding(
                "noise",
                "noise: common to all coordinates",
                "inconclusive",
                f"the noise of `{c['tensor']}` has a part shared by all its coordinates",
                f"its mean varies {c['variance_ratio']:.3g}× more across steps than independent "
                f"coordinates allow (χ² p = {c['p']:.2g})",
                "independent noise on every coordinate",
                "noise drawn once and broadcast over the tensor: the difference of two "
                "coordinates then carries little or no noise",
            )
        )


def coordinate_correlation(noise: NoiseStats, led: Ledger) -> float:
    """The factor √(1 − ρ²) for the smallest |correlation| between neighbouring coordinates
    or tensors that their confidence intervals allow, with a finding above 0.05.

    A one-coordinate effect read against a correlated neighbour's noise is larger by
    1 / √(1 − ρ²); ρ is capped just below 1 so the factor stays positive."""
    corr = 0.0
    for key in ("adjacent", "cross_tensor"):
        r = getattr(noise, key)
        if r and r["lo"] == r["lo"]:
            low = 0.0 if r["lo"] <= 0 <= r["hi"] else min(abs(r["lo"]), abs(r["hi"]))
            corr = max(corr, low)
    if corr > 0.05:
        led.findings.append(
            Finding(
                "noise",
                "noise: correlated coordinates",
                "deviation",
                "the noise of different coordinates is correlated",
                f"|correlation| ≥ {corr:.3f}",
                "independent coordinates",
                "the noise must be drawn independently for every coordinate and tensor",
            )
        )
    corr_factor = math.sqrt(max(0.0, 1 - min(corr, 0.999999) ** 2))
    return corr_factor


def freshness_findings(raw: dict[str, Any], led: Ledger) -> None:
    """A warning when two fresh builds of the setup drew the same noise (a seed an
    attacker could reproduce), and a note when the noise could not be replayed (effects
    were then estimated from repeated draws)."""
    fr = raw.get("freshness") or {}
    if fr.get("reproducible_without_global_seed"):
        led.findings.append(
            Finding(
                "noise",
                "noise: reproducible from a seed",
                "warning",
                "the setup seeds its own noise: two builds from different random states drew "
                "the same noise",
                "identical noise in two fresh instances",
                "noise an attacker cannot reproduce",
                "a fixed seed in make_private or a seeded noise generator: keep the seed secret, "
                "or use secure_mode=True in production",
            )
        )
    if not raw["replay"].get("replayed"):
        led.findings.append(
            Finding(
                "noise",
                "noise: not replayable",
                "info",
                "the noise could not be replayed; effects were estimated from repeated draws",
                raw["replay"].get("why", ""),
                "",
                "",
            )
        )
