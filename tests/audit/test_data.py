"""Audit data: reading JSONL/CSV tables and splitting members / non-members / test."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from privacy_audit import fixtures
from privacy_audit.audit.config import parse_config
from privacy_audit.audit.data import load_audit_data, read_table
from privacy_audit.ground.errors import DataError

LABELS = ["account", "billing", "shipping", "technical"]


def _jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _data_cfg(**data):
    return parse_config({"data": data}).data


# --------------------------------------------------------------------------- #
# read_table
# --------------------------------------------------------------------------- #
def test_read_jsonl(tmp_path):
    p = _jsonl(
        tmp_path / "rows.jsonl",
        [
            {"id": "a1", "text": "hello there", "label": "billing", "extra": 1},
            {"text": "no id here", "label": 3},
        ],
    )
    # blank lines are skipped
    p.write_text(p.read_text(encoding="utf-8") + "\n   \n", encoding="utf-8")
    rows = read_table(p, "text", "label", "id")
    assert rows == [
        {"id": "a1", "text": "hello there", "label": "billing"},
        {"id": "rows-1", "text": "no id here", "label": "3"},  # fallback id, label as text
    ]


def test_read_csv(tmp_path):
    p = tmp_path / "rows.csv"
    p.write_text('id,text,label\nx1,"hello, world",billing\n,second row,shipping\n', "utf-8")
    rows = read_table(p, "text", "label", "id")
    assert rows == [
        {"id": "x1", "text": "hello, world", "label": "billing"},
        {"id": "rows-1", "text": "second row", "label": "shipping"},
    ]


def test_read_custom_columns(tmp_path):
    p = tmp_path / "custom.csv"
    p.write_text("uid,message,topic,text\nu7,my parcel is late,shipping,decoy\n", "utf-8")
    assert read_table(p, "message", "topic", "uid") == [
        {"id": "u7", "text": "my parcel is late", "label": "shipping"}
    ]
    # without an id column, ids are generated from the file name
    assert read_table(p, "message", "topic", None)[0]["id"] == "custom-0"
    j = _jsonl(tmp_path / "custom.jsonl", [{"body": "hi", "y": "account", "key": 9}])
    assert read_table(j, "body", "y", "key") == [{"id": "9", "text": "hi", "label": "account"}]


def test_missing_column_is_named(tmp_path):
    p = _jsonl(
        tmp_path / "rows.jsonl",
        [{"text": "a", "label": "x"}, {"text": "b", "category": "y"}],
    )
    with pytest.raises(DataError, match=r"has no column 'label' \(row 2\)"):
        read_table(p, "text", "label", "id")
    c = tmp_path / "rows.csv"
    c.write_text("message,label\nhi,x\n", "utf-8")
    with pytest.raises(DataError, match=r"rows\.csv.*has no column 'text'"):
        read_table(c, "text", "label", "id")


def test_invalid_json_line_reports_line_number(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text(
        '{"text": "a", "label": "x"}\n\n{"text": "b", "label": \n{"text": "c", "label": "y"}\n',
        "utf-8",
    )
    with pytest.raises(DataError, match=r"bad\.jsonl' line 3 is not valid JSON"):
        read_table(p, "text", "label", "id")
    q = tmp_path / "list.jsonl"
    q.write_text('{"text": "a", "label": "x"}\n["text", "b"]\n', "utf-8")
    with pytest.raises(DataError, match="line 2 is not a JSON object"):
        read_table(q, "text", "label", "id")


def test_non_utf8_file(tmp_path):
    p = tmp_path / "latin1.csv"
    p.write_bytes("text,label\ncaf\u00e9 order,billing\n".encode("latin-1"))
    with pytest.raises(DataError, match=r"latin1\.csv' is not UTF-8 text"):
        read_table(p, "text", "label", "id")


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("empty.jsonl", "", "has no rows"),
        ("empty.csv", "", "is empty"),
        ("header.csv", "text,label\n", "has no rows"),
        ("rows.xml", "text,label\na,b\n", r"must end in \.txt, \.jsonl, .*\.parquet"),
        ("rows.txt", "a\nb\n", r"is plain text .* has no label column"),
        ("nolabel.csv", "text,label\nhello,\n", "column 'label' is empty"),
        ("numtext.jsonl", '{"text": 5, "label": "x"}\n', "column 'text' must be text"),
        ("nulllabel.jsonl", '{"text": "a", "label": null}\n', "column 'label' is empty"),
    ],
)
def test_read_table_rejects(tmp_path, name, content, message):
    p = tmp_path / name
    p.write_text(content, "utf-8")
    with pytest.raises(DataError, match=message):
        read_table(p, "text", "label", "id")


def test_read_table_missing_file(tmp_path):
    with pytest.raises(DataError, match=r"nothing\.jsonl' does not exist"):
        read_table(tmp_path / "nothing.jsonl", "text", "label", "id")


# --------------------------------------------------------------------------- #
# load_audit_data
# --------------------------------------------------------------------------- #
def test_fixture_split_sizes_and_disjointness():
    cfg = _data_cfg(n_members=50, n_nonmembers=40, n_test=30)
    d = load_audit_data(cfg, seed=0, train=True)
    assert (len(d.members), len(d.nonmembers), len(d.test)) == (50, 40, 30)
    ids = [set(d.members.ids), set(d.nonmembers.ids), set(d.test.ids)]
    assert [len(s) for s in ids] == [50, 40, 30]
    assert not ids[0] & ids[1] and not ids[0] & ids[2] and not ids[1] & ids[2]
    private = {r["id"]: r for r in fixtures.load_corpus("private")}
    assert ids[0] | ids[1] | ids[2] <= set(private)
    assert d.label_names == LABELS
    # labels are indices into label_names and match the corpus
    for i, text, y in zip(d.members.ids, d.members.texts, d.members.labels, strict=True):
        assert private[i]["text"] == text and private[i]["label"] == LABELS[y]
    # the public split is loaded for the fixture corpus and never overlaps the private one
    assert d.public is not None and len(d.public) == 2000
    assert not set(d.public.ids) & set(private)
    att = d.attack_set()
    assert att.members.tolist() == [1] * 50 + [0] * 40
    assert att.ids == d.members.ids + d.nonmembers.ids


def test_fixture_split_is_deterministic_per_seed():
    cfg = _data_cfg(n_members=20, n_nonmembers=20, n_test=10)
    a = load_audit_data(cfg, seed=3, train=True)
    b = load_audit_data(cfg, seed=3, train=True)
    c = load_audit_data(cfg, seed=4, train=True)
    assert a.members.ids == b.members.ids
    assert a.nonmembers.ids == b.nonmembers.ids
    assert a.test.ids == b.test.ids
    np.testing.assert_array_equal(a.members.labels, b.members.labels)
    assert a.members.ids != c.members.ids
    assert set(a.members.ids) != set(c.members.ids)


def test_requesting_more_rows_than_the_corpus_has():
    n_private = len(fixtures.load_corpus("private"))
    cfg = _data_cfg(n_members=n_private - 10, n_nonmembers=10, n_test=1)
    with pytest.raises(DataError, match=f"corpus has {n_private} rows.*= {n_private + 1}"):
        load_audit_data(cfg, seed=0, train=True)


def test_user_corpus_file(tmp_path):
    rows = [
        {"id": f"r{i}", "text": f"message number {i}", "label": ["x", "y"][i % 2]}
        for i in range(12)
    ]
    corpus = _jsonl(tmp_path / "corpus.jsonl", rows)
    cfg = _data_cfg(corpus=str(corpus), n_members=4, n_nonmembers=4, n_test=4)
    d = load_audit_data(cfg, seed=0, train=True)
    assert d.label_names == ["x", "y"]
    assert sorted(d.members.ids + d.nonmembers.ids + d.test.ids) == sorted(r["id"] for r in rows)
    assert d.public is None


def test_explicit_member_files(tmp_path):
    members = _jsonl(
        tmp_path / "in.jsonl",
        [{"id": "m1", "text": "a", "label": "x"}, {"id": "m2", "text": "b", "label": "y"}],
    )
    nonmembers = _jsonl(tmp_path / "out.jsonl", [{"id": "n1", "text": "c", "label": "x"}])
    cfg = _data_cfg(members=str(members), nonmembers=str(nonmembers))
    d = load_audit_data(cfg, seed=0, train=True)
    assert d.members.ids == ["m1", "m2"] and d.nonmembers.ids == ["n1"]
    assert d.test.ids == ["n1"]  # the test set defaults to the non-members
    assert d.public is None


def test_explicit_files_errors(tmp_path):
    one_class = _jsonl(
        tmp_path / "in.jsonl",
        [{"id": "m1", "text": "a", "label": "x"}, {"id": "m2", "text": "b", "label": "x"}],
    )
    dup = _jsonl(tmp_path / "dup.jsonl", [{"id": "m1", "text": "c", "label": "y"}])
    out = _jsonl(
        tmp_path / "out.jsonl",
        [{"id": "n1", "text": "c", "label": "z"}, {"id": "n2", "text": "d", "label": "x"}],
    )
    cfg = _data_cfg(members=str(one_class), nonmembers=str(out))
    with pytest.raises(DataError, match="single task label"):
        load_audit_data(cfg, seed=0, train=True)
    # auditing a trained model needs no two classes, but labels must be the model's
    d = load_audit_data(cfg, seed=0, train=False, label_names=["x", "y", "z"])
    assert d.members.labels.tolist() == [0, 0] and d.nonmembers.labels.tolist() == [2, 0]
    with pytest.raises(DataError, match="label 'z' in the data is not one of the model's labels"):
        load_audit_data(cfg, seed=0, train=False, label_names=["x", "y"])
    cfg = _data_cfg(members=str(one_class), nonmembers=str(dup))
    with pytest.raises(DataError, match="ids are not unique"):
        load_audit_data(cfg, seed=0, train=False)


def test_utf8_bom_is_accepted(tmp_path):
    """Spreadsheet exports ("CSV UTF-8") start with a byte-order mark."""
    c = tmp_path / "excel.csv"
    c.write_bytes(b"\xef\xbb\xbftext,label\nhello,billing\n")
    assert read_table(c, "text", "label", "id") == [
        {"id": "excel-0", "text": "hello", "label": "billing"}
    ]
    j = tmp_path / "bom.jsonl"
    j.write_bytes(b'\xef\xbb\xbf{"text": "hi", "label": "x", "id": "k"}\n')
    assert read_table(j, "text", "label", "id") == [{"id": "k", "text": "hi", "label": "x"}]


# --------------------------------------------------------------------------- #
# users' text formats (issue 15): .txt, .jsonl, .csv, .parquet, a saved dataset
# --------------------------------------------------------------------------- #
TEXTS = ["first example", "second, with a comma", 'third "quoted"', "fourth ünïcode"]


def _all_formats(tmp_path):
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    (tmp_path / "ex.txt").write_text(
        "\n".join([TEXTS[0], "", TEXTS[1], "   ", TEXTS[2], TEXTS[3]]) + "\n", "utf-8"
    )
    _jsonl(tmp_path / "ex.jsonl", [{"text": t} for t in TEXTS])
    with open(tmp_path / "ex.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["text"])
        w.writerows([[t] for t in TEXTS])
    pq.write_table(
        pa.table({"text": TEXTS, "id": [f"p{i}" for i in range(4)]}), tmp_path / "ex.parquet"
    )
    datasets.Dataset.from_dict({"text": TEXTS}).save_to_disk(str(tmp_path / "ex-ds"))
    return {
        "txt": tmp_path / "ex.txt",
        "jsonl": tmp_path / "ex.jsonl",
        "csv": tmp_path / "ex.csv",
        "parquet": tmp_path / "ex.parquet",
        "dataset": tmp_path / "ex-ds",
    }


def test_every_text_format_loads_without_labels(tmp_path):
    paths = _all_formats(tmp_path)
    for kind, path in paths.items():
        rows = read_table(path, "text", None, "id")
        assert [r["text"] for r in rows] == TEXTS, kind
        assert {r["label"] for r in rows} == {"-"}
    ids = {k: [r["id"] for r in read_table(p, "text", None, "id")] for k, p in paths.items()}
    assert ids["txt"] == ["ex:1", "ex:3", "ex:5", "ex:6"]  # line numbers; blanks skipped
    assert ids["jsonl"] == ["ex-0", "ex-1", "ex-2", "ex-3"]  # rows
    assert ids["parquet"] == ["p0", "p1", "p2", "p3"]  # the data's own id column
    assert ids["dataset"] == ["ex-ds-0", "ex-ds-1", "ex-ds-2", "ex-ds-3"]
    # and as audit data for a causal LM: one label, no label column anywhere
    cfg = {
        "members": str(paths["txt"]),
        "nonmembers": str(paths["dataset"]),
        "test": None,
        "corpus": None,
        "public": None,
        "text_column": "text",
        "label_column": "label",
        "id_column": "id",
    }
    # the same four texts on both sides are exact duplicates (issue 26): refused
    with pytest.raises(DataError, match="exact duplicates"):
        load_audit_data(cfg, seed=0, train=False, labels=False)
    cfg["nonmembers"] = str(_jsonl(tmp_path / "held.jsonl", [{"text": t + "!"} for t in TEXTS]))
    d = load_audit_data(cfg, seed=0, train=False, labels=False)
    assert d.label_names == ["-"] and len(d.members) == 4 and len(d.nonmembers) == 4


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: (p / "e.txt").write_text("\n \n", "utf-8") and p / "e.txt", "has no rows"),
        (
            lambda p: (p / "e.parquet").write_bytes(b"PAR1 not really") and p / "e.parquet",
            "is not a readable parquet file",
        ),
        (lambda p: (p / "d").mkdir() or p / "d", "not one saved by datasets.Dataset.save_to_disk"),
    ],
)
def test_bad_user_files_are_one_clear_error(tmp_path, make, message):
    with pytest.raises(DataError, match=message):
        read_table(make(tmp_path), "text", None, "id")


def test_wrong_column_in_parquet_and_dataset(tmp_path):
    paths = _all_formats(tmp_path)
    for kind in ("parquet", "dataset", "csv"):
        with pytest.raises(DataError, match=r"has no column 'body' \(row 1\); its columns: .*text"):
            read_table(paths[kind], "body", None, "id")


def test_bad_data_file_from_the_cli_is_exit_2(tmp_path, cli):
    from tests.own_models import build_causal_lm, save, word_tokenizer

    tok = word_tokenizer()
    save(build_causal_lm("gpt2", len(tok), d=16), tok, tmp_path / "m")
    (tmp_path / "ok.txt").write_text("w1 w2\nw3 w4\n", "utf-8")
    (tmp_path / "bad.parquet").write_bytes(b"not parquet at all")
    outcome = cli(
        ["run", "--model", str(tmp_path / "m"), "--members", str(tmp_path / "bad.parquet")]
        + ["--nonmembers", str(tmp_path / "ok.txt"), "--out", str(tmp_path / "out"), "--quiet"]
    )
    assert outcome.code == 2, outcome.stderr
    lines = outcome.stderr.strip().splitlines()
    assert len(lines) == 1 and "is not a readable parquet file" in lines[0]
    assert not (tmp_path / "out" / "results.json").exists()
