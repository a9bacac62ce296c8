"""``privacy-audit bench users``: natural users (Debian changelog maintainers), end to end.

The record's numbers are recomputed independently from the per-text scores file with
pandas (per-user aggregates) and sklearn / numpy (AUC, TPR at FPR)."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest
from sklearn.metrics import roc_auc_score

from privacy_audit.audit.benchmarks import users as bench_users
from privacy_audit.audit.cli import main

AGG = {"mean": "mean", "lr-sum": "sum", "median": "median"}


def _entry(pkg: str, version: int, lines: list[str], who: str) -> str:
    body = "\n".join(f"  * {ln}" for ln in lines)
    return (
        f"{pkg} (1.{version}-1) unstable; urgency=medium\n\n{body}\n\n"
        f" -- {who}  Mon, 0{version % 9 + 1} Jan 2024 10:00:00 +0000\n"
    )


def _write_changelog(root, pkg: str, entries: list[str]) -> None:
    d = root / pkg
    d.mkdir(parents=True)
    with gzip.open(d / "changelog.Debian.gz", "wt", encoding="utf-8") as fh:
        fh.write("\n".join(entries))


def test_cleaning_rules_by_hand(tmp_path):
    a, b = "Ann Example <ANN@example.org>", "Bob Example <bob@example.org>"
    _write_changelog(
        tmp_path,
        "foo",
        [
            _entry("foo", 1, ["New upstream release."], a),  # short: dropped
            _entry("foo", 2, ["Fix the crash on empty input files in the parser", "Add tests"], a),
            # near-duplicate of the previous (digits and punctuation differ only): dropped
            _entry(
                "foo", 3, ["Fix the crash on empty input files in the parser 2", "Add tests!"], a
            ),
            _entry("foo", 4, ["Shared text copied into two packages by two people here"], a),
            _entry("foo", 5, ["Rewrite the build system around meson and ninja today"], b),
        ],
    )
    _write_changelog(
        tmp_path,
        "bar",
        [_entry("bar", 1, ["Shared text copied into two packages by two people here"], b)],
    )
    entries = bench_users.changelog_entries(str(tmp_path / "*" / "changelog.Debian.gz"))
    assert len(entries) == 6 and {e[0] for e in entries} == {"ann@example.org", "bob@example.org"}
    texts, dropped = bench_users.user_texts(entries, min_words=6)
    assert texts == {
        "ann@example.org": ["* Fix the crash on empty input files in the parser * Add tests"],
        "bob@example.org": ["* Rewrite the build system around meson and ninja today"],
    }
    assert dropped == {"short": 1, "duplicate_within_user": 1, "shared_across_users": 2}


def test_too_few_users_exits_2_before_writing(tmp_path, monkeypatch, capsys):
    _write_changelog(
        tmp_path,
        "foo",
        [
            _entry(
                "foo",
                i,
                [f"Change number {w} of the package in a long enough entry"],
                "A <a@x.org>",
            )
            for i, w in enumerate(["one", "two", "three", "four"])
        ],
    )
    monkeypatch.setattr(bench_users, "CHANGELOGS", str(tmp_path / "*" / "changelog.Debian.gz"))
    out = tmp_path / "out" / "bench.json"
    out.parent.mkdir()
    assert main(["bench", "users", "--quick", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "1 users with at least 3 texts" in err and "needs 25" in err
    assert not any(out.parent.iterdir())


def _tpr_at(user_scores: pd.DataFrame, fpr: float) -> float:
    """Largest TPR over thresholds t (member iff score >= t) with FPR <= fpr, over every
    distinct score as t (counts by numpy searchsorted)."""
    s, m = user_scores["s"].to_numpy(), user_scores["m"].to_numpy().astype(bool)
    t = np.unique(s)
    non, mem = np.sort(s[~m]), np.sort(s[m])
    fp = (len(non) - np.searchsorted(non, t, "left")) / len(non)
    tp = (len(mem) - np.searchsorted(mem, t, "left")) / len(mem)
    ok = fp <= fpr
    return float(tp[ok].max()) if ok.any() else 0.0


def _check_row(rec: dict, per_user: pd.DataFrame) -> None:
    assert rec["n_member_users"] == int(per_user["m"].sum())
    assert rec["n_nonmember_users"] == int((1 - per_user["m"]).sum())
    assert rec["auc"]["value"] == pytest.approx(roc_auc_score(per_user["m"], per_user["s"]))
    assert rec["auc"]["ci_low"] <= rec["auc"]["value"] <= rec["auc"]["ci_high"]
    for fpr in (0.01, 0.05, 0.1):
        got = rec[f"tpr_at_fpr_{fpr:g}"]
        if got["value"] is None:  # unresolved: says how many non-members it needs
            assert got["below_resolution"] and got["needs_nonmembers"] > 0
        else:
            assert got["value"] == pytest.approx(_tpr_at(per_user, fpr))


def _check_stage(ev: dict, df: pd.DataFrame) -> None:
    """Every user-level and example-level number of one target, from the scores file."""
    a = df[df["set"] != "fresh"]
    assert {(r["score"], r["aggregator"]) for r in ev["a"]} == {
        (s, h) for s in bench_users.SCORES for h in AGG
    }
    for rec in ev["a"]:
        per_user = a.groupby("user").agg(
            s=(rec["score"], AGG[rec["aggregator"]]),
            m=("side", lambda x: int(x.iloc[0] == "member")),
        )
        _check_row(rec, per_user)
        assert rec["n_member_texts"] == int((a["side"] == "member").sum())
    fresh = df[df["set"] == "fresh"]
    tested = 0
    for rec in ev["b"]:
        if "not_tested" in rec:
            continue
        tested += 1
        k = rec["k"]
        have = fresh.groupby("user")["order"].transform("size")
        b = fresh[(have >= k) & (fresh["order"] < k)]
        per_user = b.groupby("user").agg(
            s=(rec["score"], AGG[rec["aggregator"]]),
            m=("side", lambda x: int(x.iloc[0] == "member")),
        )
        assert (b.groupby("user").size() == k).all()
        _check_row(rec, per_user)
    assert tested >= len(bench_users.SCORES) * len(AGG)  # at least k = 1
    m = (a["side"] == "member").astype(int)
    for rec in ev["example"]:
        want = roc_auc_score(m, a[rec["score"]])
        assert rec["independent"]["auc"]["value"] == pytest.approx(want)
        assert rec["users_resampled"]["auc"]["value"] == pytest.approx(want)
        assert rec["users_resampled"]["n_member_users"] == int(a.loc[m == 1, "user"].nunique())


@pytest.mark.skipif(
    len(bench_users.changelog_entries()) < 500, reason="needs the Debian changelogs of this machine"
)
def test_bench_users_quick_end_to_end_matches_pandas(tmp_path):
    out = tmp_path / "bench-users.json"
    assert main(["bench", "users", "--quick", "--out", str(out)]) == 0
    (res,) = json.loads(out.read_text())["benchmarks"]
    assert res["name"] == "users"
    setup = res["setup"]
    cfg, counts = setup["config"], setup["counts"]
    assert counts["member_users"] == cfg["n_members"]
    assert counts["nonmember_users"] == cfg["n_nonmembers"]
    assert [st["epochs"] for st in setup["targets"]] == list(cfg["epochs"])
    raw = pd.read_csv(tmp_path / setup["scores_file"])
    assert set(raw["side"]) == {"member", "nonmember"}
    assert (raw.groupby("user")["side"].nunique() == 1).all()  # a user on one side only
    assert len(raw[raw["set"] == "train"]) == counts["member_training_texts"]
    for st in setup["targets"]:
        for key in ("member_train_target", "nonmember_target", "member_fresh_target"):
            assert np.isfinite(st["loss"][key])
        e = st["epochs"]
        _check_stage(st["metrics"], raw.rename(columns={f"{s}@{e}": s for s in bench_users.SCORES}))
    assert "| threat |" in bench_users.markdown(res)


def test_all_users_design_split_by_hand():
    """all-users: members only among users with >= min_rest + 1 texts, every other user a
    non-member, no reference user; the same seed gives the same split."""
    texts = {f"u{i:02d}": [f"text {i} {j}" for j in range(1 + i % 6)] for i in range(30)}
    cfg = bench_users.UsersConfig(n_members=6, design="all-users")
    split = bench_users.split_users(texts, cfg, seed=3)
    members = [u for u, s in split.side.items() if s == "member"]
    assert len(members) == 6 and all(len(texts[u]) >= 3 for u in members)
    assert all(split.fresh[u] and len(split.rest[u]) >= 2 for u in members)
    assert sorted(split.side) == sorted(texts)
    assert sum(s == "nonmember" for s in split.side.values()) == 24
    assert split.n_eligible == sum(len(v) >= 3 for v in texts.values())
    for u in split.side:  # every text is either fresh or rest, never lost
        assert sorted(split.fresh[u] + split.rest[u]) == sorted(texts[u])
    assert bench_users.split_users(texts, cfg, seed=3).side == split.side
    with pytest.raises(bench_users.DataError, match="needs 25 eligible member users"):
        bench_users.split_users(texts, bench_users.UsersConfig(n_members=25, design="all-users"), 0)


def test_prose_reference_corpus_holds_no_excluded_text():
    prose = bench_users.prose_texts(50, seed=0)
    assert len(prose) == 50 and len(set(prose)) == 50
    assert all(len(p.split()) >= 12 for p in prose)
    keys = {bench_users.comparison_key(p) for p in prose[:10]}
    again = bench_users.prose_texts(10**6, seed=0, exclude=keys)
    assert not keys & {bench_users.comparison_key(p) for p in again}


def test_users_design_applies_to_users_only(capsys):
    assert main(["bench", "split-check", "--users-design", "all-users", "--quick"]) == 2
    assert "--users-design applies to the users benchmark only" in capsys.readouterr().err


def _check_ratio(stage: dict, df: pd.DataFrame) -> None:
    """The user/example TPR@1% ratio's point value, from the scores file."""
    r = stage["ratio_at_1pct"]
    a = df[df["set"] != "fresh"]
    ex_score = bench_users.HEADLINE["example"][0]
    ex = _tpr_at(pd.DataFrame({"s": a[ex_score], "m": (a["side"] == "member").astype(int)}), 0.01)
    assert r["example"]["tpr"] == pytest.approx(ex)
    score, how, k = bench_users.HEADLINE["a"]
    per_user = a.groupby("user").agg(
        s=(score, AGG[how]), m=("side", lambda x: int(x.iloc[0] == "member"))
    )
    u = _tpr_at(per_user, 0.01)
    assert r["a"]["tpr"] == pytest.approx(u)
    if ex > 0:
        assert r["a"]["ratio"] == pytest.approx(u / ex)
    if r["a"]["ci_low"] is not None and r["a"]["ci_high"] is not None:
        assert r["a"]["ci_low"] <= r["a"]["ci_high"]
    want = bench_users.ratio_verdict(
        r["a"],
        next(x for x in stage["metrics"]["a"] if (x["score"], x["aggregator"]) == (score, how)),
        next(x for x in stage["metrics"]["example"] if x["score"] == ex_score)["independent"],
    )
    assert r["a"]["verdict"] == want


@pytest.mark.parametrize("record", ["bench-users.json", "bench-users-all.json"])
def test_recorded_benchmark_matches_its_scores_file(record):
    """docs/records/bench-users*.json: every recorded number recomputed from the scores it stores."""
    from pathlib import Path

    docs = Path(__file__).resolve().parents[3] / "docs" / "records"
    (res,) = json.loads((docs / record).read_text())["benchmarks"]
    setup = res["setup"]
    assert setup["counts"]["member_users"] >= 100 and setup["counts"]["nonmember_users"] >= 100
    raw = pd.read_csv(docs / setup["scores_file"])
    assert raw.groupby("side")["user"].nunique().to_dict() == {
        "member": setup["counts"]["member_users"],
        "nonmember": setup["counts"]["nonmember_users"],
    }
    for st in setup["targets"]:
        e = st["epochs"]
        assert st["loss"]["member_train_target"] < st["loss"]["nonmember_target"]  # it learned
        view = raw.rename(columns={f"{s}@{e}": s for s in bench_users.SCORES})
        _check_stage(st["metrics"], view)
        if "ratio_at_1pct" in st:
            _check_ratio(st, view)
    if setup.get("design") == "all-users":
        counts = setup["counts"]
        # every user is on one side: non-members are all users but the members
        assert counts["nonmember_users"] == counts["users_after_cleaning"] - counts["member_users"]
        assert counts["nonmember_users"] >= 300  # TPR at 1% resolvable at the user level
        assert counts["reference_users"] == 0
        n = raw.groupby("user").size()
        mem = raw.groupby("user")["side"].first() == "member"
        assert (n[mem] >= 3).all() and (n[~mem] >= 1).all()
        assert (n[~mem] <= 2).sum() > 0  # the 1- and 2-text users are non-members
