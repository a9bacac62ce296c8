"""Privacy gate for CI: absolute thresholds and regressions against a committed baseline.

Reads only ``results.json`` files (and, with ``--baseline``, a second one).

**Absolute thresholds** (``--max-auc``, ``--max-tpr-at-1pct-fpr``, ``--max-epsilon-lb``):
a metric is compared by its point ``value``; ``--strict`` compares the upper end of its
95% CI instead (fails when the threshold is inside the CI). The ε lower bound is already
a one-sided 95% lower confidence bound, so it is always compared by its value.

**Baseline regressions** (``--baseline BASELINE.json [--tolerance T]``): runs are matched
by ``name`` (or ``--match NEW=BASE``; when no name is shared and each file holds one run,
those two runs pair) and attacks within a run by ``attack``. A baseline gate that compared
no measured number fails unless ``--allow-empty``: it checked nothing. For every attack that is ``ok`` in
both files, each metric in :data:`BASELINE_METRICS` is classified with
``Δ = new.value − base.value`` and the tolerance ``T ≥ 0`` (default 0):

- two-sided metrics (``auc``, ``tpr_at_fpr_0.01``, ``tpr_at_fpr_0.001``, ``advantage``,
  each with a 95% CI ``[ci_low, ci_high]``):

  * **regression** iff ``Δ > T`` **and** ``new.ci_low > base.ci_high`` (the two
    intervals are disjoint, the new one above);
  * **improved** iff ``−Δ > T`` **and** ``new.ci_high < base.ci_low`` (disjoint, the new
    one below);
  * otherwise **unchanged within CI**.

  With ``T = 0`` this is CI disjointness alone (a disjoint rise always has ``Δ > 0``);
  ``T`` is an absolute slack on the metric's scale that a rise must also exceed.
  Disjoint 95% intervals are a conservative test (a difference can be significant with
  overlapping intervals), so a flagged regression is a real one, not noise.
  If either side's CI is missing (``null``), the point values alone decide (``Δ > T``).

- the empirical ε lower bound (``epsilon_lower_bound``; already a one-sided 95% lower
  bound, ``ci_high`` is ``null``): **regression** iff ``new.value > base.value + T``,
  **improved** iff ``new.value < base.value − T``, otherwise **unchanged within
  tolerance**.

A metric whose value is ``null`` on either side (non-finite) is **not comparable** and
never fails. Runs and attacks present in only one file are reported (``missing``: in the
baseline only, including an attack that is no longer ``ok``; ``added``: in the results
only); ``missing`` ones fail the gate only with ``--fail-on-missing``. The baseline must
have the same ``schema_version`` as the results, one this version knows; a metric outside
its range (an AUC of −5), a non-finite number or ``ci_low > ci_high`` is bad input (exit 2).
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from privacy_audit.audit.integrations.gate_rules import (
    GATED,
    LEAKAGE_GATES,
    Failure,
    Tally,
    Violation,
    claim_violation,
    finite,
    gate_entry,
    hold_attacks,
    hold_epsilon_audits,
    hold_leakage,
    shifted_split,
    unmeasured,
    verdict_failures,
)
from privacy_audit.ground.errors import DataError
from privacy_audit.reports.results_record import AttackRecord, ResultsRecord, RunRecord

#: Metrics compared against a baseline, in display order.
BASELINE_METRICS = (
    "auc",
    "tpr_at_fpr_0.01",
    "tpr_at_fpr_0.001",
    "advantage",
    "epsilon_lower_bound",
)
#: One-sided bounds: compared by value with the tolerance only.
ONE_SIDED = frozenset({"epsilon_lower_bound"})

REGRESSION = "regression"
IMPROVED = "improved"
UNCHANGED_CI = "unchanged within CI"
UNCHANGED_TOL = "unchanged within tolerance"
NOT_COMPARABLE = "not comparable"

JUNIT_SUITE = "privacy-gate"


@dataclass(frozen=True)
class Estimate:
    """A metric's point value and 95% CI (``None`` where absent or non-finite)."""

    value: float | None
    ci_low: float | None = None
    ci_high: float | None = None

    def to_dict(self) -> dict[str, float | None]:
        return {"value": self.value, "ci_low": self.ci_low, "ci_high": self.ci_high}

    def text(self) -> str:
        if self.value is None:
            return "n/a"
        if self.ci_low is None or self.ci_high is None:
            return f"{self.value:.4f}"
        return f"{self.value:.4f} [{self.ci_low:.4f}, {self.ci_high:.4f}]"


@dataclass(frozen=True)
class Comparison:
    """One run × attack × metric compared with the baseline."""

    run: str
    attack: str
    metric: str
    base: Estimate
    new: Estimate
    verdict: str
    tolerance: float

    @property
    def delta(self) -> float | None:
        if self.base.value is None or self.new.value is None:
            return None
        return self.new.value - self.base.value

    @property
    def regression(self) -> bool:
        return self.verdict == REGRESSION

    def __str__(self) -> str:
        head = f"{self.metric} of attack '{self.attack}' on '{self.run}'"
        if self.verdict != REGRESSION:
            return f"{head}: {self.verdict}"
        d = self.delta
        if self.metric in ONE_SIDED:
            why = f"rose by {d:+.4g}, more than the tolerance {self.tolerance:.4g}"
        elif None in (self.base.ci_high, self.new.ci_low):
            why = (
                f"rose by {d:+.4g}, more than the tolerance {self.tolerance:.4g} (no CI to compare)"
            )
        else:
            why = (
                f"rose by {d:+.4g} (more than the tolerance {self.tolerance:.4g}) and its 95% CI "
                f"lies above the baseline's"
            )
        return f"{head} regressed: {self.base.text()} -> {self.new.text()}; {why}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "attack": self.attack,
            "metric": self.metric,
            "baseline": self.base.to_dict(),
            "new": self.new.to_dict(),
            "delta": self.delta,
            "verdict": self.verdict,
            "message": str(self),
        }


@dataclass(frozen=True)
class Unmatched:
    """A run or attack present in only one of the two files (``attack`` None: a whole run)."""

    run: str
    attack: str | None
    present_in: str  # "baseline" (missing from the results) or "results" (new)
    reason: str

    def __str__(self) -> str:
        what = (
            f"run '{self.run}'"
            if self.attack is None
            else f"attack '{self.attack}' of run '{self.run}'"
        )
        return f"{what}: {self.reason}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "run": self.run,
            "attack": self.attack,
            "present_in": self.present_in,
            "reason": self.reason,
            "message": str(self),
        }


@dataclass
class BaselineDiff:
    comparisons: list[Comparison] = field(default_factory=list)
    missing: list[Unmatched] = field(default_factory=list)  # in the baseline only
    added: list[Unmatched] = field(default_factory=list)  # in the results only
    pairing: str = "by name"  # how runs were paired (match_runs)

    @property
    def regressions(self) -> list[Comparison]:
        return [c for c in self.comparisons if c.regression]


@dataclass
class GateOutcome:
    """Everything the gate decided, for the console, ``--summary`` and ``--junit``."""

    violations: list[Violation]
    diff: BaselineDiff | None = None
    failures: list[Failure] = field(default_factory=list)
    leakage: dict[str, float] = field(default_factory=dict)
    fail_on_missing: bool = False
    tolerance: float | None = None
    thresholds: dict[str, float | None] = field(default_factory=dict)
    strict: bool = False
    results_path: str = ""
    baseline_path: str | None = None
    #: per run, the report's headline ε (reports/verdict.py ``epsilon_headline``)
    headlines: list[dict[str, Any]] = field(default_factory=list)

    @property
    def failed_missing(self) -> list[Unmatched]:
        return list(self.diff.missing) if self.diff is not None and self.fail_on_missing else []

    @property
    def passed(self) -> bool:
        regressions = self.diff.regressions if self.diff is not None else []
        return not (self.violations or regressions or self.failed_missing or self.failures)


# --------------------------------------------------------------------------- #
# Loading and validation
# --------------------------------------------------------------------------- #
def load_results(path: str | Path, what: str = "results file") -> dict[str, Any]:
    """Read and structurally check a results.json (:meth:`ResultsRecord.load`, one
    :class:`DataError` if it is not one); every status the gate reads lower-cased."""
    results = ResultsRecord.load(path, what).raw
    for run in results["runs"]:
        _normalise_status(run)
    return results


def _normalise_status(run: dict[str, Any]) -> None:
    """Lower-case every ``status`` the gate reads (``"OK"``, ``"Violated"``): compared
    verbatim, a hand-edited or foreign status would make a result silently absent."""
    rec = RunRecord.of(run)
    ea = rec.epsilon_audit
    items = [a.raw for a in (*rec.gated_attacks(), *rec.leakage)]
    items += [*ea.audits, ea.raw, *([ea.tradeoff] if ea.tradeoff else [])] if ea else []
    for item in items:
        if isinstance(item.get("status"), str):
            item["status"] = item["status"].strip().lower()


def load_baseline(path: str | Path, results: dict[str, Any]) -> dict[str, Any]:
    """Load a baseline results.json and check that its schema matches ``results``."""
    baseline = load_results(path, "baseline file")
    got, want = baseline.get("schema_version"), results.get("schema_version")
    if want is None:
        raise DataError(
            "results file has no 'schema_version'; a baseline can only be compared with a "
            "results.json written by 'run', 'epsilon' or 'score'"
        )
    if got != want:
        raise DataError(
            f"baseline file {str(path)!r} has schema_version {got!r} but the results have "
            f"{want!r}; regenerate the baseline with this version of privacy-audit"
        )
    return baseline


def _estimate(att: AttackRecord, run: str, metric: str, what: str) -> Estimate:
    """The metric as an :class:`Estimate` (its numbers were checked at loading:
    :meth:`ResultsRecord.load`); a TPR the sample does not resolve is no number."""
    m = att.metric(metric)
    if m is None or "value" not in m.raw:
        raise DataError(
            f"{what}: attack {att.name!r} of run {run!r} has no '{metric}' metric; "
            "is it a privacy-audit results.json?"
        )
    if metric.startswith("tpr_at_fpr_") and unmeasured(m.raw, att.raw, metric) is not None:
        return Estimate(None, None, None)  # not resolvable at this n: not a number to compare
    return Estimate(finite(m.value), finite(m.ci_low), finite(m.ci_high))


def _by_name(items: list[Any], what: str) -> dict[str, Any]:
    """Runs or attacks by their ``name``; two of one name cannot be matched."""
    out: dict[str, Any] = {}
    for item in items:
        name = item.name
        if name in out:
            raise DataError(f"{what} has two entries named {name!r}; they are matched by name")
        out[name] = item
    return out


# --------------------------------------------------------------------------- #
# Decisions
# --------------------------------------------------------------------------- #
#: Thresholds on fractions: AUC, TPR and rates must lie in [0, 1]; ε bounds >= 0.
RATE_THRESHOLDS = ("max_auc", "max_tpr_at_1pct_fpr")


def check_threshold(option: str, value: float, kind: str) -> None:
    """Raise :class:`DataError` (exit 2) for a threshold outside its metric's range: a
    percent-style ``--max-auc 60`` could never fail, a negative one always fails."""
    if not math.isfinite(value):
        raise DataError(f"{option} must be a finite number, got {value!r}")
    if kind == "rate" and not 0.0 <= value <= 1.0:
        raise DataError(
            f"{option} is a fraction in [0, 1], got {value:g}"
            + (f" (did you mean {value / 100:g}?)" if 1 < value <= 100 else "")
        )
    if kind == "nonnegative" and value < 0:
        raise DataError(f"{option} must be >= 0, got {value:g}")


def parse_leakage_thresholds(items: list[str] | None) -> dict[str, float]:
    """``["extraction-rate=0.1", ...]`` -> ``{"extraction-rate": 0.1}``, validated."""
    out: dict[str, float] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep:
            raise DataError(f"--max-leakage takes NAME=VALUE, got {item!r}")
        if gate_entry(name) is None:
            raise DataError(
                f"unknown leakage metric {name!r} in --max-leakage; allowed: "
                f"{', '.join(LEAKAGE_GATES)}, extraction-risk@N (N queries, e.g. extraction-risk@100)"
            )
        try:
            v = float(value)
        except ValueError:
            raise DataError(f"--max-leakage {name}: {value!r} is not a number") from None
        check_threshold(f"--max-leakage {name}", v, gate_entry(name)[1])
        if name in out:
            raise DataError(f"--max-leakage names {name!r} twice")
        out[name] = v
    return out


def check_all(
    results: dict[str, Any],
    thresholds: dict[str, float | None],
    strict: bool = False,
    leakage: dict[str, float] | None = None,
    allow_empty: bool = False,
    allow_shifted_split: bool = False,
) -> tuple[list[Violation], list[Failure]]:
    """Every threshold violation and every failure (see docs/gate.md, "Never fails open").

    - every ``ok`` membership attack is held to each given threshold; a requested metric
      that is missing, null, non-finite or below resolution is a failure;
    - ``--max-epsilon-lb`` also holds every ``ok`` ε audit's bound, by name;
    - ``leakage`` thresholds hold the headline of every ``ok`` matching leakage attack, and
      fail when no run measured one;
    - a run whose privacy claim is violated (by its ε audit or by any ``ok`` attack's
      ε lower bound) always fails, with the evidence;
    - a run whose verdict is "invalid-attack" (AUC interval entirely below 0.5) fails;
    - an attack with status ``error`` is unmeasured (a failure) when a threshold is given,
      unless nothing at all was measured and ``allow_empty`` accepts that;
    - with ``strict``, a run whose verdict is "inconclusive" fails;
    - no measured result at all fails unless ``allow_empty``;
    - a run whose split check found the member / non-member split shifted (verdict
      ``split-shifted``: its attack numbers are not about the model) fails unless
      ``allow_shifted_split``.
    """
    from privacy_audit.reports.user_verdict import user_view

    leakage = leakage or {}
    tally = Tally()
    leak_seen = dict.fromkeys(leakage, 0)
    record = ResultsRecord.of(results)
    for run in record.runs:
        hold_attacks(run, thresholds, strict, tally)
        hold_leakage(run, leakage, strict, leak_seen, tally)
        hold_epsilon_audits(run, thresholds.get("max_epsilon_lb"), tally)
        uview = user_view(run.raw)
        claim_violation(run, uview, tally)
        if not allow_shifted_split:
            shifted_split(run, tally)
        verdict_failures(run, uview, strict, tally)
    for name, seen in leak_seen.items():
        if not seen:
            tally.fail(
                "(all runs)",
                name,
                name,
                "unmeasured",
                f"--max-leakage {name}: no run has a measured "
                f"{' / '.join(gate_entry(name)[0])} result to hold to it",
            )
    failures = tally.failures
    if tally.n_measured == 0 and allow_empty:  # nothing measured, as the user accepted
        failures = [f for f in failures if f.key != "status"]
    if tally.n_measured == 0 and not allow_empty:
        failures.append(
            Failure(
                "(all runs)",
                "(all attacks)",
                "measured",
                "nothing-measured",
                f"nothing was measured: {len(record.runs)} run(s), no attack with status "
                "'ok' (every attack errored or was not applicable); pass --allow-empty to accept",
            )
        )
    return tally.violations, failures


#: Failures :func:`check` raises on instead of returning only the threshold violations.
BLOCKING_KINDS = ("unmeasured", "claim-violated", "split-shifted", "invalid-attack")


def check(
    results: dict[str, Any], thresholds: dict[str, float | None], strict: bool = False
) -> list[Violation]:
    """Threshold violations (see :func:`check_all` for everything the gate fails on). A
    requested metric that was not measured raises :class:`DataError`, so a caller that
    reads only the violations (the pytest plugin) cannot pass it silently."""
    violations, failures = check_all(results, thresholds, strict, allow_empty=True)
    # a failure that says the thresholds were not really tested (unmeasured metrics, a
    # violated claim, a shifted split, an inverted attack) raises: a caller that reads only
    # the violations must never pass such a run silently ("inconclusive" under strict is
    # already a violation of the CI's upper end)
    blocking = [f for f in failures if f.kind in BLOCKING_KINDS]
    if blocking:
        more = f" (and {len(blocking) - 1} more)" if len(blocking) > 1 else ""
        raise DataError(f"results file: {blocking[0].message}{more}")
    return violations


def classify(metric: str, base: Estimate, new: Estimate, tolerance: float = 0.0) -> str:
    """The verdict for one metric; the rule is in the module docstring."""
    if base.value is None or new.value is None:
        return NOT_COMPARABLE
    delta = new.value - base.value
    if metric in ONE_SIDED:
        if delta > tolerance:
            return REGRESSION
        if -delta > tolerance:
            return IMPROVED
        return UNCHANGED_TOL
    have_ci = None not in (base.ci_low, base.ci_high, new.ci_low, new.ci_high)
    if delta > tolerance and (not have_ci or new.ci_low > base.ci_high):  # type: ignore[operator]
        return REGRESSION
    if -delta > tolerance and (not have_ci or new.ci_high < base.ci_low):  # type: ignore[operator]
        return IMPROVED
    return UNCHANGED_CI


def parse_match(items: list[str] | None) -> list[str]:
    """``--match NEW=BASE`` items, checked for their form; run names may hold ``=``, so
    the split is resolved against the files' run names by :func:`match_runs`."""
    for item in items or []:
        if "=" not in item.strip("=") or not item.strip():
            raise DataError(f"--match expects NEW_RUN=BASELINE_RUN, got {item!r}")
    return list(items or [])


def _split_match(item: str, new_names: list[str], base_names: list[str]) -> tuple[str, str]:
    cuts = [i for i, ch in enumerate(item) if ch == "="]
    found = [
        (item[:i].strip(), item[i + 1 :].strip())
        for i in cuts
        if item[:i].strip() in new_names and item[i + 1 :].strip() in base_names
    ]
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise DataError(f"--match {item!r} can be split into run names in more than one way")
    new, _, base = item.partition("=")
    side, name, names = (
        ("results", new.strip(), new_names)
        if not any(item[:i].strip() in new_names for i in cuts)
        else ("baseline", base.strip(), base_names)
    )
    raise DataError(
        f"--match {item!r}: the {side} have no run {name!r} "
        f"(runs: {', '.join(map(repr, names)) or 'none'})"
    )


def match_runs(
    results: dict[str, Any], baseline: dict[str, Any], match: list[str] | None = None
) -> tuple[dict[str, str], str]:
    """Which baseline run each results run is compared with, and how they were paired.

    Runs pair by ``name``; ``match`` (``--match NEW=BASE``) pairs named runs explicitly.
    When no name is shared and each file holds exactly one run, those two runs pair: a
    run's name can come from an input file's name (``score`` names a run after its CSV),
    which is not the run's identity."""
    new_names = [r.name for r in ResultsRecord.of(results).runs]
    base_names = [r.name for r in ResultsRecord.of(baseline).runs]
    if match:
        pairs: dict[str, str] = {}
        for item in match:
            new, base = _split_match(item, new_names, base_names)
            if new in pairs:
                raise DataError(f"--match names the results run {new!r} twice")
            if base in pairs.values():
                raise DataError(f"--match pairs two results runs with the baseline run {base!r}")
            pairs[new] = base
        for n in new_names:
            if n not in pairs and n in base_names and n not in pairs.values():
                pairs[n] = n
        return pairs, "by name and --match"
    pairs = {n: n for n in new_names if n in base_names}
    if not pairs and len(new_names) == 1 and len(base_names) == 1:
        return {new_names[0]: base_names[0]}, (
            f"the only run of each file: results {new_names[0]!r} with baseline {base_names[0]!r}"
        )
    return pairs, "by name"


def compare(
    results: dict[str, Any],
    baseline: dict[str, Any],
    tolerance: float = 0.0,
    match: list[str] | None = None,
) -> BaselineDiff:
    """Pair runs (:func:`match_runs`) and attacks by name; classify every gated metric.
    A run is reported under its name in the results."""
    diff = BaselineDiff()
    new_by_name = _by_name(ResultsRecord.of(results).runs, "results file")
    base_by_name = _by_name(ResultsRecord.of(baseline).runs, "baseline file")
    pairs, diff.pairing = match_runs(results, baseline, match)
    paired_base = {b: n for n, b in pairs.items()}
    for base_name, base_run in base_by_name.items():
        name = paired_base.get(base_name)
        if name is None:
            diff.missing.append(
                Unmatched(base_name, None, "baseline", "in the baseline, not in the results")
            )
            continue
        new_run = new_by_name[name]
        new_atts = _by_name(new_run.gated_attacks(), f"results run {name!r}")
        base_atts = _by_name(base_run.gated_attacks(), f"baseline run {name!r}")
        for att_name, base_att in base_atts.items():
            base_ok = base_att.status == "ok"
            new_att = new_atts.get(att_name)
            if new_att is None:
                if base_ok:
                    diff.missing.append(
                        Unmatched(name, att_name, "baseline", "in the baseline, not in the results")
                    )
                continue
            new_ok = new_att.status == "ok"
            if base_ok and not new_ok:
                diff.missing.append(
                    Unmatched(
                        name,
                        att_name,
                        "baseline",
                        f"measured in the baseline, status {new_att.status!r} in the results",
                    )
                )
            elif new_ok and not base_ok:
                diff.added.append(
                    Unmatched(
                        name,
                        att_name,
                        "results",
                        f"measured in the results, status {base_att.status!r} in the baseline",
                    )
                )
            elif base_ok and new_ok:
                for metric in BASELINE_METRICS:
                    b = _estimate(base_att, name, metric, "baseline file")
                    n = _estimate(new_att, name, metric, "results file")
                    diff.comparisons.append(
                        Comparison(
                            name,
                            att_name,
                            metric,
                            b,
                            n,
                            classify(metric, b, n, tolerance),
                            tolerance,
                        )
                    )
        for att_name, new_att in new_atts.items():
            if att_name not in base_atts and new_att.status == "ok":
                diff.added.append(
                    Unmatched(name, att_name, "results", "in the results, not in the baseline")
                )
    for name in new_by_name:
        if name not in pairs:
            diff.added.append(
                Unmatched(name, None, "results", "in the results, not in the baseline")
            )
    return diff


# --------------------------------------------------------------------------- #
# Output
# --------------------------------------------------------------------------- #
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")


def _clean(text: str) -> str:
    """Replace characters that XML 1.0 cannot carry (and that garble a terminal)."""
    return _CONTROL.sub("\ufffd", text)


def one_line(text: str) -> str:
    """``text`` safe to print as one console line (hostile names cannot add lines)."""
    return _clean(text).replace("\r", " ").replace("\n", " ").replace("\t", " ")


def format_table(comparisons: list[Comparison]) -> str:
    """The diff as an aligned plain-text table."""
    header = ("run", "attack", "metric", "baseline [95% CI]", "new [95% CI]", "Δ", "verdict")
    rows = [header]
    for c in comparisons:
        d = c.delta
        rows.append(
            (
                one_line(c.run),
                one_line(c.attack),
                c.metric,
                c.base.text(),
                c.new.text(),
                "n/a" if d is None else f"{d:+.4f}",
                c.verdict.upper() if c.regression else c.verdict,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip() for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary(outcome: GateOutcome) -> dict[str, Any]:
    """The machine-readable summary written by ``--summary``."""
    diff = outcome.diff
    return {
        "passed": outcome.passed,
        "regressions": [c.to_dict() for c in diff.regressions] if diff else [],
        "threshold_violations": [v.to_dict() for v in outcome.violations],
        "failures": [f.to_dict() for f in outcome.failures],
        "missing": [m.to_dict() for m in diff.missing] if diff else [],
        "added": [m.to_dict() for m in diff.added] if diff else [],
        "compared": len(diff.comparisons) if diff else 0,
        "pairing": diff.pairing if diff else None,
        "improved": [c.to_dict() for c in diff.comparisons if c.verdict == IMPROVED]
        if diff
        else [],
        "comparisons": [c.to_dict() for c in diff.comparisons] if diff else [],
        "fail_on_missing": outcome.fail_on_missing,
        "tolerance": outcome.tolerance,
        "thresholds": {k: v for k, v in outcome.thresholds.items() if v is not None},
        "leakage_thresholds": dict(outcome.leakage),
        "strict": outcome.strict,
        "results": outcome.results_path,
        "baseline": outcome.baseline_path,
        "epsilon_headlines": outcome.headlines,
    }


def epsilon_headlines(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per run: the headline ε lower bound the report, the verdict and the VERDICT line
    show (``None`` when nothing bounds ε), with its source and any larger bound beside it."""
    from privacy_audit.reports.verdict import epsilon_headline, headline_text

    out = []
    for run in ResultsRecord.of(results).runs:
        v = run.raw.get("verdict") if isinstance(run.raw.get("verdict"), dict) else {}
        head = epsilon_headline(run)
        if head is not None and v.get("level") == "split-shifted" and head["kind"] == "attack":
            head = None  # as the report: an attack's bound on a shifted split is no evidence
        out.append(
            {
                "run": run.name,
                "value": head["value"] if head else None,
                "source": head["source"] if head else None,
                "at_ceiling": head["at_ceiling"] if head else None,
                "larger": [
                    {"value": b["value"], "source": b["source"], "at_ceiling": b["at_ceiling"]}
                    for b in head["larger"]
                ]
                if head
                else [],
                "text": headline_text(head) if head else "no ε lower bound",
            }
        )
    return out


def junit_xml(outcome: GateOutcome, results: dict[str, Any]) -> str:
    """JUnit XML: one testsuite ``privacy-gate``, one testcase per run × attack × metric
    compared with the baseline or held to a threshold, plus one per run or attack
    missing from the results (a failure with ``--fail-on-missing``, else skipped)."""
    cases: dict[tuple[str, str, str], list[tuple[str, str]]] = {}
    if outcome.diff is not None:
        for c in outcome.diff.comparisons:
            msgs = cases.setdefault((c.run, c.attack, c.metric), [])
            if c.regression:
                msgs.append(("privacy-regression", str(c)))
    thresholded = {GATED[k][0] for k, v in outcome.thresholds.items() if v is not None}
    if thresholded:
        for run in ResultsRecord.of(results).runs:
            for att in run.gated_attacks():
                if att.status == "ok":
                    for metric in sorted(thresholded, key=_metric_order):
                        cases.setdefault((run.name, att.name, metric), [])
    for v in outcome.violations:
        cases.setdefault((v.run, v.attack, v.key), []).append(("privacy-threshold", str(v)))
    for f in outcome.failures:
        cases.setdefault((f.run, f.attack, f.key), []).append((f"privacy-{f.kind}", str(f)))

    suite = ET.Element("testsuite", name=JUNIT_SUITE)
    n_fail = n_skip = 0
    for (run, attack, metric), msgs in cases.items():
        case = ET.SubElement(
            suite,
            "testcase",
            classname=_clean(f"{JUNIT_SUITE}.{run}"),
            name=_clean(f"{attack} {metric}"),
        )
        if msgs:
            n_fail += 1
            text = [m for _, m in msgs]
            fail = ET.SubElement(case, "failure", message=_clean("; ".join(text)), type=msgs[0][0])
            fail.text = _clean("\n".join(text))
    if outcome.diff is not None:
        for m in outcome.diff.missing:
            case = ET.SubElement(
                suite,
                "testcase",
                classname=_clean(f"{JUNIT_SUITE}.{m.run}"),
                name=_clean(f"{m.attack or '(whole run)'} present"),
            )
            if outcome.fail_on_missing:
                n_fail += 1
                ET.SubElement(case, "failure", message=_clean(str(m)), type="privacy-missing")
            else:
                n_skip += 1
                ET.SubElement(case, "skipped", message=_clean(str(m)))
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(n_fail))
    suite.set("errors", "0")
    suite.set("skipped", str(n_skip))
    root = ET.Element("testsuites", name=JUNIT_SUITE)
    root.set("tests", suite.get("tests", "0"))
    root.set("failures", str(n_fail))
    root.set("errors", "0")
    root.append(suite)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _metric_order(metric: str) -> int:
    return BASELINE_METRICS.index(metric) if metric in BASELINE_METRICS else len(BASELINE_METRICS)
