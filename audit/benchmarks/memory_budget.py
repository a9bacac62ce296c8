"""Largest batch whose training step fits in a memory budget, per method.

Ding et al. (ICML 2024) compare Phantom and Ghost Clipping by the largest batch size whose
training fits in one V100's 16 GB. The CPU analogue here: a probe builds one method's model
and optimizer at batch size B in a fresh Python process, resets the process's peak-RSS
mark (``/proc/self/clear_refs``), runs one full training step (forward, per-sample
clipping, noise, optimizer step) and reads the peak resident set size (VmHWM) of that step;
the step "fits" when the peak is within the budget. The peak is the whole process's
resident memory during the step (imports, parameters, gradients, activations), as a GPU's
memory holds the framework's context and the parameters too; transient memory of building
the model on the host before the step (converting or untying weights) is left out, as it
would not sit on a GPU. The process peak including that construction is recorded beside it.

Why peak RSS and not ``resource.RLIMIT_AS``: torch reserves far more virtual address space
than it touches (thread pools, allocator arenas, mapped libraries), so an address-space cap
fails at an RSS that depends on the build, and an allocation refused inside C++ can abort
the process instead of raising MemoryError. VmHWM is the memory the step really used. A
watchdog thread in the probe ends it as soon as its RSS passes the budget during the step
(an observed RSS above the budget is a certain "does not fit"), so failing probes stay
cheap.

The search (:func:`largest_fitting_batch`) doubles B from a start until a probe fails, then
bisects between the largest fit and the smallest failure; it assumes peak memory is
non-decreasing in B (one step's activations grow with B) and records every probe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

METHODS = ("non-private", "phantom", "ghost")
METRIC = (
    "peak RSS (VmHWM, reset after the model is built) of a fresh process during one full "
    "training step at batch B: imports, parameters, gradients and activations resident; "
    "1 thread"
)
ABORT_RC = 3  # the probe's exit status when its watchdog saw RSS above the budget


@dataclass(frozen=True)
class Probe:
    """One probe: did the step at ``batch`` fit, and the peak it reached (MiB)."""

    batch: int
    fits: bool
    peak_mib: float | None
    note: str = ""


@dataclass
class BatchSearch:
    """Result of :func:`largest_fitting_batch`.

    ``largest_fit`` is the largest batch seen to fit (None: not even ``start`` down to 1);
    ``smallest_fail`` the smallest seen not to (None: ``max_batch`` fits, ``capped``).
    The true largest batch lies in ``[largest_fit, smallest_fail - 1]``.
    """

    budget_mib: float
    largest_fit: int | None
    smallest_fail: int | None
    capped: bool
    probes: list[Probe] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["upper_bound"] = None if self.smallest_fail is None else self.smallest_fail - 1
        return d


def largest_fitting_batch(
    probe: Callable[[int], Probe],
    budget_mib: float,
    start: int = 1,
    max_batch: int = 1024,
    rel_tol: float = 0.0,
    progress: Callable[[str], None] | None = None,
) -> BatchSearch:
    """Largest B in ``[1, max_batch]`` with ``probe(B).fits``: doubling from ``start``
    (halving if ``start`` fails), then binary search until the bracket
    ``[largest_fit, smallest_fail)`` is at most ``max(1, rel_tol * largest_fit)`` wide
    (``rel_tol = 0``: the exact answer)."""
    if budget_mib <= 0:
        raise ValueError(f"budget must be positive, got {budget_mib}")
    if not 1 <= start <= max_batch:
        raise ValueError(f"need 1 <= start <= max_batch, got start={start}, max={max_batch}")
    if rel_tol < 0:
        raise ValueError(f"rel_tol must be >= 0, got {rel_tol}")
    probes: list[Probe] = []
    seen: dict[int, bool] = {}

    def fits(b: int) -> bool:
        if b not in seen:
            p = probe(b)
            probes.append(p)
            seen[b] = bool(p.fits)
            if progress:
                peak = "n/a" if p.peak_mib is None else f"{p.peak_mib:.0f} MiB"
                progress(f"B={b}: {'fits' if p.fits else 'does not fit'} (peak {peak}) {p.note}")
        return seen[b]

    lo: int | None = None  # largest fit
    hi: int | None = None  # smallest failure
    b = start
    if fits(b):
        lo = b
        while lo < max_batch:
            b = min(2 * lo, max_batch)
            if fits(b):
                lo = b
            else:
                hi = b
                break
    else:
        hi = b
        while hi > 1:
            b = hi // 2
            if fits(b):
                lo = b
                break
            hi = b
    if lo is not None and hi is not None:
        while hi - lo > max(1, int(rel_tol * lo)):
            mid = (lo + hi) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid
    return BatchSearch(budget_mib, lo, hi, capped=hi is None and lo == max_batch, probes=probes)


def ratio_interval(a: BatchSearch, b: BatchSearch) -> tuple[float, float, float] | None:
    """Largest-batch ratio a/b: ``(point, low, high)`` from the two brackets (point: the
    largest fits; low/high: the extremes the brackets allow). None when either search found
    no fitting batch; an open (capped) upper end gives ``inf``."""
    if not a.largest_fit or not b.largest_fit:
        return None
    a_hi = float("inf") if a.smallest_fail is None else a.smallest_fail - 1
    b_hi = float("inf") if b.smallest_fail is None else b.smallest_fail - 1
    point = a.largest_fit / b.largest_fit
    return point, a.largest_fit / b_hi, a_hi / b.largest_fit


# --------------------------------------------------------------------------------------
# the probe: one step in a fresh process
# --------------------------------------------------------------------------------------


def rss_kib(field_name: str) -> int | None:
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(field_name + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def subprocess_probe(
    method: str,
    vocab: int,
    seq_len: int,
    dims: dict[str, int],
    budget_mib: float,
    seed: int = 0,
    timeout_s: float = 900.0,
) -> Callable[[int], Probe]:
    """A probe for :func:`largest_fitting_batch` that runs ``method``'s step at batch B in a
    fresh ``python -m privacy_audit.audit.benchmarks.memory_probe`` process (1 thread)."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; allowed: {', '.join(METHODS)}")
    if rss_kib("VmHWM") is None:
        raise RuntimeError("the memory-budget search needs Linux /proc (VmHWM)")

    def probe(batch: int) -> Probe:
        cmd = [
            sys.executable,
            "-m",
            "privacy_audit.audit.benchmarks.memory_probe",
            json.dumps(
                {
                    "method": method,
                    "batch": batch,
                    "vocab": vocab,
                    "seq_len": seq_len,
                    "dims": dims,
                    "budget_mib": budget_mib,
                    "seed": seed,
                }
            ),
        ]
        env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        try:
            res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"{method} probe at B={batch} ran over {timeout_s:.0f} s") from None
        lines = [ln for ln in res.stdout.splitlines() if ln.startswith("{")]
        if res.returncode in (0, ABORT_RC) and lines:
            out = json.loads(lines[-1])
            note = out.get("note", "")
            if out.get("process_peak_mib") is not None:
                note = (note + " " if note else "") + (
                    f"(process peak incl. model build {out['process_peak_mib']:.0f} MiB)"
                )
            return Probe(batch, bool(out["fits"]), out.get("peak_mib"), note)
        if res.returncode in (-9, 137):  # killed by the kernel's OOM killer: far over budget
            return Probe(batch, False, None, "killed (out of memory)")
        tail = (res.stderr or res.stdout).strip().splitlines()[-3:]
        raise RuntimeError(
            f"{method} probe at B={batch} failed (exit {res.returncode}): {' | '.join(tail)}"
        )

    return probe
