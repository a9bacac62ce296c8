"""``privacy-audit attacks``: every registered attack, what it needs and what it costs."""

from __future__ import annotations

from privacy_audit.audit.commands.common import EXIT_OK

NAME = "attacks"


def add_parser(sub) -> None:
    sub.add_parser(
        "attacks",
        help="list every registered attack: what it does, what it needs, its cost in forward "
        "passes (the names run --model --attacks takes)",
    )


def run(args) -> int:
    from privacy_audit.attacks.catalog import catalog, format_catalog

    print(format_catalog(catalog()))
    return EXIT_OK
