"""Kills (SIGKILL, nothing runs at exit): the output pair stays consistent and pool
workers do not outlive their driver (issue 17)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _env(extra_path: Path | None = None) -> dict:
    env = dict(os.environ)
    parts = [str(ROOT)] + ([str(extra_path)] if extra_path else [])
    env["PYTHONPATH"] = os.pathsep.join(parts + [env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"
    return env


def _gone(pid: int) -> bool:
    """Not running: no such process, or a zombie waiting for a reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


PAIR_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    from privacy_audit.ground import io

    real = os.replace
    calls = []

    def replace_then_die(src, dst):
        real(src, dst)
        calls.append(dst)
        if len(calls) == 1:  # killed between the two renames
            os.kill(os.getpid(), signal.SIGKILL)

    os.replace = replace_then_die
    io.publish_together(sys.argv[1], [("report.html", "NEW REPORT"), ("results.json", "NEW RESULTS")])
    """
)


def test_kill_between_the_two_renames_never_leaves_new_results_beside_an_old_report(
    tmp_path,
):
    from privacy_audit.audit.results import check_output_dir
    from privacy_audit.ground.io import publish_together

    out = tmp_path / "out"
    publish_together(out, [("report.html", "OLD REPORT"), ("results.json", "OLD RESULTS")])
    proc = subprocess.run(
        [sys.executable, "-c", PAIR_SCRIPT, str(out)], env=_env(), capture_output=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    # report first, results last: results.json (the completion mark) is still the old one
    assert (out / "report.html").read_text() == "NEW REPORT"
    assert (out / "results.json").read_text() == "OLD RESULTS"
    stray = sorted(p.name for p in out.iterdir() if p.name.endswith(".tmp"))
    assert len(stray) == 1 and stray[0].startswith(".results.json."), stray
    check_output_dir(out)  # the next start removes what the kill left
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "results.json"]


def test_failed_publish_leaves_old_pair_and_no_temporaries(tmp_path, monkeypatch):
    from privacy_audit.ground import io

    out = tmp_path / "out"
    io.publish_together(out, [("report.html", "OLD"), ("results.json", "OLD")])

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        io.publish_together(out, [("report.html", "NEW"), ("results.json", "NEW")])
    assert sorted(p.name for p in out.iterdir()) == ["report.html", "results.json"]
    assert (out / "results.json").read_text() == "OLD"


NAP = textwrap.dedent(
    """
    import os, time
    from pathlib import Path

    def nap(payload, deps):
        Path(payload["dir"], f"{os.getpid()}.pid").write_text(str(os.getppid()))
        time.sleep(600)
        return {}
    """
)

DRIVER = textwrap.dedent(
    """
    import sys
    from privacy_audit.audit.scale.executors import ExecutorSpec, LocalExecutor, Task

    ex = LocalExecutor(ExecutorSpec(workers=2))
    batch = [(Task("nap", "kill_nap:nap", {"dir": sys.argv[1], "i": i}), []) for i in range(2)]
    ex.run(batch, lambda t: None, lambda t, r: None)
    """
)


def test_pool_workers_end_when_the_driver_is_killed(tmp_path):
    (tmp_path / "kill_nap.py").write_text(NAP, encoding="utf-8")
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(pids_dir)],
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240  # spawned workers import torch: slow on a busy CI
        while len(list(pids_dir.glob("*.pid"))) < 2:
            assert driver.poll() is None, "driver exited early"
            assert time.monotonic() < deadline, "workers did not start"
            time.sleep(0.2)
        workers = [int(p.stem) for p in pids_dir.glob("*.pid")]
        assert all(int((pids_dir / f"{w}.pid").read_text()) == driver.pid for w in workers)
        driver.send_signal(signal.SIGKILL)
        driver.wait(timeout=30)
        killed = time.monotonic()
        while not all(_gone(w) for w in workers) and time.monotonic() - killed < 10:
            time.sleep(0.1)
        alive = [w for w in workers if not _gone(w)]
        assert not alive, f"orphaned pool workers still running: {alive}"
    finally:
        if driver.poll() is None:
            driver.kill()
        for p in pids_dir.glob("*.pid"):
            try:
                os.kill(int(p.stem), signal.SIGKILL)
            except ProcessLookupError:
                pass
