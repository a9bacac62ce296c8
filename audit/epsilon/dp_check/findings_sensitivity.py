"""dp-check's sensitivity and coverage findings, from the crafted pairs of batches.

Each crafted pair differs by one example (:mod:`.mechanism`); its effect μ on the release
is measured in noise units with the noise replayed. One clipped example moves the
release by at most C, so μ ≤ 1/σ; a tensor it moves must carry noise; a larger example
must not move it further (clipping); spreading the example over tensors or opposing it
within the batch must not either. Each finding names one of these failures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from privacy_audit.audit.epsilon.dp_check.contract import Claim
from privacy_audit.audit.epsilon.dp_check.finding import EFFECT_SLACK, Finding, Ledger, eps_view
from privacy_audit.audit.epsilon.dp_check.mechanism import Effect, NoiseStats


@dataclass
class Pairs:
    """The crafted pairs, grouped the way the checks read them.

    ``ar`` and ``rep`` are the measured (not skipped) add-remove and replace-one pairs;
    ``dirac`` one clipped example on one tensor (or the ghost-clipped pair) and ``large``
    the same example with a 1,000× larger gradient, both keyed by tensor;
    ``expected_mu`` = 1/σ, one clipped example's effect in noise units."""

    effects: list[Effect]
    ar: list[Effect]
    rep: list[Effect]
    dirac: dict[str, Effect]
    large: dict[str, Effect]
    expected_mu: float


def crafted_pairs(effects: list[Effect], claim: Claim) -> Pairs:
    """Group the crafted pairs' effects (:class:`Pairs`) for the declared σ."""
    sigma_d = claim.noise_multiplier
    ar = [e for e in effects if not e.skipped and e.design.relation == "add-remove"]
    rep = [e for e in effects if not e.skipped and e.design.relation == "replace-one"]
    expected_mu = 1.0 / sigma_d
    dirac = {e.design.tensor: e for e in ar if e.design.kind in ("dirac", "ghost-clipped")}
    large = {e.design.tensor: e for e in ar if e.design.kind == "dirac-large"}
    return Pairs(effects, ar, rep, dirac, large, expected_mu)


def _where_noise(names: list[str]) -> str:
    show = ", ".join(f"`{n}`" for n in names[:6]) + (" …" if len(names) > 6 else "")
    return (
        f"the parameters {show} receive no noise: every tensor the optimizer steps must get "
        "N(0, σ²C²) in add_noise (check per-group overrides and parameter groups added after "
        "make_private)"
    )


def pairs_measured(pairs: Pairs, ghost: bool, led: Ledger) -> None:
    """Sensitivity and coverage pass only when every kind of crafted pair was measured
    (the ghost-clipped pair under ghost clipping; else the one-tensor, larger and opposing
    pairs, and the spread pair when it was built); otherwise both say why they are
    untested."""
    effects, ar = pairs.effects, pairs.ar
    # every kind of crafted pair must have been measured for "passed": a budget that
    # stopped early, or an optimizer that skipped the step, leaves the check untested
    built = {d.design.kind for d in effects}
    measured_kinds = {e.design.kind for e in ar}
    need = (
        {"ghost-clipped"}
        if ghost
        else {"dirac", "dirac-large", "opposite"} | ({"spread"} if "spread" in built else set())
    )
    missing = sorted(need - measured_kinds)
    if ar and not missing:
        led.status["sensitivity"] = "passed"
        led.status["coverage"] = "passed"
    else:
        led.why_untested["sensitivity"] = (
            f"crafted pairs of kind {', '.join(missing)} were not measured (budget, or the "
            "optimizer released nothing for them)"
            if ar
            else "no crafted pair produced two releases"
        )
        led.why_untested["coverage"] = led.why_untested["sensitivity"]


def coverage_findings(pairs: Pairs, noise: NoiseStats, claim: Claim, led: Ledger) -> list[str]:
    """Findings for released tensors one example moves that have no noise measurement,
    and for released tensors without noise: a violation with ε = ∞ when one example moves
    them, else a warning (or inconclusive when some were not probed). Returns the sorted
    names of the noiseless tensors one example moves."""
    sigma_d = claim.noise_multiplier
    C = claim.max_grad_norm
    ar = pairs.ar
    zero = [n for n, p in noise.per_tensor.items() if p.get("zero")]
    probed = {e.design.tensor for e in ar if e.design.tensor}
    unmeasured = sorted({n for e in ar for n in e.unmeasured})
    if unmeasured:
        led.findings.append(
            Finding(
                "coverage",
                "coverage: released tensors without a noise measurement",
                "inconclusive",
                f"{len(unmeasured)} released tensor(s) moved by a crafted example have no noise "
                "measurement",
                ", ".join(unmeasured[:6]),
                "every released tensor measured",
                "a tensor the wrapped optimizer steps that is not among the DP optimizer's "
                "parameters: give it to the DP optimizer",
            )
        )
    # unnoised tensors one example moves
    moved_noiseless = sorted({n for e in ar for n in e.infinite_in})
    if moved_noiseless:
        led.status["coverage"] = "violated"
        led.findings.append(
            Finding(
                "coverage",
                "parameter group: not noised",
                "violation",
                f"{len(moved_noiseless)} released tensor(s) carry no noise",
                f"noise std 0 in {', '.join(moved_noiseless[:6])}; one example moves them",
                f"noise std σ·C = {sigma_d * C:.4g} per coordinate (gradient units)",
                _where_noise(moved_noiseless),
                eps_view(
                    math.inf,
                    "sound lower bound",
                    "a deterministic function of the batch is released",
                ),
            )
        )
    elif zero:
        unprobed = [n for n in zero if n not in probed]
        led.findings.append(
            Finding(
                "coverage",
                "parameter group: not noised",
                "inconclusive" if unprobed else "warning",
                f"{len(zero)} released tensor(s) carry no noise"
                + (
                    f"; {len(unprobed)} of them were not probed (budget)"
                    if unprobed
                    else ", and no crafted example moved them"
                ),
                ", ".join(zero[:6]),
                "noise on every released tensor",
                _where_noise(zero),
            )
        )
    return moved_noiseless


def unclipped_findings(pairs: Pairs, led: Ledger) -> list[tuple[str, float]]:
    """Tensors where a 1,000× larger gradient moves the release further than the clipped
    example (lower bound above the clipped example's upper bound by more than
    ``EFFECT_SLACK``): unbounded sensitivity, a violation with ε = ∞. Returns the
    (tensor, effect ratio) pairs found."""
    dirac, large = pairs.dirac, pairs.large
    # unclipped: the effect grows with the example's norm
    unclipped = []
    for t, e in large.items():
        d = dirac.get(t)
        # bounds, not point estimates: drawn (not replayed) effects are noisy
        if (
            d is not None
            and d.mu_hi > 0
            and e.mu_lo > d.mu_hi * (1 + EFFECT_SLACK)
            and not e.infinite_in
        ):
            unclipped.append((t, e.mu / d.mu))
    if unclipped:
        led.status["sensitivity"] = "violated"
        ts = [t for t, _ in unclipped]
        led.findings.append(
            Finding(
                "sensitivity",
                "clipping: a parameter group is not clipped",
                "violation",
                f"one example's effect on {len(ts)} tensor(s) grows with its gradient norm",
                f"×{unclipped[0][1]:.3g} effect for a 1,000× larger gradient in `{ts[0]}`",
                "the same effect (clipping bounds it by C)",
                "per-example norms and clip factors must be computed over every parameter, "
                f"including {', '.join(f'`{t}`' for t in ts[:6])}"
                + (" …" if len(ts) > 6 else "")
                + " (clip_and_accumulate), before summing",
                eps_view(
                    math.inf,
                    "sound lower bound",
                    "sensitivity unbounded: a larger gradient moves the release further",
                ),
            )
        )
    return unclipped


def clipped_baseline(dirac: dict[str, Effect]) -> tuple[float, float, float]:
    """One clipped example's largest effect μ, and the largest upper and lower ends of its
    interval, over the tensors that carry noise (0.0 when there are none)."""
    base_mu = max((e.mu for e in dirac.values() if not e.infinite_in), default=0.0)
    base_hi = max((e.mu_hi for e in dirac.values() if not e.infinite_in), default=0.0)
    base_lo = max((e.mu_lo for e in dirac.values() if not e.infinite_in), default=0.0)
    return base_mu, base_hi, base_lo


def design_effect_findings(pairs: Pairs, led: Ledger) -> None:
    """Deviations for the spread and opposing designs when one of them moves the release
    further than one clipped example and further than 1/σ (both by more than
    ``EFFECT_SLACK``): per-layer clipping that adds up, or clipping after aggregation."""
    ar, expected_mu = pairs.ar, pairs.expected_mu
    base_mu, base_hi, _ = clipped_baseline(pairs.dirac)
    for kind, cls, where in (
        (
            "spread",
            "clipping: per-layer norms add up",
            "per-layer (or per-tensor) clipping to C each lets one example move the release by "
            "C·√L: clip the total norm, or give the noise σ·√(Σ C_l²)",
        ),
        (
            "opposite",
            "clipping: after aggregation",
            "clip each example's gradient before summing (clip_and_accumulate), not the batch's "
            "sum or a micro-batch's mean: then one example moves the sum by 2C",
        ),
    ):
        es = [e for e in ar if e.design.kind == kind and not e.infinite_in]
        if not es or base_mu <= 0:
            continue
        worst = max(es, key=lambda e: e.mu)
        if worst.mu_lo > base_hi * (1 + EFFECT_SLACK) and worst.mu_lo > expected_mu * (
            1 + EFFECT_SLACK
        ):
            led.status["sensitivity"] = "violated"
            led.findings.append(
                Finding(
                    "sensitivity",
                    cls,
                    "deviation",
                    f"one example moves the release {worst.mu / base_mu:.3g}× as far as a clipped example should",
                    f"design `{worst.design.name}`: {worst.design.what}; μ = {worst.mu:.4g} "
                    f"(noise units)",
                    f"μ ≤ 1/σ = {expected_mu:.4g}",
                    where,
                )
            )


def noise_scale_finding(
    pairs: Pairs,
    unclipped: list[tuple[str, float]],
    measured_noise: dict[str, Any],
    claim: Claim,
    scale: float | None,
    led: Ledger,
) -> None:
    """A deviation when one clipped example moves the release further than 1/σ and no
    violation of sensitivity explains it: the noise std is too small (when the measured
    std is below σ·C) or the clipping norm larger than the claim's."""
    sigma_d = claim.noise_multiplier
    C = claim.max_grad_norm
    dirac, expected_mu = pairs.dirac, pairs.expected_mu
    base_mu, _, base_lo = clipped_baseline(dirac)
    # the noise scale against one example's clipped effect (same design: both exact)
    if dirac and base_lo > expected_mu * (1 + EFFECT_SLACK) and not unclipped:
        if not any(f.check == "sensitivity" and f.severity == "violation" for f in led.findings):
            led.status["sensitivity"] = "violated"
            c_meas = None
            if scale:
                norms = [
                    math.sqrt(sum(v * v for v in e.norms.values())) / scale for e in dirac.values()
                ]
                c_meas = max(norms) if norms else None
            nstd = measured_noise.get("noise_std_gradient_units", {}).get("min")
            noise_low = nstd is not None and nstd < sigma_d * C * (1 - EFFECT_SLACK)
            led.findings.append(
                Finding(
                    "noise" if noise_low else "sensitivity",
                    "noise: scale too small" if noise_low else "clipping: norm larger than claimed",
                    "deviation",
                    f"the noise is {base_mu / expected_mu:.3g}× too small for one clipped example",
                    (
                        f"noise std {nstd:.4g} per coordinate"
                        if noise_low
                        else f"one clipped example moves the release by {c_meas:.4g}"
                        if c_meas
                        else f"μ = {base_mu:.4g}"
                    )
                    + (f"; clipped example {c_meas:.4g}" if noise_low and c_meas else "")
                    + " (gradient-sum units)",
                    f"noise std σ·C = {sigma_d * C:.4g}, clipped example ≤ C = {C:.4g}",
                    "the std given to the noise: it must be noise_multiplier × max_grad_norm on the "
                    "clipped SUM (before any division by the batch size or accumulation steps)"
                    if noise_low
                    else "the clipping norm the code uses must be the claim's max_grad_norm",
                )
            )


def pair_findings(
    pairs: Pairs,
    info: dict[str, Any],
    noise: NoiseStats,
    measured_noise: dict[str, Any],
    claim: Claim,
    scale: float | None,
    led: Ledger,
) -> tuple[list[str], list[tuple[str, float]]]:
    """Every crafted-pair finding, in report order. Returns the noiseless tensors one
    example moves and the unclipped tensors (later checks do not repeat them)."""
    pairs_measured(pairs, bool(info.get("ghost_clipping")), led)
    moved_noiseless = coverage_findings(pairs, noise, claim, led)
    unclipped = unclipped_findings(pairs, led)
    design_effect_findings(pairs, led)
    noise_scale_finding(pairs, unclipped, measured_noise, claim, scale, led)
    return moved_noiseless, unclipped
