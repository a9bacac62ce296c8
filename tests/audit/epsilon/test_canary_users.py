"""User-level DP end to end through ``privacy-audit run``: member and non-member CSV files
that name each text's user, ``[[defenses]] name = "dp-sgd", unit = "user"`` trained by
the suite, audited by canary users, with the ``users`` section of an own-model audit.

The data are real authored text: Debian changelog entries on this machine, each user a
maintainer (the signature line ``-- Name <email>``), 40 users a side, 3 entries each."""

from __future__ import annotations

import csv
import json
import random
import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from privacy_audit.audit.benchmarks.users import changelog_blocks

USERS_PER_SIDE = 40
TEXTS_PER_USER = 3


def _changelog_users() -> dict[str, list[str]]:
    """Maintainer -> distinct changelog entries (the bullets of one upload, signature
    and header dropped, cut to 300 characters)."""
    by: dict[str, list[str]] = defaultdict(list)
    seen: set[str] = set()
    for _, block, body in changelog_blocks():
        m = re.search(r"^ -- (.+?) <", block, re.M)
        if not m:
            continue
        entry = body[:300]
        if len(entry.split()) >= 8 and entry not in seen:
            seen.add(entry)
            by[m.group(1).strip()].append(entry)
    return by


@pytest.fixture(scope="module")
def grouped_csvs(tmp_path_factory) -> Path:
    by = _changelog_users()
    users = sorted(u for u, v in by.items() if len(v) >= TEXTS_PER_USER)
    if len(users) < 2 * USERS_PER_SIDE:
        pytest.skip(
            f"needs {2 * USERS_PER_SIDE} Debian maintainers with {TEXTS_PER_USER}+ changelog "
            f"entries in /usr/share/doc; this machine has {len(users)}"
        )
    random.Random(0).shuffle(users)
    d = tmp_path_factory.mktemp("user-dp-data")
    for name, side in (("members", users[:USERS_PER_SIDE]), ("nonmembers", users[USERS_PER_SIDE:])):
        with open(d / f"{name}.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["id", "text", "label", "maintainer"])
            for j, u in enumerate(side):
                for i, e in enumerate(by[u][:TEXTS_PER_USER]):
                    # task label: whether the upload names upstream
                    label = "upstream" if "upstream" in e.lower() else "other"
                    w.writerow([f"{name}-{j}-{i}", e, label, u])
    return d


CONFIG = """\
title = "User-level DP-SGD"
seed = 0
device = "cpu"

[data]
members = "members.csv"
nonmembers = "nonmembers.csv"
{data}

[target]
preset = "{preset}"
max_length = 32
public_epochs = 0

[train]
epochs = 1
batch_size = 16

{defenses}

[attacks]
names = ["loss"]

[metrics]
bootstrap = 100

[epsilon]
enabled = true
canaries = 50
{extra}
"""

USER_DP = '[[defenses]]\nname = "dp-sgd"\nlabel = "user-dp"\nepsilon = 8.0\nunit = "user"\n'
EXAMPLE_DP = '[[defenses]]\nname = "dp-sgd"\nlabel = "example-dp"\nepsilon = 8.0\n'


def _write(d: Path, name: str, **kw) -> Path:
    args = {
        "data": 'group = "maintainer"',
        "preset": "tiny",
        "defenses": USER_DP,
        "extra": "",
        **kw,
    }
    p = d / name
    p.write_text(CONFIG.format(**args), encoding="utf-8")
    return p


@pytest.fixture(scope="module")
def user_dp_run(grouped_csvs):
    from tests.conftest import invoke_cli

    cfg = _write(grouped_csvs, "run.toml", defenses=USER_DP + "\n" + EXAMPLE_DP)
    out = grouped_csvs / "out"
    outcome = invoke_cli(["run", str(cfg), "--out", str(out)])
    return out, outcome


@pytest.mark.slow
def test_user_level_dp_sgd_run_is_audited_by_canary_users(user_dp_run, grouped_csvs):
    out, outcome = user_dp_run
    assert outcome.code == 0, outcome.stderr[-3000:]
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    runs = {r["name"]: r for r in res["runs"]}
    run = runs["user-dp"]
    # the suite trained with fit_users: the claim is per user, the accountant over users
    assert run["claim"]["unit"] == "user" and run["claim"]["proven"]
    assert 0 < run["claim"]["epsilon"] <= 8.0 * 1.01
    info = run["training"]
    assert info["unit"] == "user"
    # the users sampled are the 40 member users plus the input canaries inserted, each
    # canary a user of its own (with_canaries)
    eps = run["epsilon_audit"]
    canary = next(a for a in eps["audits"] if a["name"].startswith("input-canaries"))
    assert canary["status"] == "ok" and canary["canaries"] == 50
    assert info["users"] == USERS_PER_SIDE + canary["n_in"]
    assert info["sample_rate"] == pytest.approx(info["users_per_step"] / info["users"])
    # a correct user-level trainer: no audit's bound exceeds the claim
    assert eps["comparable"] is True and eps["status"] != "violated"
    for a in eps["audits"]:
        if a.get("status") == "ok":
            assert a["epsilon_lb"] <= run["claim"]["epsilon"], a["name"]
            assert not a.get("exceeds_claim"), a["name"]
    assert run["verdict"]["claim_status"] != "violated"

    # the users section, computed from the texts' users (an independent pandas count)
    members = pd.read_csv(grouped_csvs / "members.csv")
    nonmembers = pd.read_csv(grouped_csvs / "nonmembers.csv")
    users = run["users"]
    assert users["unit"] == "user" and users["column"] == "maintainer"
    assert users["counts"]["members"]["users"] == members["maintainer"].nunique()
    assert users["counts"]["nonmembers"]["users"] == nonmembers["maintainer"].nunique()
    assert users["counts"]["members"]["texts"] == len(members)
    assert users["group_privacy"] is None  # a per-user claim needs no group privacy
    loss = next(a for a in run["attacks"] if a["attack"] == "loss")
    assert loss["resampled"] == "users"  # the per-text intervals resample users
    mean = next(a for a in users["attacks"] if a["attack"] == "loss:user-mean")
    # the per-user mean of the loss attack's stored per-text scores (pandas, not the suite)
    ex = loss["examples"]
    texts = pd.DataFrame({"id": ex["ids"], "score": ex["scores"]})
    both = pd.concat([members, nonmembers])
    texts["user"] = texts["id"].map(dict(zip(both["id"], both["maintainer"], strict=True)))
    assert texts["user"].notna().all(), texts["id"].head().tolist()
    want = texts.groupby("user")["score"].mean()
    got = pd.Series(mean["examples"]["scores"], index=mean["examples"]["ids"])
    np.testing.assert_allclose(got.sort_index().to_numpy(), want.sort_index().to_numpy())
    assert "<html" in (out / "report.html").read_text(encoding="utf-8").lower()


@pytest.mark.slow
def test_example_level_dp_sgd_on_grouped_data_reports_group_privacy(user_dp_run):
    out, outcome = user_dp_run
    assert outcome.code == 0, outcome.stderr[-3000:]
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    run = next(r for r in res["runs"] if r["name"] == "example-dp")
    assert run["claim"]["unit"] == "example"
    gp = run["users"]["group_privacy"]
    assert gp["claim_unit"] == "example" and gp["epsilon"] == run["claim"]["epsilon"]
    # group privacy of (ε, δ) for k = 3 texts: (kε, k e^{(k-1)ε} δ), capped at δ = 1
    e, d = run["claim"]["epsilon"], run["claim"]["delta"]
    for row in gp["implied"]:
        k = row["texts"]
        assert k == TEXTS_PER_USER
        assert row["epsilon"] == pytest.approx(k * e)
        assert row["delta"] == pytest.approx(min(1.0, k * np.exp((k - 1) * e) * d))


def _refused(cli, cfg: Path, *needles: str) -> str:
    out = cfg.parent / ("out-" + cfg.stem)
    outcome = cli(["run", str(cfg), "--out", str(out)])
    assert outcome.code == 2, outcome.stderr[-2000:]
    lines = [ln for ln in outcome.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, outcome.stderr
    assert "Traceback" not in outcome.stderr and "stage: train" not in outcome.stderr
    assert not out.exists()
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


def test_unit_user_without_a_group_column_is_refused_before_training(cli, grouped_csvs):
    _refused(cli, _write(grouped_csvs, "nogroup.toml", data=""), "unit = 'user'", "data.group")


def test_unit_user_on_a_causal_lm_is_refused(cli, grouped_csvs):
    _refused(cli, _write(grouped_csvs, "lm.toml", preset="tiny-gpt2"), "unit = 'user'", "causal LM")


def test_unit_user_with_shadow_models_is_refused(cli, grouped_csvs):
    cfg = _write(grouped_csvs, "shadow.toml", extra="[shadow]\nn_models = 2\n")
    _refused(cli, cfg, "unit = 'user'", "[shadow]")


def test_group_with_a_corpus_split_by_text_is_refused(cli, tmp_path):
    cfg = tmp_path / "corpus.toml"
    cfg.write_text('[data]\ngroup = "author"\n', encoding="utf-8")
    _refused(cli, cfg, "data.group", "data.members")


def test_fresh_texts_need_the_users_own_model(cli, grouped_csvs):
    (grouped_csvs / "fresh.csv").write_text("text,maintainer\nx y z,a\n", encoding="utf-8")
    cfg = _write(grouped_csvs, "fresh.toml", data='group = "maintainer"\nfresh = "fresh.csv"')
    _refused(cli, cfg, "data.fresh")


@pytest.mark.slow
def test_grouped_causal_lm_run_aggregate_only_names_no_user(cli, grouped_csvs):
    """A causal LM the suite fine-tunes on grouped data gets the users section too; with
    aggregate_only no user's name reaches results.json or report.html."""
    cfg = _write(
        grouped_csvs,
        "lm.toml",
        preset="tiny-gpt2",
        defenses='[[defenses]]\nname = "none"\n',
        extra="[report]\naggregate_only = true\n",
    ).read_text(encoding="utf-8")
    cfg = cfg.replace("[epsilon]\nenabled = true\ncanaries = 50\n", "")
    path = grouped_csvs / "lm-agg.toml"
    path.write_text(cfg, encoding="utf-8")
    out = grouped_csvs / "out-lm"
    outcome = cli(["run", str(path), "--out", str(out)])
    assert outcome.code == 0, outcome.stderr[-3000:]
    res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    users = res["runs"][0]["users"]
    assert users["counts"]["members"]["users"] == USERS_PER_SIDE
    assert users["most_exposed"] and users["attacks"]
    names = set(pd.read_csv(grouped_csvs / "members.csv")["maintainer"])
    names |= set(pd.read_csv(grouped_csvs / "nonmembers.csv")["maintainer"])
    for f in ("results.json", "report.html"):
        text = (out / f).read_text(encoding="utf-8")
        leaked = [n for n in names if n in text]
        assert not leaked, (f, leaked[:3])
