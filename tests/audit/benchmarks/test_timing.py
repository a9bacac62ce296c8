"""``privacy-audit bench``: side-by-side timing harness and CLI."""

from __future__ import annotations

import json

import pytest

from privacy_audit.audit.benchmarks.timing import CaseTiming, ratios_to, time_cases
from privacy_audit.audit.cli import main


def test_time_cases_interleaves_and_counts_calls():
    order = []
    timings = time_cases({"a": lambda: order.append("a"), "b": lambda: order.append("b")}, 3, 1)
    assert order == ["a", "b"] + ["a", "b"] * 3  # warm-up per case, then round-robin
    assert {k: len(v.times_s) for k, v in timings.items()} == {"a": 3, "b": 3}


def test_ratios_are_median_over_reference_median():
    t = {"ref": CaseTiming("ref", [1.0, 2.0, 9.0]), "x": CaseTiming("x", [3.0, 4.0, 5.0])}
    assert ratios_to(t, "ref") == {"ref": 1.0, "x": 2.0}
    with pytest.raises(ValueError, match="reference case 'nope'"):
        ratios_to(t, "nope")
    with pytest.raises(ValueError, match="repeats"):
        time_cases({"a": lambda: None}, 0, 0)


def test_bench_cli_writes_ratios(tmp_path, capsys):
    out = tmp_path / "bench.json"
    assert (
        main(["bench", "dp-sgd", "--quick", "--repeats", "2", "--warmup", "1", "--out", str(out)])
        == 0
    )
    data = json.loads(out.read_text())
    (res,) = data["benchmarks"]
    assert res["reference"] == "non-private" and res["ratios"]["non-private"] == 1.0
    assert res["ratios"]["dp-sgd"] > 0 and res["cases"]["dp-sgd"]["n"] == 2
    assert "dp-sgd" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["bench", "nope"], "unknown benchmark 'nope'"),
        (["bench", "dp-sgd", "--repeats", "0"], "--repeats must be at least 1"),
        (["bench", "dp-sgd", "--threads", "0"], "--threads must be at least 1"),
    ],
)
def test_bench_cli_bad_input(argv, message, capsys, tmp_path):
    assert main([*argv, "--out", str(tmp_path / "b.json")]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "b.json").exists()


def test_bench_metrics_quick_records_both_ratios(tmp_path):
    out = tmp_path / "bench.json"
    assert main(["bench", "metrics", "--quick", "--repeats", "1", "--out", str(out)]) == 0
    (res,) = json.loads(out.read_text())["benchmarks"]
    assert res["reference"] == "sklearn-auc"
    assert set(res["cases"]) == {
        "sklearn-auc",
        "membership_metrics",
        "sklearn-auc-float32",
        "membership_metrics-float32",
        "one-sort",
        "epsilon-split",
    }
    assert res["ratios"]["membership_metrics-float32"] > 0
    assert 0.0 <= res["setup"]["float32_tied_fraction"] < 0.5
    assert res["ratios"]["membership_metrics"] > 0 and res["ratios"]["epsilon-split / one-sort"] > 0
    assert res["setup"]["n_boot"] == 100 and len(res["setup"]["load_average_before"]) == 3


def test_bench_dp_check_quick_table_and_markdown(tmp_path):
    """bench dp-check --quick --seeds 1: each bug VIOLATED with the check that caught it
    and its true ε against the claim; the correct setups pooled as the null."""
    from privacy_audit.audit.benchmarks.dp_check import markdown

    out = tmp_path / "bench.json"
    assert main(["bench", "dp-check", "--quick", "--seeds", "1", "--out", str(out)]) == 0
    (res,) = json.loads(out.read_text())["benchmarks"]
    rows = {r["setup"]: r for r in res["setup"]["table"]}
    assert set(rows) == {
        "opacus_default",
        "privatize_correct",
        "bug_noise_divided_by_batch",
        "bug_clip_after_aggregation",
        "bug_shuffle_as_poisson",
    }
    for name, r in rows.items():
        if r["kind"] == "bug":
            assert r["violated"] == 1 and r["caught_by"] and r["two_x_line"], name
            assert r["true_epsilon"] >= 2 * r["claimed_epsilon"]
        else:
            assert r["violated"] == 0 and r["consistent"] == 1, name
    assert res["setup"]["null_pooled"]["runs"] == 2
    table = markdown(res)
    assert "bug_clip_after_aggregation" in table and "Pooled over the correct setups" in table


def test_bench_seeds_flag_is_for_dp_check_only(tmp_path, capsys):
    assert main(["bench", "dp-sgd", "--seeds", "3", "--out", str(tmp_path / "b.json")]) == 2
    assert "--seeds applies to the dp-check benchmark only" in capsys.readouterr().err
