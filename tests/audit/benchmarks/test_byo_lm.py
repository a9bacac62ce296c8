"""``privacy-audit bench byo-lm --lm-reference --rounds R``: R passes over the texts, the
cases side by side in each, and each round's ratio reported beside the totals (the spread
a loaded machine puts on one figure)."""

from __future__ import annotations

import json

import pytest


def test_rounds_report_each_rounds_ratio(tmp_path, cli):
    out = tmp_path / "bench.json"
    outcome = cli(
        [
            "bench",
            "byo-lm",
            "--quick",
            "--threads",
            "1",
            "--lm-reference",
            "--sequences",
            "4",
            "--rounds",
            "3",
            "--out",
            str(out),
        ]
    )
    assert outcome.code == 0, outcome.stderr[-2000:]
    res = json.loads(out.read_text())["benchmarks"][0]
    setup = res["setup"]
    assert setup["rounds"] == 3 and setup["tokens"] == 3 * 4 * 32
    for key, (num, den) in (
        ("reference_round_ratios", ("suite+reference", "plain x2")),
        ("suite_round_ratios", ("suite", "plain")),
    ):
        rr = setup[key]
        assert rr["rounds"] == len(rr["values"]) == 3
        assert rr["min"] <= rr["median"] <= rr["max"]
        assert rr["median"] == pytest.approx(sorted(rr["values"])[1])
        # 4 texts = one chunk (4 batches of 4 at --quick): one timing per case per round
        assert res["cases"][num]["n"] == res["cases"][den]["n"] == 3
    # the rounds' totals are the case totals
    total = setup["seconds"]
    assert total["suite+reference"] / total["plain x2"] == pytest.approx(
        setup["reference_time_over_plain_x2"]
    )


def test_rounds_are_validated(tmp_path, cli):
    out = tmp_path / "bench.json"
    bad = cli(["bench", "byo-lm", "--quick", "--rounds", "0", "--out", str(out)])
    assert bad.code == 2 and "--rounds is too small" in bad.stderr
    other = cli(["bench", "split-check", "--quick", "--rounds", "2", "--out", str(out)])
    assert other.code == 2 and "--rounds applies to the byo-lm benchmark only" in other.stderr
    assert not out.exists()


def test_reference_only_times_the_two_reference_cases(tmp_path, cli):
    out = tmp_path / "bench.json"
    outcome = cli(
        [
            "bench",
            "byo-lm",
            "--quick",
            "--threads",
            "1",
            "--lm-reference-only",
            "--sequences",
            "4",
            "--rounds",
            "2",
            "--out",
            str(out),
        ]
    )
    assert outcome.code == 0, outcome.stderr[-2000:]
    res = json.loads(out.read_text())["benchmarks"][0]
    assert set(res["cases"]) == {"plain x2", "suite+reference"}
    assert res["reference"] == "plain x2" and res["ratios"]["plain x2"] == 1.0
    setup = res["setup"]
    assert res["ratios"]["suite+reference"] == pytest.approx(setup["reference_time_over_plain_x2"])
    assert setup["reference_round_ratios"]["rounds"] == 2
    assert "suite_round_ratios" not in setup
    bad = cli(["bench", "split-check", "--quick", "--lm-reference-only", "--out", str(out)])
    assert bad.code == 2 and "byo-lm benchmark only" in bad.stderr
