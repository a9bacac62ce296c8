"""The gate's rules (docs/gate.md, "Never fails open"): what each run of a results.json
is held to and when the gate fails, apart from reading the files (gate.py). Each step reads
one part of the typed record (reports/results_record.py) and adds to a :class:`Tally`."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from privacy_audit.reports.results_record import AttackRecord, RunRecord

#: ``--max-auc`` etc.: option -> (the metric's key in results.json, its label)
GATED = {
    "max_auc": ("auc", "AUC"),
    "max_tpr_at_1pct_fpr": ("tpr_at_fpr_0.01", "TPR@1%FPR"),
    "max_epsilon_lb": ("epsilon_lower_bound", "empirical epsilon lower bound"),
}


@dataclass(frozen=True)
class Violation:
    """A measured number above its threshold."""

    run: str
    attack: str
    metric: str
    observed: float
    threshold: float
    key: str = ""  # the metric's key in results.json, e.g. "auc"
    source: str = "attack"  # "attack" | "leakage attack" | "ε audit"

    def __str__(self) -> str:
        return (
            f"{self.metric} of {self.source} '{self.attack}' on '{self.run}' is {self.observed:.4g}, "
            f"above the threshold {self.threshold:.4g}"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "attack": self.attack,
            "metric": self.key,
            "label": self.metric,
            "observed": self.observed,
            "threshold": self.threshold,
            "message": str(self),
        }


#: ``--max-leakage NAME=VALUE``: NAME -> (leakage attacks whose headline it gates, range
#: of the headline, a label). Rates are fractions in [0, 1]; exposure is in bits and mutual
#: information in nats per token, both >= 0. A leakage attack's own name is accepted too.
LEAKAGE_GATES: dict[str, tuple[tuple[str, ...], str, str]] = {
    "inversion-recall": (
        ("inversion-nn", "inversion-relaxed", "gradient-inversion"),
        "rate",
        "inversion token recall",
    ),
    "extraction-rate": (
        ("prompt-extraction", "extraction-untargeted"),
        "rate",
        "extraction rate",
    ),
    "pii-extraction-rate": (("pii-extraction",), "rate", "PII extraction rate"),
    "exposure": (("canary-exposure",), "nonnegative", "canary exposure (bits)"),
    "mi": (("mutual-information",), "nonnegative", "mutual information (nats/token)"),
    "attribute-accuracy": (("attribute-inference",), "rate", "attribute-inference accuracy"),
    "attention-epsilon": (("attention-lrt",), "nonnegative", "attention LRT ε lower bound"),
    # the largest member's risk within the headline's n queries (100 when measured);
    # ``extraction-risk@N`` gates the risk within N queries instead
    "extraction-risk": (
        ("extraction-risk",),
        "rate",
        "largest member extraction risk",
    ),
}
LEAKAGE_GATES.update(
    {
        attack: ((attack,), kind, f"{attack} headline")
        for attacks, kind, _ in list(LEAKAGE_GATES.values())
        for attack in attacks
    }
)
#: ``--max-leakage extraction-risk@N=R``: no audited member may come out verbatim within N
#: sampled queries with probability above R (attacks/extraction_risk.py).
RISK_AT = re.compile(r"extraction-risk@([1-9][0-9]{0,11})")


def gate_entry(name: str) -> tuple[tuple[str, ...], str, str] | None:
    """LEAKAGE_GATES' entry of a ``--max-leakage`` name (None: unknown)."""
    m = RISK_AT.fullmatch(name)
    if m:
        return ("extraction-risk",), "rate", f"largest member extraction risk within {m[1]} queries"
    return LEAKAGE_GATES.get(name)


@dataclass(frozen=True)
class Failure:
    """A gate failure that is not a number above a threshold: a requested metric that was
    not measured, nothing measured at all, a violated privacy claim, an inconclusive
    verdict under ``--strict``."""

    run: str
    attack: str
    key: str  # what was checked, e.g. "auc", "claim", "measured"
    # "unmeasured" | "nothing-measured" | "nothing-compared" | "claim-violated"
    # | "inconclusive" | "split-shifted" | "invalid-attack"
    kind: str
    message: str

    def __str__(self) -> str:
        return self.message

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "attack": self.attack,
            "metric": self.key,
            "kind": self.kind,
            "message": self.message,
        }


def finite(x: Any) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def unmeasured(m: Any, att: dict[str, Any] | None = None, key: str = "") -> str | None:
    """Why a metric dict holds no usable value (None: it does). A TPR the sample does not
    resolve (reports/resolution.py, the report's own rule) is not measured."""
    if isinstance(att, dict) and att.get("comparable") is False:
        why = att.get("not_comparable") if isinstance(att.get("not_comparable"), str) else ""
        return f"is not comparable across the two sides ({why or 'see the record'})"
    if not isinstance(m, dict):
        return "is missing"
    if m.get("below_resolution") is True or m.get("status") == "below_resolution":
        reason = m.get("reason") if isinstance(m.get("reason"), str) else ""
        return f"is {reason or 'below the resolution of this sample'} (not measured)"
    if key.startswith("tpr_at_fpr_") and att is not None:
        from privacy_audit.reports.resolution import tpr_standing

        st = tpr_standing(att, float(key[len("tpr_at_fpr_") :]))
        if st["measured"] and not st["resolvable"]:
            return f"is {st['reason']}: not measured"
    if "value" not in m or m["value"] is None:
        return "is null"
    if isinstance(m["value"], bool) or not isinstance(m["value"], (int, float)):
        return f"is not a number ({m['value']!r})"
    if not math.isfinite(float(m["value"])):
        return f"is not finite ({m['value']!r})"
    return None


def reason(att: dict[str, Any]) -> str:
    reason = att.get("reason")
    return str(reason).strip()[:200] if reason else "no reason recorded"


@dataclass
class Tally:
    """What the rules found so far: violations, failures, and how many results were
    measured (none at all fails unless ``allow_empty``)."""

    violations: list[Violation] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    n_measured: int = 0

    def fail(self, run: str, attack: str, key: str, kind: str, message: str) -> None:
        self.failures.append(Failure(run, attack, key, kind, message))


def leakage_matches(name: str, att: AttackRecord) -> bool:
    return att.name in gate_entry(name)[0]


def gated_metric(name: str, att: AttackRecord) -> Any:
    """The metric of ``att`` that ``--max-leakage name`` holds: the headline, or for
    ``extraction-risk@N`` the largest member risk within N queries."""
    m = RISK_AT.fullmatch(name)
    return f"max_member_risk@{m[1]}" if m else att.raw.get("headline")


def _upper(m: Any) -> float | None:
    """The metric's finite upper CI end (``--strict`` reads it), else ``None``."""
    hi = m.ci_high
    return hi if hi is not None and math.isfinite(hi) else None


def hold_attacks(
    run: RunRecord, thresholds: dict[str, float | None], strict: bool, tally: Tally
) -> None:
    """Every ``ok`` membership attack against each given threshold; an errored attack or a
    requested metric that is missing, null, non-finite or below resolution fails."""
    rname = run.name
    for att in run.gated_attacks():
        if att.status == "error" and any(v is not None for v in thresholds.values()):
            # an attack that ran and failed is unmeasured, not absent: its threshold
            # cannot be held, so it fails rather than silently dropping out
            tally.fail(
                rname,
                att.name,
                "status",
                "unmeasured",
                f"attack '{att.name}' on '{rname}' errored "
                f"({reason(att.raw)}); the gate cannot hold it to the thresholds",
            )
            continue
        if att.status != "ok":
            continue
        tally.n_measured += 1
        for key, limit in thresholds.items():
            if limit is not None:
                _hold_metric(run, att, key, limit, strict, tally)


def _hold_metric(
    run: RunRecord, att: AttackRecord, key: str, limit: float, strict: bool, tally: Tally
) -> None:
    rname, aname = run.name, att.name
    metric, label = GATED[key]
    m = att.metric(metric)
    why = unmeasured(m.raw if m is not None else None, att.raw, metric)
    if why is not None:
        tally.fail(
            rname,
            aname,
            metric,
            "unmeasured",
            f"{label} of attack '{aname}' on '{rname}' {why}; the gate cannot "
            "hold it to the threshold",
        )
        return
    observed = m.value
    if strict and metric != "epsilon_lower_bound":
        hi = _upper(m)
        if hi is None:
            tally.fail(
                rname,
                aname,
                metric,
                "unmeasured",
                f"{label} of attack '{aname}' on '{rname}' has no finite upper CI end for --strict",
            )
            return
        observed = hi
    if observed > limit:
        tally.violations.append(Violation(rname, aname, label, observed, limit, metric))


def hold_leakage(
    run: RunRecord, leakage: dict[str, float], strict: bool, seen: dict[str, int], tally: Tally
) -> None:
    """The headline of every ``ok`` leakage attack that a ``--max-leakage`` name gates."""
    rname = run.name
    for att in run.leakage:
        if att.status != "ok":
            continue
        tally.n_measured += 1
        for name, limit in leakage.items():
            if not leakage_matches(name, att):
                continue
            seen[name] += 1
            head = gated_metric(name, att)
            m = att.metric(head) if isinstance(head, str) else None
            label = f"{gate_entry(name)[2]} ({head})"
            why = unmeasured(m.raw if m is not None else None)
            if why is not None:
                tally.fail(
                    rname,
                    att.name,
                    str(head),
                    "unmeasured",
                    f"{label} of attack '{att.name}' on '{rname}' {why}",
                )
                continue
            observed = m.value
            if strict and _upper(m) is not None:
                observed = _upper(m)
            if observed > limit:
                tally.violations.append(
                    Violation(rname, att.name, label, observed, limit, str(head), "leakage attack")
                )


def hold_epsilon_audits(run: RunRecord, limit: float | None, tally: Tally) -> None:
    """``--max-epsilon-lb`` also holds every ``ok`` ε audit's bound, by name."""
    from privacy_audit.reports.epsilon_readout import epsilon_audit_bounds

    rname = run.name
    for aname, lb in epsilon_audit_bounds(run):
        tally.n_measured += 1
        if limit is None:
            continue
        label = "ε lower bound"
        v = finite(lb)
        if v is None:
            tally.fail(
                rname,
                aname,
                "epsilon_audit",
                "unmeasured",
                f"{label} of '{aname}' on '{rname}' is not a finite number ({lb!r})",
            )
        elif v > limit:
            tally.violations.append(
                Violation(rname, aname, label, v, limit, "epsilon_audit", "ε audit")
            )


def claim_violation(run: RunRecord, uview: dict | None, tally: Tally) -> None:
    """A violated privacy claim always fails, with the evidence: by the run's ε audit or by
    any ``ok`` attack's ε lower bound (the README's claim check reads every attack's bound,
    not only the strongest's). A per-user claim is also held to the user-level bounds (the
    user view carries the claim only when its unit is the user: reports/user_verdict.py)."""
    from privacy_audit.reports.verdict import audit_evidence, check_attack_claim, check_claim

    claim = check_claim(run)
    views = [run] + ([uview] if uview is not None and uview["claim"].get("epsilon") else [])
    if claim["status"] != "violated":
        for view in views:
            for att in RunRecord.of(view).measured_attacks():
                other = check_attack_claim(view, att.raw)
                if other["status"] == "violated":
                    claim = other
                    break
            if claim["status"] == "violated":
                break
    if claim["status"] == "violated":
        evidence = audit_evidence(run) or [claim["text"]]
        tally.fail(
            run.name,
            "(privacy claim)",
            "claim",
            "claim-violated",
            f"the privacy claim of '{run.name}' is VIOLATED: " + "; ".join(evidence),
        )


def shifted_split(run: RunRecord, tally: Tally) -> None:
    """A run whose split check found the sets shifted fails (its attack numbers are not
    about the model)."""
    from privacy_audit.reports.verdict import split_shifted

    shifted = split_shifted(run)
    if shifted is not None:
        tally.fail(
            run.name,
            "(split check)",
            "split",
            "split-shifted",
            f"the member / non-member split of '{run.name}' is shifted: "
            + shifted["text"]
            + " (pass --allow-shifted-split to accept)",
        )


def verdict_failures(run: RunRecord, uview: dict | None, strict: bool, tally: Tally) -> None:
    """An "invalid-attack" verdict fails; with ``strict`` an "inconclusive" one too (per
    text, or per user when that one is)."""
    from privacy_audit.reports.verdict import verdict_level

    rname = run.name
    level, why = verdict_level(run)
    if uview is not None and level not in ("invalid-attack", "inconclusive"):
        u_level, u_why = verdict_level(uview)
        if u_level in ("invalid-attack", "inconclusive"):
            level, why = u_level, f"per user: {u_why}"
    if level == "invalid-attack":
        tally.fail(
            rname,
            "(verdict)",
            "verdict",
            "invalid-attack",
            f"the verdict of '{rname}' is invalid-attack: the AUC interval lies entirely "
            f"below 0.5, so {why}",
        )
    if strict and level == "inconclusive":
        tally.fail(
            rname,
            "(verdict)",
            "verdict",
            "inconclusive",
            f"the verdict of '{rname}' is inconclusive (fails --strict): {why}",
        )
