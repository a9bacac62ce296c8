"""dp-check's schedule findings: does each release depend on its own batch only?

One example is put in the first batch and every later release of the run is compared
with the noise replayed (:class:`.mechanism.ScheduleEffect`). The accountant composes
releases that each depend on their own batch; state carried across steps (a gradient
not cleared, an accumulated buffer) breaks that, and a sound bound on the resulting ε
exists only under the assumptions :func:`persistence_conditions` checks.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import numpy as np

from privacy_audit.audit.epsilon.dp_check import accounting
from privacy_audit.audit.epsilon.dp_check.contract import Claim
from privacy_audit.audit.epsilon.dp_check.finding import Finding, Ledger, eps_view
from privacy_audit.audit.epsilon.dp_check.mechanism import NoiseStats


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


def _state_carried_finding(
    sched: Any, raw: dict[str, Any], claim: Claim, noise: NoiseStats, led: Ledger
) -> None:
    """The finding for one example that moves releases after its own step: a violation
    when the state-across-steps bound (:func:`accounting.persistence_lower_bound`, at the
    sampling rate's decision lower end) applies and exceeds the claim, else inconclusive
    with the reason no sound bound applies."""
    led.status["schedule"] = "inconclusive"
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
    pb = accounting.persistence_lower_bound(response, q_for, t_for, claim.delta) if usable else 0.0
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
    led.findings.append(
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
        led.status["schedule"] = "violated"


def _replayed_schedule_findings(
    sched: Any, raw: dict[str, Any], claim: Claim, noise: NoiseStats, led: Ledger
) -> None:
    """Findings of a schedule that was compared: releases whose number depends on the
    data, noise that could not be replayed across the run, or state carried across steps
    (:func:`_state_carried_finding`)."""
    if sched.release_counts_differ:
        led.status["schedule"] = "inconclusive"
        led.findings.append(
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
        led.status["schedule"] = "inconclusive"
        led.findings.append(
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
        _state_carried_finding(sched, raw, claim, noise, led)


def schedule_findings(
    raw: dict[str, Any], claim: Claim, noise: NoiseStats, runner: Any, led: Ledger
) -> dict[str, Any] | None:
    """The schedule check: untested when fewer than two releases were compared or the
    example moved none, passed when compared (then :func:`_replayed_schedule_findings`),
    untested without a data loader or budget. Notes a truncated comparison on ``runner``
    and returns the schedule's record (None when it never ran)."""
    sched = raw.get("schedule")
    sched_view = None
    if sched is not None and (sched.releases < 2 or sched.first_moved_at is None):
        led.why_untested["schedule"] = (
            f"only {sched.releases} release(s) compared (budget)"
            if sched.releases < 2
            else "the crafted example in the first batch moved no release (does the "
            "optimizer drop part of a batch?)"
        )
        sched_view = asdict(sched)
    elif sched is not None:
        led.status["schedule"] = "passed"
        sched_view = asdict(sched)
        _replayed_schedule_findings(sched, raw, claim, noise, led)
        if sched.truncated:
            runner.notes.append(
                f"schedule: compared {sched.releases} releases, not the whole schedule (budget)"
            )
    elif raw["sampling"].get("tested") is False:
        led.why_untested["schedule"] = "no data loader (privatize: define make_loader)"
    else:
        led.why_untested["schedule"] = "budget spent before this check"
    return sched_view
