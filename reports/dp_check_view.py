"""The dp-check report page (``privacy-audit dp-check``): the main report's stylesheet,
the verdict, each finding with where to look, the checks, the ε table, the noise per
released tensor, the crafted pairs and the sampling scheme.

It reads only the results record (audit/epsilon/dp_check/verdict.py's ``assemble`` plus the
budget and environment ``check`` adds), field by field with defaults, so a field missing
from an older record shows as "—", never as a template error. Every value is escaped by
the template environment.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from typing import Any

from privacy_audit.reports.dataset_inference_view import stylesheet
from privacy_audit.reports.formatting import DASH, num

TEMPLATE = "dp_check.html.j2"
_VERDICT = {
    "consistent": ("CONSISTENT", "low"),
    "violated": ("VIOLATED", "high"),
    "inconclusive": ("INCONCLUSIVE", "inconclusive"),
}
_SEVERITY = {
    "violation": "high",
    "inconclusive": "inconclusive",
    "warning": "moderate",
    "info": "not-measured",
}
_STATUS = {"passed": "ok", "violated": "high", "inconclusive": "warn", "not-applicable": "muted"}
_WHAT = {
    "noise": "the release of all-zero gradients: noise std per tensor, Gaussian shape, independence",
    "sensitivity": "crafted pairs of batches that differ by one example: clipping at two magnitudes, spread over every tensor, against opposing examples",
    "coverage": "every released tensor carries noise; every tensor training changes is released",
    "sampling": "the data loader driven over the claimed schedule: the scheme and the rate",
    "schedule": "one example in the first step: does any later release move?",
    "accounting": "the claim against dp-accounting at the declared and at the measured σ, q, T",
    "cross-example": "one example replaced: do the others' per-sample gradients move?",
    "model-clipping": "one example's loss weighted by W against 0, through the model's own backward",
    "outside-release": "parameters and buffers training changes outside the DP optimizer",
}


def _eps(e: Any) -> str:
    if not isinstance(e, dict):
        return DASH
    if e.get("infinite"):
        return "∞"
    return num(e.get("value"), 4)


def _eps_text(e: Any) -> str:
    if not isinstance(e, dict):
        return ""
    v = _eps(e)
    kind = e.get("kind") or ""
    how = e.get("how") or ""
    return f"≥ {v} ({kind}{'; ' + how if how else ''})"


def _check_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per check: its status and style class, why it was not tested, what it
    measures, and the CPU time of the phase that ran it (from the record's budget)."""
    budget = r.get("budget") or {}
    phases = budget.get("phases") or {}
    phase_of = {
        "noise": "noise",
        "sensitivity": "designs",
        "coverage": "designs",
        "sampling": "sampling",
        "schedule": "schedule",
        "cross-example": "model",
        "model-clipping": "model",
        "outside-release": "model",
    }
    checks = []
    for c in r.get("checks") or []:
        name = str(c.get("name"))
        st = str(c.get("status"))
        ph = phases.get(phase_of.get(name, ""), {})
        checks.append(
            {
                "name": name,
                "status": st,
                "cls": _STATUS.get(st.split(" ")[0], "muted" if "not" in st else "warn"),
                "why": c.get("why_not_tested") or "",
                "what": _WHAT.get(name, ""),
                "time": f"{ph['cpu_s']:.1f} s CPU"
                if isinstance(ph.get("cpu_s"), (int, float))
                else DASH,
            }
        )
    return checks


def _finding_rows(r: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per finding, in the record's order, with its style class and ε text."""
    findings = []
    for f in r.get("findings") or []:
        findings.append(
            {
                "bug_class": f.get("bug_class", ""),
                "severity": f.get("severity", ""),
                "cls": _SEVERITY.get(f.get("severity"), "not-measured"),
                "title": f.get("title", ""),
                "measured": f.get("measured", ""),
                "expected": f.get("expected", ""),
                "where": f.get("where", ""),
                "check": f.get("check", ""),
                "epsilon": _eps_text(f.get("epsilon")),
            }
        )
    return findings


def _claim_text(claim: dict[str, Any]) -> str:
    """The claim in one line: ε at δ, neighbours, unit, sampling; σ, C (the total norm
    when per-layer), q, epochs or steps, and the accountant when named."""
    c_total = claim.get("max_grad_norm_total", claim.get("max_grad_norm"))
    claim_text = (
        f"ε = {num(claim.get('epsilon'), 4)} at δ = {claim.get('delta')} "
        f"({claim.get('adjacency', 'add-remove')} neighbours, per {claim.get('unit', 'example')}, "
        f"{claim.get('sampling', 'poisson')} sampling); σ = {num(claim.get('noise_multiplier'), 4)}, "
        f"C = {c_total}, q = {num(claim.get('sample_rate'), 4)}, "
        + (f"epochs = {claim['epochs']}" if "epochs" in claim else "")
        + (f", steps = {claim['steps']}" if "steps" in claim else "")
        + (f"; accountant {claim['accountant']}" if claim.get("accountant") else "")
    )
    return claim_text


def _measured_text(meas: dict[str, Any]) -> str:
    """What was measured in one line: σ_eff with its interval, the scheme, q̂ with its
    interval when tested, the steps run and the sound lower bound on ε."""
    se = meas.get("sigma_eff") or {}
    measured_text = (
        f"σ_eff = {num(se.get('estimate'), 4)} [{num(se.get('lower'), 4)}, {num(se.get('upper'), 4)}]; "
        f"scheme {meas.get('scheme') or 'not tested'}"
        + (
            f", q̂ = {num(meas['q'].get('estimate'), 4)} [{num(meas['q'].get('lower'), 4)}, {num(meas['q'].get('upper'), 4)}]"
            if isinstance(meas.get("q"), dict)
            else ""
        )
        + f", T = {meas.get('steps_run', DASH)}; ε ≥ {_eps(meas.get('epsilon_lower'))} (sound lower bound)"
    )
    return measured_text


def _eps_rows(claim: dict[str, Any], eps: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The ε table: the claim, the declared parameters' PLD interval, RDP and shuffle
    lower bound when present, and the measured mechanism's lower bound and upper
    estimate."""
    meas = eps.get("measured") or {}
    dec = eps.get("declared") or {}
    eps_rows = [
        (
            "claimed",
            num(claim.get("epsilon"), 4),
            f"δ = {claim.get('delta')}; what the script prints",
        ),
    ]
    pld = dec.get("epsilon_pld") or {}
    if pld:
        eps_rows.append(
            (
                "declared σ, q, T (dp-accounting PLD)",
                f"[{num(pld.get('lower'), 4)}, {num(pld.get('upper'), 4)}]",
                f"T = {dec.get('steps')} ({dec.get('steps_how', '')}); {pld.get('how', '')}",
            )
        )
    if dec.get("epsilon_rdp") is not None:
        eps_rows.append(
            (
                "declared σ, q, T (dp-accounting RDP)",
                num(dec.get("epsilon_rdp"), 4),
                "an upper bound",
            )
        )
    if dec.get("epsilon_shuffle_lower") is not None:
        eps_rows.append(
            (
                "declared, shuffled batches (lower bound)",
                num(dec.get("epsilon_shuffle_lower"), 4),
                "Chua et al.'s pair",
            )
        )
    lo = meas.get("epsilon_lower")
    if isinstance(lo, dict):
        eps_rows.append(("measured mechanism, sound lower bound", _eps(lo), lo.get("how", "")))
    up = meas.get("epsilon_upper")
    if isinstance(up, dict):
        eps_rows.append(("measured mechanism, upper estimate", _eps(up), up.get("how", "")))
    return eps_rows


def _noise_view(r: dict[str, Any]) -> tuple[list[tuple[str, ...]], str]:
    """The noise table (the first 200 released tensors: size, std with its interval, std
    in gradient-sum units) and the note above it (releases, Gaussian shape, lag-1
    correlation, expected σ·C)."""
    claim = r.get("claim") or {}
    setup = r.get("setup") or {}
    c_total = claim.get("max_grad_norm_total", claim.get("max_grad_norm"))
    noise = r.get("noise") or {}
    scale = setup.get("release_scale")
    noise_rows = []
    for name, p in list((noise.get("per_tensor") or {}).items())[:200]:
        std = p.get("std")
        noise_rows.append(
            (
                name,
                num(p.get("numel")),
                num(std, 4),
                f"[{num(p.get('lo'), 4)}, {num(p.get('hi'), 4)}]"
                + (" pooled" if p.get("pooled") else ""),
                num(std / scale, 4) if isinstance(std, (int, float)) and scale else DASH,
            )
        )
    ks = noise.get("gaussian_ks_p")
    lag = noise.get("lag1") or {}
    noise_note = (
        f"{noise.get('steps', DASH)} releases of {noise.get('batch', DASH)}-example batches of zero "
        f"gradients. Gaussian shape: Kolmogorov–Smirnov p = {num(ks, 3)}. Correlation of one step's "
        f"noise with the next's: {num(lag.get('rho'), 3)}. Expected std in gradient-sum units: "
        f"σ·C = {num((claim.get('noise_multiplier') or 0) * (c_total or 0) if isinstance(c_total, (int, float)) else None, 4)}"
        f" (the release is scaled by {setup.get('release_scale_how', DASH)})."
    )
    return noise_rows, noise_note


def _design_rows(sens: dict[str, Any]) -> list[tuple[str, ...]]:
    """The first 80 crafted pairs: design, what it crafts, μ (∞ when unbounded), σ_eff and
    whether the noise was replayed."""
    design_rows = []
    for d in (sens.get("designs") or [])[:80]:
        mu = d.get("mu")
        design_rows.append(
            (
                d.get("design", ""),
                d.get("what", ""),
                "∞" if isinstance(mu, float) and math.isinf(mu) else num(mu, 4),
                num(d.get("sigma_eff"), 4),
                "exact (replayed noise)" if d.get("exact") else "estimated (repeated draws)",
            )
        )
    return design_rows


def _sampling_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The sampling table: scheme, examples, steps driven, q̂, batch sizes, empty batches,
    the Poisson tests and the trace's source; one row when the loader was not driven."""
    s = r.get("sampling") or {}
    sampling_rows = []
    if s.get("tested"):
        rate = s.get("rate") or {}
        sampling_rows = [
            ("Scheme", f"{s.get('scheme')}: {s.get('why', '')}"),
            ("Examples", num(s.get("examples"))),
            (
                "Steps driven",
                f"{s.get('logical_steps')} logical ({s.get('physical_batches')} physical batches) over {s.get('epochs_driven')} of {s.get('epochs_wanted')} epoch(s)"
                + (" — stopped at the budget" if s.get("truncated") else ""),
            ),
            (
                "Inclusion rate q̂",
                f"{num(rate.get('estimate'), 4)} [{num(rate.get('lower'), 4)}, {num(rate.get('upper'), 4)}] from {num(s.get('inclusions'))} draws of {num(rate.get('trials'))}",
            ),
            (
                "Batch size",
                f"mean {num((s.get('batch_size') or {}).get('mean'), 4)}, min {(s.get('batch_size') or {}).get('min')}, max {(s.get('batch_size') or {}).get('max')}",
            ),
            (
                "Empty batches",
                f"{s.get('empty_batches')} (Poisson expects {num(s.get('expected_empty_batches'), 3)})",
            ),
            ("Poisson tests", json.dumps(s.get("poisson_tests"))),
            ("Read from", s.get("source", DASH)),
        ]
    else:
        sampling_rows = [("Sampling", "not tested: no data loader")]
    return sampling_rows


def _run_rows(r: dict[str, Any]) -> list[tuple[str, str]]:
    """The run table: setup file and hash, what is released, optimizer and loader, ghost
    clipping, replay, budget used and versions."""
    setup = r.get("setup") or {}
    budget = r.get("budget") or {}
    env = r.get("environment") or {}
    run_rows = [
        ("Setup file", f"{setup.get('path')} (sha256 {str(setup.get('sha256'))[:16]}…)"),
        (
            "Released",
            f"{num(setup.get('released_parameters'))} parameters in {setup.get('released_tensors')} tensors",
        ),
        (
            "Optimizer / loader",
            f"{setup.get('optimizer')} / {setup.get('data_loader')} ({setup.get('batch_sampler')})",
        ),
        ("Ghost clipping", num(setup.get("ghost_clipping"))),
        ("Noise replayed", (r.get("replay") or {}).get("why", DASH)),
        (
            "Budget",
            f"{num(budget.get('seconds'))} s; used {num(budget.get('wall_s'), 3)} s wall, {num(budget.get('cpu_s'), 3)} s CPU",
        ),
        ("Versions", ", ".join(f"{k} {v}" for k, v in env.items())),
    ]
    return run_rows


def dp_check_context(r: dict[str, Any]) -> dict[str, Any]:
    """The template's context for one dp-check results record (module docstring)."""
    tool = r.get("tool") or {}
    verdict = str(r.get("verdict", "inconclusive"))
    label, cls = _VERDICT.get(verdict, ("UNKNOWN", "not-measured"))
    claim = r.get("claim") or {}
    eps = r.get("epsilon") or {}
    setup = r.get("setup") or {}
    budget = r.get("budget") or {}
    sens = r.get("sensitivity") or {}
    checks = _check_rows(r)
    findings = _finding_rows(r)
    claim_text = _claim_text(claim)
    measured_text = _measured_text(eps.get("measured") or {})
    eps_rows = _eps_rows(claim, eps)
    noise_rows, noise_note = _noise_view(r)
    design_rows = _design_rows(sens)
    sampling_rows = _sampling_rows(r)
    run_rows = _run_rows(r)
    name = str(setup.get("path") or "setup").rsplit("/", 1)[-1]
    return {
        "title": f"dp-check: {name}",
        "styles": stylesheet(),
        "tool_name": "privacy-audit",
        "tool_version": str(tool.get("version") or DASH),
        "created": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "seed": r.get("seed", DASH),
        "schema_version": r.get("schema_version", DASH),
        "setup_name": name,
        "protocol": setup.get("protocol", DASH),
        "verdict_label": label,
        "verdict_class": cls,
        "headline": r.get("headline", ""),
        "claim_text": claim_text,
        "measured_text": measured_text,
        "exit_code": r.get("exit_code", DASH),
        "exit_meaning": {0: "consistent", 1: "VIOLATED", 4: "inconclusive"}.get(
            r.get("exit_code"), ""
        ),
        "findings": findings,
        "checks": checks,
        "left_out": "; ".join(budget.get("left_out") or []),
        "eps_rows": eps_rows,
        "noise_note": noise_note,
        "noise_rows": noise_rows,
        "expected_mu": num(sens.get("expected_mu"), 4),
        "design_rows": design_rows,
        "sampling_rows": sampling_rows,
        "run_rows": run_rows,
    }


def render_dp_check(results: dict[str, Any]) -> str:
    """The dp-check page (self-contained, every value escaped)."""
    from privacy_audit.reports.html import jinja_environment

    return jinja_environment().get_template(TEMPLATE).render(**dp_check_context(results))


__all__ = ["dp_check_context", "render_dp_check"]
