"""``privacy-audit export-risky RESULTS.json --top K --out FILE``: the ids of the most
exposed training records (or users), one per line, to scrub or unlearn."""

from __future__ import annotations

import re
from pathlib import Path

from privacy_audit.audit.commands.common import EXIT_OK, check_writable
from privacy_audit.ground.errors import AuditError

NAME = "export-risky"


def add_parser(sub) -> None:
    x = sub.add_parser(
        "export-risky",
        help="write the ids of the most exposed training records (to scrub or unlearn)",
        description="Read a results.json of a causal-LM audit and write the ids of its top K "
        "members, one per line: ranked by exposure (target - reference log-likelihood, or the "
        "strongest attack's score) or by extraction risk within N queries.",
    )
    x.add_argument("results", help="results.json written by 'run' (not --aggregate-only)")
    x.add_argument("--top", type=int, required=True, metavar="K", help="how many records")
    x.add_argument(
        "--by",
        default="exposure",
        metavar="exposure|extraction-risk@N",
        help="ranking (default exposure: the report's leakage table order)",
    )
    x.add_argument(
        "--by-user",
        action="store_true",
        help="write the K member users most at risk instead (an audit with [data] group / "
        "--group-by): ranked by the strongest user-level attack's score",
    )
    x.add_argument("--run", metavar="NAME", help="which run (default: the only one)")
    x.add_argument("--out", required=True, metavar="FILE", help="ids file to write (atomically)")


def _users_by_exposure(run: dict) -> list[str]:
    """Member users ranked by the run's strongest user-level attack (highest score first;
    ties keep the record's order)."""
    users = run.get("users")
    if not isinstance(users, dict):
        raise AuditError(
            f"run {run['name']!r} names no users; audit with [data] group (--group-by COLUMN) "
            "to rank users"
        )
    best = next(
        (
            a
            for a in users.get("attacks") or []
            if isinstance(a, dict)
            and a.get("attack") == users.get("strongest_attack")
            and a.get("status") == "ok"
        ),
        None,
    )
    ex = (best or {}).get("examples")
    if not isinstance(ex, dict):
        raise AuditError(f"run {run['name']!r} has no measured user-level attack to rank users by")
    rows = [
        (float(sc), str(i))
        for i, sc, mem in zip(ex["ids"], ex["scores"], ex["members"], strict=True)
        if mem
    ]
    rows.sort(key=lambda t: -t[0])
    return [i for _, i in rows]


def run(args) -> int:
    from privacy_audit.audit.integrations.gate import load_results
    from privacy_audit.ground.io import atomic_write_text

    if args.top < 1:
        raise AuditError(f"--top must be at least 1, got {args.top}")
    by = args.by
    m = re.fullmatch(r"extraction-risk@([1-9][0-9]*)", by)
    if by != "exposure" and m is None:
        raise AuditError(f"--by must be exposure or extraction-risk@N, got {by!r}")
    from privacy_audit.audit.outputs import check_outputs, results_family

    check_outputs([("--out", args.out)], results_family(args.results))
    check_writable(args.out, "--out")
    results = load_results(args.results)
    if results.get("aggregate_only"):
        raise AuditError(
            f"{args.results!r} is an aggregate-only run: its record ids are one-way pseudonyms; "
            "rerun without --aggregate-only to export ids"
        )
    runs = results["runs"]
    if args.run is not None:
        runs = [r for r in runs if r.get("name") == args.run]
        if not runs:
            names = ", ".join(str(r.get("name")) for r in results["runs"])
            raise AuditError(f"no run named {args.run!r} in {args.results!r}; runs: {names}")
    if len(runs) != 1:
        raise AuditError(f"{args.results!r} holds {len(runs)} runs; name one with --run")
    run = runs[0]
    if getattr(args, "by_user", False):
        if m is not None:
            raise AuditError(
                "--by-user ranks users by exposure; it takes no --by extraction-risk@N"
            )
        ids = _users_by_exposure(run)
        by = "user-level exposure"
    elif m is None:
        ranking = run.get("leakage_ranking")
        if not isinstance(ranking, dict) or not isinstance(ranking.get("ids"), list):
            why = ranking.get("reason") if isinstance(ranking, dict) else None
            raise AuditError(
                f"run {run['name']!r} has no per-record leakage ranking"
                + (f" ({why})" if why else " (a causal-LM audit of your own model writes one)")
            )
        ids = [str(i) for i in ranking["ids"]]
    else:
        n = m[1]
        rec = next(
            (
                r
                for r in run.get("leakage") or []
                if r.get("attack") == "extraction-risk" and r.get("status") == "ok"
            ),
            None,
        )
        records = (rec or {}).get("details", {}).get("records") if rec else None
        if not isinstance(records, dict) or f"risk@{n}" not in records:
            raise AuditError(
                f"run {run['name']!r} has no extraction risk within {n} queries "
                "(run with [extraction] and that n in queries)"
            )
        rows = [
            (r, str(i))
            for i, r, mem in zip(
                records["ids"], records[f"risk@{n}"], records["members"], strict=True
            )
            if mem and r is not None
        ]
        rows.sort(key=lambda t: -t[0])  # stable: ties keep the members' order
        ids = [i for _, i in rows]
    chosen = ids[: args.top]
    if any("\n" in i or "\r" in i for i in chosen):
        raise AuditError("a record id holds a line break; it cannot be written one per line")
    atomic_write_text(Path(args.out), "".join(f"{i}\n" for i in chosen))
    what = "user id(s)" if getattr(args, "by_user", False) else "record id(s)"
    print(f"{len(chosen)} {what} ranked by {by} written to {args.out}")
    return EXIT_OK
