"""``privacy-audit gate RESULTS.json``: exit 1 when an attack exceeds a threshold or
regressed against a baseline (for CI). The checks themselves are
:mod:`privacy_audit.audit.integrations.gate`; this module reads the flags, checks the
outputs before any work, writes the JUnit and summary files and prints the decision."""

from __future__ import annotations

import math
from pathlib import Path

from privacy_audit.audit.commands.common import EXIT_GATE, EXIT_OK, check_writable
from privacy_audit.ground.errors import AuditError

NAME = "gate"


def add_parser(sub) -> None:
    g = sub.add_parser(
        "gate",
        help="exit 1 if any attack exceeds a threshold or regressed against a baseline (for CI)",
    )
    g.add_argument("results", help="results.json written by 'run', 'epsilon' or 'score'")
    g.add_argument("--max-auc", type=float, help="a fraction in [0, 1]")
    g.add_argument("--max-tpr-at-1pct-fpr", type=float, help="a fraction in [0, 1]")
    g.add_argument(
        "--max-epsilon-lb",
        type=float,
        help="ε >= 0; holds every attack's empirical ε lower bound and every ε audit's bound "
        "(gradient canaries, one-run canaries, trade-off test), each by name",
    )
    g.add_argument(
        "--max-leakage",
        action="append",
        metavar="NAME=VALUE",
        help="threshold on a leakage headline (repeatable): inversion-recall, extraction-rate, "
        "extraction-risk@N (largest member risk within N queries), "
        "attribute-accuracy (fractions in [0, 1]), exposure (bits), mi (nats/token), "
        "attention-epsilon, or a leakage attack's name",
    )
    g.add_argument(
        "--allow-empty",
        action="store_true",
        help="pass when nothing was measured (default: zero measured results fail the gate)",
    )
    g.add_argument(
        "--strict",
        action="store_true",
        help="compare the upper end of each metric's CI; an inconclusive verdict fails",
    )
    g.add_argument(
        "--allow-shifted-split",
        action="store_true",
        help="pass a run whose member / non-member split is shifted (blind AUC above 0.5); "
        "by default it fails: its attack numbers are not about the model",
    )
    g.add_argument(
        "--baseline",
        metavar="BASELINE.json",
        help="a committed results.json: fail when a metric rose beyond its CI (see docs/gate.md)",
    )
    g.add_argument(
        "--tolerance",
        type=float,
        metavar="T",
        help="absolute slack a rise must also exceed to count as a regression (default 0)",
    )
    g.add_argument(
        "--fail-on-missing",
        action="store_true",
        help="fail when a run or attack of the baseline is missing from the results",
    )
    g.add_argument(
        "--match",
        action="append",
        metavar="NEW=BASE",
        help="compare the results run NEW with the baseline run BASE (repeatable); runs "
        "otherwise pair by name, or as the only run of each file",
    )
    g.add_argument(
        "--junit", metavar="FILE", help="write a JUnit XML report (testsuite privacy-gate)"
    )
    g.add_argument("--summary", metavar="FILE", help="write a JSON summary of the gate decision")


def run(args) -> int:
    from privacy_audit.audit.integrations.gate import (
        GateOutcome,
        check_all,
        compare,
        epsilon_headlines,
        junit_xml,
        load_baseline,
        load_results,
        summary,
    )
    from privacy_audit.audit.outputs import check_outputs, results_family
    from privacy_audit.ground.io import dumps_json

    thresholds, leakage, match, tolerance = _checked_options(args)
    check_outputs(
        [("--junit", args.junit), ("--summary", args.summary)],
        results_family(args.results) + [("--baseline", args.baseline)],
    )
    results = load_results(args.results)
    baseline = load_baseline(args.baseline, results) if args.baseline is not None else None
    violations, failures = check_all(
        results,
        thresholds,
        strict=args.strict,
        leakage=leakage,
        allow_empty=args.allow_empty,
        allow_shifted_split=args.allow_shifted_split,
    )
    diff = compare(results, baseline, tolerance, match) if baseline is not None else None
    if diff is not None:
        failures.extend(_baseline_failures(diff, args.allow_empty))
    for option, path in (("--junit", args.junit), ("--summary", args.summary)):
        if path is not None:
            check_writable(path, option)
    outcome = GateOutcome(
        violations,
        diff,
        failures=failures,
        leakage=leakage,
        fail_on_missing=args.fail_on_missing,
        tolerance=tolerance if baseline is not None else None,
        thresholds=thresholds,
        strict=args.strict,
        results_path=str(args.results),
        baseline_path=None if args.baseline is None else str(args.baseline),
        headlines=epsilon_headlines(results),
    )
    # render everything before writing anything
    files = []
    if args.summary is not None:
        files.append((args.summary, dumps_json(summary(outcome))))
    if args.junit is not None:
        files.append((args.junit, junit_xml(outcome, results)))
    _write_all(files)
    if diff is not None:
        _print_baseline(diff, args, tolerance)
    for v in violations:
        print(f"FAIL: {_one_line_of(v)}")
    for f in failures:
        print(f"FAIL: {_one_line_of(f)}")
    if outcome.passed:
        print(f"privacy gate passed: {_passed_text(results, diff, thresholds, leakage)}")
        return EXIT_OK
    print(f"privacy gate failed: {_failed_text(outcome, diff, violations, failures)}")
    return EXIT_GATE


def _one_line_of(item) -> str:
    from privacy_audit.audit.integrations.gate import one_line

    return one_line(str(item))


def _checked_options(args):
    """The thresholds, leakage thresholds, run pairing and tolerance, each checked before
    any file is read (one line and exit 2 on a bad one)."""
    from privacy_audit.audit.integrations.gate import (
        RATE_THRESHOLDS,
        check_threshold,
        parse_leakage_thresholds,
        parse_match,
    )

    thresholds = {
        "max_auc": args.max_auc,
        "max_tpr_at_1pct_fpr": args.max_tpr_at_1pct_fpr,
        "max_epsilon_lb": args.max_epsilon_lb,
    }
    if args.baseline is None:
        for flag, given in (
            ("--tolerance", args.tolerance is not None),
            ("--fail-on-missing", args.fail_on_missing),
            ("--match", bool(args.match)),
        ):
            if given:
                raise AuditError(f"{flag} only applies together with --baseline")
    if (
        args.baseline is None
        and all(v is None for v in thresholds.values())
        and not args.max_leakage
    ):
        raise AuditError(
            "gate needs --baseline or at least one of --max-auc, --max-tpr-at-1pct-fpr, "
            "--max-epsilon-lb, --max-leakage"
        )
    for key, value in thresholds.items():
        if value is not None:
            option = "--" + key.replace("_", "-")
            check_threshold(option, value, "rate" if key in RATE_THRESHOLDS else "nonnegative")
    leakage = parse_leakage_thresholds(args.max_leakage)
    match = parse_match(args.match)
    tolerance = 0.0 if args.tolerance is None else args.tolerance
    if not (math.isfinite(tolerance) and tolerance >= 0):
        raise AuditError(f"--tolerance must be a finite number >= 0, got {args.tolerance}")
    return thresholds, leakage, match, tolerance


def _baseline_failures(diff, allow_empty: bool) -> list:
    """A baseline gate that compared no number has checked nothing; a metric measured in
    the baseline but not now is a failure, never "not comparable"."""
    from privacy_audit.audit.integrations.gate import Failure

    failures = []
    if not any(c.base.value is not None for c in diff.comparisons) and not allow_empty:
        failures.append(
            Failure(
                "",
                "",
                "baseline",
                "nothing-compared",
                "no metric was compared with the baseline (runs paired "
                f"{diff.pairing}; {len(diff.missing)} in the baseline only, "
                f"{len(diff.added)} in the results only): pair runs with --match "
                "NEW=BASE, or pass --allow-empty to accept",
            )
        )
    for c in diff.comparisons:
        if c.new.value is None and c.base.value is not None:
            failures.append(
                Failure(
                    c.run,
                    c.attack,
                    c.metric,
                    "unmeasured",
                    f"{c.metric} of attack '{c.attack}' on '{c.run}' is null or not finite "
                    f"in the results but was measured in the baseline ({c.base.text()})",
                )
            )
    return failures


def _write_all(files: list[tuple[str, str]]) -> None:
    """Write every rendered file, all or nothing."""
    from privacy_audit.ground.io import atomic_write_text

    written: list[str] = []
    for path, text in files:
        try:
            atomic_write_text(path, text)
        except OSError as exc:
            for done in written:
                Path(done).unlink(missing_ok=True)
            raise AuditError(f"cannot write {path!r}: {exc.strerror or exc}") from None
        written.append(path)


def _print_baseline(diff, args, tolerance: float) -> None:
    from privacy_audit.audit.integrations.gate import format_table

    print(f"baseline: {args.baseline} (tolerance {tolerance:g}; runs paired {diff.pairing})")
    if diff.comparisons:
        print(format_table(diff.comparisons))
    else:
        print("no attack result is present and measured in both files")
    for m in diff.missing:
        print(f"{'FAIL' if args.fail_on_missing else 'MISSING'}: {_one_line_of(m)}")
    for m in diff.added:
        print(f"NEW: {_one_line_of(m)}")
    for c in diff.regressions:
        print(f"FAIL: {_one_line_of(c)}")


def _passed_text(results: dict, diff, thresholds: dict, leakage) -> str:
    from privacy_audit.audit.integrations.gate import NOT_COMPARABLE

    n_ok = sum(1 for r in results["runs"] for a in r.get("attacks", []) if a.get("status") == "ok")
    n_ok += sum(1 for r in results["runs"] for a in r.get("leakage", []) if a.get("status") == "ok")
    parts = []
    if diff is not None:
        n_cmp = sum(1 for c in diff.comparisons if c.verdict != NOT_COMPARABLE)
        n_null = len(diff.comparisons) - n_cmp
        parts.append(
            f"{n_cmp} metric(s) compared with the baseline"
            + (f" ({n_null} null on a side, not comparable)" if n_null else "")
            + ", no regression"
        )
        if n_cmp == 0:
            parts.append("nothing compared (--allow-empty)")
    if any(v is not None for v in thresholds.values()) or leakage:
        parts.append(f"{n_ok} attack result(s) within every threshold")
    if n_ok == 0:
        parts.append("nothing was measured (--allow-empty)")
    return "; ".join(parts)


def _failed_text(outcome, diff, violations, failures) -> str:
    parts = []
    if diff is not None and diff.regressions:
        parts.append(f"{len(diff.regressions)} regression(s) against the baseline")
    if violations:
        parts.append(f"{len(violations)} threshold(s) exceeded")
    if outcome.failed_missing:
        parts.append(f"{len(outcome.failed_missing)} baseline result(s) missing")
    for kind, text in (
        ("nothing-measured", "nothing was measured"),
        ("nothing-compared", "nothing was compared with the baseline"),
        ("unmeasured", "{n} requested metric(s) not measured"),
        ("claim-violated", "{n} privacy claim(s) VIOLATED"),
        ("inconclusive", "{n} inconclusive verdict(s) under --strict"),
        ("split-shifted", "{n} shifted member/non-member split(s)"),
        ("invalid-attack", "{n} invalid-attack verdict(s) (scores point the wrong way)"),
    ):
        n = sum(1 for f in failures if f.kind == kind)
        if n:
            parts.append(text.format(n=n))
    return ", ".join(parts)
