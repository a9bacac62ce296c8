"""``privacy-audit bench input-hash``: what fingerprinting a checkpoint costs on resume.

Task keys hash every input file in full (audit/scale/fingerprint.py). Four cases on one
file of 1024 MiB (``--quick``: 32 MiB) of random bytes, timed
round-robin:

- ``read-cold``: read the file with no hashing, after evicting it from the page cache
  (``posix_fadvise(DONTNEED)``; no root needed) - the disk's own speed, the reference;
- ``sha256-cold``: :func:`~privacy_audit.audit.scale.fingerprint.file_sha256` without the
  hash cache, after the same eviction - a first run;
- ``sha256-warm``: the same from the page cache - the hash's CPU speed;
- ``cached``: ``file_sha256`` with the hash cache holding the file's key - every resume
  after the first (a ``stat`` and a lookup).

``sha256-cold`` near ``read-cold`` (ratio near 1) means the hash is I/O-bound. MB/s per
case are in ``setup``.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, time_cases


def _evict(p: Path) -> None:
    fd = os.open(p, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _read(p: Path) -> int:
    n = 0
    buf = bytearray(8 << 20)
    with open(p, "rb", buffering=0) as fh:
        while True:
            k = fh.readinto(buf)
            if not k:
                return n
            n += k


def run(settings: BenchSettings) -> BenchResult:
    from privacy_audit.audit.scale import fingerprint as fp

    mib = 32 if settings.quick else 1024
    with tempfile.TemporaryDirectory(prefix="input-hash-", dir=settings.extra.get("dir")) as tmp:
        p = Path(tmp) / "weights.bin"
        rng_bytes = os.urandom(1 << 20)
        with open(p, "wb") as fh:
            for i in range(mib):  # distinct blocks: nothing a file system could dedupe
                fh.write(rng_bytes[i % 997 :] + rng_bytes[: i % 997])
            fh.flush()
            os.fsync(fh.fileno())
        old = time.time() - 60  # older than the racy-clean window, so it may be cached
        os.utime(p, (old, old))
        cache = fp.HashCache(None)
        fp.CACHES[str(fp.cache_file())] = cache  # an in-memory cache for this benchmark
        digest = fp.file_sha256(p)  # fills the cache

        def read_cold():
            _evict(p)
            _read(p)

        def sha_cold():
            _evict(p)
            assert fp.file_sha256(p, use_cache=False) == digest

        def sha_warm():
            assert fp.file_sha256(p, use_cache=False) == digest

        def cached():
            assert fp.file_sha256(p) == digest

        timings = time_cases(
            {
                "read-cold": read_cold,
                "sha256-cold": sha_cold,
                "sha256-warm": sha_warm,
                "cached": cached,
            },
            settings.repeats,
            settings.warmup,
        )
        fp.CACHES.pop(str(fp.cache_file()), None)
    ref = timings["read-cold"].median_s
    size_mb = mib * (1 << 20) / 1e6
    return BenchResult(
        name="input-hash",
        reference="read-cold",
        cases={k: v.summary() for k, v in timings.items()},
        ratios={k: v.median_s / ref for k, v in timings.items()},
        setup={
            "file_mib": mib,
            "mb_per_s": {
                k: round(size_mb / v.median_s, 1) for k, v in timings.items() if v.median_s > 0
            },
            "chunk_bytes": fp.CHUNK_BYTES,
        },
        notes=[
            "cold = after posix_fadvise(DONTNEED) on the file (page cache evicted); the "
            "disk may still have its own cache",
            "cached = the hash cache's (path, size, mtime_ns, inode) key hit: no byte read",
        ],
    )
