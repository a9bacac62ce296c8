"""Where a run's time went: named stages, timed without overlap.

One :class:`StageTimer` per command (``run``, ``epsilon``). Code anywhere below it marks a
stage with ``with stage("score"):``; a stage opened inside another pauses the outer one,
so every second of the run is counted in at most one stage and the stage times add up to
the time spent inside stages (what is left of the wall time is the glue between them).
The same name used twice (one attack on two runs) adds up. Without an active timer
``stage`` does nothing, so library callers (the pytest plugin, the callbacks) pay nothing.

results.json gets ``timing = {"stages": [{"stage", "seconds", "count"}, ...],
"wall_seconds", "unattributed_seconds"}``; the report shows it in its run-configuration
section and the command prints :func:`one_line`.
"""

from __future__ import annotations

import contextlib
import contextvars
import sys
import time
from collections.abc import Iterator
from typing import Any

_CURRENT: contextvars.ContextVar[StageTimer | None] = contextvars.ContextVar(
    "privacy_audit_stage_timer", default=None
)


def fmt_elapsed(seconds: float) -> str:
    """``"0:42"`` / ``"12:05"`` / ``"1:02:03"`` (whole seconds)."""
    s = max(0, int(round(seconds)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class StageTimer:
    """Non-overlapping stage clock of one command. ``progress`` prints a line on stderr
    as each stage starts, with the time elapsed since the command began (a stage inside
    another indented under it)."""

    def __init__(self, progress: bool = False, clock=time.perf_counter, root: str | None = None):
        self.clock = clock
        self.start = clock()
        self.progress = progress
        self.seconds: dict[str, float] = {}
        self.counts: dict[str, int] = {}
        self._stack: list[list[Any]] = []  # [name, started] of the open stages
        self.end: float | None = None
        # ``root``: a stage open from the start, holding what no other stage does (imports,
        # the glue between stages), so its share says how well the stages cover the run
        self._depth0 = 0
        if root is not None:
            self.counts[root] = 1
            self.seconds[root] = 0.0
            self._stack.append([root, self.start])
            self._depth0 = 1

    def _add(self, name: str, dt: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + max(dt, 0.0)

    @contextlib.contextmanager
    def stage(self, name: str, note: str = "") -> Iterator[None]:
        now = self.clock()
        if self.progress:  # a stage inside another is indented under it
            depth = len(self._stack) - self._depth0
            line = f"[{fmt_elapsed(now - self.start)}] {'  ' * depth}stage: {name}"
            print(line + (f" ({note})" if note else ""), file=sys.stderr, flush=True)
        if self._stack:  # pause the enclosing stage
            outer = self._stack[-1]
            self._add(outer[0], now - outer[1])
        self.counts[name] = self.counts.get(name, 0) + 1
        self.seconds.setdefault(name, 0.0)
        self._stack.append([name, now])
        try:
            yield
        finally:
            now = self.clock()
            name_, started = self._stack.pop()
            self._add(name_, now - started)
            if self._stack:  # resume the enclosing stage
                self._stack[-1][1] = now

    def stop(self) -> None:
        self.end = self.clock()

    def record(self) -> dict[str, Any]:
        """The ``timing`` entry of results.json (wall time up to now or :meth:`stop`)."""
        end = self.end if self.end is not None else self.clock()
        wall = end - self.start
        seconds = dict(self.seconds)
        if self._stack:  # the running stage, up to the end
            name, started = self._stack[-1]
            seconds[name] = seconds.get(name, 0.0) + max(end - started, 0.0)
        total = sum(seconds.values())
        return {
            "stages": [
                {"stage": k, "seconds": round(v, 3), "count": self.counts.get(k, 1)}
                for k, v in seconds.items()
            ],
            "wall_seconds": round(wall, 3),
            "unattributed_seconds": round(max(wall - total, 0.0), 3),
            "note": "seconds per stage, without overlap (a stage inside another is not "
            "counted twice); wall_seconds runs from the start of the command to the "
            "rendering of the report",
        }


@contextlib.contextmanager
def active(timer: StageTimer) -> Iterator[StageTimer]:
    """Make ``timer`` the one :func:`stage` records into, for the block."""
    token = _CURRENT.set(timer)
    try:
        yield timer
    finally:
        _CURRENT.reset(token)


def current() -> StageTimer | None:
    return _CURRENT.get()


@contextlib.contextmanager
def stage(name: str, note: str = "") -> Iterator[None]:
    """Time the block as stage ``name`` of the active timer (nothing without one)."""
    timer = _CURRENT.get()
    if timer is None:
        yield
        return
    with timer.stage(name, note):
        yield


class Phases:
    """Consecutive stages of one function: ``go("load")`` ... ``go("score")`` closes the
    stage before and opens the next; ``done()`` (or leaving the ``with`` block) closes the
    last one."""

    def __init__(self) -> None:
        self._open: contextlib.ExitStack | None = None

    def go(self, name: str, note: str = "") -> None:
        self.done()
        self._open = contextlib.ExitStack()
        self._open.enter_context(stage(name, note))

    def done(self) -> None:
        if self._open is not None:
            self._open.close()
            self._open = None

    def __enter__(self) -> Phases:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.done()


def one_line(timing: dict[str, Any] | None) -> str:
    """``time: load 2.1 s · score 30.2 s · ... · total 41.9 s`` ("" without timing)."""
    if not isinstance(timing, dict) or not isinstance(timing.get("stages"), list):
        return ""
    parts = []
    for s in timing["stages"]:
        if not isinstance(s, dict):
            continue
        sec = s.get("seconds")
        if isinstance(sec, int | float):
            parts.append(f"{s.get('stage')} {sec:.1f} s")
    wall = timing.get("wall_seconds")
    if isinstance(wall, int | float):
        parts.append(f"total {wall:.1f} s ({fmt_elapsed(wall)})")
    return "time: " + " · ".join(parts)


__all__ = ["Phases", "StageTimer", "active", "current", "fmt_elapsed", "one_line", "stage"]
