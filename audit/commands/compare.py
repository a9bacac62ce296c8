"""``privacy-audit compare RUN_A RUN_B ...``: the command. It reads and checks the
runs' results.json files, refuses outputs that would overwrite an input, and writes
compare.json, differences.csv and compare.html atomically; the comparison itself (tables,
plots, the page) is :mod:`privacy_audit.reports.compare_view`, which reads no files."""

from __future__ import annotations

import contextlib
import csv
import io
from pathlib import Path

from privacy_audit.audit.commands.common import EXIT_OK
from privacy_audit.ground.errors import AuditError, DataError
from privacy_audit.reports.compare_view import (
    COMPARE_HTML,
    floor_line,
    render_compare,
    unmeasured_metrics,
    utility_floor_checks,
    validate_results,
)

NAME = "compare"


def add_parser(sub) -> None:
    c = sub.add_parser(
        "compare",
        help="one HTML page comparing finished runs (privacy-utility, AUC and TPR@low FPR per "
        "attack, claimed vs audited ε) and a table of the differences",
    )
    c.add_argument("runs", nargs="+", help="run output directories or results.json files")
    c.add_argument("--out", default="compare-out", help="output directory (default: compare-out)")


def run(args) -> int:
    html, table = compare_runs_cli(args.runs, args.out)
    print(f"compare: {html}")
    print(f"differences: {table}")
    return EXIT_OK


def load_for_compare(path: str | Path) -> tuple[str, dict]:
    p = Path(path)
    f = p / "results.json" if p.is_dir() else p
    if not f.is_file():
        raise DataError(f"no results.json at {str(path)!r}; give a run directory or a results file")
    from privacy_audit.ground.io import read_json

    res = read_json(f, "results file")
    if not isinstance(res, dict):
        raise DataError(f"{str(f)!r} is not a results.json: the top level is not an object")
    name = p.name if p.is_dir() else (p.parent.name or p.stem)
    return name or str(p), res


def check_schemas(named: list[tuple[str, dict]]) -> None:
    """All inputs must be privacy-audit results of the schema this version reads."""
    from privacy_audit.audit.results import SCHEMA_VERSION

    seen = []
    for name, res in named:
        tool = res.get("tool") if isinstance(res.get("tool"), dict) else {}
        version = res.get("schema_version")
        if tool.get("name") != "privacy-audit" or not isinstance(res.get("runs"), list):
            raise AuditError(
                f"cannot compare runs with incompatible schemas: {name!r} is not a privacy-audit "
                "results.json (no tool.name 'privacy-audit' or no runs list)"
            )
        seen.append((name, version))
        validate_results(name, res)
    versions = {v for _, v in seen}
    if len(versions) > 1 or versions != {SCHEMA_VERSION}:
        listing = ", ".join(f"{n!r} has schema_version {v!r}" for n, v in seen)
        raise AuditError(
            f"cannot compare runs with incompatible schemas: {listing}; this version reads "
            f"schema_version {SCHEMA_VERSION}"
        )


def compare_runs_cli(paths: list[str], out_dir: str | Path) -> tuple[Path, Path]:
    from privacy_audit.audit.results import check_output_dir
    from privacy_audit.ground.io import atomic_write_text, dumps_json

    if len(paths) < 2:
        raise AuditError("compare needs at least two runs (RUN_A RUN_B ...)")
    from privacy_audit.audit.outputs import check_outputs, dir_outputs, results_family

    inputs = []
    for p in paths:
        q = Path(p)
        inputs += results_family(q / "results.json" if q.is_dir() else q)
    check_outputs(  # before reading anything: no output may be one of the runs' files
        dir_outputs("--out", out_dir, ("compare.json", "differences.csv", COMPARE_HTML)), inputs
    )
    created = not Path(out_dir).exists()
    check_output_dir(out_dir)  # writable, before seconds of rendering
    try:
        named = [load_for_compare(p) for p in paths]
        names = [n for n, _ in named]
        if len(set(names)) != len(names):  # e.g. two results.json in folders of the same name
            named = [(f"{n} [{i + 1}]", r) for i, (n, r) in enumerate(named)]
        check_schemas(named)
    except (AuditError, KeyboardInterrupt):  # bad input or ^C: leave no empty folder behind
        if created:
            with contextlib.suppress(OSError):
                Path(out_dir).rmdir()
        raise
    html, diffs = render_compare(named)
    buf = io.StringIO()
    cols = ["run", "attack", "metric", "a", "b", "value_a", "value_b", "difference", "cis_overlap"]
    w = csv.DictWriter(buf, fieldnames=cols, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(diffs)
    out = Path(out_dir)
    missing = unmeasured_metrics(named)
    checks = utility_floor_checks(named)
    atomic_write_text(
        out / "compare.json",
        dumps_json(
            {
                "inputs": [str(p) for p in paths],
                "differences": diffs,
                "not_measured": missing,
                "utility_floor": checks,
            }
        ),
    )
    for c in checks:
        if c["learned"] is not True:
            print(floor_line(c))
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        print(f"not measured (null, left out of the plots and table): {shown}")
    table = atomic_write_text(out / "differences.csv", buf.getvalue())
    page = atomic_write_text(out / COMPARE_HTML, html)
    return page, table
