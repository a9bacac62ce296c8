"""The run-directory lock without a race (issue 35, item 4).

The full figure (200 trials x 16 processes, flock and fallback, and the old lock for the
before column) is in docs/scale-out.md, from ``python tests/lock_stress.py``; CI runs a
few trials of the same harness.
"""

from __future__ import annotations

import fcntl
import os
import socket

import pytest
from lock_stress import stress

from privacy_audit.ground import lock as lock_mod
from privacy_audit.ground.errors import AuditError
from privacy_audit.ground.lock import LOCK_NAME, DirLock


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
