"""Verdicts at the edges (issue 26, item 1): inverted scores, label sets that do not match,
the same texts among members and non-members, and clashing ids of same-named files.

Each test builds its own small inputs; nothing trains a model (a run that must be refused
stops before any training)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from privacy_audit.audit.data import load_audit_data
from privacy_audit.ground.errors import DataError


def _data_cfg(**kw) -> dict:
    from privacy_audit.audit.config_schema import SCHEMA

    cfg = {k: v[1] for k, v in SCHEMA["data"].items()}
    cfg.update(kw)
    return cfg


def _scores_csv(path: Path, member_scores, nonmember_scores, texts=None) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["score", "member", "id"] + (["text"] if texts is not None else []))
        rows = [(s, 1) for s in member_scores] + [(s, 0) for s in nonmember_scores]
        for i, (s, m) in enumerate(rows):
            w.writerow([repr(float(s)), m, f"r{i}"] + ([texts[i]] if texts is not None else []))
    return path


# --------------------------------------------------------------------------- #
# V2: an AUC interval entirely below 0.5
# --------------------------------------------------------------------------- #
def test_inverted_scores_are_invalid_attack_never_low_and_the_gate_fails(tmp_path, cli):
    """A sign-flipped attack (members score lower) used to read LOW, with a text saying its
    interval "includes 0.5", and `gate --max-auc 0.6 --strict` passed it."""
    rng = np.random.default_rng(0)
    n = 300
    members = -(rng.normal(size=n) + 3.0)  # the attack's direction flipped
    nonmembers = -rng.normal(size=n)
    src = _scores_csv(tmp_path / "scores.csv", members, nonmembers)
    out = tmp_path / "out"
    outcome = cli(["score", str(src), "--out", str(out), "--bootstrap", "200"])
    assert outcome.code == 0, outcome.stderr
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    (run,) = res["runs"]
    auc = run["attacks"][0]["metrics"]["auc"]
    # independent check of the direction: sklearn's AUC of the same scores
    from sklearn.metrics import roc_auc_score

    labels = np.r_[np.ones(n), np.zeros(n)]
    assert roc_auc_score(labels, np.r_[members, nonmembers]) == pytest.approx(auc["value"])
    assert auc["ci_high"] < 0.5
    verdict = run["verdict"]
    assert verdict["level"] == "invalid-attack"
    assert (
        "the scores point the wrong way: check the labels or the score direction"
        in (verdict["text"])
    )
    assert "includes 0.5" not in verdict["text"]
    gate = cli(["gate", str(out / "results.json"), "--max-auc", "0.6", "--strict"])
    assert gate.code == 1, gate.stdout + gate.stderr
    assert "invalid-attack" in gate.stdout


def test_an_interval_reaching_chance_is_not_invalid():
    """The new level is only for intervals entirely below 0.5: [0.45, 0.52] stays a
    sample-size question."""
    from privacy_audit.reports.verdict import verdict_level

    run = {
        "attacks": [
            {
                "attack": "loss",
                "status": "ok",
                "n_members": 5000,
                "n_nonmembers": 5000,
                "metrics": {
                    "auc": {"value": 0.485, "ci_low": 0.45, "ci_high": 0.52},
                    "tpr_at_fpr_0.01": {"value": 0.01, "ci_low": 0.005, "ci_high": 0.02},
                },
            }
        ]
    }
    assert verdict_level(run)[0] == "low"
    run["attacks"][0]["metrics"]["auc"].update(value=0.46, ci_low=0.44, ci_high=0.499)
    assert verdict_level(run)[0] == "invalid-attack"


# --------------------------------------------------------------------------- #
# V3: label sets
# --------------------------------------------------------------------------- #
def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_labels_compare_by_value_and_disjoint_label_sets_are_refused(tmp_path, cli):
    """`1` and `1.0` are one class; a non-member label set that shares nothing with the
    members' (e.g. ``label_column = "text"``) is exit 2 naming both sets."""
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    m = _jsonl(
        tmp_path / "m.jsonl",
        [{"text": f"{w} member {i}", "label": i % 2} for i, w in enumerate(words)],
    )
    n = _jsonl(
        tmp_path / "n.jsonl",
        [{"text": f"{w} held out {i}", "label": float(i % 2)} for i, w in enumerate(words)],
    )
    data = load_audit_data(_data_cfg(members=str(m), nonmembers=str(n)), 0, train=True)
    assert data.label_names == ["0", "1"]  # 1 and 1.0 are the same class
    assert list(data.members.labels) == list(data.nonmembers.labels)

    with pytest.raises(DataError, match="no non-member label occurs among the members") as e:
        load_audit_data(
            _data_cfg(members=str(m), nonmembers=str(n), label_column="text"), 0, train=True
        )
    assert "alpha member 0" in str(e.value) and "alpha held out 0" in str(e.value)

    cfg = tmp_path / "c.toml"
    cfg.write_text(
        f'[data]\nmembers = "{m}"\nnonmembers = "{n}"\nlabel_column = "text"\n'
        '[target]\npreset = "tiny"\n[[defenses]]\nname = "none"\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    outcome = cli(["run", str(cfg), "--out", str(out), "--quiet"])
    assert outcome.code == 2, outcome.stderr
    assert outcome.stderr.count("\n") == 1
    assert "no non-member label occurs among the members" in outcome.stderr
    assert not out.exists() or not any(out.iterdir())


# --------------------------------------------------------------------------- #
# V4: exact duplicates across the sets, on every path
# --------------------------------------------------------------------------- #
def test_exact_duplicates_are_counted_reported_and_removed_on_every_path(tmp_path, cli):
    texts = [f"example number {i} about topic {i % 7}" for i in range(40)]
    m = tmp_path / "m.txt"
    m.write_text("\n".join(texts[:20]) + "\n", encoding="utf-8")
    # half of the non-members are copies of members (one with stray whitespace)
    held = texts[20:30] + texts[:9] + ["  " + texts[9] + " "]
    n = tmp_path / "n.txt"
    n.write_text("\n".join(held) + "\n", encoding="utf-8")

    # files given explicitly (an LM audit of the user's model reads them this way)
    data = load_audit_data(_data_cfg(members=str(m), nonmembers=str(n)), 0, False, labels=False)
    assert data.exact_duplicates["removed_nonmembers"] == 10
    assert len(data.nonmembers) == 10
    assert not {t.strip() for t in data.nonmembers.texts} & set(data.members.texts)
    assert data.test.texts == data.nonmembers.texts  # the default test set is the non-members

    # identical files: nothing can be measured, exit 2 before any work
    with pytest.raises(DataError, match="every one of the 20 non-member texts"):
        load_audit_data(_data_cfg(members=str(m), nonmembers=str(m)), 0, False, labels=False)

    # a corpus split by a built-in config: duplicated rows land on both sides of the split
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(texts + texts) + "\n", encoding="utf-8")
    data = load_audit_data(
        _data_cfg(corpus=str(corpus), n_members=30, n_nonmembers=30, n_test=10),
        0,
        True,
        labels="optional",
    )
    removed = data.exact_duplicates["removed_nonmembers"]
    assert removed > 0 and len(data.nonmembers) == 30 - removed
    assert not set(data.nonmembers.texts) & set(data.members.texts)

    # `score` with a text column
    rng = np.random.default_rng(1)
    score_texts = texts[:20] + texts[:5] + texts[20:35]
    src = _scores_csv(
        tmp_path / "s.csv", rng.normal(size=20), rng.normal(size=20), texts=score_texts
    )
    out = tmp_path / "out"
    outcome = cli(["score", str(src), "--out", str(out), "--bootstrap", "100"])
    assert outcome.code == 0, outcome.stderr
    assert "removed 5 non-member row(s)" in outcome.stderr
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    (run,) = res["runs"]
    assert run["exact_duplicates"]["removed_nonmembers"] == 5
    assert run["attacks"][0]["n_nonmembers"] == 15
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "5 of 20 non-member text(s) were exact copies of member texts" in html

    # every score row a duplicate: refused
    src = _scores_csv(
        tmp_path / "t.csv", rng.normal(size=5), rng.normal(size=5), texts=texts[:5] * 2
    )
    outcome = cli(["score", str(src), "--out", str(tmp_path / "o2"), "--bootstrap", "100"])
    assert outcome.code == 2 and "exact duplicates" in outcome.stderr


def test_same_named_txt_files_in_different_folders_get_distinct_ids(tmp_path):
    (tmp_path / "train").mkdir()
    (tmp_path / "heldout").mkdir()
    m = tmp_path / "train" / "data.txt"
    n = tmp_path / "heldout" / "data.txt"
    m.write_text("one member\ntwo member\n", encoding="utf-8")
    n.write_text("one held out\ntwo held out\n", encoding="utf-8")
    data = load_audit_data(_data_cfg(members=str(m), nonmembers=str(n)), 0, False, labels=False)
    assert data.members.ids == ["train/data:1", "train/data:2"]
    assert data.nonmembers.ids == ["heldout/data:1", "heldout/data:2"]

    # ids given by the user that clash: the error names both files
    a = _jsonl(tmp_path / "train" / "a.jsonl", [{"id": "x", "text": "t1", "label": 0}])
    b = _jsonl(tmp_path / "heldout" / "b.jsonl", [{"id": "x", "text": "t2", "label": 0}])
    with pytest.raises(DataError) as e:
        load_audit_data(_data_cfg(members=str(a), nonmembers=str(b)), 0, False, labels=False)
    assert str(a) in str(e.value) and str(b) in str(e.value)
