"""glibc malloc thresholds for scoring (audit/scale/malloc.py, issue 38): applied once per
process, a no-op with a debug line off glibc, called by the streaming scorer, and with the
effect it is there for (a freed large buffer's pages are reused, not faulted in again)."""

from __future__ import annotations

import logging
import platform
import subprocess
import sys

import pytest

from privacy_audit.audit.scale import malloc


class FakeLibc:
    def __init__(self, answer: int = 1) -> None:
        self.calls: list[tuple[int, int]] = []
        self.answer = answer

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return self.answer


@pytest.fixture
def fresh(monkeypatch):
    """A process in which tune_malloc has not run yet."""
    monkeypatch.setattr(malloc, "_tried", False)
    monkeypatch.setattr(malloc, "_applied", None)


def test_thresholds_are_set_once_per_process(fresh, monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(malloc, "_libc", lambda: libc)
    assert malloc.tune_malloc() == malloc.SETTING == malloc.applied()
    assert malloc.tune_malloc() == malloc.SETTING
    # glibc's malloc.h: M_MMAP_THRESHOLD = -3, M_TRIM_THRESHOLD = -1; 1 GiB and 2 GiB - 1
    assert libc.calls == [(-3, 1 << 30), (-1, (1 << 31) - 1)]


def test_off_glibc_nothing_is_set_and_a_debug_line_says_so(fresh, monkeypatch, caplog):
    monkeypatch.setattr(malloc, "_libc", lambda: None)
    with caplog.at_level(logging.DEBUG, logger=malloc.__name__):
        assert malloc.tune_malloc() is None
    assert malloc.applied() is None
    assert any("not glibc" in r.getMessage() for r in caplog.records)


def test_a_refused_mallopt_is_not_reported_as_applied(fresh, monkeypatch):
    monkeypatch.setattr(malloc, "_libc", lambda: FakeLibc(answer=0))
    assert malloc.tune_malloc() is None and malloc.applied() is None


def test_not_glibc_is_recognised(monkeypatch):
    monkeypatch.setattr(platform, "system", lambda: "Darwin")
    assert malloc._libc() is None
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    monkeypatch.setattr(platform, "libc_ver", lambda *a, **k: ("musl", "1.2"))
    assert malloc._libc() is None


def test_the_streaming_scorer_applies_it(fresh, monkeypatch):
    from privacy_audit.audit.scale import stream

    calls = []
    monkeypatch.setattr(malloc, "tune_malloc", lambda: calls.append(1))

    class Release:  # every text already cached: nothing is scored
        pass

    rel = Release()
    rel.__dict__.update(_token_stats_cache={"a": 1}, _hidden_cache={"a": 2})
    stream.stream_token_stats(rel, ["a"])
    assert calls == [1]


_FAULTS = """
import ctypes, ctypes.util, resource, sys
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
applied = None
if sys.argv[1] == "tuned":
    from privacy_audit.audit.scale.malloc import tune_malloc
    applied = tune_malloc()
SIZE = 64 << 20
def batch():  # a batch's buffer (malloc, as torch's CPU allocator does), written, freed
    p = libc.malloc(SIZE)
    ctypes.memset(p, 1, SIZE)
    libc.free(p)
batch()  # one before counting
f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(8):
    batch()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0, applied is not None)
"""


def test_a_freed_large_buffer_is_reused_without_faulting_where_applied():
    def faults(mode: str) -> tuple[int, bool]:
        out = subprocess.run(
            [sys.executable, "-c", _FAULTS, mode], capture_output=True, text=True, check=True
        )
        n, applied = out.stdout.split()
        return int(n), applied == "True"

    pages = (64 << 20) // 4096  # one 64 MiB buffer in 4 KiB pages
    (default, _), (tuned, applied) = faults("default"), faults("tuned")
    assert default > 6 * pages  # mapped afresh each time: every page faults again
    assert applied == (malloc._libc() is not None)
    if applied:  # glibc: the heap keeps the pages, the loop reuses them
        assert tuned < pages
    else:  # elsewhere a no-op: the same faults
        assert tuned > 6 * pages


_HOLE = """
import ctypes, ctypes.util, sys
libc = ctypes.CDLL(ctypes.util.find_library("c"))
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
from privacy_audit.audit.scale.malloc import release_free_memory, tune_malloc
applied = tune_malloc()
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
SIZE = 64 << 20
big = libc.malloc(SIZE)
ctypes.memset(big, 1, SIZE)
kept = libc.malloc(1024)  # a small result kept above the batch's buffer
libc.free(big)  # a free hole below it: not at the heap's top, so never trimmed by free
before = rss()
released = release_free_memory()
print(before - rss(), released, applied is not None)
"""


def test_free_pages_between_kept_results_go_back_where_applied():
    out = subprocess.run([sys.executable, "-c", _HOLE], capture_output=True, text=True, check=True)
    dropped, released, applied = out.stdout.split()
    assert applied == str(malloc._libc() is not None)
    if applied == "True":  # glibc: the 64 MiB hole's pages are handed back
        assert released == "True" and int(dropped) > 60 << 20
    else:
        assert released == "False"


def test_release_is_a_no_op_off_glibc(monkeypatch):
    monkeypatch.setattr(malloc, "_libc", lambda: None)
    assert malloc.release_free_memory() is False
