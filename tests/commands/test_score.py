"""``score``'s CSV, read as a CSV writer means it: refusals name the row and the cause;
what ``[data]`` accepts (a float member column) is accepted here too; short or numeric
texts run the split check instead of failing inside it."""

from __future__ import annotations

import json

import numpy as np
import pytest


def _write(path, header, rows):
    path.write_text(
        ",".join(header) + "\n" + "".join(",".join(map(str, r)) + "\n" for r in rows),
        encoding="utf-8",
    )
    return str(path)


def _rows(n=40, seed=0):
    rng = np.random.default_rng(seed)
    return [(f"{rng.normal(i % 2, 1):.6f}", i % 2) for i in range(n)]


@pytest.mark.parametrize("bad", ["1_000", "١٢", "0x10", "1,5"])
def test_a_score_only_python_would_parse_is_refused(tmp_path, cli, bad):
    rows = _rows()
    rows[3] = (f'"{bad}"' if "," in bad else bad, 1)
    out = cli(
        [
            "score",
            _write(tmp_path / "s.csv", ("score", "member"), rows),
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert out.code == 2, out.stdout + out.stderr
    assert "line 5: score" in out.stderr and "is not a number" in out.stderr
    assert not (tmp_path / "o").exists()


def test_a_row_with_more_fields_than_the_header_is_refused(tmp_path, cli):
    rows = _rows()
    rows[5] = ("0.5", "0", "extra")
    out = cli(
        [
            "score",
            _write(tmp_path / "s.csv", ("score", "member"), rows),
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert out.code == 2
    assert "a row holds 3 fields but the header names 2 (score,member)" in out.stderr
    assert "(data row 6)" in out.stderr


def test_a_float_member_column_is_read_as_data_reads_it(tmp_path, cli):
    rows = [(s, f"{m}.0") for s, m in _rows()]
    out = cli(
        [
            "score",
            _write(tmp_path / "s.csv", ("score", "member"), rows),
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert out.code == 0, out.stderr
    res = json.loads((tmp_path / "o" / "results.json").read_text("utf-8"))
    a = res["runs"][0]["attacks"][0]
    assert (a["n_members"], a["n_nonmembers"]) == (20, 20)
    bad = [(s, "0.5") if i == 2 else (s, m) for i, (s, m) in enumerate(rows)]
    out = cli(
        [
            "score",
            _write(tmp_path / "b.csv", ("score", "member"), bad),
            "--out",
            str(tmp_path / "p"),
        ]
    )
    assert out.code == 2 and "line 4: member must be 0/1 or true/false, got '0.5'" in out.stderr


def test_numeric_texts_run_the_split_check(tmp_path, cli):
    """Texts with no n-gram shared by two texts (numbers): the blind classifier has no
    n-gram features, not a crash (sklearn's "Found array with 0 feature(s)")."""
    rng = np.random.default_rng(1)
    rows = [(f"{rng.normal(1, 1):.5f}", 1, str(i)) for i in range(60)]
    rows += [(f"{rng.normal(0, 1):.5f}", 0, str(100 + i)) for i in range(60)]
    out = cli(
        [
            "score",
            _write(tmp_path / "s.csv", ("score", "member", "text"), rows),
            "--out",
            str(tmp_path / "o"),
        ]
    )
    assert out.code == 0, out.stderr
    assert "feature(s)" not in out.stdout + out.stderr
    res = json.loads((tmp_path / "o" / "results.json").read_text("utf-8"))
    assert res["runs"][0]["split_check"]["blind"]["auc"]["value"] is not None


def test_an_interrupted_score_leaves_no_output_folder(tmp_path, cli, monkeypatch):
    """^C while scoring: exit 130, one line, and the --out folder it created is gone."""
    import privacy_audit.audit.runner as runner

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "score_file", interrupted)
    out = tmp_path / "o"
    res = cli(
        ["score", _write(tmp_path / "s.csv", ("score", "member"), _rows()), "--out", str(out)]
    )
    assert res.code == 130, res.stdout + res.stderr
    assert "interrupted; no partial report was written" in res.stderr
    assert not out.exists()
