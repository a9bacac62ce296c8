"""``privacy-audit score --group-by COLUMN``: your own per-text scores grouped by user.

Every user-level number in results.json is recomputed here independently (a pandas
group-by of the CSV and sklearn's AUC); stdout and the gate read the user level; bad user
columns are refused in one line with exit 2 and nothing written."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from tests.own_models import random_texts

N_USERS = 20  # per side


def _frame(seed: int = 0, n_users: int = N_USERS, shift: float = 0.8) -> pd.DataFrame:
    """Users with 2-7 texts each; a user's texts share a per-user offset (a cluster), the
    member users' offsets shifted by ``shift``: pooling a user's texts is the stronger
    attack."""
    rng = np.random.default_rng(seed)
    rows = []
    for u in range(2 * n_users):
        member = int(u < n_users)
        offset = rng.normal(shift * member, 1.0)
        for j in range(int(rng.integers(2, 8))):
            rows.append(
                {
                    "score": round(float(offset + rng.normal(0, 1.0)), 6),
                    "member": member,
                    "id": f"t{u}-{j}",
                    "author": f"user {u}",
                }
            )
    return pd.DataFrame(rows)


def _write(path, frame: pd.DataFrame):
    frame.to_csv(path, index=False, quoting=csv.QUOTE_MINIMAL)
    return path


def _score(cli, tmp_path, frame, *extra, name="s.csv"):
    src = _write(tmp_path / name, frame)
    out = tmp_path / "out"
    outcome = cli(["score", str(src), "--bootstrap", "200", "--out", str(out), *extra])
    return outcome, out


@pytest.fixture(scope="module")
def scored(tmp_path_factory):
    from tests.conftest import invoke_cli

    d = tmp_path_factory.mktemp("score-users")
    frame = _frame()
    outcome, out = _score(invoke_cli, d, frame, "--group-by", "author")
    assert outcome.code in (0, 1), outcome.stderr[-3000:]
    res = json.loads((out / "results.json").read_text("utf-8"))
    return {"frame": frame, "outcome": outcome, "out": out, "run": res["runs"][0]}


def test_every_user_aggregate_and_auc_equal_pandas_and_sklearn(scored):
    f, run = scored["frame"], scored["run"]
    users = run["users"]
    g = f.groupby("author").agg(
        mean=("score", "mean"), total=("score", "sum"), median=("score", "median"),
        member=("member", "first"), texts=("score", "size"),
    )  # fmt: skip
    assert users["column"] == "author" and users["unit"] == "user"
    assert users["counts"]["members"]["users"] == N_USERS
    assert users["counts"]["nonmembers"]["texts"] == int((f["member"] == 0).sum())
    for how, col in (("mean", "mean"), ("lr-sum", "total"), ("median", "median")):
        rec = next(a for a in users["attacks"] if a["attack"] == f"user-scores:user-{how}")
        ex = rec["examples"]
        got = pd.Series(ex["scores"], index=ex["ids"])
        np.testing.assert_allclose(got.loc[g.index], g[col], rtol=1e-12, atol=1e-12)
        assert (
            pd.Series(ex["n_texts"], index=ex["ids"]).loc[g.index].tolist() == g["texts"].tolist()
        )
        assert rec["metrics"]["auc"]["value"] == pytest.approx(roc_auc_score(g["member"], g[col]))
        assert rec["unit"] == "user" and rec["n_members"] == rec["n_nonmembers"] == N_USERS
    # the per-text attack: same point AUC, interval that resamples users
    att = run["attacks"][0]
    assert att["metrics"]["auc"]["value"] == pytest.approx(roc_auc_score(f["member"], f["score"]))
    assert att["resampled"] == "users" and att["metrics"]["n_member_users"] == N_USERS
    assert "Obuchowski" in att["metrics"]["auc"]["method"]
    # the per-user p-values: conformal against the non-member users' means, independently
    di = users["dataset_inference"]
    null = g.loc[g["member"] == 0, "mean"].to_numpy()
    for name, row in g[g["member"] == 1].iterrows():
        assert di["pvalues"][name] == pytest.approx((1 + (null >= row["mean"]).sum()) / 21)


def test_stdout_and_verdict_name_both_units(scored):
    run = scored["run"]
    assert set(run["verdict"]["by_unit"]) == {"example", "user"}
    assert "Per user (20 member and 20 non-member users" in run["verdict"]["text"]
    out = scored["outcome"].stdout
    assert "per text (intervals resample users): AUC" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("VERDICT"))
    assert "per text" in line and "per user (20 member / 20 non-member users)" in line


def test_the_gate_fails_on_a_user_level_auc_the_per_text_auc_passes(scored, cli):
    run = scored["run"]
    text_auc = run["attacks"][0]["metrics"]["auc"]["value"]
    user_auc = max(a["metrics"]["auc"]["value"] for a in run["users"]["attacks"])
    assert user_auc > text_auc + 0.02, (user_auc, text_auc)
    limit = f"{(user_auc + text_auc) / 2:.6f}"
    outcome = cli(["gate", str(scored["out"] / "results.json"), "--max-auc", limit])
    assert outcome.code == 1, outcome.stdout + outcome.stderr
    assert ":user-" in outcome.stdout + outcome.stderr
    # the same threshold on the same scores without users passes: the user level failed it
    plain = scored["out"].parent / "plain"
    _write(plain.with_suffix(".csv"), scored["frame"].drop(columns="author"))
    assert (
        cli(
            ["score", str(plain.with_suffix(".csv")), "--bootstrap", "200", "--out", str(plain)]
        ).code
        == 0
    )
    assert cli(["gate", str(plain / "results.json"), "--max-auc", limit]).code == 0


def test_copies_collapse_within_a_user_only(cli, tmp_path):
    f = _frame(seed=1, n_users=6)
    f["text"] = [t for t in random_texts(len(f), 5)]
    m_rows = f.index[f["member"] == 1]
    # user 0 repeats its first text (one record); user 1 writes user 0's text too (theirs)
    u0 = f.index[f["author"] == "user 0"]
    u1 = f.index[f["author"] == "user 1"]
    f.loc[u0[1], "text"] = f.loc[u0[0], "text"]
    f.loc[u1[0], "text"] = f.loc[u0[0], "text"]
    outcome, out = _score(cli, tmp_path, f, "--group-by", "author")
    assert outcome.code in (0, 1), outcome.stderr[-2000:]
    run = json.loads((out / "results.json").read_text("utf-8"))["runs"][0]
    within = run["split_check"]["duplicates"]["within_members"]
    assert within == {**within, "texts": len(m_rows), "removed": 1}
    rec = next(a for a in run["users"]["attacks"] if a["attack"] == "user-scores:user-mean")
    n_texts = dict(zip(rec["examples"]["ids"], rec["examples"]["n_texts"], strict=True))
    assert n_texts["user 0"] == len(u0) - 1 and n_texts["user 1"] == len(u1)
    assert run["split_check"]["unit"] == "user"


def test_aggregate_only_hides_user_names(cli, tmp_path):
    outcome, out = _score(cli, tmp_path, _frame(seed=2, n_users=5), "--group-by", "author",
                          "--aggregate-only")  # fmt: skip
    assert outcome.code in (0, 1), outcome.stderr[-2000:]
    text = (out / "results.json").read_text("utf-8") + (out / "report.html").read_text("utf-8")
    assert "user 3" not in text and "t3-0" not in text


def _refused(outcome, out) -> str:
    assert outcome.code == 2, outcome.stderr[-2000:]
    assert "Traceback" not in outcome.stderr
    errors = [ln for ln in outcome.stderr.splitlines() if "error" in ln.lower()]
    assert len(errors) == 1, outcome.stderr
    assert not out.exists()
    return errors[0]


def test_refusals_name_the_column_the_row_and_the_counts(cli, tmp_path):
    f = _frame(seed=3, n_users=5)
    line = _refused(*_score(cli, tmp_path, f, "--group-by", "writer"))
    assert "group (user) column 'writer'" in line and "author" in line
    g = f.copy()
    g.loc[6, "author"] = " "
    line = _refused(*_score(cli, tmp_path, g, "--group-by", "author"))
    assert "data row 7" in line and "'author' is empty" in line
    g = f.copy()
    for u in ("user 0", "user 1"):  # one row of each of two member users marked non-member
        g.loc[g["author"].eq(u).idxmax(), "member"] = 0
    line = _refused(*_score(cli, tmp_path, g, "--group-by", "author"))
    assert "2 user(s) of group column 'author'" in line and "member 1 and member 0" in line
    small = f[~f["author"].isin(["user 0", "user 1"])]  # 3 member users left
    line = _refused(*_score(cli, tmp_path, small, "--group-by", "author"))
    assert "3 member and 5 non-member user(s)" in line and "at least 4 users on each side" in line


def test_a_user_emptied_by_duplicate_removal_is_refused(cli, tmp_path):
    f = _frame(seed=4, n_users=5)
    f["text"] = random_texts(len(f), 9)
    # non-member user 9's every row copies a member text: removed as exact duplicates
    rows = f.index[f["author"] == "user 9"]
    f.loc[rows, "text"] = f.loc[f.index[f["member"] == 1][: len(rows)], "text"].to_numpy()
    line = _refused(*_score(cli, tmp_path, f, "--group-by", "author"))
    assert "1 user(s) of group column 'author' have no text left" in line and "'user 9'" in line
