"""Users in the data (``[data] group`` / ``--group-by``): reading the user column in every
format, one ``.txt`` file per user, and the refusals (exit 2, one line naming the column
and the user count, nothing written) for a missing column, a user on both sides, a user
left without texts by cleaning, and fresh texts that are not fresh."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from privacy_audit.audit.data import distinct_records, read_table
from privacy_audit.ground.errors import DataError
from tests.own_models import build_causal_lm, random_texts, save, word_tokenizer


def _write_csv(path, rows, fields=("text", "author")):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(fields))
        w.writeheader()
        w.writerows(rows)
    return path


def _rows(prefix: str, users: int, per: int, seed: int) -> list[dict]:
    return [
        {"text": t, "author": f"{prefix}{u}"}
        for u in range(users)
        for t in random_texts(per, seed * 1000 + u)
    ]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("users-model")
    tok = word_tokenizer()
    return save(build_causal_lm("gpt2", len(tok), seed=0), tok, d / "model")


def test_the_user_column_is_read_in_every_format(tmp_path):
    import pandas as pd

    rows = [{"text": "a b c", "author": "ann"}, {"text": "d e f", "author": 7}]
    _write_csv(tmp_path / "d.csv", rows)
    (tmp_path / "d.jsonl").write_text(
        "".join(
            json.dumps({**r, "author": 7.0 if r["author"] == 7 else r["author"]}) + "\n"
            for r in rows
        ),
        encoding="utf-8",
    )
    pd.DataFrame(rows).astype({"author": str}).to_parquet(tmp_path / "d.parquet")
    import datasets

    datasets.Dataset.from_list([{**r, "author": str(r["author"])} for r in rows]).save_to_disk(
        str(tmp_path / "ds")
    )
    for name in ("d.csv", "d.jsonl", "d.parquet", "ds"):
        got = read_table(tmp_path / name, "text", None, "id", group_column="author")
        # a number is one user by value (7 and 7.0), as labels are
        assert [r["group"] for r in got] == ["ann", "7"], name


def test_one_txt_file_per_user(tmp_path):
    d = tmp_path / "members"
    d.mkdir()
    (d / "alice.txt").write_text("first text\n\nsecond text\n", encoding="utf-8")
    (d / "bob.txt").write_text("bob's text\n", encoding="utf-8")
    got = read_table(d, "text", None, "id")
    assert [(r["group"], r["text"]) for r in got] == [
        ("alice", "first text"),
        ("alice", "second text"),
        ("bob", "bob's text"),
    ]
    (d / "notes.md").write_text("x", encoding="utf-8")
    with pytest.raises(DataError, match="notes.md"):
        read_table(d, "text", None, "id")


def test_an_empty_user_cell_is_refused(tmp_path):
    _write_csv(tmp_path / "d.csv", [{"text": "a b", "author": "x"}, {"text": "c d", "author": " "}])
    with pytest.raises(DataError, match="row 2: group \\(user\\) column 'author' is empty"):
        read_table(tmp_path / "d.csv", "text", None, "id", group_column="author")


def test_copies_collapse_within_a_user_but_two_users_keep_their_own():
    texts = [
        "the same words here now",
        "the same words here now",
        "the same words here now",
        "x y z",
    ]
    keep, info = distinct_records(texts, ["ann", "ann", "bob", "bob"])
    assert keep == [0, 2, 3] and info["removed"] == 1
    keep, _ = distinct_records(texts)
    assert keep == [0, 3]  # without users, copies are one record whoever wrote them


def _run(cli, tmp_path, model_dir, members, nonmembers, *extra):
    m = _write_csv(tmp_path / "members.csv", members)
    n = _write_csv(tmp_path / "nonmembers.csv", nonmembers)
    out = tmp_path / "out"
    outcome = cli(
        ["run", "--model", str(model_dir), "--members", str(m), "--nonmembers", str(n),
         "--out", str(out), *extra]
    )  # fmt: skip
    return outcome, out


def _one_line_refusal(outcome, out):
    assert outcome.code == 2, outcome.stderr[-2000:]
    errors = [ln for ln in outcome.stderr.splitlines() if "error" in ln.lower()]
    assert len(errors) == 1, outcome.stderr
    assert "Traceback" not in outcome.stderr
    assert not out.exists()
    return errors[0]


def test_a_missing_user_column_is_one_line_exit_2(cli, tmp_path, model_dir):
    outcome, out = _run(
        cli, tmp_path, model_dir, _rows("m", 3, 3, 1), _rows("n", 3, 3, 2), "--group-by", "writer"
    )
    line = _one_line_refusal(outcome, out)
    assert "group (user) column 'writer'" in line and "members.csv" in line


def test_a_user_on_both_sides_is_one_line_exit_2(cli, tmp_path, model_dir):
    members = _rows("m", 4, 3, 1)
    nonmembers = _rows("n", 4, 3, 2) + [{"text": "w1 w2 w3 w4", "author": "m0"}]
    members += [{"text": "w5 w6 w7", "author": "n1"}]
    outcome, out = _run(cli, tmp_path, model_dir, members, nonmembers, "--group-by", "author")
    line = _one_line_refusal(outcome, out)
    assert "2 user(s) of group column 'author'" in line and "both" in line


def test_a_user_left_without_texts_is_one_line_exit_2(cli, tmp_path, model_dir):
    members = _rows("m", 4, 3, 1)
    # n9's only text is a copy of a member text: removed as no non-member, n9 has none left
    nonmembers = _rows("n", 4, 3, 2) + [{"text": members[0]["text"], "author": "n9"}]
    outcome, out = _run(cli, tmp_path, model_dir, members, nonmembers, "--group-by", "author")
    line = _one_line_refusal(outcome, out)
    assert "1 user(s) of group column 'author' have no text left" in line and "'n9'" in line


def test_fresh_texts_of_unknown_users_or_copies_of_training_texts_are_refused(
    cli, tmp_path, model_dir
):
    members, nonmembers = _rows("m", 4, 3, 1), _rows("n", 4, 3, 2)
    fresh = _write_csv(tmp_path / "fresh.csv", [{"text": "w9 w8 w7", "author": "zed"}])
    outcome, out = _run(
        cli, tmp_path, model_dir, members, nonmembers, "--group-by", "author", "--fresh", str(fresh)
    )
    line = _one_line_refusal(outcome, out)
    assert "1 user(s) of group column 'author' in the fresh-texts file" in line
    _write_csv(tmp_path / "fresh.csv", [{"text": members[0]["text"], "author": "m0"}])
    outcome, out = _run(
        cli, tmp_path, model_dir, members, nonmembers, "--group-by", "author", "--fresh", str(fresh)
    )
    assert "copies of member (training) texts" in _one_line_refusal(outcome, out)


def test_group_needs_the_users_own_model(cli, tmp_path):
    cfg = tmp_path / "a.toml"
    cfg.write_text('[data]\ngroup = "author"\n', encoding="utf-8")
    outcome = cli(["run", str(cfg), "--out", str(tmp_path / "out")])
    assert outcome.code == 2 and "data.group" in outcome.stderr
    assert not (tmp_path / "out").exists()


def test_examples_keep_their_users_through_subset_and_concat():
    from privacy_audit.defenses.base import Examples

    ex = Examples(["a", "b", "c"], ["x", "y", "z"], np.zeros(3), groups=["u", "v", "u"])
    assert ex.subset([2, 0]).groups == ["u", "u"]
    assert ex.concat(ex.subset([1])).groups == ["u", "v", "u", "v"]
    with pytest.raises(ValueError, match="groups"):
        Examples(["a"], ["x"], np.zeros(1), groups=["u", "v"])


def test_aggregate_only_keeps_no_user_name(cli, tmp_path, model_dir):
    members = [
        {"text": t, "author": f"person-{u}-zq"} for u in range(6) for t in random_texts(3, u)
    ]
    nonmembers = [
        {"text": t, "author": f"person-{u}-zq"} for u in range(6, 12) for t in random_texts(3, u)
    ]
    outcome, out = _run(
        cli, tmp_path, model_dir, members, nonmembers, "--group-by", "author", "--aggregate-only"
    )
    assert outcome.code in (0, 1), outcome.stderr[-2000:]
    for name in ("results.json", "report.html"):
        assert "-zq" not in (out / name).read_text("utf-8"), name
    users = json.loads((out / "results.json").read_text("utf-8"))["runs"][0]["users"]
    assert users["counts"]["members"]["users"] == 6
    assert "pvalues" not in (users["dataset_inference"] or {})
