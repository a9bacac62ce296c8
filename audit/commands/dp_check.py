"""``privacy-audit dp-check SETUP.py``: the parser and the handler; the checks are
:mod:`privacy_audit.audit.epsilon.dp_check`, the terminal summary
:func:`privacy_audit.audit.epsilon.dp_check.summary.summary`.

Exit codes: 0 consistent, 1 VIOLATED, 2 bad input (one line, nothing written),
4 inconclusive (a required check could not run or decide; ``--accept-untested``
accepts named checks that cannot apply to your code). Progress goes to stderr as
``[m:ss] dp-check: ...`` lines; the summary to stdout.
"""

from __future__ import annotations

import math
from pathlib import Path

from privacy_audit.ground.errors import AuditError

NAME = "dp-check"
EXIT_VIOLATED, EXIT_INCONCLUSIVE = 1, 4
CHECK_NAMES = (
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


def add_parser(sub) -> None:
    d = sub.add_parser(
        "dp-check",
        help="test YOUR DP-SGD code (Opacus setup or any loop): clipping, noise, coverage, "
        "sampling and accounting, each finding with where to look (exit 0 consistent, 1 "
        "VIOLATED, 2 bad input, 4 inconclusive)",
    )
    d.add_argument(
        "setup",
        help="SETUP.py defining make_dataset(), make_private(dataset) and CLAIM "
        "(or PARAMS, privatize(per_example_grads) and CLAIM); see docs/dp-check.md",
    )
    d.add_argument(
        "--budget",
        type=float,
        default=None,
        help="seconds of wall-clock time for all checks (default 180; a typical setup "
        "finishes well before)",
    )
    d.add_argument("--out", default="dp-check-out", help="output directory (default: dp-check-out)")
    d.add_argument("--seed", type=int, default=0, help="seeds every crafted batch and replay")
    d.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    d.add_argument(
        "--end-to-end",
        action="store_true",
        help="also run the crafted-dataset many-run audits (lone canary, anchor pair, "
        "duplicate record) on your setup with the budget left: a distribution-free ε bound "
        "(they run by themselves where the parts rest on an assumption that failed)",
    )
    d.add_argument(
        "--accept-untested",
        default="",
        metavar="CHECK,...",
        help="checks whose 'not tested' does not make the verdict inconclusive "
        f"({', '.join(CHECK_NAMES)})",
    )


def _accepted(text: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for n in names:
        if n not in CHECK_NAMES:
            import difflib

            close = difflib.get_close_matches(n, CHECK_NAMES, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise AuditError(
                f"--accept-untested: unknown check {n!r}{hint}; allowed: {', '.join(CHECK_NAMES)}"
            )
    return names


def run(args) -> int:
    from privacy_audit.audit.epsilon.dp_check.contract import load_setup
    from privacy_audit.audit.epsilon.dp_check.run import DEFAULT_BUDGET, check
    from privacy_audit.audit.epsilon.dp_check.summary import summary
    from privacy_audit.audit.outputs import check_outputs, dir_outputs
    from privacy_audit.ground.io import dumps_json, publish_together, remove_stale_temporaries
    from privacy_audit.reports.dp_check_view import render_dp_check

    budget = DEFAULT_BUDGET if args.budget is None else args.budget
    if not (math.isfinite(budget) and budget > 0):
        raise AuditError(f"--budget must be a number of seconds > 0, got {args.budget!r}")
    accepted = _accepted(args.accept_untested)
    from privacy_audit.audit.epsilon.dp_check.contract import check_seed

    check_seed(args.seed)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise AuditError(f"--out {str(out)!r} exists and is not a directory")
    parent = out.absolute().parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise AuditError(f"--out {str(out)!r}: {str(parent)!r} is not a directory")
    import os

    if not os.access(parent, os.W_OK | os.X_OK):
        raise AuditError(f"--out {str(out)!r}: {str(parent)!r} is not writable")
    setup_path = Path(args.setup)
    check_outputs(
        dir_outputs("--out", out, ("report.html", "results.json")),
        inputs=[("the SETUP file", setup_path)],
    )
    setup = load_setup(setup_path)
    record = check(
        setup,
        budget=budget,
        seed=args.seed,
        progress=not args.quiet,
        accept_untested=accepted,
        end_to_end=args.end_to_end,
    )
    html = render_dp_check(record)
    out.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(out)
    publish_together(out, [("report.html", html), ("results.json", dumps_json(record))])
    print(summary(record))
    print(f"  wrote {out / 'report.html'} and {out / 'results.json'}")
    return int(record["exit_code"])
