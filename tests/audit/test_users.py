"""The user-level audit end to end: a saved GPT-2 fine-tuned on the texts of member users,
audited through the CLI with ``--group-by`` and ``--fresh``; every user-level number in
results.json is recomputed here independently (pandas group-bys of the stored per-text
scores, sklearn's AUC, a plain ``transformers`` forward pass for the fresh texts), and
every surface (verdict, stdout, report, gate, export-risky) names the unit."""

from __future__ import annotations

import csv
import json

import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.metrics import roc_auc_score

from tests.own_models import WORDS, build_causal_lm, fine_tune, save, word_tokenizer

N_USERS, PER_USER, FRESH = 24, 6, 3


def _user_texts(user: int, n: int, seed: int) -> list[str]:
    """Texts in a user's own style: words drawn from the user's own 12 of 120 words."""
    vocab = np.random.default_rng(user).choice(WORDS[:120], size=12, replace=False)
    rng = np.random.default_rng([user, seed])
    return [" ".join(rng.choice(vocab, size=10)) for _ in range(n)]


def _write(path, rows):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, ["text", "author"])
        w.writeheader()
        w.writerows(rows)
    return path


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    from tests.conftest import invoke_cli

    d = tmp_path_factory.mktemp("users-audit")
    member_users, nonmember_users = range(N_USERS), range(N_USERS, 2 * N_USERS)
    rows = {
        side: [{"text": t, "author": f"u{u}"} for u in users for t in _user_texts(u, PER_USER, 0)]
        for side, users in (("members", member_users), ("nonmembers", nonmember_users))
    }
    fresh = [
        {"text": t, "author": f"u{u}"}
        for u in [*member_users, *nonmember_users]
        for t in _user_texts(u, FRESH, 1)
    ]
    for side in rows:
        _write(d / f"{side}.csv", rows[side])
    _write(d / "fresh.csv", fresh)
    tok = word_tokenizer()
    model = build_causal_lm("gpt2", len(tok), seed=0)
    fine_tune(model, tok, [r["text"] for r in rows["members"]], epochs=6)
    save(model, tok, d / "model")
    out = d / "out"
    outcome = invoke_cli(
        ["run", "--model", str(d / "model"), "--members", str(d / "members.csv"),
         "--nonmembers", str(d / "nonmembers.csv"), "--group-by", "author",
         "--fresh", str(d / "fresh.csv"), "--out", str(out)]
    )  # fmt: skip
    assert outcome.code in (0, 1), outcome.stderr[-3000:]
    res = json.loads((out / "results.json").read_text("utf-8"))
    return {"dir": d, "out": out, "outcome": outcome, "run": res["runs"][0], "fresh": fresh}


def _text_frame(run: dict, attack: str) -> pd.DataFrame:
    att = next(a for a in run["attacks"] if a["attack"] == attack)
    ex = att["examples"]
    texts = run["example_texts"]
    return pd.DataFrame({"id": ex["ids"], "score": ex["scores"], "member": ex["members"]}).assign(
        text=lambda f: f["id"].map(texts)
    )


def test_counts_and_every_aggregate_equal_pandas(audited):
    run = audited["run"]
    users = run["users"]
    d = audited["dir"]
    m = pd.read_csv(d / "members.csv")
    n = pd.read_csv(d / "nonmembers.csv")
    c = users["counts"]
    assert c["members"]["users"] == m["author"].nunique() == N_USERS
    assert c["nonmembers"]["texts"] == len(n)
    assert c["members"]["texts_per_user"]["median"] == m.groupby("author").size().median()
    author = dict(zip(pd.concat([m, n])["text"], pd.concat([m, n])["author"], strict=True))
    for base in ("lm-loss", "zlib", "min-k", "min-k++"):
        f = _text_frame(run, base)
        f["author"] = f["text"].map(author)
        g = f.groupby("author").agg(
            mean=("score", "mean"), total=("score", "sum"), median=("score", "median"),
            member=("member", "first"),
        )  # fmt: skip
        for how, col in (("mean", "mean"), ("lr-sum", "total"), ("median", "median")):
            rec = next(a for a in users["attacks"] if a["attack"] == f"{base}:user-{how}")
            got = pd.Series(rec["examples"]["scores"], index=rec["examples"]["ids"])
            np.testing.assert_allclose(got.loc[g.index], g[col], rtol=1e-12, atol=1e-12)
            assert rec["metrics"]["auc"]["value"] == pytest.approx(
                roc_auc_score(g["member"], g[col])
            )
            assert rec["n_members"] == N_USERS and rec["unit"] == "user"


def test_per_text_intervals_resample_users(audited):
    from privacy_audit.stats.metrics import membership_metrics

    run = audited["run"]
    att = next(a for a in run["attacks"] if a["attack"] == "lm-loss")
    assert att["resampled"] == "users" and "Obuchowski" in att["metrics"]["auc"]["method"]
    f = _text_frame(run, "lm-loss")
    naive = membership_metrics(f["score"].to_numpy(), f["member"].to_numpy())["auc"]
    assert att["metrics"]["auc"]["value"] == pytest.approx(naive["value"])
    # each user's texts share a style: the clustered interval is the wider one
    width = att["metrics"]["auc"]["ci_high"] - att["metrics"]["auc"]["ci_low"]
    assert width > naive["ci_high"] - naive["ci_low"]
    assert run["battery_chance"]["relabelled"] == "users"
    # each user writes in their own style; with users as the split check's clusters a
    # user's texts never sit on both sides of a fold, so style is not read as a shift
    check = run["split_check"]
    assert check["unit"] == "user" and not check["shifted"], check.get("blind")


def test_fresh_text_user_inference_equals_a_plain_forward_pass(audited):
    """k = 3 uses every fresh text (3 per user): the per-user statistic without a
    reference is the mean over the user's fresh texts of the mean token log-probability."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    run = audited["run"]
    d = audited["dir"]
    tok = AutoTokenizer.from_pretrained(d / "model")
    model = AutoModelForCausalLM.from_pretrained(d / "model").eval()
    per_text = []
    for r in audited["fresh"]:
        ids = tok(r["text"], return_tensors="pt")["input_ids"]
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].double(), -1)
        per_text.append(float(logp.gather(1, ids[0, 1:, None]).mean()))
    f = pd.DataFrame(audited["fresh"]).assign(s=per_text)
    expected = f.groupby("author")["s"].mean()
    rec = next(a for a in run["users"]["attacks"] if a["attack"] == f"user-inference:{FRESH}-fresh")
    got = pd.Series(rec["examples"]["scores"], index=rec["examples"]["ids"])
    np.testing.assert_allclose(got.loc[expected.index], expected, atol=1e-5)
    ten = next(a for a in run["users"]["attacks"] if a["attack"] == "user-inference:10-fresh")
    assert ten["status"] == "not_applicable" and "not tested" in ten["reason"]
    assert ten["users_not_tested"] == {"members": N_USERS, "nonmembers": N_USERS}


def test_every_surface_names_the_unit(audited, tmp_path):
    from tests.conftest import invoke_cli

    run = audited["run"]
    v = run["verdict"]
    assert v["by_unit"]["user"] == run["users"]["verdict"]["level"]
    assert "Per text:" in v["text"] and "Per user (24 member and 24 non-member users" in v["text"]
    line = next(ln for ln in audited["outcome"].stdout.splitlines() if ln.startswith("VERDICT"))
    assert "per text" in line and "per user (24 member / 24 non-member users)" in line
    html = (audited["out"] / "report.html").read_text("utf-8")
    assert "Per user: membership of a person" in html and "unit: one user" in html
    # the per-user p-values: conformal against the non-member users, independently
    di = run["users"]["dataset_inference"]
    rec = next(a for a in run["users"]["attacks"] if a["attack"] == di["attack"])
    s = np.asarray(rec["examples"]["scores"])
    mem = np.asarray(rec["examples"]["members"], dtype=bool)
    null = s[~mem]
    for name, score in zip(np.asarray(rec["examples"]["ids"])[mem], s[mem], strict=True):
        assert di["pvalues"][name] == pytest.approx((1 + (null >= score).sum()) / (1 + null.size))
    # export-risky --by-user: member users by the strongest user-level attack, highest first
    best = next(
        a for a in run["users"]["attacks"] if a["attack"] == run["users"]["strongest_attack"]
    )
    ranked = (
        pd.DataFrame(best["examples"]).query("members == 1").sort_values("scores", ascending=False)
    )
    out = tmp_path / "users.txt"
    outcome = invoke_cli(
        ["export-risky", str(audited["out"] / "results.json"), "--by-user", "--top", "5",
         "--out", str(out)]
    )  # fmt: skip
    assert outcome.code == 0, outcome.stderr
    assert out.read_text("utf-8").split() == list(ranked["ids"][:5])


def test_the_gate_holds_user_level_numbers(audited, tmp_path):
    from tests.conftest import invoke_cli

    run = audited["run"]
    users_best = max(
        a["metrics"]["auc"]["value"] for a in run["users"]["attacks"] if a["status"] == "ok"
    )
    text_best = max(a["metrics"]["auc"]["value"] for a in run["attacks"] if a["status"] == "ok")
    assert users_best > text_best  # pooling a user's texts is the stronger attack here
    limit = (users_best + text_best) / 2
    outcome = invoke_cli(
        ["gate", str(audited["out"] / "results.json"), "--max-auc", f"{limit:.6f}"]
    )
    assert outcome.code == 1, outcome.stdout + outcome.stderr
    assert ":user-" in outcome.stdout + outcome.stderr
