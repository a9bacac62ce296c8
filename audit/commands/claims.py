"""``privacy-audit claims``: the paper-claims table (the paper's number, ours with CI,
verdict, command), read from the recorded results under docs/records/ by the checkout's
``experiments.claims``."""

from __future__ import annotations

from pathlib import Path

from privacy_audit.audit.commands import experiment
from privacy_audit.audit.commands.common import EXIT_OK, check_writable
from privacy_audit.ground.errors import AuditError

NAME = "claims"


def add_parser(sub) -> None:
    """The paper-claims table, read from recorded JSON under docs/records/."""
    c = sub.add_parser(
        "claims",
        help="print the paper-claims table (paper's number, ours with CI, verdict, command) "
        "from the recorded results under docs/records/",
    )
    c.add_argument(
        "--docs", default=None, help="folder of recorded results (default: docs/records/)"
    )
    c.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    c.add_argument("--markdown", metavar="FILE", help="also write the table as Markdown")


def run(args) -> int:
    experiment.checkout_experiments()  # one line and exit 2 from an installed wheel
    import importlib

    claims = importlib.import_module("experiments.claims")  # the checkout's, not installed
    build_claims, format_table, to_markdown = (
        claims.build_claims,
        claims.format_table,
        claims.to_markdown,
    )

    docs = Path(args.docs) if args.docs else None
    if docs is not None and not docs.is_dir():
        raise AuditError(f"--docs {str(docs)!r} is not a folder")
    if docs is None and experiment.checkout_root() is None:
        raise AuditError(experiment.NO_CHECKOUT + " (or give --docs FOLDER of recorded results)")
    from privacy_audit.audit.outputs import check_outputs

    check_outputs(
        [("--json", args.json), ("--markdown", args.markdown)], claims.recorded_inputs(docs)
    )
    if args.json:
        check_writable(args.json, "--json")
    if args.markdown:
        check_writable(args.markdown, "--markdown")
    rows = build_claims(docs)
    print(format_table(rows))
    if args.json:
        from privacy_audit.ground.io import atomic_write_text, dumps_json

        atomic_write_text(Path(args.json), dumps_json({"claims": rows}))
    if args.markdown:
        from privacy_audit.ground.io import atomic_write_text

        atomic_write_text(Path(args.markdown), to_markdown(rows))
    return EXIT_OK
