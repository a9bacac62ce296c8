"""The run-directory lock without a race (issue 35, item 4).

The full figure (200 trials x 16 processes, flock and fallback, and the old lock for the
before column) is in docs/executors-and-resumable-runs.md, from ``python tests/lock_stress.py``; CI runs a
few trials of the same harness.
"""

from __future__ import annotations

import fcntl
import os
import socket

import pytest

from privacy_audit.ground import lock as lock_mod
from privacy_audit.ground.errors import AuditError
from privacy_audit.ground.lock import LOCK_NAME, DirLock
from tests.lock_stress import stress


@pytest.mark.parametrize("flock", [True, False], ids=["flock", "fallback"])
def test_many_processes_and_a_stale_lock_never_two_holders(flock, monkeypatch):
    monkeypatch.setattr(lock_mod, "USE_FLOCK", flock)  # inherited by the forked workers
    r = stress(trials=9, procs=8)  # dead PID, empty file, reused PID: 3 trials each
    assert r["double_trials"] == 0, r
    assert r["held"] >= (9 if flock else 6), r  # fallback: a fresh empty file is respected
    assert r["held"] + r["refused"] == 9 * 8


def test_a_fresh_empty_lock_file_held_by_its_creator_is_not_stale(tmp_path):
    f = tmp_path / LOCK_NAME
    fd = os.open(f, os.O_CREAT | os.O_RDWR)  # created, not yet written: the creator holds it
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    try:
        with pytest.raises(AuditError, match="in use by another privacy-audit run"):
            DirLock(tmp_path, "--out").acquire()
        assert f.exists() and f.read_text() == ""  # never deleted
    finally:
        os.close(fd)
    with DirLock(tmp_path, "--out") as lk:  # its creator is gone: free
        assert f.read_text().split()[0] == str(os.getpid())
        assert lk.held
    assert not f.exists()


def test_fallback_respects_a_fresh_empty_lock_and_takes_a_dead_one(tmp_path, monkeypatch):
    monkeypatch.setattr(lock_mod, "USE_FLOCK", False)
    f = tmp_path / LOCK_NAME
    f.write_text("")
    with pytest.raises(AuditError, match="just created"):
        DirLock(tmp_path, "--out").acquire()
    assert f.exists()
    old = f.stat().st_mtime - 60
    os.utime(f, (old, old))
    with DirLock(tmp_path, "--out"):
        assert f.read_text().split()[0] == str(os.getpid())
    f.write_text(f"{2**22 + 12345} {socket.gethostname()} 1\n")  # no such PID
    with DirLock(tmp_path, "--out"):
        assert f.read_text().split()[0] == str(os.getpid())


def _start_ticks(pid):
    """Field 22 of /proc/PID/stat (start time in clock ticks), parsed here independently."""
    stat = open(f"/proc/{pid}/stat", encoding="utf-8").read()
    return stat.rsplit(")", 1)[1].split()[19]


def test_leaving_keeps_a_new_run_directory_that_holds_finished_tasks(tmp_path):
    run = tmp_path / "run"
    with DirLock(run, "--run-dir"):
        (run / "tasks").mkdir()
        (run / "tasks" / "t0.json").write_text("{}")
    assert (run / "tasks" / "t0.json").is_file()  # a finished task is never deleted
    assert not (run / LOCK_NAME).exists()
    # the same new directory with nothing finished in it is removed again
    empty = tmp_path / "empty"
    with DirLock(empty, "--run-dir"):
        (empty / "tasks").mkdir()
        (empty / "events.log").write_text("started\n")
    assert not empty.exists()


def test_a_record_of_this_process_is_not_a_live_holder(tmp_path):
    # a lock file left by this very process (same PID, host and start time): not busy
    f = tmp_path / LOCK_NAME
    f.write_text(f"{os.getpid()} {socket.gethostname()} {_start_ticks(os.getpid())}\n")
    with DirLock(tmp_path, "--out") as lk:
        assert lk.held


def test_a_reused_pid_and_a_remote_host(tmp_path, monkeypatch):
    import subprocess
    import sys

    f = tmp_path / LOCK_NAME
    host = socket.gethostname()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # the PID is alive, but its start time is not the recorded one: another process
        # now has that PID, so the lock is stale and is taken over
        f.write_text(f"{live.pid} {host} 1\n")
        assert lock_mod.lock_owner(f) is None
        with DirLock(tmp_path, "--out"):
            assert f.read_text().split()[0] == str(os.getpid())
        # the same PID with its real start time is a live holder
        f.write_text(f"{live.pid} {host} {_start_ticks(live.pid)}\n")
        assert lock_mod.lock_owner(f) == (live.pid, f"PID {live.pid}")
        with pytest.raises(AuditError, match=f"PID {live.pid}"):
            DirLock(tmp_path, "--out").acquire()
    finally:
        live.kill()
        live.wait()
    # a run on another host cannot be checked from here: respected, even with a PID that
    # is dead on this host
    dead = 2**22 + 12345
    f.write_text(f"{dead} elsewhere-{host} 1\n")
    assert lock_mod.lock_owner(f) == (dead, f"PID {dead} on host elsewhere-{host}")
    for flock in (True, False):
        monkeypatch.setattr(lock_mod, "USE_FLOCK", flock)
        with pytest.raises(AuditError, match=f"on host elsewhere-{host}"):
            DirLock(tmp_path, "--out").acquire()
    assert f.read_text().split()[0] == str(dead)  # never deleted


# --------------------------------------------------------------------------- #
# issue 49: one-line mutants that survived the suite
# --------------------------------------------------------------------------- #
def test_a_record_without_a_host_is_a_local_run(tmp_path):
    f = tmp_path / LOCK_NAME
    f.write_text(f"{os.getpid()}\n")  # an older version's record: the PID alone
    assert lock_mod.lock_owner(f) == (os.getpid(), f"PID {os.getpid()}")


def test_without_a_start_time_the_pid_is_trusted(tmp_path, monkeypatch):
    f = tmp_path / LOCK_NAME
    f.write_text(f"{os.getpid()} {socket.gethostname()} 12345\n")
    monkeypatch.setattr(lock_mod, "_start_time", lambda pid: "")  # no /proc here
    assert lock_mod.lock_owner(f) == (os.getpid(), f"PID {os.getpid()}")


def test_a_lock_file_unlinked_by_its_releasing_holder_is_retried(tmp_path, monkeypatch):
    # between our open() and our flock() the previous holder releases: it unlinks the
    # file, and a new run creates a fresh one at the path. Locking the orphaned inode
    # would leave the path's file without our record; the lock must retry on the new one.
    d = tmp_path / "out"
    d.mkdir()
    path = d / LOCK_NAME
    real = fcntl.flock
    raced = []

    def flock(fd, op):
        if not raced:
            raced.append(True)
            path.unlink()
            path.write_text("")
        return real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)
    lk = DirLock(d, "--out")
    lk.acquire()
    try:
        assert path.read_text().split()[0] == str(os.getpid())
    finally:
        lk.release()
