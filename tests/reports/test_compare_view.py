"""Executor layer, run directory and sweeps: the same numbers in-process, after a SIGKILL
and resume, and on Ray; clear errors for Ray missing or unreachable, empty sweeps and
incompatible comparisons; `privacy-audit compare` on two small runs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# "timing" says where this invocation spent its time (a resumed or Ray run has other
# stages), not what it measured
VOLATILE = {"created", "environment", "seconds", "wall_seconds", "timing"}

SMALL = """\
title = "small scale-out run"
seed = 0
[data]
n_members = 30
n_nonmembers = 30
n_test = 20
[target]
preset = "tiny"
max_length = 16
[train]
epochs = 2
batch_size = 15
[[defenses]]
name = "none"
label = "non-private"
[attacks]
names = ["loss", "modified-entropy"]
[metrics]
bootstrap = 100
[shadow]
n_models = 4
population = 20
attacks = ["lira-online", "rmia-offline"]
"""


def _stable(obj):
    """results.json without timestamps, environment and timings."""
    if isinstance(obj, dict):
        return {k: _stable(v) for k, v in obj.items() if k not in VOLATILE}
    if isinstance(obj, list):
        return [_stable(v) for v in obj]
    return obj


def _results(out: Path) -> dict:
    return json.loads((out / "results.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def small_cfg(tmp_path_factory) -> Path:
    p = tmp_path_factory.mktemp("scaleout") / "small.toml"
    p.write_text(SMALL, encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def small_run(small_cfg, tmp_path_factory, cli) -> Path:
    """The uninterrupted, in-process reference run."""
    out = tmp_path_factory.mktemp("small-local") / "out"
    outcome = cli(["run", str(small_cfg), "--out", str(out), "--quiet"])
    assert outcome.code == 0, outcome.stderr
    return out


def test_small_run_has_shadow_attacks_and_a_run_directory(small_run):
    res = _results(small_run)
    (run,) = res["runs"]
    names = [a["attack"] for a in run["attacks"]]
    assert names == ["loss", "modified-entropy", "lira-online", "rmia-offline"]
    assert all(a["status"] == "ok" for a in run["attacks"])
    assert run["strongest_attack"] in names
    tasks = list((small_run / "run" / "tasks").glob("*.json"))
    assert len(tasks) == 1 + 4 + 2  # trial, shadow models, scored attacks
    assert "executor" not in res["config"]  # where tasks ran never changes results.json


def test_sigkill_mid_run_then_resume_gives_the_same_numbers(small_cfg, small_run, tmp_path, cli):
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "privacy_audit",
            "run",
            str(small_cfg),
            "--out",
            str(out),
            "--quiet",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    tasks = out / "run" / "tasks"
    deadline = time.monotonic() + 240
    try:
        while len(list(tasks.glob("*.json"))) < 2:
            assert proc.poll() is None, "the run ended before it could be killed"
            assert time.monotonic() < deadline, "no task finished in time"
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    finished = {p.stem for p in tasks.glob("*.json")}
    assert 2 <= len(finished) < 7
    assert not (out / "results.json").exists()
    log = out / "run" / "events.log"
    before = log.read_text(encoding="utf-8").splitlines()

    outcome = cli(["run", str(small_cfg), "--out", str(out), "--quiet", "--resume"])
    assert outcome.code == 0, outcome.stderr
    after = log.read_text(encoding="utf-8").splitlines()[len(before) :]
    restarted = {line.split()[2] for line in after if line.split()[1] == "start"}
    assert not restarted & finished, "a finished task was run again"
    assert len(restarted) == 7 - len(finished)
    assert _stable(_results(out)) == _stable(_results(small_run))


def test_local_and_ray_give_identical_results(small_cfg, small_run, tmp_path, cli):
    import ray

    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}},
    )
    try:
        out = tmp_path / "ray"
        outcome = cli(["run", str(small_cfg), "--out", str(out), "--executor", "ray"])
        assert outcome.code == 0, outcome.stderr
        assert "executor ray" in outcome.stderr
        assert "[5/5] train-shadow" in outcome.stderr or "[5/5] audit-trial" in outcome.stderr
    finally:
        ray.shutdown()
    assert _stable(_results(out)) == _stable(_results(small_run))


def test_ray_requested_but_not_installed_names_the_extra(small_cfg, tmp_path, cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    out = tmp_path / "out"
    outcome = cli(["run", str(small_cfg), "--out", str(out), "--executor", "ray"])
    assert outcome.code == 2, outcome.stderr
    (line,) = outcome.stderr.splitlines()
    assert line.startswith("privacy-audit: error:") and "privacy-audit[ray]" in line
    assert '".[ray]"' in line
    assert not out.exists()


def test_unreachable_ray_address_is_one_clear_error(small_cfg, tmp_path, cli):
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "out"
    t0 = time.monotonic()
    outcome = cli(
        [
            "run",
            str(small_cfg),
            "--out",
            str(out),
            "--quiet",
            "--executor",
            "ray",
            "--address",
            f"127.0.0.1:{port}",
        ]
    )
    assert outcome.code == 2, outcome.stderr
    (line,) = outcome.stderr.splitlines()
    assert f"cannot reach the Ray cluster at '127.0.0.1:{port}'" in line
    assert time.monotonic() - t0 < 30
    assert not (out / "results.json").exists() and not (out / "run").exists()
    bad = cli(["run", str(small_cfg), "--out", str(out), "--address", "127.0.0.1:1"])
    assert bad.code == 2 and "--address applies only with --executor ray" in bad.stderr


@pytest.mark.parametrize(
    "sweep, needle",
    [
        ("seeds = []", "0 seed(s)"),
        ("defenses = []\nseeds = [0]", "0 defense(s)"),
        ("epsilons = []", "0 ε value(s)"),
    ],
)
def test_a_sweep_that_expands_to_zero_tasks_is_refused(tmp_path, cli, sweep, needle):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(
        '[[defenses]]\nname = "dp-sgd"\nepsilon = 8.0\n\n[sweep]\n' + sweep + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "out"
    outcome = cli(["run", str(cfg), "--out", str(out)])
    assert outcome.code == 2, outcome.stderr
    (line,) = outcome.stderr.splitlines()
    assert "the sweep expands to zero tasks" in line and needle in line, line
    assert not out.exists()


SWEEP = """\
title = "sweep"
seed = 0
[data]
n_members = 32
n_nonmembers = 32
n_test = 30
[target]
preset = "tiny"
max_length = 16
[train]
epochs = 1
batch_size = 4
[[defenses]]
name = "none"
label = "non-private"
[[defenses]]
name = "dp-sgd"
label = "dp-sgd"
epsilon = 8.0
accountant = "rdp"  # calibrates in about a second at q = 1/8 (PRV takes longer)
[attacks]
names = ["loss"]
[metrics]
bootstrap = 100
[sweep]
defenses = ["dp-sgd"]
epsilons = [2.0, 8.0]
seeds = [0, 1]
"""


def test_sweep_curves_and_compare_two_runs(small_run, tmp_path, cli):
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(SWEEP, encoding="utf-8")
    out = tmp_path / "sweep-out"
    outcome = cli(["run", str(cfg), "--out", str(out), "--quiet", "--workers", "1"])
    assert outcome.code == 0, outcome.stderr
    res = _results(out)
    names = [r["name"] for r in res["runs"]]
    assert names == [
        "dp-sgd @ eps=2 seed=0",
        "dp-sgd @ eps=2 seed=1",
        "dp-sgd @ eps=8 seed=0",
        "dp-sgd @ eps=8 seed=1",
    ]
    eps = {r["name"]: r["claim"]["epsilon"] for r in res["runs"]}
    assert eps["dp-sgd @ eps=2 seed=0"] <= 2.0 + 1e-9 and eps["dp-sgd @ eps=8 seed=1"] <= 8.0
    sweep = res["sweep"]
    assert sweep["seeds"] == [0, 1]
    curves = {c["defense"]: c for c in sweep["curves"]}
    assert [p["epsilon"] for p in curves["dp-sgd"]["points"]] == [2.0, 8.0]
    assert set(curves) == {"dp-sgd"}  # [sweep] defenses picks the defenses to sweep
    for p in curves["dp-sgd"]["points"]:
        u = p["utility"]
        assert u["n"] == 2 and u["ci_low"] <= u["value"] <= u["ci_high"]
        accs = [r["utility"]["value"] for r in res["runs"] if r["name"] in p["runs"]]
        assert u["value"] == pytest.approx(sum(accs) / 2)
    # seeds change training: the two seeds' models differ
    s0, s1 = (r["attacks"][0]["examples"]["scores"] for r in res["runs"][:2])
    assert s0 != s1
    assert "Sweep: privacy-utility curves" in (out / "report.html").read_text(encoding="utf-8")

    cmp_out = tmp_path / "cmp"
    outcome = cli(["compare", str(small_run), str(out), "--out", str(cmp_out)])
    assert outcome.code == 0, outcome.stderr
    html = (cmp_out / "compare.html").read_text(encoding="utf-8")
    for title in ("Privacy / utility", "Attack success per attack", "Claimed vs audited"):
        assert title in html
    assert html.count("data:image/png;base64,") == 3
    # the sweep has no run named like the small run's: nothing to difference
    assert json.loads((cmp_out / "compare.json").read_text())["differences"] == []

    # a run against itself and a changed copy: differences are B - A
    changed = _results(small_run)
    changed["runs"][0]["attacks"][0]["metrics"]["auc"]["value"] += 0.25
    (tmp_path / "changed").mkdir()
    (tmp_path / "changed" / "results.json").write_text(json.dumps(changed), encoding="utf-8")
    outcome = cli(["compare", str(small_run), str(tmp_path / "changed"), "--out", str(cmp_out)])
    assert outcome.code == 0, outcome.stderr
    diffs = json.loads((cmp_out / "compare.json").read_text())["differences"]
    by = {(d["attack"], d["metric"]): d for d in diffs}
    assert by[("loss", "auc")]["difference"] == pytest.approx(0.25)
    assert by[("modified-entropy", "auc")]["difference"] == 0
    from privacy_audit.audit.commands.compare import load_for_compare
    from privacy_audit.reports.compare_view import metric_table, records

    named = [load_for_compare(small_run), load_for_compare(tmp_path / "changed")]
    bars = metric_table(records(named), "changed", "auc")  # what the AUC panel draws
    assert (
        bars[("non-private", "loss")]["value"]
        == changed["runs"][0]["attacks"][0]["metrics"]["auc"]["value"]
    )
    assert set(bars) == {
        ("non-private", a) for a in ("loss", "modified-entropy", "lira-online", "rmia-offline")
    }
    csv_text = (cmp_out / "differences.csv").read_text(encoding="utf-8")
    assert csv_text.splitlines()[0].startswith("run,attack,metric,a,b")


def test_compare_refuses_incompatible_schemas(small_run, tmp_path, cli):
    other = _results(small_run)
    other["schema_version"] = 2
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "results.json").write_text(json.dumps(other), encoding="utf-8")
    out = tmp_path / "cmp"
    outcome = cli(["compare", str(small_run), str(tmp_path / "v2"), "--out", str(out)])
    assert outcome.code == 2
    (line,) = outcome.stderr.splitlines()
    assert "incompatible schemas" in line and "schema_version 2" in line
    (tmp_path / "x.json").write_text('{"hello": 1}', encoding="utf-8")
    outcome = cli(["compare", str(small_run), str(tmp_path / "x.json"), "--out", str(out)])
    assert outcome.code == 2 and "incompatible schemas" in outcome.stderr
    outcome = cli(["compare", str(small_run), "--out", str(out)])
    assert outcome.code == 2 and "at least two runs" in outcome.stderr
    assert not out.exists()
