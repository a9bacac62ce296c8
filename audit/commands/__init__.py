"""The ``privacy-audit`` commands, one module each (parser and handler together).

Every command module exposes ``NAME`` (the command as typed), ``add_parser(subparsers)``
(its argparse sub-parser) and ``run(args) -> int`` (the handler: its exit code).
:mod:`privacy_audit.audit.cli` builds the parser from them and dispatches; what the
commands share (exit codes, flag groups, input and output checks, the VERDICT line) is in
:mod:`privacy_audit.audit.commands.common`, and the config of ``run --model`` in
:mod:`privacy_audit.audit.commands.config_builders`.
"""
