"""Command line: ``privacy-audit run | epsilon | compare | score | gate | export-risky |
bench | experiment | claims | dataset-inference | attacks | canaries | dp-check``.

Each command is a module of :mod:`privacy_audit.audit.commands` (its parser and its
handler); this module builds the parser from them and turns what a handler raises into
an exit code. Exit codes: 0 success; 1 the gate found a threshold exceeded or a
regression against the baseline; 2 bad input (one line on stderr naming the problem,
nothing written); 3 an internal error (``--debug`` shows the traceback); 130 interrupted
(^C). ``dp-check`` adds 4, inconclusive.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys

from privacy_audit.audit.commands import (
    attacks,
    bench,
    canaries,
    claims,
    compare,
    dataset_inference,
    dp_check,
    epsilon,
    experiment,
    export_risky,
    gate,
    run,
    score,
)
from privacy_audit.audit.commands.common import (
    EXIT_INPUT,
    EXIT_INTERNAL,
    command_parser,
)
from privacy_audit.ground.errors import AuditError

#: the commands in the order ``privacy-audit --help`` lists them
COMMANDS = (
    run,
    epsilon,
    compare,
    score,
    gate,
    export_risky,
    bench,
    experiment,
    claims,
    dataset_inference,
    attacks,
    canaries,
    dp_check,
)
BY_NAME = {module.NAME: module for module in COMMANDS}


def build_parser() -> argparse.ArgumentParser:
    return command_parser(COMMANDS)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = BY_NAME[args.command]
    try:
        return handler.run(args)
    except AuditError as exc:
        print(f"privacy-audit: error: {exc}", file=sys.stderr)
        return EXIT_INPUT
    except KeyboardInterrupt:
        print("privacy-audit: interrupted; no partial report was written", file=sys.stderr)
        if argv is None:  # the command itself (console script, python -m), not a caller
            _exit_130()
        return 130
    except Exception as exc:  # noqa: BLE001 - one line unless --debug
        if args.debug:
            raise
        print(
            f"privacy-audit: internal error: {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _exit_130() -> None:
    """End the process with exit code 130 after ^C (:func:`main` run as the command).

    CPython (3.8 to 3.12) also records a KeyboardInterrupt that escaped a nested
    ``PyRun_*`` call (some extension imports run code that way) and, at the end of
    ``Py_RunMain``, kills the process with SIGINT whatever exit code was asked for, even
    when the interrupt was caught: the shell then sees a signal death (-2) instead of 130,
    at random depending on where the interrupt landed. So the exit handlers run here and
    the process ends with ``os._exit(130)``."""
    import atexit

    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()
    os._exit(130)


if __name__ == "__main__":
    sys.exit(main())
