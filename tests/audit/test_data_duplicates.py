"""Copies of one record inside a side are one record: 40 copies of one member text must
not become 40 independent members (a HIGH verdict and an ε bound resting on one text)."""

from __future__ import annotations

import json

import pytest

from privacy_audit.audit.data import distinct_records
from tests.own_models import (
    build_causal_lm,
    fine_tune,
    random_texts,
    save,
    word_tokenizer,
    write_lines,
)


def test_distinct_records_keeps_the_first_of_each_group_and_counts():
    texts = ["a b c d e f g", "x y z", "a b c d e f g", "A  b c d e f g", "p q r s t u v w"]
    keep, info = distinct_records(texts)
    assert keep == [0, 1, 4]  # equal after normalising (case, spaces) is a copy
    assert info == {"texts": 5, "distinct": 3, "removed": 2, "groups_with_copies": 1, "largest": 3}
    keep, info = distinct_records(["one", "two"])
    assert keep == [0, 1] and info["removed"] == 0 and info["largest"] == 1


@pytest.mark.slow
def test_forty_copies_of_one_member_count_as_one_record(tmp_path, cli):
    tok = word_tokenizer()
    others = random_texts(60, 1)
    copy = random_texts(1, 7, length=20)[0]
    members = [copy] * 40 + others
    nonmembers = random_texts(100, 2)
    write_lines(tmp_path / "members.txt", members)
    write_lines(tmp_path / "nonmembers.txt", nonmembers)
    model = build_causal_lm("gpt2", len(tok), seed=0)
    fine_tune(model, tok, others + [copy], epochs=5)
    save(model, tok, tmp_path / "model")
    cfg = tmp_path / "audit.toml"
    cfg.write_text(
        '[target]\naudit_dir = "model"\n[data]\nmembers = "members.txt"\n'
        'nonmembers = "nonmembers.txt"\n',
        encoding="utf-8",
    )
    out = tmp_path / "out"
    outcome = cli(["run", str(cfg), "--out", str(out)])
    assert outcome.code in (0, 1), outcome.stderr[-3000:]
    res = json.loads((out / "results.json").read_text("utf-8"))
    run = res["runs"][0]
    dups = run["split_check"]["duplicates"]
    assert dups["within_members"] == {
        "texts": 100,
        "distinct": 61,
        "removed": 39,
        "groups_with_copies": 1,
        "largest": 40,
    }
    assert dups["within_nonmembers"]["removed"] == 0
    for a in run["attacks"]:
        if a["status"] == "ok":
            assert a["n_members"] == 61, (a["attack"], a["n_members"])
    assert "39 duplicate member text(s) collapsed" in outcome.stdout + outcome.stderr
    html = (out / "report.html").read_text("utf-8")
    assert "100 member texts hold 61 distinct records" in html
    assert "protected only as a group of 40" in html


def test_score_collapses_copies_of_one_member_text(tmp_path, cli):
    """The issue's case through ``score``: 40 copies of one member text (with their
    scores) count as one member; the bound and the intervals rest on distinct records."""
    import numpy as np

    rng = np.random.default_rng(0)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()

    def text():
        return " ".join(rng.choice(words, 12))

    rows = [(3.0 + 0.01 * i, 1, "the same member text repeated forty times") for i in range(40)]
    rows += [(rng.normal(0.2, 1), 1, text()) for _ in range(60)]
    rows += [(rng.normal(0, 1), 0, text()) for _ in range(100)]
    src = tmp_path / "s.csv"
    src.write_text(
        "score,member,text\n" + "".join(f"{s:.6f},{m},{t}\n" for s, m, t in rows),
        encoding="utf-8",
    )
    out = cli(["score", str(src), "--out", str(tmp_path / "o")])
    assert out.code == 0, out.stderr
    assert "collapsed 39 member row(s)" in out.stderr
    res = json.loads((tmp_path / "o" / "results.json").read_text("utf-8"))
    run = res["runs"][0]
    assert run["attacks"][0]["n_members"] == 61
    w = run["split_check"]["duplicates"]["within_members"]
    assert (w["removed"], w["largest"]) == (39, 40)
    html = (tmp_path / "o" / "report.html").read_text("utf-8")
    assert "100 member texts hold 61 distinct records" in html


def test_blank_texts_are_never_copies_of_each_other():
    keep, info = distinct_records(["", "  ", "a b c d e f", "", "a b c d e f"])
    assert keep == [0, 1, 2, 3] and info["removed"] == 1 and info["largest"] == 2
