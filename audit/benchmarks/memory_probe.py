"""The child process of the memory-budget search (:mod:`memory_budget`): builds one
method's model with the cost-of-privacy bench's own cases, resets the peak-RSS mark, runs
one full step and prints its peak RSS as JSON.

    python -m privacy_audit.audit.benchmarks.memory_probe '{"method": "phantom", "batch": 8, ...}'

It lives apart from :mod:`memory_budget` because it needs :mod:`cost_of_privacy`'s cases,
and :mod:`cost_of_privacy` runs the search: one module holding both would make an import
cycle.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from typing import Any

from privacy_audit.audit.benchmarks.memory_budget import ABORT_RC, rss_kib


def _watchdog(budget_kib: float, stop: threading.Event, setup_peak_kib: int) -> None:
    while not stop.wait(0.005):
        rss = rss_kib("VmRSS")
        if rss is not None and rss > budget_kib:
            out = {
                "fits": False,
                "peak_mib": rss / 1024,
                "process_peak_mib": max(setup_peak_kib, rss) / 1024,
                "note": "stopped early: RSS > budget",
            }
            print(json.dumps(out), flush=True)
            os._exit(ABORT_RC)


def _child(spec: dict[str, Any]) -> int:
    import ctypes
    import gc
    import warnings

    import torch

    torch.set_num_threads(1)
    try:  # big tensors on mmap so that freed memory leaves the process (as the bench does)
        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 1 << 16)
    except OSError:
        libc = None
    from privacy_audit.audit.benchmarks.cost_of_privacy import privacy_cost_cases

    method = spec["method"]
    include = () if method == "non-private" else (method,)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        steps, _ = privacy_cost_cases(
            spec["vocab"],
            spec["batch"],
            spec["seq_len"],
            spec["seed"],
            None,
            spec["dims"],
            include,
            reference=method == "non-private",
        )
        gc.collect()
        if libc is not None:
            libc.malloc_trim(0)
        setup_peak = rss_kib("VmHWM") or 0
        with open("/proc/self/clear_refs", "w") as fh:  # peak mark := current RSS
            fh.write("5")
        stop = threading.Event()
        budget_kib = spec["budget_mib"] * 1024
        threading.Thread(target=_watchdog, args=(budget_kib, stop, setup_peak), daemon=True).start()
        per_step = []  # "steps" > 1 (a manual check): later steps reach the first one's peak
        for _ in range(int(spec.get("steps", 1))):
            steps[method]()
            per_step.append(rss_kib("VmHWM") / 1024)
    stop.set()
    peak = rss_kib("VmHWM")
    out = {
        "fits": peak <= budget_kib,
        "peak_mib": peak / 1024,
        "process_peak_mib": max(setup_peak, peak) / 1024,
    }
    if len(per_step) > 1:
        out["cumulative_peak_mib_after_each_step"] = per_step
    print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_child(json.loads(sys.argv[1])))
