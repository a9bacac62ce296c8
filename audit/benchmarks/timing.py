"""Timing and memory helpers shared by the benchmarks."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class BenchSettings:
    """Options every benchmark accepts (``privacy-audit bench --repeats/--warmup/--quick``)."""

    repeats: int = 10
    warmup: int = 2
    quick: bool = False  # smaller shapes, for tests and smoke runs; never for reported figures
    seed: int = 0
    device: str = "cpu"
    threads: int | None = None  # torch intra-op threads (None: torch's default)
    # benchmark-specific sizes from the command line (e.g. byo-lm --sequences/--seq-len)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CaseTiming:
    name: str
    times_s: list[float]

    @property
    def median_s(self) -> float:
        return statistics.median(self.times_s)

    def summary(self) -> dict[str, Any]:
        t = sorted(self.times_s)
        q1 = t[len(t) // 4]
        q3 = t[(3 * len(t)) // 4]
        return {
            "median_ms": 1e3 * self.median_s,
            "q1_ms": 1e3 * q1,
            "q3_ms": 1e3 * q3,
            "n": len(t),
        }


@dataclass
class BenchResult:
    """One benchmark's output: per-case timings, ratios to ``reference``, extra figures."""

    name: str
    reference: str
    cases: dict[str, dict[str, Any]]
    ratios: dict[str, float]
    setup: dict[str, Any] = field(default_factory=dict)
    memory: dict[str, Any] = field(default_factory=dict)
    targets: dict[str, Any] = field(default_factory=dict)  # e.g. {"dp-forward": "<= 1.1x"}
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def time_cases(
    cases: dict[str, Callable[[], Any]],
    repeats: int,
    warmup: int,
    sync: Callable[[], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, CaseTiming]:
    """Time each zero-argument ``case`` ``repeats`` times, round-robin across the cases.

    Every case runs ``warmup`` untimed calls first. ``sync`` (e.g. ``torch.cuda.synchronize``)
    runs before each clock read so asynchronous devices are timed correctly. ``clock`` is
    the time source (default wall time; ``time.process_time`` measures this process's CPU
    time, which other load on a shared machine does not inflate).
    """
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup}")
    if not cases:
        raise ValueError("no cases to time")
    for fn in cases.values():
        for _ in range(warmup):
            fn()
    out = {name: CaseTiming(name, []) for name in cases}
    for _ in range(repeats):
        for name, fn in cases.items():
            gc.collect()
            if sync:
                sync()
            t0 = clock()
            fn()
            if sync:
                sync()
            out[name].times_s.append(clock() - t0)
    return out


def ratios_to(timings: dict[str, CaseTiming], reference: str) -> dict[str, float]:
    """Median time of every case over the reference case's median time."""
    if reference not in timings:
        raise ValueError(f"reference case {reference!r} was not timed")
    ref = timings[reference].median_s
    return {name: t.median_s / ref for name, t in timings.items()}
