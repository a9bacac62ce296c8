"""The gate reads every attack as the README says (issue 26, item 6): every ``ok``
attack's ε lower bound against the claim, an errored attack as unmeasured, ``status``
case-insensitively; and ``score`` refuses a repeated column name. (The report's
"Claimed vs audited ε" layout is checked in a real browser in tests/end_to_end/test_browser.py.)"""

from __future__ import annotations

import json
from pathlib import Path

CLAIM = {"epsilon": 1.0, "delta": 1e-5, "unit": "example", "notion": "central-dp", "proven": True}


def _attack(name: str, auc: float, status: str = "ok", lb: float = 0.0) -> dict:
    return {
        "attack": name,
        "status": status,
        "reason": None if status.lower() == "ok" else "the surface returned NaN",
        "n_members": 1000,
        "n_nonmembers": 1000,
        "metrics": {
            "auc": {"value": auc, "ci_low": max(0.0, auc - 0.03), "ci_high": min(1.0, auc + 0.03)},
            "tpr_at_fpr_0.01": {"value": 0.02, "ci_low": 0.01, "ci_high": 0.03},
            "epsilon_lower_bound": {"value": lb, "delta": 1e-5, "confidence": 0.95},
        },
    }


def _write(tmp_path: Path, runs: list[dict]) -> str:
    p = tmp_path / "results.json"
    p.write_text(json.dumps({"schema_version": 1, "runs": runs}), encoding="utf-8")
    return str(p)


def _fails(outcome) -> list[str]:
    return [ln for ln in outcome.stdout.splitlines() if ln.startswith("FAIL:")]


def test_gate_reads_every_attack_status_and_bound(tmp_path, cli):
    # a weaker attack (lower AUC) certifies ε ≥ 3 against a claimed ε = 1
    run = {
        "name": "dp",
        "claim": CLAIM,
        "strongest_attack": "loss",
        "attacks": [_attack("loss", 0.62, lb=0.2), _attack("zlib", 0.58, lb=3.0)],
    }
    out = cli(["gate", _write(tmp_path, [run]), "--max-auc", "0.9"])
    assert out.code == 1, out.stdout
    assert any("VIOLATED" in f and "3" in f for f in _fails(out)), out.stdout
    run["attacks"][1]["metrics"]["epsilon_lower_bound"]["value"] = 0.5  # below the claim
    assert cli(["gate", _write(tmp_path, [run]), "--max-auc", "0.9"]).code == 0

    # an attack that errored is unmeasured, not absent
    run = {"name": "r", "attacks": [_attack("loss", 0.55), _attack("zlib", 0.99, "error")]}
    out = cli(["gate", _write(tmp_path, [run]), "--max-auc", "0.9"])
    assert out.code == 1, out.stdout
    assert any("'zlib'" in f and "errored" in f for f in _fails(out)), out.stdout

    # status compared case-insensitively: "OK" is measured and held to the threshold
    run = {"name": "r", "attacks": [_attack("loss", 0.55), _attack("zlib", 0.95, "OK")]}
    out = cli(["gate", _write(tmp_path, [run]), "--max-auc", "0.9"])
    assert out.code == 1, out.stdout
    assert any("zlib" in f and "0.95" in f for f in _fails(out)), out.stdout
    run = {"name": "r", "attacks": [_attack("loss", 0.55), _attack("zlib", 0.5, " Error ")]}
    assert cli(["gate", _write(tmp_path, [run]), "--max-auc", "0.9"]).code == 1


def test_score_refuses_a_repeated_column_name(tmp_path, cli):
    src = tmp_path / "s.csv"
    rows = "".join(f"{i / 10},{int(i < 10)},{1 - i / 10}\n" for i in range(20))
    src.write_text("score,member,score\n" + rows, encoding="utf-8")
    out = tmp_path / "out"
    outcome = cli(["score", str(src), "--out", str(out)])
    assert outcome.code == 2, outcome.stderr
    assert outcome.stderr.count("\n") == 1 and "'score' twice" in outcome.stderr
    assert not (out / "results.json").exists()
