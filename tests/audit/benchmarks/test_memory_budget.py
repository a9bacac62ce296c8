"""Largest batch whose step fits a memory budget (issue 27: the paper's memory metric for
Phantom vs Ghost Clipping, audit/benchmarks/memory_budget.py)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from privacy_audit.audit.benchmarks.cost_of_privacy import largest_batch_in_budget
from privacy_audit.audit.benchmarks.memory_budget import (
    Probe,
    largest_fitting_batch,
    ratio_interval,
    subprocess_probe,
)
from privacy_audit.audit.cli import main


def linear(base: float, slope: float, calls: list | None = None):
    """A fake probe whose peak memory is ``base + slope * B`` MiB."""

    def probe_factory(budget: float):
        def probe(b: int) -> Probe:
            if calls is not None:
                calls.append(b)
            peak = base + slope * b
            return Probe(b, peak <= budget, peak)

        return probe

    return probe_factory


@pytest.mark.parametrize("start", [1, 8, 37, 64, 500])
@pytest.mark.parametrize("base,slope,budget", [(400, 30, 2048), (1100, 7.5, 4096), (10, 1, 11)])
def test_bisection_returns_the_known_largest_batch(start, base, slope, budget):
    calls: list[int] = []
    known = math.floor((budget - base) / slope)  # closed form of base + slope * B <= budget
    res = largest_fitting_batch(
        linear(base, slope, calls)(budget), budget, start=start, max_batch=1024
    )
    assert res.largest_fit == known and res.smallest_fail == known + 1
    assert not res.capped
    assert len(calls) == len(set(calls)) <= 2 * math.ceil(math.log2(1024)) + 2  # no re-probe


def test_tolerance_brackets_the_answer_with_fewer_probes():
    exact_calls, loose_calls = [], []
    budget, known = 2048, math.floor((2048 - 400) / 3)  # 549
    exact = largest_fitting_batch(linear(400, 3, exact_calls)(budget), budget, 8, 4096)
    loose = largest_fitting_batch(linear(400, 3, loose_calls)(budget), budget, 8, 4096, 1 / 8)
    assert exact.largest_fit == known
    assert loose.largest_fit <= known < loose.smallest_fail  # the true answer is bracketed
    assert loose.smallest_fail - loose.largest_fit <= max(1, loose.largest_fit // 8)
    assert len(loose_calls) < len(exact_calls)


def test_cap_and_nothing_fits_are_reported():
    capped = largest_fitting_batch(linear(0, 1)(1e9), 1e9, start=3, max_batch=40)
    assert capped.capped and capped.largest_fit == 40 and capped.smallest_fail is None
    none = largest_fitting_batch(linear(5000, 1)(2048), 2048, start=16)
    assert none.largest_fit is None and none.smallest_fail == 1
    with pytest.raises(ValueError):
        largest_fitting_batch(linear(0, 1)(10), 10, start=0)


def test_ratio_interval_spans_what_both_brackets_allow():
    a = largest_fitting_batch(linear(0, 1)(30), 30, 8, 1024, 1 / 4)  # [28?, ...]
    b = largest_fitting_batch(linear(0, 1)(10), 10, 8, 1024)  # exactly 10
    v, lo, hi = ratio_interval(a, b)
    assert v == a.largest_fit / 10
    assert lo == a.largest_fit / 10 and hi == (a.smallest_fail - 1) / 10
    assert lo <= 3.0 <= hi  # the true ratio 30 / 10
    nothing = largest_fitting_batch(linear(50, 1)(10), 10, 1)
    assert ratio_interval(a, nothing) is None


def _search_2gib(curves):
    """The bench's search in 2 GiB on GPT-2's shape, every method probed by a known linear
    memory curve (base MiB, MiB per sample)."""
    return largest_batch_in_budget(
        2.0,
        50257,
        32,
        {"n_embd": 768},
        rel_tol=0.0,
        probe_factory=lambda m, budget: linear(*curves[m])(budget),
    )


def test_bench_search_records_every_method_and_the_phantom_over_ghost_ratio():
    curves = {"non-private": (400, 10), "phantom": (420, 10), "ghost": (700, 20)}
    out = _search_2gib(curves)
    known = {m: math.floor((2048 - b) / s) for m, (b, s) in curves.items()}
    assert {m: r["largest_fit"] for m, r in out["methods"].items()} == known
    ratio = out["phantom_over_ghost_largest_batch"]
    assert ratio["value"] == ratio["low"] == ratio["high"] == known["phantom"] / known["ghost"]
    assert out["budget_mib"] == 2048 and "peak RSS" in out["metric"]


def test_probe_child_reports_its_own_peak_rss_and_the_probe_stops_early_over_budget():
    dims = {"n_embd": 32, "n_layer": 1, "n_head": 2}
    spec = {"method": "phantom", "batch": 2, "vocab": 256, "seq_len": 8, "dims": dims}
    spec |= {"budget_mib": 64 * 1024, "seed": 0}
    # The parent's independent reading of the probe's peak is wait4's ru_maxrss. It is read
    # by a small intermediate interpreter: a child spawned straight from this (large) pytest
    # process inherits the pytest process's high-water mark at exec, which says nothing
    # about the probe.
    probe = [sys.executable, "-m", "privacy_audit.audit.benchmarks.memory_probe", json.dumps(spec)]
    reader = (
        "import json, os, subprocess, sys\n"
        "p = subprocess.Popen(json.loads(sys.argv[1]), stdout=subprocess.PIPE)\n"
        "_, status, usage = os.wait4(p.pid, 0)\n"
        "print(json.dumps({'code': os.waitstatus_to_exitcode(status), "
        "'maxrss_kib': usage.ru_maxrss, 'out': p.stdout.read().decode()}))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", reader, json.dumps(probe)],
        capture_output=True,
        text=True,
        env=dict(os.environ, OMP_NUM_THREADS="1"),
        check=True,
    )
    res = json.loads(done.stdout.strip().splitlines()[-1])
    out = json.loads(res["out"].strip().splitlines()[-1])
    assert res["code"] == 0 and out["fits"]
    assert out["peak_mib"] == pytest.approx(res["maxrss_kib"] / 1024, rel=0.02)
    # a budget below torch's own import: the step cannot fit (the watchdog may stop it early)
    small = subprocess_probe("phantom", 256, 8, dims, budget_mib=40)(2)
    assert not small.fits and small.peak_mib > 40 and "process peak" in small.note


@pytest.mark.parametrize(
    "argv,message",
    [
        (["bench", "dp-sgd", "--memory-budget-gb", "2"], "cost-of-privacy benchmark only"),
        (["bench", "cost-of-privacy", "--cost-cases", "ghost"], "must name phantom"),
        (["bench", "cost-of-privacy", "--cost-cases", "phantom,fast"], "must name phantom"),
        (["bench", "cost-of-privacy", "--memory-budget-gb", "-1"], "positive size"),
        (["bench", "cost-of-privacy", "--memory-max-batch", "8"], "needs --memory-budget-gb"),
    ],
)
def test_bench_cost_options_bad_input_exit_2_before_running(argv, message, tmp_path, capsys):
    out = tmp_path / "b.json"
    assert main([*argv, "--out", str(out)]) == 2
    assert message in capsys.readouterr().err and not out.exists()


def test_report_table_carries_the_budget_search_as_one_line(tmp_path):
    from privacy_audit.audit.cost_of_privacy_table import cost_table_from_bench_json

    curves = {"non-private": (400, 10), "phantom": (420, 30), "ghost": (700, 60)}
    found = _search_2gib(curves)
    bench = {"name": "cost-of-privacy", "setup": {"cost_of_privacy_table": [], "threads": 1}}
    bench["setup"]["largest_batch_in_budget"] = found
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"benchmarks": [bench]}))
    setup = cost_table_from_bench_json(path)["setup"]
    assert setup["threads"] == 1
    line = setup["largest_batch_in_budget"]
    assert isinstance(line, str) and "phantom: B = 54," in line and "ghost: B = 22;" in line
    assert "phantom/ghost 2.45x" in line
