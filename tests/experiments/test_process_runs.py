"""``python -m experiments.process_runs``: a bench command repeated in separate processes
for the claims table's timing rule (issue 27)."""

from __future__ import annotations

import json

from experiments.process_runs import main

BENCH = ["--", "privacy-audit", "bench", "dp-forward", "--threads", "1"]


def test_bad_input_exits_2_before_running_anything(tmp_path, capsys):
    out = str(tmp_path / "r.json")
    assert main(["--runs", "0", "--out", out, *BENCH]) == 2
    assert main(["--out", out, "--", "privacy-audit", "run", "lm"]) == 2  # not a bench
    assert main(["--out", out, *BENCH, "--out", "x.json"]) == 2  # --out is ours
    assert main(["--out", str(tmp_path / "missing" / "r.json"), *BENCH]) == 2
    assert not (tmp_path / "r.json").exists() and not (tmp_path / "r.json.runs").exists()
    assert "error:" in capsys.readouterr().err


def test_finished_runs_are_kept_and_collected_in_order(tmp_path):
    out = tmp_path / "r.json"
    runs = tmp_path / "r.json.runs"
    runs.mkdir()
    for i in range(3):  # as left by an interrupted series: nothing is re-run
        (runs / f"run{i}.json").write_text(json.dumps({"benchmarks": [], "i": i}))
    assert main(["--runs", "3", "--out", str(out), *BENCH]) == 0
    doc = json.loads(out.read_text())
    assert [r["i"] for r in doc["process_runs"]] == [0, 1, 2]
    assert doc["command"].endswith("-- privacy-audit bench dp-forward --threads 1")
