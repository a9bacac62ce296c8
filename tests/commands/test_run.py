"""The command line end to end: ``privacy-audit run | score | gate``.

Exit codes: 0 ok, 1 gate failed, 2 bad input (one ``privacy-audit: error:`` line on
stderr), 3 internal error. Most tests call ``privacy_audit.audit.cli.main`` in-process; one runs the
real module in a subprocess to check what a shell sees.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from privacy_audit import fixtures

LABELS = ["account", "billing", "shipping", "technical"]
METRIC_KEYS = (
    "auc",
    "tpr_at_fpr_0.001",
    "tpr_at_fpr_0.01",
    "advantage",
    "balanced_accuracy",
    "epsilon_lower_bound",
)
VOLATILE_KEYS = {"created", "environment", "seconds", "wall_seconds"}


# --------------------------------------------------------------------------- #
# helpers
# --------------------------------------------------------------------------- #
def _results(out_dir: Path) -> dict:
    return json.loads((out_dir / "results.json").read_text(encoding="utf-8"))


def _write_scores(path: Path, rows: list[dict], columns: list[str]) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=columns)
        w.writeheader()
        for r in rows:
            w.writerow({c: r[c] for c in columns})
    return path


def _gaussian_rows(n: int = 500, shift: float = 2.0, seed: int = 7) -> list[dict]:
    rng = np.random.default_rng(seed)
    mem = rng.normal(shift, 1.0, n)
    non = rng.normal(0.0, 1.0, n)
    rows = [{"score": repr(float(s)), "member": 1, "id": f"m-{i}"} for i, s in enumerate(mem)]
    rows += [{"score": repr(float(s)), "member": 0, "id": f"n-{i}"} for i, s in enumerate(non)]
    return rows


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _corpus_rows(start: int, stop: int) -> list[dict]:
    rows = fixtures.load_corpus("private")[start:stop]
    return [{"id": r["id"], "text": r["text"], "label": r["label"]} for r in rows]


def _strip_volatile(obj):
    if isinstance(obj, dict):
        return {k: _strip_volatile(v) for k, v in obj.items() if k not in VOLATILE_KEYS}
    if isinstance(obj, list):
        return [_strip_volatile(v) for v in obj]
    return obj


def assert_input_error(outcome, out_dir: Path, *keywords: str, only_line: bool = True) -> str:
    """Exit 2, exactly one ``privacy-audit: error:`` line naming the problem, no output.

    ``only_line=False`` tolerates other (progress) lines before the error line.
    """
    assert outcome.code == 2, (outcome.code, outcome.stdout, outcome.stderr)
    lines = outcome.stderr.splitlines()
    if only_line:
        assert len(lines) == 1, f"expected one stderr line, got: {outcome.stderr!r}"
    assert [x for x in lines if "privacy-audit" in x] == lines[-1:], outcome.stderr
    line = lines[-1]
    assert line.startswith("privacy-audit: error:"), line
    for kw in keywords:
        assert kw in line, f"{kw!r} not in {line!r}"
    assert "Traceback" not in outcome.stderr + outcome.stdout
    assert not (out_dir / "report.html").exists()
    assert not (out_dir / "results.json").exists()
    assert not out_dir.exists() or not any(out_dir.iterdir()), list(out_dir.iterdir())
    return line


def _config(tmp_path: Path, text: str, name: str = "audit.toml") -> Path:
    p = tmp_path / name
    p.write_text(text, encoding="utf-8")
    return p


SMALL_DATA = """
[data]
n_members = 20
n_nonmembers = 20
n_test = 20
[target]
max_length = 16
[train]
epochs = 1
[metrics]
bootstrap = 100
"""


# --------------------------------------------------------------------------- #
# run: the shared tiny audit
# --------------------------------------------------------------------------- #
def test_run_writes_report_and_results(tiny_run):
    out_dir, outcome = tiny_run
    assert outcome.code == 0, outcome.stderr[-2000:]
    html, js = out_dir / "report.html", out_dir / "results.json"
    assert html.is_file() and js.is_file()
    assert str(html) in outcome.stdout
    assert str(js) in outcome.stdout
    assert "<html" in html.read_text(encoding="utf-8").lower()
    assert "Traceback" not in outcome.stderr


def test_run_results_follow_the_schema(tiny_run_dir):
    res = _results(tiny_run_dir)
    for key in (
        "schema_version",
        "tool",
        "created",
        "title",
        "seed",
        "config",
        "environment",
        "runs",
        "comparison",
    ):
        assert key in res, key
    assert res["schema_version"] == 1
    assert res["tool"]["name"] == "privacy-audit"
    assert res["title"] == "Tiny test audit"
    assert res["seed"] == 0
    assert [r["name"] for r in res["runs"]] == ["non-private", "dp-sgd (eps=8)"]
    assert [r["defense"] for r in res["runs"]] == ["none", "dp-sgd"]
    for run in res["runs"]:
        for key in ("name", "defense", "claim", "utility", "attacks"):
            assert key in run, key
        assert set(run["claim"]) >= {
            "epsilon",
            "delta",
            "unit",
            "notion",
            "proven",
            "accountant",
            "note",
        }
        u = run["utility"]
        assert 0.0 <= u["ci_low"] <= u["value"] <= u["ci_high"] <= 1.0
        assert [a["attack"] for a in run["attacks"]] == [
            "loss",
            "confidence",
            "entropy",
            "modified-entropy",
        ]
        for att in run["attacks"]:
            assert att["status"] == "ok", att
            assert att["n_members"] == 40 and att["n_nonmembers"] == 40
            for key in METRIC_KEYS:
                m = att["metrics"][key]
                assert {"value", "ci_low", "ci_high"} <= set(m), (key, m)
                if key.startswith("tpr_at_fpr_"):
                    # 1% and 0.1% FPR are below the resolution 1/40: flagged, no number
                    assert m["below_resolution"] is True and m["value"] is None, (key, m)
                    continue
                assert isinstance(m["value"], float) and math.isfinite(m["value"])
            auc = att["metrics"]["auc"]
            assert 0.0 <= auc["ci_low"] <= auc["value"] <= auc["ci_high"] <= 1.0
            lb = att["metrics"]["epsilon_lower_bound"]
            assert lb["delta"] == 1e-5
            assert lb["confidence"] == 0.95
            assert lb["value"] >= 0.0
            assert len(att["examples"]["scores"]) == 80


def test_run_claims(tiny_run_dir):
    none, dp = _results(tiny_run_dir)["runs"]
    assert none["claim"]["proven"] is False
    assert none["claim"]["notion"] == "none"
    assert none["claim"]["epsilon"] is None
    c = dp["claim"]
    assert c["proven"] is True
    assert c["notion"] == "central-dp"
    assert c["unit"] == "example"
    assert c["delta"] == 1e-5
    assert 0 < c["epsilon"] <= 8 + 1e-9
    assert dp["training"]["noise_multiplier"] > 0


def test_run_is_reproducible_for_a_seed(tiny_config_path, tiny_run_dir, tmp_path, cli):
    out = tmp_path / "again"
    outcome = cli(["run", str(tiny_config_path), "--out", str(out), "--quiet"])
    assert outcome.code == 0, outcome.stderr[-2000:]
    first, second = _results(tiny_run_dir), _results(out)
    a, b = _strip_volatile(first), _strip_volatile(second)
    # the per-example scores are part of it: same seed, same model, same scores
    for run_a, run_b in zip(a["runs"], b["runs"], strict=True):
        for att_a, att_b in zip(run_a["attacks"], run_b["attacks"], strict=True):
            assert att_a["examples"] == att_b["examples"], att_a["attack"]
            assert att_a["metrics"] == att_b["metrics"], att_a["attack"]
    assert a == b


# --------------------------------------------------------------------------- #
# score: bring-your-own scores
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def gaussian_score_run(tmp_path_factory, cli):
    d = tmp_path_factory.mktemp("gauss")
    csv_path = _write_scores(d / "gauss.csv", _gaussian_rows(), ["score", "member", "id"])
    out = d / "out"
    outcome = cli(["score", str(csv_path), "--out", str(out), "--bootstrap", "100"])
    return out, outcome


def test_score_recovers_known_auc(gaussian_score_run):
    out, outcome = gaussian_score_run
    assert outcome.code == 0, outcome.stderr
    assert (out / "report.html").is_file()
    res = _results(out)
    (run,) = res["runs"]
    (att,) = run["attacks"]
    auc = att["metrics"]["auc"]
    expected = 0.5 * (1 + math.erf(2 / math.sqrt(2) / math.sqrt(2)))  # Φ(2/√2) ≈ 0.921
    assert abs(expected - 0.9214) < 1e-3
    assert abs(auc["value"] - expected) < 0.04
    assert auc["ci_low"] < auc["value"] < auc["ci_high"]
    assert att["n_members"] == 500 and att["n_nonmembers"] == 500
    assert "AUC 0.9" in outcome.stdout
    assert str(out / "report.html") in outcome.stdout


def test_score_uses_the_id_column(gaussian_score_run):
    out, _ = gaussian_score_run
    ex = _results(out)["runs"][0]["attacks"][0]["examples"]
    assert ex["ids"][:2] == ["m-0", "m-1"]
    assert ex["ids"][500:502] == ["n-0", "n-1"]
    assert ex["members"][:500] == [1] * 500 and ex["members"][500:] == [0] * 500


def test_score_columns_in_other_order_without_id(gaussian_score_run, tmp_path, cli):
    csv_path = _write_scores(tmp_path / "reordered.csv", _gaussian_rows(), ["member", "score"])
    out = tmp_path / "out"
    outcome = cli(["score", str(csv_path), "--out", str(out), "--bootstrap", "100"])
    assert outcome.code == 0, outcome.stderr
    att = _results(out)["runs"][0]["attacks"][0]
    ref = _results(gaussian_score_run[0])["runs"][0]["attacks"][0]
    assert att["metrics"]["auc"]["value"] == pytest.approx(ref["metrics"]["auc"]["value"])
    assert att["examples"]["scores"] == ref["examples"]["scores"]
    assert att["examples"]["ids"][:3] == ["0", "1", "2"]
    assert (out / "report.html").is_file()


def test_score_accepts_a_utf8_bom(tmp_path, cli):
    csv_path = tmp_path / "excel.csv"
    _write_scores(csv_path, _gaussian_rows(n=50), ["score", "member", "id"])
    csv_path.write_bytes(b"\xef\xbb\xbf" + csv_path.read_bytes())
    out = tmp_path / "out"
    outcome = cli(["score", str(csv_path), "--out", str(out), "--bootstrap", "100"])
    assert outcome.code == 0, outcome.stderr
    assert _results(out)["runs"][0]["attacks"][0]["examples"]["ids"][0] == "m-0"


# --------------------------------------------------------------------------- #
# gate
# --------------------------------------------------------------------------- #
def test_gate_passes_when_thresholds_are_above_every_metric(tiny_run_dir, cli):
    outcome = cli(
        [
            "gate",
            str(tiny_run_dir / "results.json"),
            "--max-auc",
            "1.0",
            "--max-epsilon-lb",
            "1000",
        ]
    )
    assert outcome.code == 0, outcome.stdout + outcome.stderr
    assert "privacy gate passed: 8 attack result(s)" in outcome.stdout
    assert "FAIL" not in outcome.stdout
    # 40 non-members cannot resolve 1% FPR: a TPR@1%FPR threshold is not measured, not passed
    outcome = cli(["gate", str(tiny_run_dir / "results.json"), "--max-tpr-at-1pct-fpr", "1.0"])
    assert outcome.code == 1 and "not resolvable at this n" in outcome.stdout


def test_gate_fails_and_names_every_exceeded_threshold(tiny_run_dir, cli):
    res = _results(tiny_run_dir)
    outcome = cli(
        [
            "gate",
            str(tiny_run_dir / "results.json"),
            "--max-auc",
            "0.0",
            "--max-epsilon-lb",
            "0",  # thresholds are range-checked: ε >= 0 (a negative one is exit 2)
        ]
    )
    assert outcome.code == 1, outcome.stdout + outcome.stderr
    fails = [line for line in outcome.stdout.splitlines() if line.startswith("FAIL:")]
    expected = [
        (run["name"], att["attack"], metric)
        for run in res["runs"]
        for att in run["attacks"]
        for metric, key in (
            ("AUC", "auc"),
            ("empirical epsilon lower bound", "epsilon_lower_bound"),
        )
        if att["metrics"][key]["value"] > 0
    ]
    assert len(fails) == len(expected) >= 8
    for run_name, attack, metric in expected:
        hits = [f for f in fails if f"{metric} of attack '{attack}' on '{run_name}'" in f]
        assert len(hits) == 1, (run_name, attack, metric, fails)
    assert "TPR@1%FPR" not in outcome.stdout
    assert f"{len(expected)} threshold(s) exceeded" in outcome.stdout


def test_gate_strict_compares_the_upper_ci(tmp_path, cli):
    res = {
        "runs": [
            {
                "name": "r",
                "attacks": [
                    {
                        "attack": "a",
                        "status": "ok",
                        "metrics": {"auc": {"value": 0.6, "ci_low": 0.55, "ci_high": 0.7}},
                    },
                    {"attack": "b", "status": "not_applicable"},
                ],
            }
        ]
    }
    p = tmp_path / "results.json"
    p.write_text(json.dumps(res), encoding="utf-8")
    assert cli(["gate", str(p), "--max-auc", "0.65"]).code == 0
    strict = cli(["gate", str(p), "--max-auc", "0.65", "--strict"])
    assert strict.code == 1
    assert "AUC of attack 'a' on 'r' is 0.7" in strict.stdout


def test_gate_without_threshold_is_bad_input(tiny_run_dir, tmp_path, cli):
    outcome = cli(["gate", str(tiny_run_dir / "results.json")])
    assert_input_error(outcome, tmp_path / "none", "--max-auc", "--max-epsilon-lb")


def test_gate_rejects_a_nan_threshold(tiny_run_dir, tmp_path, cli):
    # NaN compares false with everything: it would let every result pass
    outcome = cli(["gate", str(tiny_run_dir / "results.json"), "--max-auc", "nan"])
    assert_input_error(outcome, tmp_path / "none", "nan")


def test_gate_missing_results_file(tmp_path, cli):
    outcome = cli(["gate", str(tmp_path / "nope.json"), "--max-auc", "0.9"])
    assert_input_error(outcome, tmp_path / "none", "nope.json", "does not exist")


def test_gate_invalid_json(tmp_path, cli):
    p = tmp_path / "broken.json"
    p.write_text('{"runs": [', encoding="utf-8")
    outcome = cli(["gate", str(p), "--max-auc", "0.9"])
    assert_input_error(outcome, tmp_path / "none", "broken.json", "not valid JSON")


def test_gate_json_that_is_not_results(tmp_path, cli):
    p = tmp_path / "other.json"
    p.write_text('{"hello": 1}', encoding="utf-8")
    outcome = cli(["gate", str(p), "--max-auc", "0.9"])
    assert_input_error(outcome, tmp_path / "none", "'runs'")


# --------------------------------------------------------------------------- #
# HTML escaping
# --------------------------------------------------------------------------- #
def test_score_report_escapes_ids_and_file_name(tmp_path, cli):
    rows = _gaussian_rows(n=100)
    rows[0]["id"] = "<script>alert(1)</script>"
    rows[0]["score"] = "99.0"  # the most exposed member: listed in the report
    d = tmp_path / "<img src=x onerror=alert(3)>"
    d.mkdir()
    csv_path = _write_scores(d / "<b>evil.csv", rows, ["score", "member", "id"])
    out = tmp_path / "out"
    outcome = cli(["score", str(csv_path), "--out", str(out), "--bootstrap", "100"])
    assert outcome.code == 0, outcome.stderr
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>evil" not in html
    assert "&lt;b&gt;evil" in html
    assert "<img src=x" not in html
    assert "&lt;img src=x onerror=alert(3)&gt;" in html  # the config's source path
    # the raw id is kept in results.json (aggregate_only is off)
    assert "<script>alert(1)</script>" in _results(out)["runs"][0]["attacks"][0]["examples"]["ids"]


def test_rendered_title_is_escaped():
    from privacy_audit.attacks import AttackResult, MetricSettings
    from privacy_audit.audit.results import assemble_results, run_record
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.reports import render_html

    rng = np.random.default_rng(0)
    members = np.r_[np.ones(30), np.zeros(30)]
    result = AttackResult.from_scores(
        "loss",
        rng.normal(size=60) + members,
        members,
        settings=MetricSettings(n_boot=100),
    )
    run = run_record("<i>run</i>", "none", PrivacyClaim.none("<u>note</u>"), None, [result])
    results = assemble_results([run], "<script>alert(2)</script>", 0, {"k": "<script>"})
    html = render_html(results)
    assert "<script>" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    assert "<i>run</i>" not in html and "&lt;i&gt;run&lt;/i&gt;" in html


# --------------------------------------------------------------------------- #
# bad input: exit 2, one line, no partial output
# --------------------------------------------------------------------------- #
def test_unknown_config_key(tmp_path, cli):
    cfg = _config(tmp_path, "[train]\nepochz = 3\n")
    out = tmp_path / "out"
    line = assert_input_error(cli(["run", str(cfg), "--out", str(out)]), out, "train.epochz")
    assert "epochs" in line  # the allowed keys are listed


def test_unknown_top_level_key(tmp_path, cli):
    cfg = _config(tmp_path, 'titel = "x"\n')
    out = tmp_path / "out"
    assert_input_error(cli(["run", str(cfg), "--out", str(out)]), out, "'titel'", "title")


def test_unknown_defense_lists_allowed_names(tmp_path, cli):
    cfg = _config(tmp_path, '[[defenses]]\nname = "dp-magic"\n')
    out = tmp_path / "out"
    line = assert_input_error(cli(["run", str(cfg), "--out", str(out)]), out, "dp-magic")
    assert "allowed" in line and "none" in line and "dp-sgd" in line


def test_unknown_defense_parameter(tmp_path, cli):
    cfg = _config(tmp_path, '[[defenses]]\nname = "dp-sgd"\nsigma = 1.0\n')
    out = tmp_path / "out"
    line = assert_input_error(cli(["run", str(cfg), "--out", str(out)]), out, "defenses[0].sigma")
    assert "epsilon" in line


def test_unknown_attack_lists_allowed_names(tmp_path, cli):
    cfg = _config(tmp_path, '[attacks]\nnames = ["loss", "telepathy"]\n')
    out = tmp_path / "out"
    line = assert_input_error(cli(["run", str(cfg), "--out", str(out)]), out, "telepathy")
    for name in ("loss", "confidence", "entropy", "modified-entropy"):
        assert name in line


def test_empty_member_file(tmp_path, cli):
    members = tmp_path / "members.jsonl"
    members.write_text("", encoding="utf-8")
    nonmembers = _write_jsonl(tmp_path / "nonmembers.jsonl", _corpus_rows(0, 20))
    cfg = _config(
        tmp_path,
        f'[data]\nmembers = "{members.name}"\nnonmembers = "{nonmembers.name}"\n'
        "[train]\nepochs = 1\n[metrics]\nbootstrap = 100\n",
    )
    out = tmp_path / "out"
    assert_input_error(
        cli(["run", str(cfg), "--out", str(out), "--quiet"]), out, "members.jsonl", "no rows"
    )


def test_one_class_member_set(tmp_path, cli):
    rows = [r for r in fixtures.load_corpus("private") if r["label"] == "billing"][:20]
    members = _write_jsonl(
        tmp_path / "members.jsonl",
        [{"id": r["id"], "text": r["text"], "label": r["label"]} for r in rows],
    )
    assert {r["label"] for r in rows} == {"billing"}
    nonmembers = _write_jsonl(tmp_path / "nonmembers.jsonl", _corpus_rows(3000, 3020))
    cfg = _config(
        tmp_path,
        f'[data]\nmembers = "{members}"\nnonmembers = "{nonmembers}"\n'
        "[train]\nepochs = 1\n[metrics]\nbootstrap = 100\n",
    )
    out = tmp_path / "out"
    line = assert_input_error(cli(["run", str(cfg), "--out", str(out), "--quiet"]), out)
    assert "single task label" in line and "two classes" in line


def test_score_with_only_members(tmp_path, cli):
    rows = [{"score": str(i / 10), "member": 1, "id": f"x{i}"} for i in range(20)]
    csv_path = _write_scores(tmp_path / "all_members.csv", rows, ["score", "member", "id"])
    out = tmp_path / "out"
    line = assert_input_error(cli(["score", str(csv_path), "--out", str(out)]), out)
    assert "need both members and non-members" in line
    assert "20 members and 0 non-members" in line


def test_score_with_nan(tmp_path, cli):
    rows = _gaussian_rows(n=20)
    rows[3]["score"] = "nan"
    csv_path = _write_scores(tmp_path / "nan.csv", rows, ["score", "member", "id"])
    out = tmp_path / "out"
    assert_input_error(cli(["score", str(csv_path), "--out", str(out)]), out, "1 NaN")


def test_score_with_non_numeric_score(tmp_path, cli):
    rows = _gaussian_rows(n=20)
    rows[5]["score"] = "high"
    csv_path = _write_scores(tmp_path / "text.csv", rows, ["score", "member", "id"])
    out = tmp_path / "out"
    assert_input_error(cli(["score", str(csv_path), "--out", str(out)]), out, "line 7", "'high'")


def test_score_without_member_column(tmp_path, cli):
    rows = _gaussian_rows(n=20)
    csv_path = _write_scores(tmp_path / "nomember.csv", rows, ["score", "id"])
    out = tmp_path / "out"
    assert_input_error(cli(["score", str(csv_path), "--out", str(out)]), out, "'member'")


def test_score_missing_file_and_bad_options(tmp_path, cli):
    out = tmp_path / "out"
    assert_input_error(
        cli(["score", str(tmp_path / "gone.csv"), "--out", str(out)]), out, "does not exist"
    )
    csv_path = _write_scores(tmp_path / "ok.csv", _gaussian_rows(n=20), ["score", "member"])
    assert_input_error(
        cli(["score", str(csv_path), "--out", str(out), "--delta", "1.5"]), out, "--delta"
    )
    assert_input_error(
        cli(["score", str(csv_path), "--out", str(out), "--bootstrap", "5"]), out, "--bootstrap"
    )


def test_model_dir_that_does_not_exist(tmp_path, cli):
    missing = tmp_path / "no-such-model"
    cfg = _config(
        tmp_path,
        SMALL_DATA.replace("[target]\n", f'[target]\nmodel_dir = "{missing}"\n'),
    )
    out = tmp_path / "out"
    assert_input_error(
        cli(["run", str(cfg), "--out", str(out), "--quiet"]),
        out,
        "no-such-model",
        "does not exist",
    )


def test_classifier_dir_that_does_not_exist(tmp_path, cli):
    members = _write_jsonl(tmp_path / "members.jsonl", _corpus_rows(0, 20))
    nonmembers = _write_jsonl(tmp_path / "nonmembers.jsonl", _corpus_rows(20, 40))
    cfg = _config(
        tmp_path,
        f'[data]\nmembers = "{members}"\nnonmembers = "{nonmembers}"\n'
        '[target]\nclassifier_dir = "missing-classifier"\n',
    )
    out = tmp_path / "out"
    assert_input_error(
        cli(["run", str(cfg), "--out", str(out), "--quiet"]),
        out,
        "classifier directory",
        "missing-classifier",
        "does not exist",
    )


def test_malformed_toml(tmp_path, cli):
    cfg = _config(tmp_path, "[train\nepochs = 3\n")
    out = tmp_path / "out"
    assert_input_error(cli(["run", str(cfg), "--out", str(out)]), out, "not valid TOML")


def test_config_file_that_does_not_exist(tmp_path, cli):
    out = tmp_path / "out"
    assert_input_error(
        cli(["run", str(tmp_path / "missing.toml"), "--out", str(out)]),
        out,
        "missing.toml",
        "does not exist",
    )


def test_wrong_type(tmp_path, cli):
    cfg = _config(tmp_path, '[train]\nepochs = "three"\n')
    out = tmp_path / "out"
    assert_input_error(
        cli(["run", str(cfg), "--out", str(out)]), out, "train.epochs", "integer", "'three'"
    )


def test_boolean_is_not_an_integer(tmp_path, cli):
    cfg = _config(tmp_path, "[train]\nepochs = true\n")
    out = tmp_path / "out"
    assert_input_error(cli(["run", str(cfg), "--out", str(out)]), out, "train.epochs", "True")


@pytest.mark.parametrize(
    ("param", "keywords"),
    [
        ("epsilon = 0", ("epsilon", "positive", "got 0")),
        ("epsilon = -1.5", ("epsilon", "positive", "-1.5")),
        ("delta = 2", ("delta", "(0, 1)", "got 2")),
        ('accountant = "gdp"', ("accountant", "prv", "rdp")),
    ],
)
def test_bad_dp_sgd_parameters(tmp_path, cli, param, keywords):
    cfg = _config(tmp_path, f'[[defenses]]\nname = "dp-sgd"\n{param}\n')
    out = tmp_path / "out"
    assert_input_error(cli(["run", str(cfg), "--out", str(out)]), out, "defenses[0]", *keywords)


def test_argparse_errors_are_one_line_exit_2(tmp_path, cli):
    out = tmp_path / "out"
    outcome = cli(["score"])  # the scores file is required
    assert outcome.code == 2
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("privacy-audit")
    assert "error:" in lines[0] and "scores" in lines[0]
    assert not out.exists()


def test_subprocess_bad_config_exit_code_and_single_stderr_line(tmp_path):
    cfg = _config(tmp_path, "[train]\nepochz = 3\n")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "privacy_audit", "run", str(cfg), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines() == [proc.stderr.strip()]
    assert proc.stderr.startswith("privacy-audit: error: unknown config key 'train.epochz'")
    assert proc.stdout == ""
    assert not out.exists()


# --------------------------------------------------------------------------- #
# bring your own trained classifier
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def byo_run(tmp_path_factory, cli):
    from privacy_audit.targets.loading import TargetSpec

    d = tmp_path_factory.mktemp("byo")
    model_dir = d / "my-classifier"
    model, tokenizer = TargetSpec("tiny").build(LABELS, 0)
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    _write_jsonl(d / "members.jsonl", _corpus_rows(0, 30))
    _write_jsonl(d / "nonmembers.jsonl", _corpus_rows(30, 60))
    cfg = _config(
        d,
        'title = "<script>alert(2)</script> BYO"\n'
        "[data]\n"
        'members = "members.jsonl"\n'  # relative paths resolve against the config's folder
        'nonmembers = "nonmembers.jsonl"\n'
        "[target]\n"
        'classifier_dir = "my-classifier"\n'
        "max_length = 32\n"
        "[claim]\n"
        "epsilon = 3.0\n"
        "delta = 1e-6\n"
        'unit = "user"\n'
        'notion = "central-dp"\n'
        'note = "Trained with our in-house DP pipeline."\n'
        "[metrics]\n"
        "bootstrap = 100\n",
    )
    out = d / "out"
    outcome = cli(["run", str(cfg), "--out", str(out), "--quiet"])
    return out, outcome, model_dir


def test_bring_your_own_classifier(byo_run):
    out, outcome, model_dir = byo_run
    assert outcome.code == 0, outcome.stderr
    res = _results(out)
    (run,) = res["runs"]
    assert run["defense"] == "as-is"
    assert run["name"] == "my-classifier"
    assert run["training"] == {"trained_by_suite": False}
    assert "seconds" not in json.dumps(run["training"])
    assert run["claim"] == {
        "epsilon": 3.0,
        "delta": 1e-6,
        "unit": "user",
        "notion": "central-dp",
        "accountant": None,
        "proven": False,
        "note": "Trained with our in-house DP pipeline.",
        "details": {},
    }
    assert res["config"]["target"]["classifier_dir"] == str(model_dir)
    assert res["config"]["defenses"] == []
    assert [a["status"] for a in run["attacks"]] == ["ok"] * 4
    for att in run["attacks"]:
        assert att["n_members"] == 30 and att["n_nonmembers"] == 30
        assert att["examples"]["ids"][0] == fixtures.load_corpus("private")[0]["id"]
    # the test set defaults to the non-members
    assert run["utility"]["n"] == 30


def test_bring_your_own_title_is_escaped(byo_run):
    out, outcome, _ = byo_run
    assert outcome.code == 0, outcome.stderr
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "<script>alert(2)</script>" not in html
    assert "&lt;script&gt;alert(2)&lt;/script&gt; BYO" in html
    assert _results(out)["title"] == "<script>alert(2)</script> BYO"


def test_bring_your_own_rejects_defenses_and_unknown_labels(byo_run, tmp_path, cli):
    _, _, model_dir = byo_run
    members = _write_jsonl(tmp_path / "members.jsonl", _corpus_rows(0, 10))
    nonmembers = _write_jsonl(tmp_path / "nonmembers.jsonl", _corpus_rows(10, 20))
    base = (
        f'[data]\nmembers = "{members}"\nnonmembers = "{nonmembers}"\n'
        f'[target]\nclassifier_dir = "{model_dir}"\n'
    )
    out = tmp_path / "out"
    cfg = _config(tmp_path, base + '[[defenses]]\nname = "none"\n', "with-defense.toml")
    assert_input_error(cli(["run", str(cfg), "--out", str(out)]), out, "classifier_dir", "defenses")

    bad = [dict(r, label="refund") for r in _corpus_rows(0, 10)]
    _write_jsonl(members, bad)
    cfg = _config(tmp_path, base, "bad-labels.toml")
    # --quiet silences transformers' weight-loading bar, so the error is the only line.
    line = assert_input_error(cli(["run", str(cfg), "--out", str(out), "--quiet"]), out, "'refund'")
    assert "account" in line


def test_unwritable_output_directory_is_bad_input_before_any_work(tmp_path, cli):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    scores = tmp_path / "s.csv"
    scores.write_text("score,member\n0.9,1\n0.8,1\n0.2,0\n0.1,0\n")
    for out in (blocker, blocker / "sub"):
        res = cli(["score", str(scores), "--out", str(out)])
        assert res.code == 2
        assert res.stderr.strip().startswith(
            "privacy-audit: error: cannot write to output directory"
        )
        assert "Traceback" not in res.stderr


def test_duplicate_ids_in_scores_are_rejected(tmp_path, cli):
    scores = tmp_path / "s.csv"
    scores.write_text("score,member,id\n0.9,1,a\n0.8,1,b\n0.2,0,a\n0.1,0,c\n")
    out = tmp_path / "out"
    res = cli(["score", str(scores), "--out", str(out)])
    assert res.code == 2 and "duplicate id 'a'" in res.stderr
    assert not (out / "report.html").exists() and not (out / "results.json").exists()


def test_gate_fails_results_missing_a_gated_metric(tmp_path, cli):
    bad = tmp_path / "results.json"
    bad.write_text(
        json.dumps(
            {
                "runs": [
                    {"name": "r", "attacks": [{"attack": "loss", "status": "ok", "metrics": {}}]}
                ]
            }
        )
    )
    res = cli(["gate", str(bad), "--max-auc", "0.6"])
    # a requested metric missing on an `ok` attack is a failure, never "nothing to compare"
    assert res.code == 1 and "Traceback" not in res.stderr
    assert "FAIL: AUC of attack 'loss' on 'r' is missing" in res.stdout
