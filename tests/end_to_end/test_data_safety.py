"""Nothing overwritten, nothing silently stale (issue 26, item 2).

- D1: the gate refuses a ``--junit`` / ``--summary`` path that is one of its inputs;
- D2: ``--resume`` re-runs the tasks whose data file changed (content hash in the task
  key) and says why, even when the edit kept the file's size and mtime;
- D3: a second run into an ``--out`` a live run holds is refused (exit 2) before it
  clears or writes anything; a stale lock (its process gone) is taken over.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]


def _score_results(tmp_path: Path, cli) -> Path:
    rng = np.random.default_rng(0)
    src = tmp_path / "s.csv"
    with open(src, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["score", "member"])
        for i in range(200):
            w.writerow([rng.normal() + (i < 100), int(i < 100)])
    out = tmp_path / "scored"
    assert cli(["score", str(src), "--out", str(out), "--bootstrap", "100"]).code == 0
    return out / "results.json"


def test_gate_refuses_to_write_over_its_inputs(tmp_path, cli):
    results = _score_results(tmp_path, cli)
    base = tmp_path / "base.json"
    base.write_bytes(results.read_bytes())
    before = {p: p.read_bytes() for p in (results, base)}
    same = str(results.parent / ".." / results.parent.name / results.name)  # another spelling
    link = tmp_path / "link.json"
    link.symlink_to(base)
    cases = [
        ["gate", str(results), "--max-auc", "0.99", "--summary", str(results)],
        ["gate", str(results), "--max-auc", "0.99", "--junit", same],
        ["gate", str(results), "--baseline", str(base), "--junit", str(base)],
        ["gate", str(results), "--baseline", str(base), "--summary", str(link)],
    ]
    for argv in cases:
        out = cli(argv)
        assert out.code == 2, (argv, out.stdout, out.stderr)
        assert out.stderr.count("\n") == 1 and "would overwrite an input" in out.stderr, argv
        assert out.stdout == ""
        for p, data in before.items():
            assert p.read_bytes() == data, (argv, p)


CONFIG = """\
seed = 0
[data]
members = "members.jsonl"
nonmembers = "nonmembers.jsonl"
[target]
preset = "tiny"
max_length = 16
public_epochs = 0
[train]
epochs = 1
batch_size = 16
[[defenses]]
name = "none"
[attacks]
names = ["loss"]
[metrics]
bootstrap = 100
"""


def _write_data(d: Path) -> Path:
    from privacy_audit import fixtures

    rows = fixtures.load_corpus("private")[:48]
    for name, part in (("members", rows[:24]), ("nonmembers", rows[24:])):
        with open(d / f"{name}.jsonl", "w", encoding="utf-8") as fh:
            for r in part:
                fh.write(json.dumps({"id": r["id"], "text": r["text"], "label": r["label"]}) + "\n")
    cfg = d / "audit.toml"
    cfg.write_text(CONFIG, encoding="utf-8")
    return cfg


def _starts(log: Path) -> list[str]:
    return [ln.split()[2] for ln in log.read_text(encoding="utf-8").splitlines() if " start " in ln]


def test_resume_reruns_tasks_whose_data_changed_and_says_why(tmp_path, cli):
    cfg = _write_data(tmp_path)
    out = tmp_path / "out"
    first = cli(["run", str(cfg), "--out", str(out), "--quiet"])
    assert first.code == 0, first.stderr
    log = out / "run" / "events.log"
    (key,) = _starts(log)
    res1 = json.loads((out / "results.json").read_text(encoding="utf-8"))

    # unchanged inputs: nothing runs again
    again = cli(["run", str(cfg), "--out", str(out), "--resume"])
    assert again.code == 0, again.stderr
    assert _starts(log) == [key]

    # the same size and mtime, other contents: one letter of one non-member text swapped
    f = tmp_path / "nonmembers.jsonl"
    st = f.stat()
    text = f.read_text(encoding="utf-8")
    i = text.index('"text": "') + len('"text": "')
    swapped = text[:i] + ("x" if text[i] != "x" else "y") + text[i + 1 :]
    f.write_text(swapped, encoding="utf-8")
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert f.stat().st_size == st.st_size and f.stat().st_mtime_ns == st.st_mtime_ns

    resumed = cli(["run", str(cfg), "--out", str(out), "--resume"])
    assert resumed.code == 0, resumed.stderr
    assert "data.nonmembers" in resumed.stderr and "changed contents" in resumed.stderr
    starts = _starts(log)
    assert len(starts) == 2 and starts[1] != key, "the task on the old data was reused"
    assert "input-changed data.nonmembers" in log.read_text(encoding="utf-8")
    res2 = json.loads((out / "results.json").read_text(encoding="utf-8"))
    s1 = res1["runs"][0]["attacks"][0]["examples"]["scores"]
    s2 = res2["runs"][0]["attacks"][0]["examples"]["scores"]
    assert s1 != s2  # scored on the new text


def _proc_start(pid: int) -> str:
    """Field 22 of /proc/PID/stat (start time in clock ticks), read here independently."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rfind(")") + 2 :].split()[19]


def test_a_live_run_holds_its_out_directory_and_a_stale_lock_is_taken_over(tmp_path, cli):
    cfg = _write_data(tmp_path)
    out = tmp_path / "out"
    tasks = out / "run" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "finished.json").write_text('{"run": {}}', encoding="utf-8")
    (out / "run" / "events.log").write_text("1 start finished x\n", encoding="utf-8")
    host = os.uname().nodename
    lock = out / ".privacy-audit.lock"
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        lock.write_text(f"{live.pid} {host} {_proc_start(live.pid)}\n", encoding="utf-8")
        second = cli(["run", str(cfg), "--out", str(out), "--quiet"])
        assert second.code == 2, second.stderr
        assert second.stderr.count("\n") == 1
        assert f"PID {live.pid}" in second.stderr and "in use by another" in second.stderr
        # refused before it cleared the live run's tasks and log or wrote anything
        assert (tasks / "finished.json").is_file()
        assert (out / "run" / "events.log").read_text(encoding="utf-8") == "1 start finished x\n"
        assert lock.read_text(encoding="utf-8").split()[0] == str(live.pid)
        assert not (out / "results.json").exists()
    finally:
        live.kill()
        live.wait()
    # the holder is gone (a killed run leaves its lock): the next run takes the lock over
    third = cli(["run", str(cfg), "--out", str(out), "--quiet"])
    assert third.code == 0, third.stderr
    assert not lock.exists() and (out / "results.json").is_file()
    # a PID that now belongs to another process (reused) is stale too
    from privacy_audit.ground.lock import DirLock

    lock.write_text(f"{os.getpid()} {host} 1\n", encoding="utf-8")
    with DirLock(out, "--out"):
        assert lock.read_text(encoding="utf-8").split()[2] == _proc_start(os.getpid())
    assert not lock.exists()
