"""From measurements to findings, the ε they imply, and one verdict.

The rule (docs/dp-check.md):

- **violated** — a sound lower bound on the ε of what the code releases exceeds the
  claim. The bound is dp-accounting's optimistic PLD (or Chua et al.'s shuffle bound, or
  the exact Gaussian composition of fixed batches) at the measured effective noise
  multiplier's upper confidence bound, the sampling rate's lower bound and the steps
  counted; or ∞ when a tensor that one example moves carries no noise, or a state the
  optimizer does not release depends on one example deterministically. A claim whose
  own declared σ, q, T already give a larger ε is violated too.
- **consistent** — every required check ran, every measurement agrees with the declared
  mechanism at the 99.9% level, and the declared parameters' ε is within the claim.
- **inconclusive** — anything else: a check that could not run, a deviation that no
  sound bound turns into a violation (state carried across steps, non-Gaussian noise, a
  scheme with no sound accountant), or a measured ε interval that straddles the claim.

Every finding says its class, what was measured against what was expected, the ε it
implies (and whether that is a sound bound or an approximation), and where to look.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from privacy_audit.audit.epsilon.dp_check import accounting
from privacy_audit.audit.epsilon.dp_check.contract import Claim, Setup
from privacy_audit.audit.epsilon.dp_check.mechanism import Effect, NoiseStats

#: effective noise multipliers below this are clamped up to it before the accountant
#: runs (ε decreases in σ, so the clamped value is still a lower bound, and fast)
SIGMA_FLOOR = 0.05
#: relative slack on a measured effect before it counts as larger than the claimed one
#: (crafted pairs are exact up to float rounding; 1% is far above it)
EFFECT_SLACK = 0.01
#: non-Gaussian noise is reported below this Kolmogorov–Smirnov p-value
GAUSSIAN_P = 1e-3
#: checks a CONSISTENT verdict needs, per protocol
REQUIRED = {
    "opacus": (
        "noise",
        "sensitivity",
        "coverage",
        "sampling",
        "schedule",
        "accounting",
        "cross-example",
        "outside-release",
    ),
    "privatize": ("noise", "sensitivity", "coverage", "sampling", "schedule", "accounting"),
}
ALL_CHECKS = (
    "noise",
    "sensitivity",
    "coverage",
    "sampling",
    "schedule",
    "accounting",
    "cross-example",
    "model-clipping",
    "outside-release",
)


@dataclass
class Finding:
    check: str
    bug_class: str
    severity: str  # violation | inconclusive | warning | info
    title: str
    measured: str
    expected: str
    where: str
    epsilon: dict[str, Any] | None = None


def eps_view(value: float | None, kind: str, how: str = "") -> dict[str, Any]:
    """An ε for results.json: a number, or infinite (strict JSON has no Infinity)."""
    inf = value is not None and math.isinf(value)
    return {
        "value": None if (value is None or inf) else float(value),
        "infinite": bool(inf),
        "kind": kind,
        "how": how,
    }


def fmt_eps(e: dict[str, Any] | None) -> str:
    if not e:
        return "—"
    if e.get("infinite"):
        return "∞"
    v = e.get("value")
    return "—" if v is None else f"{v:.3g}"


def _sigma_eff(mu: float) -> float:
    return 0.0 if math.isinf(mu) else (math.inf if mu <= 0 else 1.0 / mu)


def _lower_epsilon(
    scheme: str, sigma: float, q: float, steps: int, spe: int, epochs: int, claim: Claim
) -> tuple[float | None, str]:
    """A sound lower bound on ε for the scheme run, or None when there is none."""
    d = claim.delta
    if sigma <= 0:
        return (
            math.inf,
            "a released tensor carries no noise (ε = ∞ for δ below the chance of sampling the example)",
        )
    s = max(sigma, SIGMA_FLOOR)
    at_least = " (σ_eff clamped up to 0.05: ε is at least this)" if sigma < SIGMA_FLOOR else ""
    if scheme == "poisson":
        rel = claim.adjacency
        iv = accounting.poisson_interval(s, q, steps, d, decide_against=claim.epsilon, relation=rel)
        return iv.lower, iv.how + at_least
    if scheme == "shuffle" and claim.adjacency == "add-remove":
        return (
            accounting.shuffle_lower_bound(s, spe, epochs, d),
            f"Chua et al.'s shuffle pair, {spe} steps per epoch × {epochs} epochs, exact "
            f"max-statistic bound at σ={s:.4g}{at_least}",
        )
    if scheme == "fixed" and claim.adjacency == "add-remove":
        return (
            accounting.gaussian_composition_epsilon(s, epochs, d),
            f"{epochs} Gaussian releases at known steps (no amplification), σ={s:.4g}{at_least}",
        )
    if scheme == "fixed-shuffled-once" and claim.adjacency == "add-remove":
        # the same unknown step every epoch: summing the epochs' releases step by step (a
        # post-processing) is one shuffled epoch at σ/√E
        s1 = max(s / math.sqrt(epochs), 1e-3)
        return (
            accounting.shuffle_lower_bound(s1, spe, 1, d),
            f"Chua et al.'s pair over one epoch at σ/√E = {s1:.4g} ({epochs} epochs summed "
            f"step by step), {spe} steps{at_least}",
        )
    return None, f"no sound accountant for the '{scheme}' scheme"


def _where_noise(names: list[str]) -> str:
    show = ", ".join(f"`{n}`" for n in names[:6]) + (" …" if len(names) > 6 else "")
    return (
        f"the parameters {show} receive no noise: every tensor the optimizer steps must get "
        "N(0, σ²C²) in add_noise (check per-group overrides and parameter groups added after "
        "make_private)"
    )


def persistence_conditions(
    lag1: dict[str, float] | None, response: list[float], later: Any, scheme: str | None
) -> tuple[bool, list[float], str]:
    """Whether the state-across-steps bound (:func:`accounting.persistence_lower_bound`)
    applies, the response to use, and why not.

    The bound assumes fresh unit noise per release (the lag-1 correlation's interval is
    defined and |ρ| < 0.05), Poisson sampling, and a response that does not depend on when
    the example came: the same example inserted a few steps later (``later``, an exact
    :class:`ScheduleEffect`) must move the releases after it the same way, to 1e-3 of the
    largest response. The response used is the smaller of the two, step by step."""
    lag = lag1 or {}
    fresh = lag.get("hi") == lag.get("hi") and abs(lag.get("rho", 1.0)) < 0.05
    invariant = False
    used = list(response)
    if later is not None and later.exact and later.response:
        r0, r1 = np.asarray(response, dtype=float), np.asarray(later.response, dtype=float)
        m = min(r0.size, r1.size)
        scale_r = max(float(np.abs(r0[:m]).max()), 1e-12) if m else 1e-12
        invariant = bool(m and np.abs(r0[:m] - r1[:m]).max() <= 1e-3 * scale_r + 1e-9)
        used = [float(x) for x in np.minimum(r0[:m], r1[:m])]
    poisson = scheme == "poisson"
    why_not = ", ".join(
        w
        for w, bad in (
            ("the noise is correlated across steps", not fresh),
            ("the response depends on when the example came", not invariant),
            ("the sampling is not Poisson", not poisson),
        )
        if bad
    )
    return fresh and invariant and poisson, used, why_not


def assemble(setup: Setup, raw: dict[str, Any], runner, accept_untested=()) -> dict[str, Any]:
    claim = setup.claim
    sigma_d = claim.noise_multiplier
    C = claim.max_grad_norm
    noise: NoiseStats = raw["noise"]
    effects: list[Effect] = raw["effects"]
    scale = raw.get("scale")
    findings: list[Finding] = []
    status: dict[str, str] = dict.fromkeys(ALL_CHECKS, "not-tested")
    why_untested: dict[str, str] = {}
    protocol = setup.protocol

    # ---------------------------------------------------------------- noise
    per = noise.per_tensor
    zero = [n for n, p in per.items() if p.get("zero")]
    measured_noise: dict[str, Any] = {}
    if noise.steps >= 2:
        status["noise"] = "passed"
        stds = [p["std"] for p in per.values() if not p.get("zero") and p["std"] == p["std"]]
        if stds and scale:
            measured_noise = {
                "noise_std_gradient_units": {
                    "min": min(stds) / scale,
                    "max": max(stds) / scale,
                    "expected": sigma_d * C,
                }
            }
        if noise.gaussian_p is not None and noise.gaussian_p < GAUSSIAN_P:
            status["noise"] = "inconclusive"
            findings.append(
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
            status["noise"] = "violated" if lag["rho"] > 0.999999 else "inconclusive"
            findings.append(
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
        why_untested["noise"] = "fewer than two releases were drawn"
    reuse = noise.reuse or {}
    if reuse.get("max_correlation", 0.0) > reuse.get("limit", 1.0):
        exact_reuse = reuse["max_correlation"] > 0.999999
        status["noise"] = "violated" if exact_reuse else "inconclusive"
        findings.append(
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
        status["noise"] = "inconclusive" if status["noise"] == "passed" else status["noise"]
        findings.append(
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
    corr = 0.0
    for key in ("adjacent", "cross_tensor"):
        r = getattr(noise, key)
        if r and r["lo"] == r["lo"]:
            low = 0.0 if r["lo"] <= 0 <= r["hi"] else min(abs(r["lo"]), abs(r["hi"]))
            corr = max(corr, low)
    if corr > 0.05:
        findings.append(
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

    # ---------------------------------------------------------------- crafted pairs
    ar = [e for e in effects if not e.skipped and e.design.relation == "add-remove"]
    rep = [e for e in effects if not e.skipped and e.design.relation == "replace-one"]
    mu_pt = max((e.mu for e in ar), default=0.0)
    mu_hi = max((e.mu_hi for e in ar), default=0.0)
    expected_mu = 1.0 / sigma_d
    dirac = {e.design.tensor: e for e in ar if e.design.kind in ("dirac", "ghost-clipped")}
    large = {e.design.tensor: e for e in ar if e.design.kind == "dirac-large"}
    # every kind of crafted pair must have been measured for "passed": a budget that
    # stopped early, or an optimizer that skipped the step, leaves the check untested
    ghost = bool(raw["info"].get("ghost_clipping"))
    built = {d.design.kind for d in effects}
    measured_kinds = {e.design.kind for e in ar}
    need = (
        {"ghost-clipped"}
        if ghost
        else {"dirac", "dirac-large", "opposite"} | ({"spread"} if "spread" in built else set())
    )
    missing = sorted(need - measured_kinds)
    probed = {e.design.tensor for e in ar if e.design.tensor}
    if ar and not missing:
        status["sensitivity"] = "passed"
        status["coverage"] = "passed"
    else:
        why_untested["sensitivity"] = (
            f"crafted pairs of kind {', '.join(missing)} were not measured (budget, or the "
            "optimizer released nothing for them)"
            if ar
            else "no crafted pair produced two releases"
        )
        why_untested["coverage"] = why_untested["sensitivity"]
    unmeasured = sorted({n for e in ar for n in e.unmeasured})
    if unmeasured:
        findings.append(
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
        status["coverage"] = "violated"
        findings.append(
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
        findings.append(
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
        status["sensitivity"] = "violated"
        ts = [t for t, _ in unclipped]
        findings.append(
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
    # designs with a larger effect than one clipped example
    base_mu = max((e.mu for e in dirac.values() if not e.infinite_in), default=0.0)
    base_hi = max((e.mu_hi for e in dirac.values() if not e.infinite_in), default=0.0)
    base_lo = max((e.mu_lo for e in dirac.values() if not e.infinite_in), default=0.0)
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
            status["sensitivity"] = "violated"
            findings.append(
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
    # the noise scale against one example's clipped effect (same design: both exact)
    if dirac and base_lo > expected_mu * (1 + EFFECT_SLACK) and not unclipped:
        if not any(f.check == "sensitivity" and f.severity == "violation" for f in findings):
            status["sensitivity"] = "violated"
            c_meas = None
            if scale:
                norms = [
                    math.sqrt(sum(v * v for v in e.norms.values())) / scale for e in dirac.values()
                ]
                c_meas = max(norms) if norms else None
            nstd = measured_noise.get("noise_std_gradient_units", {}).get("min")
            noise_low = nstd is not None and nstd < sigma_d * C * (1 - EFFECT_SLACK)
            findings.append(
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
    # ---------------------------------------------------------------- replace-one
    mu_rep_lo = max((e.mu_lo for e in rep), default=0.0)
    # ---------------------------------------------------------------- schedule
    sched = raw.get("schedule")
    sched_view = None
    if sched is not None and (sched.releases < 2 or sched.first_moved_at is None):
        why_untested["schedule"] = (
            f"only {sched.releases} release(s) compared (budget)"
            if sched.releases < 2
            else "the crafted example in the first batch moved no release (does the "
            "optimizer drop part of a batch?)"
        )
        sched_view = asdict(sched)
    elif sched is not None:
        status["schedule"] = "passed"
        sched_view = asdict(sched)
        if sched.release_counts_differ:
            status["schedule"] = "inconclusive"
            findings.append(
                Finding(
                    "schedule",
                    "schedule: releases depend on the data",
                    "inconclusive",
                    "one example changed how many releases the run makes",
                    "different numbers of optimizer steps with and without it",
                    "the same steps",
                    "the loop's step / skip logic must not depend on the data",
                )
            )
        if not sched.exact:
            status["schedule"] = "inconclusive"
            findings.append(
                Finding(
                    "schedule",
                    "schedule: noise not replayed across the run",
                    "inconclusive",
                    "the run's releases could not be compared exactly",
                    "two runs from one random state drew different noise (randomness drawn "
                    "in amounts that depend on the batch, or noise scaled by it)",
                    "the same noise in both runs",
                    "noise that depends on the batch size is data-dependent noise",
                )
            )
        elif sched.mu_later > 0:
            status["schedule"] = "inconclusive"
            k = 1 + (sched.mu_later / sched.mu_first) ** 2 if sched.mu_first > 0 else math.inf
            samp0 = raw["sampling"]
            q_for = (samp0.get("rate") or {}).get("decision_lower", claim.sample_rate)
            t_for = int(samp0.get("logical_steps") or claim.steps or 1)
            usable, response, why_not = persistence_conditions(
                noise.lag1,
                sched.response,
                raw.get("schedule_later_insertion"),
                samp0.get("scheme"),
            )
            pb = (
                accounting.persistence_lower_bound(response, q_for, t_for, claim.delta)
                if usable
                else 0.0
            )
            persist_eps = (
                eps_view(
                    pb,
                    "sound lower bound",
                    f"lone example, Poisson q = {q_for:.4g}, the sum of the last releases of "
                    f"the first {min(t_for, len(response))} (measured response, linear and "
                    "time-invariant, fresh noise per release: all checked)",
                )
                if usable
                else None
            )
            findings.append(
                Finding(
                    "schedule",
                    "state carried across steps",
                    "violation" if pb > claim.epsilon else "inconclusive",
                    f"one example moves {sched.later_steps_moved} later release(s) too",
                    f"μ after its own step {sched.mu_later:.4g} (its own step {sched.mu_first:.4g})"
                    + (f"; no sound bound: {why_not}" if not usable else ""),
                    "0: each release depends only on its own batch",
                    "summed or accumulated gradients must be cleared after every noisy step "
                    "(zero_grad, p.summed_grad, a carried buffer): one example's clipped "
                    f"gradient reappears in later releases (here about {k:.3g}× its own step's "
                    "effect in total)",
                    persist_eps,
                )
            )
            if pb > claim.epsilon:
                status["schedule"] = "violated"
        if sched.truncated:
            runner.notes.append(
                f"schedule: compared {sched.releases} releases, not the whole schedule (budget)"
            )
    elif raw["sampling"].get("tested") is False:
        why_untested["schedule"] = "no data loader (privatize: define make_loader)"
    else:
        why_untested["schedule"] = "budget spent before this check"
    # ---------------------------------------------------------------- model checks
    model = raw.get("model") or {}
    mu_model_lo = 0.0
    ce = model.get("cross_example")
    if ce is not None:
        if ce.tested:
            status["cross-example"] = "passed"
            if ce.rows_moved > 0:
                mu_model_lo = max(mu_model_lo, ce.mu_replace_lower / 2)
                status["cross-example"] = "inconclusive"
                findings.append(
                    Finding(
                        "cross-example",
                        "cross-example: the batch mixes examples",
                        "deviation",
                        "one example's per-sample gradient depends on the others in its batch",
                        f"{ce.rows_moved} of {ce.rows_compared} other examples' per-sample "
                        f"gradients moved (up to {ce.max_relative_change:.3g} relative) when one "
                        f"example was replaced; the release moved by μ = {ce.mu_replace:.4g}",
                        "no other example moves; the release moves by ≤ 2C (μ ≤ 2/σ = "
                        f"{2 / sigma_d:.4g})",
                        "a layer or loss that uses batch statistics (BatchNorm, functional "
                        "batch_norm, in-batch normalisation or negatives): per-sample gradients "
                        "must depend on their own example only; use GroupNorm/LayerNorm",
                    )
                )
        else:
            why_untested["cross-example"] = ce.reason
    elif protocol == "opacus":
        why_untested["cross-example"] = model.get("not_tested", "budget spent before this check")
    lw = model.get("loss_weight")
    if lw is not None:
        if lw.tested:
            status["model-clipping"] = "passed"
            top = max(lw.mu_lower.values(), default=0.0)
            mu_model_lo = max(mu_model_lo, top)
            # effects the optimizer-level pairs or the cross-example check already name
            # (a noiseless or unclipped tensor, a batch-mixing layer) are not repeated
            explained = bool(moved_noiseless or unclipped) or (
                ce is not None and ce.tested and ce.rows_moved > 0
            )
            if explained:
                pass
            elif lw.grows:
                status["model-clipping"] = "violated"
                findings.append(
                    Finding(
                        "model-clipping",
                        "clipping: not applied through the model",
                        "violation",
                        "one example's effect grows with its loss's weight",
                        "; ".join(f"W={k}: μ={v:.4g}" for k, v in lw.mu.items()),
                        f"the same μ ≤ 1/σ = {expected_mu:.4g} for every W",
                        "the per-sample clipping in the backward pass (ghost clipping's "
                        "clipping coefficient, or the hooks' per-sample gradients)",
                        eps_view(math.inf, "sound lower bound", "sensitivity unbounded"),
                    )
                )
            elif top > max(
                expected_mu, max((e.mu for e in ar if not e.infinite_in), default=0.0)
            ) * (1 + EFFECT_SLACK):
                # beyond what the optimizer-level pairs already explain (noise scale)
                mu_pt_w = max(lw.mu.values())
                status["model-clipping"] = "violated"
                findings.append(
                    Finding(
                        "model-clipping",
                        "clipping: norm larger than claimed",
                        "deviation",
                        f"one example moves the release {mu_pt_w / expected_mu:.3g}× as far as "
                        "the claim allows",
                        f"μ = {mu_pt_w:.4g} (noise units) for one example whose loss is weighted "
                        "by W against W = 0",
                        f"μ ≤ 1/σ = {expected_mu:.4g}",
                        "the clipping norm inside the model (ghost clipping: the GradSampleModule's "
                        "max_grad_norm) must equal the optimizer's, which sets the noise",
                    )
                )
        elif raw["info"].get("ghost_clipping"):
            why_untested["model-clipping"] = lw.reason
    out_rel = model.get("outside")
    if out_rel is not None:
        if out_rel.tested:
            status["outside-release"] = "passed"
            for ch in out_rel.changed:
                if not ch["depends_on_one_example"]:
                    continue
                det = ch["deterministic"]
                status["outside-release"] = "violated" if det else "inconclusive"
                findings.append(
                    Finding(
                        "outside-release",
                        f"{ch['kind']} trained outside the DP optimizer",
                        "violation" if det else "inconclusive",
                        f"{ch['kind']} `{ch['name']}` changes with one example and is not "
                        "released through the DP optimizer",
                        (
                            "a deterministic function of the batch"
                            if det
                            else "changed, with some other randomness"
                        )
                        + f" (largest change {ch['max_change']:.3g})",
                        "only the DP optimizer's noisy release changes the model",
                        (
                            "a buffer updated in the forward pass (BatchNorm running statistics): "
                            "freeze it, or replace the layer"
                            if ch["kind"] == "buffer"
                            else "a second optimizer, or a parameter outside the DP optimizer's "
                            "groups, is trained on the data: give it to the DP optimizer or freeze it"
                        ),
                        eps_view(math.inf, "sound lower bound", "released without noise")
                        if det
                        else None,
                    )
                )
            trained = {ch["name"] for ch in out_rel.changed}
            idle = [n for n in out_rel.trainable_not_released if n not in trained]
            if idle:
                findings.append(
                    Finding(
                        "coverage",
                        "coverage: trainable but not in the DP optimizer",
                        "warning" if setup.optional.get("train_step") else "inconclusive",
                        f"{len(idle)} trainable tensor(s) are not in the DP optimizer",
                        ", ".join(idle[:6]),
                        "every trainable tensor in the DP optimizer, or frozen",
                        "set requires_grad=False on what you do not train"
                        + (
                            " (your train_step did not train them)"
                            if setup.optional.get("train_step")
                            else "; without train_step dp-check cannot see whether your loop "
                            "trains them with another optimizer: define train_step"
                        ),
                    )
                )
        else:
            why_untested["outside-release"] = out_rel.reason
    # ---------------------------------------------------------------- effective σ
    # a correlation between coordinates lets a one-coordinate effect be read against a
    # neighbour's noise (μ / √(1 − ρ²)); it is applied to those designs only
    from privacy_audit.audit.epsilon.dp_check.mechanism import ONE_DIRECTION

    def corr_adjusted(attr: str) -> float:
        return max(
            (
                getattr(e, attr) / (corr_factor if e.design.kind in ONE_DIRECTION else 1.0)
                for e in ar
            ),
            default=0.0,
        )

    mu_all_lo = max(corr_adjusted("mu_lo") if corr_factor > 0 else math.inf, mu_model_lo)
    sigma_eff_hi = _sigma_eff(mu_all_lo)
    sigma_eff_pt = min(
        _sigma_eff(max(corr_adjusted("mu") if corr_factor > 0 else math.inf, mu_model_lo)),
        sigma_eff_hi,
    )
    sigma_eff_lo = min(_sigma_eff(max(mu_hi, mu_model_lo)), sigma_eff_pt)
    unbounded = any(f.epsilon and f.epsilon.get("infinite") for f in findings)
    sigma_finite_hi = sigma_eff_hi  # the measured σ_eff without the unbounded findings
    if unbounded:  # a noiseless tensor moved, or an unbounded effect: no finite σ_eff
        sigma_eff_hi = sigma_eff_pt = sigma_eff_lo = 0.0
    # ---------------------------------------------------------------- sampling
    samp = raw["sampling"]
    scheme = samp.get("scheme") if samp.get("tested") else None
    q_d = claim.sample_rate
    spe_list = samp.get("steps_per_epoch") or []
    spe = max(spe_list) if spe_list else 0
    t_driven = int(samp.get("logical_steps", 0))
    n_data = raw["info"].get("dataset_size")
    standin = claim.dataset_size is not None and n_data is not None and claim.dataset_size != n_data
    full_epochs = [x for x in spe_list if x] if samp.get("tested") else []
    if claim.steps is not None:
        t_declared, t_how = claim.steps, "CLAIM['steps']"
    elif full_epochs and not standin:
        t_declared = claim.epochs * max(full_epochs)
        t_how = "epochs × the loader's steps per epoch (what Opacus's accountant counts)"
    else:
        t_declared, t_how = (
            max(1, round(claim.epochs / q_d)),
            "round(epochs / sample_rate)",
        )
    if samp.get("tested"):
        status["sampling"] = "passed"
        t_run = (
            spe * samp["epochs_wanted"]
            if samp.get("truncated") and claim.epochs
            else (claim.steps if samp.get("truncated") and claim.steps else t_driven)
        )
        if scheme != claim.sampling:
            sev = "deviation"
            status["sampling"] = "inconclusive"
            findings.append(
                Finding(
                    "sampling",
                    f"sampling: {scheme} accounted as {claim.sampling}",
                    sev,
                    f"the data loader's batches are '{scheme}', the claim assumes '{claim.sampling}'",
                    samp.get("why", scheme or ""),
                    f"'{claim.sampling}' sampling"
                    + (
                        " (every example in every step independently with probability q)"
                        if claim.sampling == "poisson"
                        else ""
                    ),
                    "the data loader: Opacus's make_private(poisson_sampling=True) replaces it with "
                    "a Poisson sampler; a DataLoader with shuffle or a plain batch sampler is not one",
                )
            )
        rate = samp.get("rate")
    else:
        t_run = t_declared
        rate = None
        why_untested.setdefault(
            "sampling", "no data loader to drive (privatize: define make_dataset and make_loader)"
        )
    # ---------------------------------------------------------------- accounting
    acc: dict[str, Any] = {
        "claimed": {"epsilon": claim.epsilon, "delta": claim.delta},
        "declared": {"sigma": sigma_d, "q": q_d, "steps": t_declared, "steps_how": t_how},
    }
    dec = accounting.poisson_interval(
        sigma_d,
        q_d,
        max(1, t_declared),
        claim.delta,
        decide_against=claim.epsilon,
        relation=claim.adjacency,
    )
    acc["declared"]["epsilon_pld"] = dec.as_dict()
    try:
        acc["declared"]["epsilon_rdp"] = (
            accounting.rdp_epsilon(sigma_d, q_d, max(1, t_declared), claim.delta)
            if claim.adjacency == "add-remove"
            else None
        )
    except Exception:  # RDP can fail to converge at extreme parameters; it is a side value
        acc["declared"]["epsilon_rdp"] = None
    status["accounting"] = "passed"
    if claim.sampling == "poisson" and dec.lower > claim.epsilon:
        # the declared numbers disagree with the printed ε: a violation when the measured
        # mechanism also exceeds the claim (below), else the numbers are to be checked
        findings.append(
            Finding(
                "accounting",
                "accounting: the claim is below its own parameters' ε",
                "deviation",
                f"σ = {sigma_d:g}, q = {q_d:.4g}, T = {t_declared} give ε ≥ {dec.lower:.4g}, "
                f"more than the claimed {claim.epsilon:g}",
                f"dp-accounting PLD: ε ∈ [{dec.lower:.4g}, {dec.upper:.4g}] at δ = {claim.delta:g}"
                + (f" ({claim.adjacency})" if claim.adjacency != "add-remove" else ""),
                f"ε ≤ {claim.epsilon:g}",
                "the accountant call: its δ, steps, sampling rate and neighbouring relation must be "
                "the ones the run uses",
                eps_view(dec.lower, "sound lower bound", dec.how),
            )
        )
    if claim.sampling == "shuffle":
        lb_shuffle = accounting.shuffle_lower_bound(
            sigma_d, max(1, spe or round(1 / q_d)), claim.epochs or 1, claim.delta
        )
        acc["declared"]["epsilon_shuffle_lower"] = lb_shuffle
    measured: dict[str, Any] = {
        "sigma_eff": {"estimate": sigma_eff_pt, "lower": sigma_eff_lo, "upper": sigma_eff_hi},
        "mu_max": {"estimate": mu_pt, "lower": mu_all_lo, "upper": mu_hi},
        "scheme": scheme,
        "steps_counted": t_driven,
        "steps_run": t_run,
    }
    if rate:
        measured["q"] = rate
        if claim.sampling == "poisson" and scheme == "poisson" and not standin:
            from privacy_audit.audit.epsilon.dp_check.sampling import clopper_pearson

            lo_w, hi_w = clopper_pearson(samp["inclusions"], rate["trials"], 5e-4)
            measured["q"]["consistent_interval"] = [lo_w, hi_w]
            if lo_w > q_d:
                status["accounting"] = (
                    "violated" if status["accounting"] == "violated" else "inconclusive"
                )
                findings.append(
                    Finding(
                        "accounting",
                        "accounting: sampling rate larger than declared",
                        "deviation",
                        f"examples are drawn at q̂ = {rate['estimate']:.4g}, the claim says {q_d:.4g}",
                        f"q̂ = {rate['estimate']:.4g} [{rate['lower']:.4g}, {rate['upper']:.4g}] "
                        f"({samp['inclusions']:,} draws of {rate['trials']:,})",
                        f"q = {q_d:.4g}",
                        "the sample rate given to the accountant and the noise calibration: it "
                        "must be batch size / the size of the dataset the loader draws from",
                    )
                )
    if standin:
        findings.append(
            Finding(
                "sampling",
                "sampling: a stand-in dataset",
                "info",
                f"make_dataset() has {n_data} examples, the claim's training set "
                f"{claim.dataset_size}: the loader's scheme is tested, its rate and steps are "
                "the declared ones",
                f"{n_data} examples",
                f"{claim.dataset_size} examples (CLAIM['dataset_size'])",
                "",
            )
        )
    if samp.get("tested") and t_run > t_declared and not standin:
        status["accounting"] = "violated" if status["accounting"] == "violated" else "inconclusive"
        findings.append(
            Finding(
                "accounting",
                "accounting: more steps than accounted",
                "deviation",
                f"the run takes {t_run} steps, the claim accounts for {t_declared}",
                f"{t_run} logical steps over {samp['epochs_wanted']} epoch(s)",
                f"T = {t_declared} ({t_how})",
                "the steps given to the accountant and the noise calibration must be the whole "
                "run's (epochs × steps per epoch), not one epoch's",
            )
        )
    # the ε of what was measured
    eps_lo, eps_how = None, ""
    if scheme is not None and scheme != "none":
        q_lo = rate["decision_lower"] if rate and not standin else q_d
        t_lo = max(1, t_driven if samp.get("truncated") else t_run)
        if standin:
            t_lo = t_declared
        rel_sigma = sigma_finite_hi
        if claim.adjacency == "replace-one" and mu_rep_lo > 0:
            rel_sigma = min(rel_sigma, 2.0 / mu_rep_lo)
        eps_lo, eps_how = _lower_epsilon(
            scheme,
            rel_sigma,
            q_lo,
            t_lo,
            max(1, round(1 / q_d)) if standin else max(1, spe),
            (claim.epochs or 1)
            if standin
            else max(1, len(spe_list))
            if samp.get("truncated") is False
            else max(1, len([s for s in spe_list if s])),
            claim,
        )
    elif not samp.get("tested") and sigma_finite_hi < math.inf:
        # no sampler: the declared q and T (the ε of the mechanism if its sampling is right)
        rel_sigma = sigma_finite_hi
        if claim.adjacency == "replace-one" and mu_rep_lo > 0:
            rel_sigma = min(rel_sigma, 2.0 / mu_rep_lo)
        eps_lo, eps_how = _lower_epsilon("poisson", rel_sigma, q_d, max(1, t_declared), 1, 1, claim)
        eps_how += " (declared q and T: the sampler was not tested)"
    # eps_lo: the finite measurements' bound (what a deviation implies by itself);
    # the mechanism's, reported, is ∞ when a finding is unbounded
    eps_all = math.inf if unbounded else eps_lo
    how_all = "an unbounded finding (below)" if unbounded else eps_how
    # other sound bounds on the code actually run: state carried across steps, and the
    # many-run audits; the reported bound is the largest (the declared parameters' ε is a
    # bound on the declared mechanism, not on what ran, so it is not among them)
    others = [
        (f.epsilon["value"], f.epsilon.get("how", ""))
        for f in findings
        if f.check == "schedule" and f.epsilon and f.epsilon.get("value") is not None
    ] + [
        (e["epsilon_lower"], f"{e['design']} many-run audit: {e.get('kind', '')}")
        for e in raw.get("end_to_end") or []
        if e.get("design") != "duplicate record"
    ]
    for value, how in others:
        if eps_all is not None and value > eps_all:
            eps_all, how_all = value, how
    measured["epsilon_lower"] = eps_view(eps_all, "sound lower bound", how_all)
    if (
        scheme == "poisson"
        and rate
        and 0 < sigma_eff_pt < math.inf
        and claim.adjacency == "add-remove"
    ):
        try:  # RDP beside the PLD, at the point estimates (an upper bound, for reference)
            measured["epsilon_rdp_at_estimates"] = accounting.rdp_epsilon(
                max(sigma_eff_pt, SIGMA_FLOOR), rate["estimate"], max(1, t_run), claim.delta
            )
        except Exception:  # RDP can fail to converge at extreme parameters; a side value
            measured["epsilon_rdp_at_estimates"] = None
    # the upper side, for the reader: at σ_eff's lower bound and q's upper bound
    if (
        scheme == "poisson"
        and rate
        and 0 < sigma_eff_lo < math.inf
        and eps_lo is not None
        and not unbounded
    ):
        up = accounting.poisson_interval(
            max(sigma_eff_lo, SIGMA_FLOOR),
            rate["upper"],
            max(1, t_run),
            claim.delta,
            relation=claim.adjacency,
        )
        measured["epsilon_upper"] = eps_view(
            max(up.upper, eps_lo),
            "upper estimate (the same mechanism at σ_eff's lower and q's upper end)",
            up.how,
        )
    acc["measured"] = measured
    exceeds = eps_lo is not None and eps_lo > claim.epsilon  # the finite bound alone
    deviations = [f for f in findings if f.severity == "deviation"]
    for f in deviations:
        # a deviation from the declared mechanism is a violation exactly when the ε of
        # what was measured exceeds the claim (a sound bound); otherwise it is reported
        # with that ε, and the verdict cannot be consistent
        if exceeds:
            f.severity = "violation"
            f.epsilon = f.epsilon or eps_view(eps_lo, "sound lower bound", eps_how)
        else:
            f.severity = "inconclusive"
            if eps_lo is not None:
                f.epsilon = eps_view(eps_lo, "sound lower bound", eps_how + " (within the claim)")
        if f.check in status:
            status[f.check] = "violated" if exceeds else "inconclusive"
    if exceeds or unbounded:
        for f in findings:
            if f.severity == "violation" and f.epsilon is None:
                f.epsilon = eps_view(eps_all, "sound lower bound", how_all)
    if exceeds:
        if not any(f.severity == "violation" for f in findings):
            status["accounting"] = "violated"
            findings.append(
                Finding(
                    "accounting",
                    "accounting: the measured mechanism exceeds the claim",
                    "violation",
                    f"the mechanism run gives ε ≥ {eps_lo:.4g}, more than the claimed {claim.epsilon:g}",
                    f"σ_eff ≤ {sigma_eff_hi:.4g}, scheme {scheme}, T = {t_run}",
                    f"ε ≤ {claim.epsilon:g}",
                    "compare σ, q and T given to the accountant with the run's",
                    eps_view(eps_lo, "sound lower bound", eps_how),
                )
            )
    # σ_eff below the declared σ without a proven violation
    if sigma_eff_hi < sigma_d * (1 - EFFECT_SLACK) and not any(
        f.severity == "violation" for f in findings
    ):
        status["sensitivity"] = (
            "inconclusive" if status["sensitivity"] == "passed" else status["sensitivity"]
        )
        findings.append(
            Finding(
                "sensitivity",
                "noise: effective multiplier below the declared one",
                "inconclusive",
                f"σ_eff ≤ {sigma_eff_hi:.4g}, the claim declares σ = {sigma_d:g}",
                f"σ_eff = {sigma_eff_pt:.4g} [{sigma_eff_lo:.4g}, {sigma_eff_hi:.4g}]",
                f"σ_eff ≥ {sigma_d:g}",
                "the noise std or the clipping norm; the ε it implies is not above the claim with "
                "its whole interval",
            )
        )
    # ---------------------------------------------------------------- end to end
    for e in raw.get("end_to_end") or []:
        lb = e.get("epsilon_lower", 0.0)
        # the duplicate-record design forces the record into one unsampled step (a
        # replace-one pair): it does not bound the claimed Poisson add/remove ε
        if e.get("design") == "duplicate record":
            continue
        if lb > claim.epsilon:
            findings.append(
                Finding(
                    "end-to-end",
                    f"end-to-end: {e['design']} audit",
                    "violation",
                    f"{e['runs_per_side']} runs of your setup per side tell the crafted "
                    f"datasets apart: ε ≥ {lb:.4g}",
                    f"{e['design']}, {e['steps_per_run']} step(s) per run",
                    f"ε ≤ {claim.epsilon:g}",
                    "see the other findings: this bound needs no assumption about the noise",
                    eps_view(lb, "sound lower bound", e.get("kind", "")),
                )
            )
    # ---------------------------------------------------------------- freshness
    fr = raw.get("freshness") or {}
    if fr.get("reproducible_without_global_seed"):
        findings.append(
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
        findings.append(
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
    # ---------------------------------------------------------------- verdict
    required = REQUIRED[protocol] + (
        ("model-clipping",) if raw["info"].get("ghost_clipping") else ()
    )
    accepted = set(accept_untested)
    untested = [c for c in required if status[c] == "not-tested" and c not in accepted]
    for c in required:
        if status[c] == "not-tested":
            status[c] = "not-tested" + (" (accepted)" if c in accepted else "")
    for c in ALL_CHECKS:
        if c not in required and status[c] == "not-tested":
            status[c] = "not-applicable"
    if any(f.severity == "violation" for f in findings):
        verdict = "violated"
    elif untested or any(f.severity == "inconclusive" for f in findings):
        verdict = "inconclusive"
    elif eps_all is None:
        verdict = "inconclusive"
    else:
        verdict = "consistent"
    headline = _headline(verdict, findings, untested, why_untested, claim, eps_all)
    return {
        "schema": "privacy-audit/dp-check",
        "schema_version": 1,
        "verdict": verdict,
        "exit_code": {"consistent": 0, "violated": 1, "inconclusive": 4}[verdict],
        "headline": headline,
        "setup": {
            "path": str(setup.path) if setup.path else None,
            "sha256": setup.sha256,
            **raw["info"],
        },
        "claim": claim.as_dict(),
        "checks": [
            {
                "name": c,
                "status": status[c],
                "why_not_tested": why_untested.get(c),
            }
            for c in ALL_CHECKS
        ],
        "findings": [asdict(f) for f in findings],
        "epsilon": acc,
        "noise": {
            "steps": noise.steps,
            "batch": noise.batch,
            "per_tensor": per,
            "gaussian_ks_p": noise.gaussian_p,
            "lag1": noise.lag1,
            "adjacent": noise.adjacent,
            "cross_tensor": noise.cross_tensor,
            "reuse": noise.reuse,
            "common": noise.common,
            **measured_noise,
        },
        "sensitivity": {
            "expected_mu": expected_mu,
            "designs": [e.as_dict(scale) for e in effects],
            "state_across_designs": raw.get("flushes"),
        },
        "sampling": samp,
        "schedule": sched_view,
        "model": {k: asdict(v) for k, v in model.items() if hasattr(v, "__dataclass_fields__")},
        "replay": raw["replay"],
        "freshness": fr,
        "end_to_end": {
            "why": raw.get("end_to_end_why") or None,
            "audits": raw.get("end_to_end") or [],
        },
        "seed": runner.seed,
    }


def _headline(verdict, findings, untested, why, claim: Claim, eps_lo) -> str:
    if verdict == "violated":
        v = [f for f in findings if f.severity == "violation"]
        eps = [f.epsilon for f in v if f.epsilon]
        e = max(
            eps,
            key=lambda x: math.inf if x.get("infinite") else (x.get("value") or 0.0),
            default=None,
        )
        return (
            f"{v[0].title} ({v[0].bug_class}); the code releases ε ≥ {fmt_eps(e)} against the "
            f"claimed {claim.epsilon:g}"
            + (f", and {len(v) - 1} more violation(s)" if len(v) > 1 else "")
        )
    if verdict == "inconclusive":
        if untested:
            return "not tested: " + "; ".join(f"{c} ({why.get(c, '')})" for c in untested)
        f = next(f for f in findings if f.severity == "inconclusive")
        return f"{f.title}; no sound bound shows a violation"
    e = f"{eps_lo:.3g}" if eps_lo is not None else "—"
    return (
        f"every check agrees with the claimed mechanism; the measured mechanism's ε ≥ {e} "
        f"(sound lower bound) is within the claimed {claim.epsilon:g}"
    )
