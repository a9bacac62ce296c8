"""glibc's malloc thresholds for the scoring loop (the forward's system time).

A forward pass over a batch of 32 x 256 tokens allocates buffers larger than glibc's
mmap threshold (the logits alone are 32 x 256 x V float32: 128 MiB at V = 4,096; the
threshold adapts only up to 32 MiB). Each such buffer is mapped with ``mmap`` and
unmapped on free, so every batch touches fresh pages: measured on a plain batched
``transformers`` loop over 400 texts, a third of its CPU time was system time spent on
minor page faults (docs/large-inputs-one-machine.md). Raising ``M_MMAP_THRESHOLD`` to 1 GiB serves those
buffers from the heap, and raising ``M_TRIM_THRESHOLD`` to 2 GiB keeps the freed top of
the heap mapped, so the next batch reuses the same, already faulted pages.

What it costs: freed memory stays in the process instead of going back to the system.
Small results kept between the freed buffers would then make the resident memory grow
with the number of texts (it did under glibc's defaults too), so the scorer also calls
:func:`release_free_memory` every few hundred texts; what is measured (CPU, faults and
peak RSS at 400 and 1,200 texts per side) is in docs/large-inputs-one-machine.md.

:func:`tune_malloc` is called once per process at the start of scoring; off glibc (macOS,
musl, Windows) it does nothing and says so on the debug log.
"""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

#: mallopt parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
#: The setting: buffers under 1 GiB come from the heap; up to 2 GiB of freed heap top is
#: kept for the next batch. ``mallopt`` takes a C ``int``: 2^31 - 1 is the largest trim
#: threshold it can set (the environment's ``MALLOC_TRIM_THRESHOLD_`` can go higher).
MMAP_THRESHOLD = 1 << 30
TRIM_THRESHOLD = (1 << 31) - 1
assert MMAP_THRESHOLD < 1 << 31 and TRIM_THRESHOLD < 1 << 31
SETTING = f"glibc mallopt M_MMAP_THRESHOLD={MMAP_THRESHOLD} M_TRIM_THRESHOLD={TRIM_THRESHOLD}"

_applied: str | None = None
_tried = False


def _libc():
    """glibc's handle, or None where the C library is not glibc."""
    import ctypes
    import ctypes.util
    import platform

    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return None
    name = ctypes.util.find_library("c") or "libc.so.6"
    try:
        libc = ctypes.CDLL(name)
    except OSError:
        return None
    if not hasattr(libc, "mallopt"):
        return None
    # int mallopt(int, int): the values above fit a C int (ctypes would wrap a larger one)
    libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    libc.mallopt.restype = ctypes.c_int
    return libc


def tune_malloc() -> str | None:
    """Apply :data:`SETTING` once per process; returns it, or None where nothing was set
    (not glibc, or ``mallopt`` refused). Later calls return the first call's answer."""
    global _applied, _tried
    if _tried:
        return _applied
    _tried = True
    libc = _libc()
    if libc is None:
        log.debug("malloc thresholds left as they are: the C library is not glibc")
        return None
    ok = libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1
    ok = libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1 and ok
    if not ok:
        log.debug("glibc mallopt refused the scoring thresholds; left as they are")
        return None
    _applied = SETTING
    return _applied


def release_free_memory() -> bool:
    """Hand the heap's free pages back to the system (glibc ``malloc_trim(0)``: every
    whole free page, in the middle of the heap too, not only at its top). Called at each
    scoring chunk's end: the per-text results the scorer keeps are small allocations that
    land between the batches' freed buffers, so without it the freed pages between them
    stay resident and the process's RSS grows with the number of texts (measured in
    docs/large-inputs-one-machine.md); with it the resident memory returns to what is live once per chunk.
    Returns whether anything was released; off glibc a no-op (False)."""
    libc = _libc()
    if libc is None or not hasattr(libc, "malloc_trim"):
        return False
    return bool(libc.malloc_trim(0))


def applied() -> str | None:
    """What :func:`tune_malloc` set in this process (None: nothing, or not called)."""
    return _applied


__all__ = ["SETTING", "applied", "release_free_memory", "tune_malloc"]
