"""Many processes race for one run directory's lock; count double holders (issue 35).

    python tests/lock_stress.py --trials 200 --procs 16 [--module privacy_audit.ground.lock]

Each trial: a fresh directory with a stale lock file (a dead PID, or an empty file, or a
PID reused by another process), ``--procs`` forked processes released together by a
barrier, each trying ``DirLock(dir).acquire()`` once. A process that gets the lock creates
a marker with ``O_CREAT | O_EXCL``, holds the lock for a few milliseconds, then removes the
marker and releases; a marker that already exists means two processes held the lock at once.
``--module`` names another implementation (e.g. a copy of an older ``lock.py``) for the
before/after figure in docs/executors-and-resumable-runs.md. Used by tests/ground/test_lock.py with fewer trials.
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing as mp
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

STALE = ("dead-pid", "empty", "reused-pid")


def _worker(module: str, d: str, barrier, results, hold: float) -> None:
    lock_mod = importlib.import_module(module)
    barrier.wait()
    lock = lock_mod.DirLock(d, "--out")
    try:
        lock.acquire()
    except Exception:  # noqa: BLE001 - refused: another process holds it
        results.put(("refused", os.getpid()))
        return
    marker = Path(d) / "holder"
    try:
        fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        os.close(fd)
        double = False
    except FileExistsError:
        double = True
    time.sleep(hold)
    if not double:
        marker.unlink()
    lock.release()
    results.put(("double" if double else "held", os.getpid()))


def _dead_pid() -> int:
    p = mp.get_context("fork").Process(target=lambda: None)
    p.start()
    p.join()
    return p.pid


def stress(
    trials: int,
    procs: int,
    module: str = "privacy_audit.ground.lock",
    hold: float = 0.005,
) -> dict:
    """Counts over ``trials``: trials with a double holder, holds, refusals."""
    ctx = mp.get_context("fork")
    lock_name = importlib.import_module(module).LOCK_NAME
    out = {"trials": trials, "procs": procs, "double_trials": 0, "held": 0, "refused": 0}
    dead = _dead_pid()
    host = socket.gethostname()
    with tempfile.TemporaryDirectory(prefix="lock-stress-") as tmp:
        for t in range(trials):
            d = Path(tmp) / f"t{t}"
            d.mkdir()
            kind = STALE[t % len(STALE)]
            text = {
                "dead-pid": f"{dead} {host} 1\n",
                "empty": "",
                "reused-pid": f"{os.getpid()} {host} 1\n",  # our PID, another start time
            }[kind]
            (d / lock_name).write_text(text, encoding="utf-8")
            barrier = ctx.Barrier(procs)
            results = ctx.Queue()
            ps = [
                ctx.Process(target=_worker, args=(module, str(d), barrier, results, hold))
                for _ in range(procs)
            ]
            for p in ps:
                p.start()
            got = [results.get(timeout=60) for _ in ps]
            for p in ps:
                p.join()
            kinds = [k for k, _ in got]
            out["held"] += kinds.count("held") + kinds.count("double")
            out["refused"] += kinds.count("refused")
            if "double" in kinds:
                out["double_trials"] += 1
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--procs", type=int, default=16)
    ap.add_argument("--module", default="privacy_audit.ground.lock")
    ap.add_argument("--hold", type=float, default=0.005, help="seconds a holder keeps it")
    a = ap.parse_args()
    t0 = time.monotonic()
    r = stress(a.trials, a.procs, a.module, a.hold)
    r["seconds"] = round(time.monotonic() - t0, 1)
    print(r)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
