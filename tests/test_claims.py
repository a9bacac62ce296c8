"""The paper-claims table (``privacy-audit claims``, reports/claims.py)."""

from __future__ import annotations

import importlib.util
import json
import shlex
from pathlib import Path

import pytest

from audit.integrations.cli import build_parser, main
from reports.claims import (
    CLAIMS,
    NOT_MEASURED,
    NOT_TESTABLE,
    REPRODUCED,
    VERDICTS,
    build_claims,
    default_docs,
    follow,
    to_markdown,
)

PAPERS = ("DP-Forward", "DP attention", "Split-N-Denoise", "DP-BloGS", "Ding et al.")


def _command_exists(cmd: str) -> bool:
    argv = shlex.split(cmd)
    if argv[:1] == ["privacy-audit"]:
        build_parser().parse_args(argv[1:])  # SystemExit(2) on an unknown subcommand/flag
        return True
    if argv[:2] == ["python", "-m"]:
        return importlib.util.find_spec(argv[2]) is not None
    return False


def test_one_row_per_claim_of_every_paper_with_a_command_that_parses():
    rows = build_claims()
    assert len(rows) == len(CLAIMS)
    for paper in PAPERS:
        assert any(r["paper"].startswith(paper) for r in rows), paper
    for r in rows:
        assert r["verdict"] in VERDICTS and r["paper_value"]
        measured = r["ours"] is not None
        # commands of rows not yet measured may name a benchmark another branch adds
        if measured or r["verdict"] == NOT_TESTABLE or r["command"].startswith("privacy-audit"):
            assert _command_exists(r["command"]), r["command"]


def test_every_measured_row_carries_the_number_of_its_recorded_file():
    docs = default_docs()
    rows = build_claims()
    checked = 0
    for r in rows:
        if r["source"] is None or not (docs.parent / r["source"]).is_file():
            assert r["verdict"] in (NOT_MEASURED, NOT_TESTABLE)
            continue
        if r["ours"] is None:
            assert r["verdict"] in (NOT_MEASURED, NOT_TESTABLE)
            continue
        doc = json.loads((docs.parent / r["source"]).read_text(encoding="utf-8"))
        assert follow(doc, r["pointer"]) == pytest.approx(r["ours"], rel=0, abs=0)
        checked += 1
    assert checked >= 1  # the DP-Forward bench figures are recorded on main


def test_missing_or_incomplete_files_are_not_yet_measured_never_reproduced(tmp_path):
    rows = build_claims(tmp_path)
    assert all(r["verdict"] in (NOT_MEASURED, NOT_TESTABLE) for r in rows)
    (tmp_path / "snd-auc.json").write_text(json.dumps({"rows": {}}))
    (tmp_path / "bench-dp-forward.json").write_text("{not json")
    rows = build_claims(tmp_path)
    assert not any(r["verdict"] == REPRODUCED for r in rows)
    assert any("snd-auc.json" in r["detail"] for r in rows if r["verdict"] == NOT_MEASURED)


def test_verdicts_follow_the_recorded_interval(tmp_path):
    def matched(diff_lo, diff_hi):
        cell = {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n_seeds": 3}
        return {
            "setup": {"n_train": 10, "n_test": 10, "preset": "tiny"},
            "rows": {
                "dp-forward pooled @ central eps 8": {
                    "accuracy": cell,
                    "minus_dp_sgd": {
                        "mean": (diff_lo + diff_hi) / 2,
                        "ci_low": diff_lo,
                        "ci_high": diff_hi,
                        "n_seeds": 3,
                    },
                },
                "dp-sgd @ central eps 8": {"accuracy": cell},
            },
        }

    row = next(i for i, c in enumerate(CLAIMS) if "ε ≈ 8 (Output" in c.claim)
    for (lo, hi), verdict in (
        ((0.01, 0.05), "reproduced"),
        ((-0.05, -0.01), "refuted"),
        ((-0.01, 0.02), "inconclusive"),
    ):
        (tmp_path / "dp-forward-matched-eps.json").write_text(json.dumps(matched(lo, hi)))
        assert build_claims(tmp_path)[row]["verdict"] == verdict


def test_claims_command_prints_every_row_and_writes_markdown(tmp_path, capsys):
    md = tmp_path / "claims.md"
    assert main(["claims", "--markdown", str(md), "--json", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    for c in CLAIMS:
        assert c.claim in out
    text = md.read_text()
    assert text.count("\n| ") == len(CLAIMS) + 1  # header + one line per claim
    assert len(json.loads((tmp_path / "c.json").read_text())["claims"]) == len(CLAIMS)
    assert main(["claims", "--docs", str(tmp_path / "nope")]) == 2


def test_docs_claims_md_is_generated_from_the_same_rows():
    text = (Path(default_docs()) / "claims.md").read_text(encoding="utf-8")
    assert "privacy-audit claims --markdown docs/claims.md" in text
    for c in CLAIMS:
        assert c.claim.replace("|", "\\|") in text
    assert to_markdown(build_claims()).splitlines()[0] == text.splitlines()[0]


def test_an_experiment_run_feeds_its_claim_row_and_resumes(tmp_path, capsys):
    out = tmp_path / "dp-blogs-audit.json"
    argv = ["experiment", "dp-blogs-audit", "--quick", "--seeds", "1", "--out", str(out)]
    ck = ["--checkpoint-dir", str(tmp_path / "ck")]
    assert main(argv + ck) == 0
    first = json.loads(out.read_text())
    assert first["cells_reused_from_checkpoint"] == 0
    assert main(argv + ck) == 0  # resumes: every cell from the checkpoint
    again = json.loads(out.read_text())
    assert again["cells_reused_from_checkpoint"] == 2
    assert again["summary"] == first["summary"]
    row = next(r for r in build_claims(tmp_path) if r["source"] == "docs/dp-blogs-audit.json")
    assert row["ours"] == follow(again, row["pointer"]) == again["summary"]["epsilon_lb_min"]
    assert row["verdict"] == "refuted"  # a valid lower bound far above the claimed ε ≤ 1
    assert main(["experiment", "dp-blogs-audit", "--seeds", "0", "--out", str(out)]) == 2
    a_file = tmp_path / "file"
    a_file.write_text("x")
    bad = ["experiment", "dp-blogs-audit", "--out", str(out), "--checkpoint-dir", str(a_file)]
    assert main(bad) == 2
    with pytest.raises(SystemExit) as exc:
        main(["experiment", "no-such", "--out", str(out)])
    assert exc.value.code == 2
