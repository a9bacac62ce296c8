"""``privacy-audit bench scale`` (issue 38 item 8): exponents, option checks, a quick run."""

from __future__ import annotations

import json
import math

import pytest

from privacy_audit.audit.benchmarks import scale
from privacy_audit.audit.cli import main
from privacy_audit.audit.scale import malloc


def _case(n, tokens, suite, plain, **stages):
    return {
        "n_per_side": n,
        "tokens": tokens,
        "suite": {"cpu_s": suite, "stages": stages},
        "plain": {"cpu_s": plain},
    }


def test_growth_exponents_are_the_slopes_on_log_log_axes():
    # score ~ n^1, split check ~ n^1.5, setup constant, a tiny stage not fitted
    cases = [
        _case(1000, 256, 30.0, 20.0, score=10.0, split=2.0, setup=5.0, tiny=0.01),
        _case(10000, 256, 300.0, 200.0, score=100.0, split=2.0 * 10**1.5, setup=5.0, tiny=0.1),
        _case(100, 256, 3.0, 2.0, score=1.0, split=2.0 / 10**1.5, setup=5.0, tiny=0.0),
    ]
    (a, b) = scale.exponents(cases)
    assert (a["from_n"], a["to_n"], b["from_n"], b["to_n"]) == (100, 1000, 1000, 10000)
    st = b["stages"]
    assert math.isclose(st["score"], 1.0) and math.isclose(st["split"], 1.5)
    assert math.isclose(st["setup"], 0.0, abs_tol=1e-12) and st["tiny"] is None
    assert b["fastest_stage"][0] == "split" and math.isclose(b["suite"], 1.0)
    assert a["stages"]["split"] is None  # under MIN_FIT_SECONDS at n = 100
    # against an independent fit: numpy's least-squares slope through the two points
    import numpy as np

    slope = np.polyfit(np.log([1000, 10000]), np.log([2.0, 2.0 * 10**1.5]), 1)[0]
    assert math.isclose(st["split"], slope, rel_tol=1e-9)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--scale-sizes", "100,x"], "--scale-sizes must be integers"),
        (["--scale-sizes", "1"], "--scale-sizes must be integers in [2,"),
        (["--scale-tokens", "1024"], "--scale-tokens must be integers in [8, 512]"),
        (["--scale-model", "huge"], "--scale-model"),
    ],
)
def test_bad_scale_options_are_one_line_exit_2(argv, message, tmp_path, capsys):
    out = tmp_path / "b.json"
    assert main(["bench", "scale", *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and not out.exists()
    assert main(["bench", "metrics", "--scale-tokens", "64", "--out", str(out)]) == 2
    assert "applies to the scale benchmark only" in capsys.readouterr().err


def test_quick_scale_run_writes_cases_ratios_and_rss(tmp_path, capsys, monkeypatch):
    # each case in this process (the command runs each in a fresh one, for its peak RSS)
    import torch

    monkeypatch.setattr(scale, "run_case", scale.case_from_spec)
    out = tmp_path / "scale.json"
    argv = ["bench", "scale", "--quick", "--scale-sizes", "3", "--scale-tokens", "16"]
    threads = torch.get_num_threads()
    try:
        assert main([*argv, "--scale-workdir", str(tmp_path / "w"), "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)  # a case runs on one thread
    (res,) = json.loads(out.read_text())["benchmarks"]
    cases = res["setup"]["cases"]
    assert [(c["n_per_side"], c["tokens"]) for c in cases] == [(3, 16)]
    for c in cases:
        assert c["suite"]["texts_scored"] == 2 * c["n_per_side"]
        assert c["ratio"] == pytest.approx(c["suite"]["cpu_s"] / c["plain"]["cpu_s"])
        assert {"load", "score", "split check", "report"} <= set(c["suite"]["stages"])
        assert c["peak_rss_mb"]["end"] >= c["peak_rss_mb"]["after_warmup"] > 0
        # both arms ran under the malloc setting the scorer uses, and the JSON names it
        assert c["allocator"] == malloc.applied() == malloc.SETTING
    assert res["setup"]["allocator"] == [malloc.SETTING]
    assert any("same malloc setting" in note for note in res["notes"])
    assert res["setup"]["exponents"] == []  # one size: nothing to fit
    assert (tmp_path / "w" / "scale-progress.json").is_file()
    # the case's heartbeat file: what a case stopped before its end would leave
    part = json.loads((tmp_path / "w" / "n3-t16" / "partial.json").read_text())
    assert part["step"] == "plain half 2" and part["plain_half_1"]["forward_s"] > 0
    assert part["suite"]["stages"] == cases[0]["suite"]["stages"]
    assert "n=3/side x 16 tokens: suite" in capsys.readouterr().err


def test_a_running_suites_stages_are_read_with_the_open_stage():
    from privacy_audit.audit.timing import StageTimer

    clock = iter([0.0, 1.0, 3.0, 3.5, 4.0, 6.0]).__next__
    t = StageTimer(clock=clock, root="setup")  # starts at 0
    with t.stage("load"):  # opens at 1 (setup 1 s), closes at 3
        pass
    cm = t.stage("score")
    cm.__enter__()  # opens at 3.5 (setup 1.5 s)
    snap = scale.timer_snapshot(t)  # read at 4.0: score has run 0.5 s
    assert snap == {"setup": 1.5, "load": 2.0, "score": 0.5}
    assert scale.MODELS["tiny"]["n_layer"] == 1 and scale.MODELS["tiny"]["vocab"] == 4096
