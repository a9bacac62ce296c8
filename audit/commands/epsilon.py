"""``privacy-audit epsilon [CONFIG]``: ``run`` plus the claimed-vs-audited ε audits
(gradient canaries, one-run canaries, trade-off test)."""

from __future__ import annotations

from privacy_audit.audit.commands import run as run_command
from privacy_audit.audit.commands.common import AGGREGATE_HELP, QUICK_HELP, add_executor_args

NAME = "epsilon"


def add_parser(sub) -> None:
    e = sub.add_parser(
        "epsilon",
        help="run plus the claimed-vs-audited ε audits (gradient canaries, one-run canaries, trade-off test)",
    )
    e.add_argument(
        "config", nargs="?", help="TOML config naming the defenses (default: the bundled audit)"
    )
    e.add_argument("--out", default="audit-out", help="output directory (default: audit-out)")
    e.add_argument("--quiet", action="store_true", help="no progress output")
    e.add_argument("--aggregate-only", action="store_true", help=AGGREGATE_HELP)
    e.add_argument("--quick", action="store_true", help=QUICK_HELP)
    add_executor_args(e)


def run(args) -> int:
    return run_command.run(args, epsilon=True)
