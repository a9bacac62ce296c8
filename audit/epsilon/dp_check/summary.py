"""The terminal summary of a dp-check record: the verdict, each finding with where to look,
the checks (printed by ``privacy-audit dp-check`` and by ``DPCheckResult.summary()``)."""

from __future__ import annotations

import math
from typing import Any


def _fmt_eps(e: dict | None) -> str:
    from privacy_audit.audit.epsilon.dp_check.verdict import fmt_eps

    return fmt_eps(e)


def summary(record: dict[str, Any]) -> str:
    """The terminal summary: the verdict, each finding with where to look, the checks."""
    lines = []
    v = record["verdict"].upper()
    claim = record["claim"]
    lines.append(f"dp-check: {v}: {record['headline']}")
    lines.append(
        f"  claim: ε = {claim['epsilon']:g} at δ = {claim['delta']:g} "
        f"({claim.get('adjacency', 'add-remove')}, per {claim.get('unit', 'example')}), "
        f"σ = {claim['noise_multiplier']:g}, C = {claim.get('max_grad_norm_total', claim['max_grad_norm'])}, "
        f"q = {claim['sample_rate']:.4g}"
    )
    m = record["epsilon"].get("measured", {})
    se = m.get("sigma_eff", {})
    if se:
        lines.append(
            f"  measured: σ_eff = {_n(se.get('estimate'))} [{_n(se.get('lower'))}, "
            f"{_n(se.get('upper'))}], scheme {m.get('scheme') or 'not tested'}, "
            f"ε ≥ {_fmt_eps(m.get('epsilon_lower'))} (sound lower bound)"
        )
    for f in record["findings"]:
        if f["severity"] == "info":
            continue
        eps = f" → ε ≥ {_fmt_eps(f['epsilon'])}" if f.get("epsilon") else ""
        lines.append(f"  [{f['severity'].upper()}] {f['bug_class']}: {f['title']}{eps}")
        lines.append(f"      measured: {f['measured']}")
        if f.get("expected"):
            lines.append(f"      expected: {f['expected']}")
        if f.get("where"):
            lines.append(f"      where to look: {f['where']}")
    lines.append("  checks: " + ", ".join(f"{c['name']} {c['status']}" for c in record["checks"]))
    b = record.get("budget", {})
    if b:
        lines.append(
            f"  time: {b.get('wall_s', 0):.1f} s wall, {b.get('cpu_s', 0):.1f} s CPU "
            f"(budget {b.get('seconds', 0):g} s)"
        )
        for e in (record.get("end_to_end") or {}).get("audits") or []:
            lines.append(
                f"  end-to-end {e['design']}: ε ≥ {e['epsilon_lower']:.3g} from "
                f"{e['runs_per_side']} runs per side ({e['cpu_s']:.0f} s CPU)"
            )
        for note in b.get("left_out") or []:
            lines.append(f"  left out: {note}")
    return "\n".join(lines)


def _n(x) -> str:
    if x is None:
        return "—"
    if isinstance(x, float) and math.isinf(x):
        return "∞"
    return f"{x:.4g}"
