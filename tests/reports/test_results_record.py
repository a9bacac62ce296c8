"""The typed record of results.json (reports/results_record.py) and the records an older
version wrote (tests/data/records/, README there): they load through the record, the
verdict, gate, compare and the report read them as that version did, and a stored run
directory resumes without training again and writes the same results."""

from __future__ import annotations

import copy
import gzip
import json
import os
import shutil
from pathlib import Path

import pytest
from markupsafe import escape

from privacy_audit.ground.errors import AuditError, DataError
from privacy_audit.reports.results_record import ResultsRecord, RunRecord

RECORDS = Path(__file__).resolve().parents[1] / "data" / "records"
TINY = RECORDS / "tiny-201e7bf"
#: where the stored run's config was when 201e7bf wrote it (README there)
CONFIG_AT = Path("/tmp/privacy-audit-201e7bf/audit.toml")


def _json(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.fixture
def own_results(tmp_path) -> Path:
    """The own-model record of 201e7bf, unpacked as ``own/results.json``."""
    path = tmp_path / "own" / "results.json"
    path.parent.mkdir()
    with gzip.open(RECORDS / "own-model-201e7bf.results.json.gz", "rb") as fh:
        path.write_bytes(fh.read())
    return path


def test_the_stored_records_load_through_the_typed_record(own_results):
    tiny = ResultsRecord.load(TINY / "results.json")
    assert tiny.schema_version == 1 and tiny.tool["name"] == "privacy-audit"
    assert [r.name for r in tiny.runs] == ["non-private", "dp-sgd (eps=8)"]
    plain, dp = tiny.runs
    assert not plain.claim.formal and plain.claim.finite_epsilon is None
    assert dp.claim.notion == "central-dp" and dp.claim.unit == "example" and dp.claim.proven
    assert dp.claim.finite_epsilon == pytest.approx(7.994795876957042)
    assert dp.claim.delta == 1e-05
    for run in tiny.runs:
        assert [a.name for a in run.attacks] == [
            "loss",
            "confidence",
            "entropy",
            "modified-entropy",
        ]
        assert all(a.status == "ok" for a in run.attacks)
        auc = run.attacks[0].metric("auc")
        assert auc.ci_low <= auc.value <= auc.ci_high
        # 40 non-members cannot resolve a TPR at 1% FPR (the report's one rule)
        assert not any(a.resolvable(0.01) for a in run.attacks)
        assert run.battery_chance is not None and run.split_check is None
        assert run.epsilon_audit is None and run.users is None
    assert dp.strongest().name == "confidence" and plain.strongest().name == "modified-entropy"
    assert dp.strongest().resolvable(0.1)  # its VERDICT line leads with TPR at 10% FPR

    own = ResultsRecord.load(own_results)
    (model,) = own.runs
    assert model.split_check is not None and model.split_check.shifted is False
    assert model.strongest().metric("auc").value == 1.0
    assert model.strongest().metric("auc").n is None  # the AUC records no n of its own
    assert own.runs[0].raw is own.raw["runs"][0]  # what is not typed yet stays reachable


@pytest.mark.parametrize(
    ("edit", "words"),
    [
        (lambda d: d.pop("runs"), ["has no 'runs' list"]),
        (lambda d: d.update(schema_version=7), ["schema_version 7"]),
        (lambda d: d["runs"][0].pop("name"), ["run #1", "'name'"]),
        (lambda d: d["runs"][1]["attacks"][2].pop("attack"), ["'attacks' entry"]),
        (
            lambda d: d["runs"][0]["attacks"][0]["metrics"]["auc"].update(ci_low="0.4"),
            ["metric 'auc'", "attack 'loss'", "ci_low must be a number or null"],
        ),
        (
            lambda d: d["runs"][0]["attacks"][1]["metrics"]["auc"].update(ci_low=0.9),
            ["metric 'auc'", "ci_low 0.9 is above ci_high"],
        ),
        (lambda d: d["runs"][1].update(epsilon_audit=[]), ["'epsilon_audit'"]),
    ],
)
def test_a_malformed_file_is_one_error_naming_the_file_and_the_key(tmp_path, edit, words):
    d = _json(TINY / "results.json")
    edit(d)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(d), encoding="utf-8")
    with pytest.raises(DataError) as err:
        ResultsRecord.load(path)
    assert isinstance(err.value, AuditError)
    assert str(path) in str(err.value)
    for w in words:
        assert w in str(err.value), (w, str(err.value))


def test_a_missing_file_or_a_folder_is_one_error(tmp_path):
    with pytest.raises(DataError, match="does not exist"):
        ResultsRecord.load(tmp_path / "nope.json")
    with pytest.raises(DataError, match="is a directory"):
        ResultsRecord.load(tmp_path)


def test_the_verdict_reads_the_stored_record_as_201e7bf_did(own_results):
    from privacy_audit.reports.run_comparison import compare_runs
    from privacy_audit.reports.user_verdict import combine_unit_verdicts
    from privacy_audit.reports.verdict import verdict_for_run

    for path in (TINY / "results.json", own_results):
        stored = _json(path)
        for run in stored["runs"]:
            bare = copy.deepcopy(run)
            want = bare.pop("verdict")
            assert combine_unit_verdicts(bare, verdict_for_run(RunRecord.of(bare))) == want
            assert verdict_for_run(bare) == verdict_for_run(RunRecord.of(bare))
        assert compare_runs(stored["runs"]) == stored["comparison"]


def _gate_cases():
    return [
        (c["record"], c["args"], c["exit_code"], c["stdout"])
        for c in _json(RECORDS / "gate-201e7bf.json")["gate"]
    ]


@pytest.mark.parametrize(("record", "args", "code", "stdout"), _gate_cases())
def test_the_gate_reads_the_stored_records_as_201e7bf_did(
    own_results, cli, record, args, code, stdout
):
    path = TINY / "results.json" if record == "tiny" else own_results
    args = [a.replace("{results}", str(path)) for a in args]
    outcome = cli(["gate", str(path), *args])
    assert outcome.code == code, outcome.stderr
    assert outcome.stdout == stdout.replace("{results}", str(path))


def test_compare_reads_the_stored_records_as_201e7bf_did(own_results, tmp_path, cli):
    want = _json(RECORDS / "compare-201e7bf.json")
    for name in ("tiny", "tiny-again"):
        (tmp_path / name).mkdir()
        shutil.copy(TINY / "results.json", tmp_path / name / "results.json")
    out = tmp_path / "out"
    names = [str(tmp_path / n) for n in ("tiny", "tiny-again")] + [str(own_results.parent)]
    outcome = cli(["compare", *names, "--out", str(out)])
    assert outcome.code == 0, outcome.stderr
    got = _json(out / "compare.json")
    got.pop("inputs")
    assert got == want["compare_json"]
    assert (out / "differences.csv").read_text(encoding="utf-8") == want["differences_csv"]
    assert outcome.stdout == want["stdout"].replace("{out}", str(out))


def test_the_report_reads_the_stored_record(own_results):
    from privacy_audit.reports.html import render_html

    for path in (TINY / "results.json", own_results):
        stored = _json(path)
        page = render_html(stored)
        for run in stored["runs"]:
            assert str(escape(run["verdict"]["text"])) in page
            for a in run["attacks"]:
                assert str(escape(a["attack"])) in page


def _clean(x):
    """A results.json without what differs between two invocations of the same run: the
    timings, the creation time, the environment and the config file's path."""
    if isinstance(x, dict):
        return {
            k: _clean(v)
            for k, v in x.items()
            if k not in ("timing", "created", "environment", "source") and "seconds" not in k
        }
    if isinstance(x, list):
        return [_clean(v) for v in x]
    return x


def test_a_run_directory_written_by_201e7bf_resumes_without_training(tmp_path, cli):
    """The same command with ``--resume`` on a copy of the stored directory: every task is
    reused (the log says so, no task starts again) and results.json is the one 201e7bf
    wrote, apart from timings; the VERDICT lines are the ones it printed."""
    out = tmp_path / "out"
    shutil.copytree(TINY / "run", out / "run")
    # a task's key holds the config file's path (its folder resolves relative paths), so
    # the config goes back where 201e7bf read it; every writer writes the same bytes
    config = CONFIG_AT
    config.parent.mkdir(parents=True, exist_ok=True)
    part = config.with_name(f".{config.name}.{os.getpid()}")
    shutil.copy(TINY / "audit.toml", part)
    os.replace(part, config)
    events = (out / "run" / "events.log").read_text(encoding="utf-8")
    outcome = cli(["run", str(config), "--out", str(out), "--resume"])
    assert outcome.code == 0, outcome.stderr[-3000:]
    assert "resume: 2 finished task(s) reused" in outcome.stderr
    assert (out / "run" / "events.log").read_text(encoding="utf-8") == events  # no new start
    assert _clean(_json(out / "results.json")) == _clean(_json(TINY / "results.json"))

    def verdict_lines(text: str) -> list[str]:
        return [line for line in text.splitlines() if line.startswith("VERDICT ")]

    stored = (TINY / "stdout.txt").read_text(encoding="utf-8")
    assert verdict_lines(outcome.stdout) == verdict_lines(stored) != []
