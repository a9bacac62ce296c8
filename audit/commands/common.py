"""What the commands share: exit codes, the parser class, the executor flags, the checks
of directory and file options, the ``--out`` folder left after ^C, the library log
(run.log) and the VERDICT line printed by ``run``, ``epsilon`` and ``score``."""

from __future__ import annotations

import argparse
import contextlib
import logging
import re
from pathlib import Path

from privacy_audit.ground.errors import AuditError

EXIT_OK, EXIT_GATE, EXIT_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


class Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's default exit code is also 2; keep one line
        self.exit(EXIT_INPUT, f"{self.prog}: error: {message}\n")


AGGREGATE_HELP = (
    "write no training text and no raw example ids: ids become HMAC-SHA256 pseudonyms under a "
    "random salt that is never written, so they cannot be joined across runs "
    "(overrides [report] aggregate_only)"
)


QUICK_HELP = (
    "a bundled config's small variant (within 5 minutes on a 2-core CPU), for trying it out "
    "and for CI; its numbers are not for reporting"
)


def add_executor_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--executor",
        choices=("local", "ray"),
        help="where training tasks run (overrides [executor] kind): local (default) or ray",
    )
    p.add_argument(
        "--address",
        help="Ray cluster address (host:port, ray://host:port or auto); default: a local Ray",
    )
    p.add_argument(
        "--workers",
        type=int,
        help="local: process-pool size (1 = in-process); ray: tasks in flight",
    )
    p.add_argument(
        "--run-dir",
        help="where finished tasks are kept (default: OUT/run; none with --aggregate-only)",
    )
    p.add_argument(
        "--resume", action="store_true", help="reuse finished tasks in the run directory"
    )


def command_parser(commands) -> argparse.ArgumentParser:
    """``privacy-audit`` with the given command modules' sub-parsers, in this order."""
    from privacy_audit.audit import __version__

    p = Parser(
        prog="privacy-audit",
        description="Privacy auditing and attack evaluation for language models.",
    )
    p.add_argument("--version", action="version", version=f"privacy-audit {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks for internal errors")
    sub = p.add_subparsers(dest="command", required=True, parser_class=Parser)
    for command in commands:
        command.add_parser(sub)
    return p


def one_line_text(text: str) -> str:
    from privacy_audit.audit.integrations.gate import one_line

    return one_line(text)


#: Where warnings and transformers' log records (load reports, deprecations) go, inside
#: the output directory, instead of raw (and ANSI-coloured) on the console.
RUN_LOG = "run.log"

#: what an interrupted run may leave in an --out folder it created that no rerun can use:
#: the library log, and a run directory's bookkeeping without any finished task
UNUSABLE_LEFTOVERS = {RUN_LOG, "run/events.log", "run/inputs.json"}


@contextlib.contextmanager
def no_folder_left_on_interrupt(out: str, created: bool):
    """On ^C, remove the ``--out`` folder this invocation created when it holds nothing a
    rerun can use (:data:`UNUSABLE_LEFTOVERS` and empty folders), so an interrupted
    command leaves no folder that looks like a result. A folder with finished tasks (which
    ``--resume`` reuses) or any other file is kept as it is."""
    try:
        yield
    except KeyboardInterrupt:
        root = Path(out)
        if created and root.is_dir():
            entries = list(root.rglob("*"))
            files = {p.relative_to(root).as_posix() for p in entries if not p.is_dir()}
            if files <= UNUSABLE_LEFTOVERS:
                for f in files:
                    (root / f).unlink(missing_ok=True)
                for d in sorted((p for p in entries if p.is_dir()), key=lambda p: -len(p.parts)):
                    with contextlib.suppress(OSError):
                        d.rmdir()
                with contextlib.suppress(OSError):
                    root.rmdir()
        raise


def verdict_line(run: dict) -> str:
    """One line per run for CI logs: verdict, strongest attack, AUC with CI, TPR@1%FPR (or
    why this n cannot resolve it, and the lowest FPR it does), the run's headline ε lower
    bound with any larger one beside it (reports/verdict.py ``epsilon_headline``: the
    report's number) and the claim status."""
    from privacy_audit.audit.integrations.gate import one_line
    from privacy_audit.reports import sentences as S
    from privacy_audit.reports.formatting import ci
    from privacy_audit.reports.resolution import lead_tpr, tpr_view
    from privacy_audit.reports.user_verdict import user_view
    from privacy_audit.reports.verdict import (
        TPR_1,
        epsilon_headline,
        headline_text,
        metric,
        strongest_attack,
        verdict_for_run,
    )

    def attack_parts(best: dict | None, prefix: str = "") -> list[str]:
        if best is None:
            return [prefix + S.LINE_NO_ATTACK()]
        out = [prefix + S.LINE_STRONGEST(attack=one_line(str(best.get("attack"))))]
        out.append(S.AUC_SLOT(auc=ci(metric(best, "auc"))))
        one = tpr_view(best, 0.01)
        if one["resolvable"]:
            out.append(S.LINE_TPR(fpr="1%", tpr=ci(metric(best, TPR_1))))
        else:
            why = one["text"]
            if prefix.startswith("per user"):
                why = why.replace("non-members)", "non-member users)")
            out.append(S.LINE_TPR(fpr="1%", tpr=why))
            lead = lead_tpr(best)
            if lead is not None:
                out.append(S.LINE_TPR(fpr=f"{100 * lead['fpr']:g}%", tpr=lead["text"]))
        return out

    v = run.get("verdict") if isinstance(run.get("verdict"), dict) else verdict_for_run(run)
    run_name = one_line(str(run.get("name")))
    parts = [S.LINE_HEAD(run=run_name, level=str(v.get("level", "?")).upper())]
    uview = user_view(run)
    if uview is not None:  # both units, each named (reports/user_verdict.py)
        by_unit = v.get("by_unit") or {}
        parts += attack_parts(
            strongest_attack(run), f"per text {str(by_unit.get('example', '?')).upper()}: "
        )
        counts = (run.get("users") or {}).get("counts") or {}
        n_in = (counts.get("members") or {}).get("users")
        n_out = (counts.get("nonmembers") or {}).get("users")
        ubest = strongest_attack(uview)
        parts += attack_parts(
            ubest,
            f"per user ({n_in} member / {n_out} non-member users) "
            f"{str(by_unit.get('user', '?')).upper()}: ",
        )
        ulb = metric(ubest, "epsilon_lower_bound") if ubest is not None else None
        if isinstance(ulb, dict) and isinstance(ulb.get("value"), (int, float)):
            parts.append(f"ε_lb per user ≥ {ci({'value': ulb['value']})}")
    else:
        parts += attack_parts(strongest_attack(run))
    head = epsilon_headline(run)  # the report's and the verdict's headline ε, the same number
    if head is not None and not (v.get("level") == "split-shifted" and head["kind"] == "attack"):
        parts.append(one_line(headline_text(head)).replace("ε ≥", "ε_lb ≥", 1))
    else:
        parts.append(S.LINE_NO_EPSILON())
    status = v.get("claim_status") or "?"
    parts.append(S.LINE_CLAIM(status=str(status).upper() if status == "violated" else status))
    if v.get("level") == "inconclusive" and v.get("inconclusive"):
        parts.append(one_line(str(v["inconclusive"])))
    split = run.get("split_check") if isinstance(run.get("split_check"), dict) else {}
    blind = (split.get("blind") or {}).get("auc")
    if blind:
        shifted = S.LINE_SHIFTED() if split.get("shifted") else ""
        parts.append(S.LINE_BLIND(auc=ci(blind), shifted=shifted))
    if v.get("level") == "invalid-attack" and v.get("invalid"):
        parts.append(one_line(str(v["invalid"])))
    return S.join_parts(parts)


class StripAnsi(logging.Formatter):
    _ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")

    def format(self, record: logging.LogRecord) -> str:
        return self._ANSI.sub("", super().format(record))


@contextlib.contextmanager
def capture_library_output(path: Path):
    """Route Python warnings and transformers' logging (load reports, deprecations) into
    ``path``, without ANSI codes, so the console carries only the suite's own lines. The
    records are kept in memory and written when the block ends, except after bad input
    (an ``AuditError``: nothing may be left in the output directory then)."""
    import io
    import warnings

    from privacy_audit.ground.io import atomic_write_text

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(StripAnsi("%(asctime)s %(name)s %(levelname)s: %(message)s"))
    loggers = [logging.getLogger("py.warnings"), logging.getLogger("transformers")]
    saved = [(lg, lg.handlers[:], lg.propagate, lg.level) for lg in loggers]
    try:
        import transformers

        tf_logging = transformers.utils.logging
        tf_logging.disable_default_handler()
        tf_logging.disable_progress_bar()
    except ImportError:  # pragma: no cover - a hard dependency
        tf_logging = None
    for lg in loggers:
        lg.handlers = [handler]
        lg.propagate = False
        lg.setLevel(logging.INFO)
    logging.captureWarnings(True)
    bad_input = False
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("default")
            yield
    except AuditError:
        bad_input = True
        raise
    finally:
        logging.captureWarnings(False)
        for lg, handlers, propagate, level in saved:
            lg.handlers = handlers
            lg.propagate = propagate
            lg.setLevel(level)
        if tf_logging is not None:
            tf_logging.enable_default_handler()
            tf_logging.enable_progress_bar()
        text = buf.getvalue()
        if text and not bad_input:
            try:
                atomic_write_text(path, text)
            except OSError:
                pass


@contextlib.contextmanager
def named_by_flags(flags: dict[str, str | None]):
    """A data error about a file given by a flag names the flag typed (``--members 'x.csv':
    column 'text' is empty ...``) rather than "data file"."""
    try:
        yield
    except AuditError as exc:
        msg = str(exc)
        for flag, path in flags.items():
            for what in ("data file", "data path", "data directory"):
                if isinstance(path, str) and f"{what} {path!r}" in msg:
                    raise type(exc)(msg.replace(f"{what} {path!r}", f"{flag} {path!r}")) from None
        raise


def check_seed(seed: int, option: str = "--seed") -> None:
    """A seed numpy accepts: an integer in [0, 2^32 - 1]."""
    if not 0 <= seed < 2**32:
        raise AuditError(f"{option} must be an integer from 0 to 2^32 - 1, got {seed}")


def check_dir_option(path: str, option: str) -> None:
    """A directory option must not name an existing file (or a path through one)."""
    p = Path(path)
    for q in (p, *p.parents):
        if q.exists():
            if not q.is_dir():
                what = "is" if q == p else f"is inside {str(q)!r}, which is"
                raise AuditError(f"{option} {path!r} {what} a file, not a directory")
            break


def inside(path: str, parent: str) -> bool:
    """Whether ``path`` is ``parent`` or lies below it (after resolving)."""
    p, q = Path(path).resolve(), Path(parent).resolve()
    return p == q or q in p.parents


def check_writable(path: str, option: str) -> None:
    """Fail before any output if ``path`` cannot be written (nothing is left behind)."""
    import tempfile

    p = Path(path)
    if p.is_dir():
        raise AuditError(f"{option} {path!r} is a directory; give a file name")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=p.parent, prefix=".write-check-"):
            pass
    except OSError as exc:
        raise AuditError(f"cannot write {option} file {path!r}: {exc.strerror or exc}") from None
