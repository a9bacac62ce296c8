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

The findings come family by family, in the order the report shows them: noise
(:mod:`.findings_noise`), crafted pairs (:mod:`.findings_sensitivity`), schedule
(:mod:`.findings_schedule`), the model's own checks (:mod:`.findings_model`), sampling and
the declared accounting (:mod:`.findings_sampling`); this module turns them into σ_eff,
the ε of what was measured and the verdict.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from privacy_audit.audit.epsilon.dp_check import accounting
from privacy_audit.audit.epsilon.dp_check.contract import Claim, Setup
from privacy_audit.audit.epsilon.dp_check.finding import (
    EFFECT_SLACK,
    Finding,
    Ledger,
    eps_view,
)
from privacy_audit.audit.epsilon.dp_check.findings_model import model_findings
from privacy_audit.audit.epsilon.dp_check.findings_noise import (
    coordinate_correlation,
    freshness_findings,
    noise_findings,
    reuse_findings,
)
from privacy_audit.audit.epsilon.dp_check.findings_sampling import (
    Drive,
    declared_accounting,
    run_findings,
    sampling_findings,
)
from privacy_audit.audit.epsilon.dp_check.findings_schedule import schedule_findings
from privacy_audit.audit.epsilon.dp_check.findings_sensitivity import (
    Pairs,
    crafted_pairs,
    pair_findings,
)
from privacy_audit.audit.epsilon.dp_check.mechanism import ONE_DIRECTION, NoiseStats

#: effective noise multipliers below this are clamped up to it before the accountant
#: runs (ε decreases in σ, so the clamped value is still a lower bound, and fast)
SIGMA_FLOOR = 0.05
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


@dataclass
class SigmaEff:
    """The effective noise multiplier σ_eff = 1/μ that one example's measured effect μ
    implies: ``hi`` (from μ's lower end), ``pt`` (the estimate) and ``lo`` (from μ's upper
    end), all 0.0 when a finding so far is unbounded; ``finite_hi`` is ``hi`` from the
    finite measurements alone, ``mu_all_lo`` the largest lower end of μ (noise units),
    ``unbounded`` whether a finding so far carries ε = ∞."""

    hi: float
    pt: float
    lo: float
    finite_hi: float
    mu_all_lo: float
    unbounded: bool


def effective_sigma(
    pairs: Pairs, corr_factor: float, mu_model_lo: float, findings: list[Finding]
) -> SigmaEff:
    """σ_eff over the add-remove pairs and the model checks' effect ``mu_model_lo``.

    Assumes ``corr_factor`` = √(1 − ρ²) from :func:`coordinate_correlation` (0 makes μ
    infinite) and ``findings`` holds every finding before the sampling check."""
    ar = pairs.ar
    mu_hi = max((e.mu_hi for e in ar), default=0.0)

    # a correlation between coordinates lets a one-coordinate effect be read against a
    # neighbour's noise (μ / √(1 − ρ²)); it is applied to those designs only
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
    return SigmaEff(sigma_eff_hi, sigma_eff_pt, sigma_eff_lo, sigma_finite_hi, mu_all_lo, unbounded)


def measured_mechanism(sig: SigmaEff, pairs: Pairs, drive: Drive) -> dict[str, Any]:
    """The accounting record's ``measured`` part so far: σ_eff and μ with their
    intervals, the scheme found, and the steps counted and run."""
    sigma_eff_pt, sigma_eff_lo, sigma_eff_hi = sig.pt, sig.lo, sig.hi
    mu_all_lo = sig.mu_all_lo
    mu_pt = max((e.mu for e in pairs.ar), default=0.0)
    mu_hi = max((e.mu_hi for e in pairs.ar), default=0.0)
    scheme, t_driven, t_run = drive.scheme, drive.t_driven, drive.t_run
    measured: dict[str, Any] = {
        "sigma_eff": {"estimate": sigma_eff_pt, "lower": sigma_eff_lo, "upper": sigma_eff_hi},
        "mu_max": {"estimate": mu_pt, "lower": mu_all_lo, "upper": mu_hi},
        "scheme": scheme,
        "steps_counted": t_driven,
        "steps_run": t_run,
    }
    return measured


def measured_epsilon(
    drive: Drive, sigma_finite_hi: float, mu_rep_lo: float, claim: Claim
) -> tuple[float | None, str]:
    """The sound lower bound on the ε of what was measured (:func:`_lower_epsilon`) from
    the finite measurements alone, and how: at σ_eff's upper end (or 2/μ of the
    replace-one pairs, whichever is smaller, for a replace-one claim), the sampling rate's
    decision lower end and the steps run; at the declared q and T when no sampler was
    driven. (None, "") when no sound accountant applies."""
    q_d = claim.sample_rate
    samp, scheme, rate, standin = drive.samp, drive.scheme, drive.rate, drive.standin
    spe_list, spe = drive.spe_list, drive.spe
    t_driven, t_run, t_declared = drive.t_driven, drive.t_run, drive.t_declared
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
    return eps_lo, eps_how


def reported_epsilon(
    eps_lo: float | None,
    eps_how: str,
    unbounded: bool,
    findings: list[Finding],
    raw: dict[str, Any],
) -> tuple[float | None, str]:
    """The ε reported for the code that ran, and how: ∞ when a finding is unbounded, else
    the largest of ``eps_lo``, the state-across-steps bound and the many-run audits' bounds
    (the duplicate-record design bounds another relation and is left out)."""
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
    return eps_all, how_all


def side_estimates(
    measured: dict[str, Any], drive: Drive, sig: SigmaEff, eps_lo: float | None, claim: Claim
) -> None:
    """Adds the reader's side values to ``measured`` under Poisson sampling: RDP at the
    point estimates (add-remove; an upper bound, for reference) and the PLD upper estimate
    at σ_eff's lower and q's upper end (when the measurements are finite)."""
    scheme, rate, t_run = drive.scheme, drive.rate, drive.t_run
    sigma_eff_pt, sigma_eff_lo, unbounded = sig.pt, sig.lo, sig.unbounded
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


def resolve_deviations(
    led: Ledger,
    claim: Claim,
    eps: tuple[float | None, str],
    eps_reported: tuple[float | None, str],
    sig: SigmaEff,
    drive: Drive,
) -> None:
    """Turns each deviation from the declared mechanism into a violation exactly when the
    finite measurements' ε (``eps``) exceeds the claim, else into an inconclusive finding
    with that ε; gives the reported ε (``eps_reported``) to violations without one, and
    adds an accounting violation when ε exceeds the claim and nothing else is violated."""
    eps_lo, eps_how = eps
    eps_all, how_all = eps_reported
    unbounded, sigma_eff_hi = sig.unbounded, sig.hi
    scheme, t_run = drive.scheme, drive.t_run
    exceeds = eps_lo is not None and eps_lo > claim.epsilon  # the finite bound alone
    deviations = [f for f in led.findings if f.severity == "deviation"]
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
        if f.check in led.status:
            led.status[f.check] = "violated" if exceeds else "inconclusive"
    if exceeds or unbounded:
        for f in led.findings:
            if f.severity == "violation" and f.epsilon is None:
                f.epsilon = eps_view(eps_all, "sound lower bound", how_all)
    if exceeds:
        if not any(f.severity == "violation" for f in led.findings):
            led.status["accounting"] = "violated"
            led.findings.append(
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


def sigma_below_finding(sig: SigmaEff, claim: Claim, led: Ledger) -> None:
    """An inconclusive finding when σ_eff's upper end is below the declared σ (by more than
    ``EFFECT_SLACK``) and no violation was proven."""
    sigma_d = claim.noise_multiplier
    sigma_eff_hi, sigma_eff_pt, sigma_eff_lo = sig.hi, sig.pt, sig.lo
    # σ_eff below the declared σ without a proven violation
    if sigma_eff_hi < sigma_d * (1 - EFFECT_SLACK) and not any(
        f.severity == "violation" for f in led.findings
    ):
        led.status["sensitivity"] = (
            "inconclusive" if led.status["sensitivity"] == "passed" else led.status["sensitivity"]
        )
        led.findings.append(
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


def end_to_end_findings(raw: dict[str, Any], claim: Claim, led: Ledger) -> None:
    """A violation for each many-run audit whose lower bound exceeds the claim (the
    duplicate-record design forces a replace-one pair and does not bound the claim)."""
    for e in raw.get("end_to_end") or []:
        lb = e.get("epsilon_lower", 0.0)
        # the duplicate-record design forces the record into one unsampled step (a
        # replace-one pair): it does not bound the claimed Poisson add/remove ε
        if e.get("design") == "duplicate record":
            continue
        if lb > claim.epsilon:
            led.findings.append(
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


def decide(
    led: Ledger,
    protocol: str,
    info: dict[str, Any],
    accept_untested: Any,
    eps_all: float | None,
) -> tuple[str, list[str]]:
    """The verdict and the required checks left untested (not accepted): violated on any
    violation; inconclusive on an untested required check, an inconclusive finding or no
    ε; else consistent. Marks untested checks (accepted) and those not required."""
    status, findings = led.status, led.findings
    required = REQUIRED[protocol] + (("model-clipping",) if info.get("ghost_clipping") else ())
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
    return verdict, untested


def _record(
    setup: Setup,
    raw: dict[str, Any],
    runner: Any,
    led: Ledger,
    outcome: tuple[str, str],
    acc: dict[str, Any],
    measured_noise: dict[str, Any],
    expected_mu: float,
    sched_view: dict[str, Any] | None,
) -> dict[str, Any]:
    """The results record (``results.json``, schema privacy-audit/dp-check version 1)."""
    verdict, headline = outcome
    claim, status, why_untested = setup.claim, led.status, led.why_untested
    findings = led.findings
    noise: NoiseStats = raw["noise"]
    per, effects, scale = noise.per_tensor, raw["effects"], raw.get("scale")
    samp, model, fr = raw["sampling"], raw.get("model") or {}, raw.get("freshness") or {}
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


def assemble(setup: Setup, raw: dict[str, Any], runner, accept_untested=()) -> dict[str, Any]:
    """The results record of one dp-check: each finding family in report order over the
    measurements in ``raw`` (:func:`.run.run`), σ_eff and the ε of what was measured, and
    the verdict. Checks in ``accept_untested`` may stay untested without making the
    verdict inconclusive; a truncated schedule is noted on ``runner``."""
    claim = setup.claim
    noise: NoiseStats = raw["noise"]
    scale = raw.get("scale")
    led = Ledger(dict.fromkeys(ALL_CHECKS, "not-tested"))
    measured_noise = noise_findings(noise, claim, scale, led)
    reuse_findings(noise, led)
    corr_factor = coordinate_correlation(noise, led)
    pairs = crafted_pairs(raw["effects"], claim)
    explained_by = pair_findings(pairs, raw["info"], noise, measured_noise, claim, scale, led)
    mu_rep_lo = max((e.mu_lo for e in pairs.rep), default=0.0)
    sched_view = schedule_findings(raw, claim, noise, runner, led)
    model = raw.get("model") or {}
    mu_model_lo = model_findings(model, setup, raw["info"], pairs, explained_by, led)
    sig = effective_sigma(pairs, corr_factor, mu_model_lo, led.findings)
    drive = sampling_findings(raw, claim, led)
    acc = declared_accounting(claim, drive, led)
    measured = measured_mechanism(sig, pairs, drive)
    run_findings(claim, drive, measured, led)
    eps_lo, eps_how = measured_epsilon(drive, sig.finite_hi, mu_rep_lo, claim)
    eps_all, how_all = reported_epsilon(eps_lo, eps_how, sig.unbounded, led.findings, raw)
    measured["epsilon_lower"] = eps_view(eps_all, "sound lower bound", how_all)
    side_estimates(measured, drive, sig, eps_lo, claim)
    acc["measured"] = measured
    resolve_deviations(led, claim, (eps_lo, eps_how), (eps_all, how_all), sig, drive)
    sigma_below_finding(sig, claim, led)
    end_to_end_findings(raw, claim, led)
    freshness_findings(raw, led)
    verdict, untested = decide(led, setup.protocol, raw["info"], accept_untested, eps_all)
    headline = _headline(verdict, led.findings, untested, led.why_untested, claim, eps_all)
    return _record(
        setup,
        raw,
        runner,
        led,
        (verdict, headline),
        acc,
        measured_noise,
        pairs.expected_mu,
        sched_view,
    )


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
