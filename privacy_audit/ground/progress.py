"""Progress output that reads well both in a terminal and in a CI log.

In a terminal (stderr is a TTY) :func:`progress_bar` is tqdm's bar. Anywhere else (a CI
log, a file, a pipe) tqdm would print nothing for minutes, so it is a
:class:`LineProgress`: one plain line per epoch (or per ``lines`` equal slices of the
work) with elapsed time and an ETA, no carriage returns or ANSI codes.
"""

from __future__ import annotations

import sys
import time
from typing import Any


def stderr_is_tty() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def fmt_seconds(s: float) -> str:
    s = max(0, int(round(s)))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}:{m:02d}:{sec:02d}" if h else f"{m}:{sec:02d}"


class LineProgress:
    """A tqdm-like counter (``update``, ``set_postfix``, ``close``) that prints one line
    per completed slice: ``desc: epoch 3/10 (30%) elapsed 0:12 ETA 0:28 loss=0.41``."""

    def __init__(self, total: int, desc: str, lines: int | None = None, unit: str = "epoch"):
        self.total = max(int(total), 0)
        self.desc = desc
        self.lines = max(1, min(int(lines or 10), self.total or 1))
        self.unit = unit
        self.n = 0
        self._next = 1
        self._postfix = ""
        self._start = time.perf_counter()

    def update(self, k: int = 1) -> None:
        self.n += k
        while (
            self.total
            and self._next <= self.lines
            and self.n * self.lines >= self._next * self.total
        ):
            self._emit(self._next)
            self._next += 1

    def set_postfix(self, **kw: Any) -> None:
        self._postfix = " ".join(f"{k}={v}" for k, v in kw.items())

    def _emit(self, i: int) -> None:
        elapsed = time.perf_counter() - self._start
        frac = min(self.n / self.total, 1.0)
        eta = elapsed * (1 - frac) / frac if frac > 0 else 0.0
        line = (
            f"{self.desc}: {self.unit} {i}/{self.lines} ({100 * frac:.0f}%) "
            f"elapsed {fmt_seconds(elapsed)} ETA {fmt_seconds(eta)}"
        )
        if self._postfix:
            line += f" {self._postfix}"
        print(line, file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


def progress_bar(total: int, desc: str, enabled: bool, epochs: int | None = None, **tqdm_kw):
    """tqdm in a terminal; :class:`LineProgress` (one line per epoch) elsewhere; a silent
    counter when ``enabled`` is false."""
    if enabled and not stderr_is_tty():
        return LineProgress(total, desc, lines=epochs or 10, unit="epoch" if epochs else "part")
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=None if enabled else True, **tqdm_kw)
