"""``privacy-audit score SCORES.csv``: metrics, ε lower bound and report for your own
scores (CSV: score,member[,id])."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

from privacy_audit.audit.commands.common import AGGREGATE_HELP, EXIT_OK, check_seed, verdict_line
from privacy_audit.ground.errors import AuditError

NAME = "score"


def add_parser(sub) -> None:
    s = sub.add_parser(
        "score", help="metrics, ε bound and report for your own scores (CSV: score,member[,id])"
    )
    s.add_argument("scores", help="CSV file with columns score,member and optionally id")
    s.add_argument(
        "--delta", type=float, default=1e-5, help="δ for the empirical ε lower bound (default 1e-5)"
    )
    s.add_argument(
        "--bootstrap", type=int, default=1000, help="bootstrap resamples for CIs (default 1000)"
    )
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", default="audit-out", help="output directory (default: audit-out)")
    s.add_argument("--aggregate-only", action="store_true", help=AGGREGATE_HELP)
    s.add_argument(
        "--group-by",
        metavar="COLUMN",
        help="the column naming each row's user (person): intervals resample users and each "
        "user's scores are aggregated per user (at least 4 users a side, each on one side)",
    )


def run(args) -> int:
    from privacy_audit.audit.results import check_output_dir, write_outputs
    from privacy_audit.audit.runner import score_file
    from privacy_audit.stats.scores import MAX_BOOTSTRAP

    check_seed(args.seed)
    if not 100 <= args.bootstrap <= MAX_BOOTSTRAP:
        raise AuditError(
            f"--bootstrap must be an integer in [100, {MAX_BOOTSTRAP:,}], got {args.bootstrap}"
        )
    if args.group_by is not None and not args.group_by.strip():
        raise AuditError("--group-by needs a column name, got an empty one")
    from privacy_audit.audit.outputs import check_outputs, dir_outputs

    check_outputs(
        dir_outputs("--out", args.out, ("report.html", "results.json")),
        [("the scores file", args.scores)],
    )
    created = not Path(args.out).exists()
    check_output_dir(args.out)
    try:
        results = score_file(
            args.scores,
            args.delta,
            args.bootstrap,
            args.seed,
            aggregate_only=args.aggregate_only,
            group_column=args.group_by,
        )
    except (AuditError, KeyboardInterrupt):  # bad input or ^C: leave no empty folder behind
        if created:
            with contextlib.suppress(OSError):
                Path(args.out).rmdir()
        raise
    html, js = write_outputs(results, args.out)
    dup = results["runs"][0].get("exact_duplicates") or {}
    if dup.get("removed_nonmembers"):
        print(
            f"removed {dup['removed_nonmembers']} non-member row(s) whose text is an exact copy "
            "of a member's",
            file=sys.stderr,
        )
    split_dups = (results["runs"][0].get("split_check") or {}).get("duplicates") or {}
    for side in ("members", "nonmembers"):
        w = split_dups.get(f"within_{side}") or {}
        if w.get("removed"):
            print(
                f"collapsed {w['removed']} {side[:-1]} row(s) that copy another {side[:-1]}'s "
                f"text: {w['distinct']} distinct of {w['texts']} (largest group {w['largest']}); "
                "statistics count distinct records",
                file=sys.stderr,
            )
    from privacy_audit.reports.formatting import ci as ci_text
    from privacy_audit.reports.resolution import tpr_view

    attack = results["runs"][0]["attacks"][0]
    m = attack["metrics"]
    one = tpr_view(attack, 0.01)  # the report's and the gate's standing of this number
    tpr_text = ci_text(one["metric"]) if one["resolvable"] else one["text"]
    # the bound only: epsilon_point_estimate is no bound and is not printed here
    print(
        ("per text (intervals resample users): " if "users" in results["runs"][0] else "")
        + f"AUC {m['auc']['value']:.3f} [{m['auc']['ci_low']:.3f}, {m['auc']['ci_high']:.3f}]  "
        f"TPR@1%FPR {tpr_text}  "
        f"ε lower bound {m['epsilon_lower_bound']['value']:.3f} (δ={args.delta:g}, 95%)"
    )
    if "users" in results["runs"][0]:  # both units, each named (reports/user_verdict.py)
        print(verdict_line(results["runs"][0]))
    split = results["runs"][0].get("split_check")
    if isinstance(split, dict) and split.get("text"):
        print(("SPLIT SHIFTED: " if split.get("shifted") else "split check: ") + split["text"])
        if split.get("shifted"):
            print(f"what to do: {split.get('advice')}")
    print(f"report:  {html}")
    print(f"results: {js}")
    return EXIT_OK
