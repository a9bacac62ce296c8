"""Run one ``privacy-audit bench`` command in several separate processes and keep every run.

    python -m experiments.process_runs --runs 3 --out docs/records/bench-dp-forward-runs.json -- \
        privacy-audit bench dp-forward --threads 1

A timing interval from one process hides the run-to-run spread (load, frequency scaling,
allocator state): the paper-claims table (experiments/claims.py) judges a timing claim only on
at least three separate process runs and calls it ``unstable`` when its verdict flips
between them. Each run writes its own bench JSON (``--out`` is appended to the command);
the output holds them all, in order, under ``process_runs``. Finished runs are kept in
``<out>.runs/`` so an interrupted series resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--out", required=True)
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- privacy-audit bench ...")
    args = ap.parse_args(argv)
    cmd = [c for c in args.command if c != "--"] if args.command else []
    if args.runs < 1:
        print("error: --runs must be >= 1", file=sys.stderr)
        return 2
    if cmd[:2] != ["privacy-audit", "bench"] or "--out" in cmd:
        print(
            "error: give the bench command after --, without --out "
            "(e.g. -- privacy-audit bench dp-forward --threads 1)",
            file=sys.stderr,
        )
        return 2
    out = Path(args.out)
    if not out.parent.is_dir():
        print(f"error: output directory {str(out.parent)!r} does not exist", file=sys.stderr)
        return 2
    from privacy_audit.ground.io import atomic_write_text, dumps_json

    work = out.with_name(out.name + ".runs")
    work.mkdir(exist_ok=True)
    exe = [sys.executable, "-m", "privacy_audit.audit.cli"]
    runs, meta = [], []
    for i in range(args.runs):
        path = work / f"run{i}.json"
        if not path.is_file():
            load = os.getloadavg()
            t0 = time.perf_counter()
            print(f"process run {i + 1}/{args.runs}: {shlex.join(cmd)}", file=sys.stderr)
            rc = subprocess.call([*exe, *cmd[1:], "--out", str(path)])
            if rc != 0 or not path.is_file():
                print(f"error: process run {i + 1} failed (exit {rc})", file=sys.stderr)
                return 2
            meta.append(
                {
                    "run": i,
                    "seconds": time.perf_counter() - t0,
                    "load_average_at_start": [round(x, 2) for x in load],
                }
            )
        runs.append(json.loads(path.read_text(encoding="utf-8")))
    atomic_write_text(
        out,
        dumps_json(
            {
                "command": f"python -m experiments.process_runs --runs {args.runs} "
                f"--out {args.out} -- {shlex.join(cmd)}",
                "process_runs": runs,
                "process_run_meta": meta,
            }
        ),
    )
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
