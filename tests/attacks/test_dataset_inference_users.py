"""User-level dataset inference: known answers against scipy, sklearn, pandas and brute
force; users never split by the fit split; the null on real grouped text (Debian
changelog entries by maintainer), where the text-level test over-rejects; and the
``privacy-audit dataset-inference --group-by`` command end to end on a tiny GPT-2."""

from __future__ import annotations

import csv
import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats

from privacy_audit.attacks.dataset_inference import (
    UserDatasetInference,
    permutation_welch,
    users_needed,
)


def _slack(trials: int, rate: float = 0.05) -> int:
    """Rejections allowed at a true rate of ``rate``: the binomial 99.9% upper quantile."""
    return int(stats.binom.ppf(0.999, trials, rate))


def _welch_t(a, b) -> float:
    return float(stats.ttest_ind(a, b, equal_var=False).statistic)


# --------------------------------------------------------------------------- #
# Known answers
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("seed", range(3))
def test_exact_permutation_p_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.normal(0.8, 1, 4), rng.exponential(1.0, 5)
    v = np.r_[a, b]
    t0 = _welch_t(a, b)
    ts = []
    for idx in itertools.combinations(range(9), 4):
        rest = [i for i in range(9) if i not in idx]
        ts.append(_welch_t(v[list(idx)], v[rest]))
    ref = np.mean(np.asarray(ts) >= t0 - 1e-9)
    res = permutation_welch(a, b)
    assert res["method"] == "exact" and res["permutations"] == math.comb(9, 4)
    assert res["p_value"] == pytest.approx(ref, abs=1e-12)
    assert res["t"] == pytest.approx(t0, rel=1e-10)


def test_monte_carlo_permutation_p_is_close_to_the_exact_one():
    """C(20, 10) = 184,756 arrangements: more than the exact limit, so 9,999 random ones;
    scipy's exact enumeration (its own code) is the reference, within 4 Monte Carlo SEs."""
    rng = np.random.default_rng(3)
    a, b = rng.normal(0.5, 1, 10), rng.normal(0, 2, 10)
    res = permutation_welch(a, b, seed=1)
    assert res["method"] == "monte-carlo"
    ref = stats.permutation_test(
        (a, b),
        lambda x, y, axis: stats.ttest_ind(x, y, equal_var=False, axis=axis).statistic,
        permutation_type="independent",
        alternative="greater",
        n_resamples=np.inf,
        vectorized=True,
    ).pvalue
    se = math.sqrt(ref * (1 - ref) / 9999)
    assert abs(res["p_value"] - ref) <= 4 * se + 1e-4, (res["p_value"], ref)


def test_users_needed_by_hand():
    # n - max(1, round(f n)) >= 2: f = 0.5 -> 4 (3 - 2 = 1 < 2); f = 0.2 -> 3 (3 - 1);
    # f = 0.8 -> 8 (8 - round(6.4) = 2, 7 - round(5.6) = 1)
    assert [users_needed(f) for f in (0.5, 0.2, 0.8)] == [4, 3, 8]


def _grouped(rng, n_users, per_user, shift=0.0, prefix="u"):
    """Features with a user random effect (texts of one user are a cluster)."""
    groups, rows = [], []
    for u in range(n_users):
        k = int(rng.integers(1, per_user + 1))
        eff = rng.normal(size=3)
        rows.append(eff + shift + 0.5 * rng.normal(size=(k, 3)))
        groups += [f"{prefix}{u:03d}"] * k
    return np.vstack(rows), groups


def test_user_test_matches_an_independent_recomputation():
    """The user split re-derived from the seed; sklearn's regression on the fit users'
    texts; pandas' per-user means; scipy's Welch on the means; the set-level p by brute
    force over all user arrangements; conformal p-values by hand; BH by scipy."""
    import pandas as pd
    from sklearn.linear_model import LinearRegression
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(4)
    xs, gs = _grouped(rng, 11, 5, shift=0.3, prefix="s")
    xv, gv = _grouped(rng, 12, 5, prefix="v")
    res = UserDatasetInference(fit_fraction=0.5, seed=9, fdr=0.2).test(xs, gs, xv, gv)
    us, uv = sorted(set(gs)), sorted(set(gv))
    r = np.random.default_rng(9)
    ps, pv = r.permutation(len(us)), r.permutation(len(uv))
    fit_s, test_s = {us[i] for i in ps[:6]}, {us[i] for i in ps[6:]}  # round(5.5) = 6
    fit_v, test_v = {uv[i] for i in pv[:6]}, {uv[i] for i in pv[6:]}
    ms = np.array([g in fit_s for g in gs])
    mv = np.array([g in fit_v for g in gv])
    x_fit = np.vstack([xs[ms], xv[mv]])
    sc = StandardScaler().fit(x_fit)
    lr = LinearRegression().fit(sc.transform(x_fit), np.r_[np.ones(ms.sum()), np.zeros(mv.sum())])
    df_s = pd.DataFrame({"u": np.asarray(gs)[~ms], "s": lr.predict(sc.transform(xs[~ms]))})
    df_v = pd.DataFrame({"u": np.asarray(gv)[~mv], "s": lr.predict(sc.transform(xv[~mv]))})
    a, b = df_s.groupby("u")["s"].mean(), df_v.groupby("u")["s"].mean()
    assert set(a.index) == test_s and set(b.index) == test_v
    got = {u["user"]: u for u in res["users"]}
    assert set(got) == test_s
    for name, score in a.items():
        assert got[name]["score"] == pytest.approx(score, abs=1e-9)
        assert got[name]["n_texts"] == gs.count(name)  # all of the user's texts
    assert [u["score"] for u in res["null_users"]] == pytest.approx(list(b.values), abs=1e-9)
    ref = stats.ttest_ind(a.values, b.values, equal_var=False, alternative="greater")
    assert res["welch_user_means_p_value"] == pytest.approx(ref.pvalue, rel=1e-8)
    assert res["t"] == pytest.approx(ref.statistic, rel=1e-8)
    # the set-level p over all C(11, 5) = 462 arrangements of the held-out users
    v = np.r_[a.values, b.values]
    ts = [
        _welch_t(v[list(i)], v[[j for j in range(11) if j not in i]])
        for i in itertools.combinations(range(11), 5)
    ]
    assert res["p_value"] == pytest.approx(np.mean(np.asarray(ts) >= ref.statistic - 1e-9))
    conf = [(1 + sum(bv >= s for bv in b.values)) / (1 + len(b)) for s in a.values]
    assert [got[n]["p_value"] for n in a.index] == pytest.approx(conf)
    found = stats.false_discovery_control(conf, method="bh") <= 0.2
    assert [got[n]["found"] for n in a.index] == list(found)
    assert res["n_found"] == int(found.sum()) and res["min_user_p_value"] == 1 / 7
    assert res["n_users"] == {"suspect": 11, "validation": 12}
    assert res["n_fit"] == {"suspect": 6, "validation": 6}
    assert res["n_test"] == {"suspect": 5, "validation": 6}
    assert res["n_test_texts"] == {"suspect": int((~ms).sum()), "validation": int((~mv).sum())}
    assert res["unit"] == "user"


def test_bad_user_input_is_refused():
    rng = np.random.default_rng(0)
    xs, gs = _grouped(rng, 3, 4, prefix="s")
    xv, gv = _grouped(rng, 8, 4, prefix="v")
    with pytest.raises(ValueError, match="3 suspect user.*at least 4 users per side"):
        UserDatasetInference().test(xs, gs, xv, gv)
    with pytest.raises(ValueError, match="8 user.s. have texts on both"):
        UserDatasetInference().test(xv, gv, xv, gv)


# --------------------------------------------------------------------------- #
# The null on real grouped text
# --------------------------------------------------------------------------- #
def test_null_on_debian_users_user_level_holds_and_text_level_over_rejects():
    """200 random user splits of Debian changelog entries grouped by maintainer (the
    null: users assigned at random to suspect and validation), fixed model-free features,
    the product's user-level test: the set-level test rejects at most 5% + binomial slack,
    the per-user p <= 0.05 rate is at most 5% (+ 3 SEs over splits), BH finds someone in
    at most 5% + slack; the text-level test on the same splits rejects far more."""
    from experiments.users_di_null import debian_user_corpus, null_splits, summarise, text_features

    texts, users = debian_user_corpus()
    if len(set(users)) < 100:
        pytest.skip("fewer than 100 Debian maintainers with 3+ changelog entries here")
    raw = null_splits(text_features(texts), users, 200, seed=1, permutations=999)
    s = summarise(raw)
    assert s["user_level"]["rejected"] <= _slack(200), s["user_level"]
    per = np.asarray(raw["per_user_rejected"]) / np.asarray(raw["per_user_tested"])
    assert per.mean() <= 0.05 + 3 * per.std(ddof=1) / math.sqrt(200), per.mean()
    assert s["per_user"]["any_user_found_bh"]["rejected"] <= _slack(200)
    # texts of one person are not independent: the text-level test is far off its level
    assert s["text_level_di"]["ci95"][0] > 0.10, s["text_level_di"]


# --------------------------------------------------------------------------- #
# The command
# --------------------------------------------------------------------------- #
N_SUSPECT_USERS, N_VALIDATION_USERS = 30, 40


@pytest.fixture(scope="module")
def users_lm(tmp_path_factory):
    """Suspect users (4 texts each) whose texts a tiny GPT-2 is fine-tuned on; validation
    users (3 texts each) of the same generator, never trained on; CSV files with a user
    column."""
    from tests.own_models import build_causal_lm, fine_tune, random_texts, save, word_tokenizer

    root = tmp_path_factory.mktemp("di-users")
    tok = word_tokenizer()
    suspect = random_texts(4 * N_SUSPECT_USERS, 21)
    validation = random_texts(3 * N_VALIDATION_USERS, 22)
    s_rows = [{"text": t, "user": f"s{i // 4:02d}"} for i, t in enumerate(suspect)]
    v_rows = [{"text": t, "user": f"v{i // 3:02d}"} for i, t in enumerate(validation)]
    for name, rows in (("suspect.csv", s_rows), ("validation.csv", v_rows)):
        with open(root / name, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, ["text", "user"])
            w.writeheader()
            w.writerows(rows)
    tuned = build_causal_lm("gpt2", len(tok), seed=0, d=32)
    fine_tune(tuned, tok, suspect, epochs=15)
    save(tuned, tok, root / "tuned")
    return {"root": root, "s_rows": s_rows, "v_rows": v_rows}


def _di(cli, root, *args):
    out = root / f"out-{abs(hash(args)) % 10**8}"
    outcome = cli(["dataset-inference", *args, "--out", str(out), "--quiet"])
    res = None
    if (out / "results.json").is_file():
        res = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return outcome, res, out


def _args(root, suspect="suspect.csv", validation="validation.csv"):
    return [
        "--model",
        str(root / "tuned"),
        "--suspect",
        str(root / suspect),
        "--validation",
        str(root / validation),
    ]


def test_command_with_users_end_to_end(users_lm, cli):
    root = users_lm["root"]
    outcome, res, out = _di(cli, root, *_args(root), "--group-by", "user")
    assert outcome.code == 0, outcome.stderr[-3000:]
    r = res["dataset_inference"]
    assert r["status"] == "ok" and r["unit"] == "user" and r["group_column"] == "user"
    assert r["n_users"] == {"suspect": N_SUSPECT_USERS, "validation": N_VALIDATION_USERS}
    assert r["n_texts"] == {"suspect": 4 * N_SUSPECT_USERS, "validation": 3 * N_VALIDATION_USERS}
    assert r["n_test"] == {"suspect": N_SUSPECT_USERS // 2, "validation": N_VALIDATION_USERS // 2}
    # the held-out suspect users and the held-out validation users are disjoint from the
    # fit users, and each comes with all its texts
    assert all(u["n_texts"] == 4 for u in r["users"])
    assert all(u["n_texts"] == 3 for u in r["null_users"])
    # per-user p-values: an independent numpy recomputation from the stored scores
    s = np.array([u["score"] for u in r["users"]])
    v = np.array([u["score"] for u in r["null_users"]])
    ref = (1 + (v[None, :] >= s[:, None]).sum(axis=1)) / (1 + v.size)
    assert [u["p_value"] for u in r["users"]] == pytest.approx(list(ref), abs=0)
    # BH by hand: the largest k with p_(k) <= q k / m; the k smallest are found
    order = np.argsort(ref, kind="stable")
    ok = ref[order] <= 0.05 * np.arange(1, s.size + 1) / s.size
    k = int(np.nonzero(ok)[0].max() + 1) if ok.any() else 0
    found = {r["users"][i]["user"] for i in order[:k]}
    assert {u["user"] for u in r["users"] if u["found"]} == found == set(r["found"])
    # the model was fine-tuned on every suspect user's texts: found at the set level
    # and, with 20 held-out validation users (smallest p 1/21 < 0.05), per user
    assert r["p_value"] < 0.01 and r["significant"] and r["n_found"] >= 1
    # the split check ran with users as its units, and the guard names them
    assert r["split_check"]["unit"] == "user"
    assert f"of {N_SUSPECT_USERS} users" in r["split_guard"]["text"]
    assert f"The {N_SUSPECT_USERS // 2} suspect users whose texts fitted" in r["text"]
    # stdout and the report say the unit, users and texts per side, p, the users found
    line = outcome.stdout.splitlines()[0]
    assert line.startswith("DATASET INFERENCE: OK; p = ") and "unit: users" in line
    assert f"{N_SUSPECT_USERS // 2} suspect users ({2 * N_SUSPECT_USERS} texts)" in line
    assert f"{r['n_found']} of the {N_SUSPECT_USERS // 2} held-out suspect users found" in line
    assert r["found"][0] in line
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Unit" in html and "users" in html and r["found"][0] in html
    assert f"{N_SUSPECT_USERS} suspect users" in html


def test_command_with_users_from_config_and_aggregate_only(users_lm, cli):
    root = users_lm["root"]
    cfg = root / "di-users.toml"
    cfg.write_text(
        '[target]\naudit_dir = "tuned"\n[dataset_inference]\nsuspect = "suspect.csv"\n'
        'validation = "validation.csv"\ngroup = "user"\nfdr = 0.1\n',
        encoding="utf-8",
    )
    outcome, res, out = _di(cli, root, str(cfg))
    assert outcome.code == 0, outcome.stderr[-3000:]
    r = res["dataset_inference"]
    assert r["unit"] == "user" and r["fdr"] == 0.1
    assert res["config"]["dataset_inference"]["group"] == "user"
    outcome, res, out = _di(cli, root, str(cfg), "--aggregate-only")
    assert outcome.code == 0, outcome.stderr[-3000:]
    r = res["dataset_inference"]
    assert r["unit"] == "user" and r["found"] is None and r["users"]
    flat = (out / "results.json").read_text(encoding="utf-8")
    flat += (out / "report.html").read_text(encoding="utf-8") + outcome.stdout
    for row in users_lm["s_rows"] + users_lm["v_rows"]:
        assert f'"{row["user"]}"' not in flat and f" {row['user']}," not in flat


def test_command_with_per_user_txt_directories(users_lm, cli):
    root = users_lm["root"]
    for side, rows in (("s-dir", users_lm["s_rows"]), ("v-dir", users_lm["v_rows"])):
        (root / side).mkdir(exist_ok=True)
        for user in sorted({r["user"] for r in rows}):
            texts = [r["text"] for r in rows if r["user"] == user]
            (root / side / f"{user}.txt").write_text("\n".join(texts) + "\n", encoding="utf-8")
    outcome, res, _ = _di(cli, root, *_args(root, "s-dir", "v-dir"))
    assert outcome.code == 0, outcome.stderr[-3000:]
    r = res["dataset_inference"]
    assert r["unit"] == "user" and r["n_users"]["suspect"] == N_SUSPECT_USERS


def _csv(path, rows, cols=("text", "user")):
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, list(cols), extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return path


def test_command_user_refusals_are_one_line_exit_2(users_lm, cli):
    root = users_lm["root"]
    s_rows, v_rows = users_lm["s_rows"], users_lm["v_rows"]
    # the column is missing from the validation file: named
    _csv(root / "v-nouser.csv", v_rows, cols=("text",))
    outcome, res, out = _di(
        cli, root, *_args(root, validation="v-nouser.csv"), "--group-by", "user"
    )
    assert outcome.code == 2 and res is None and not any(out.glob("*"))
    assert len(outcome.stderr.strip().splitlines()) == 1
    assert "'user'" in outcome.stderr and "group (user) column" in outcome.stderr
    # 3 users on both sides: the column and the count
    _csv(root / "v-both.csv", v_rows + s_rows[:12])
    outcome, res, out = _di(cli, root, *_args(root, validation="v-both.csv"), "--group-by", "user")
    assert outcome.code == 2 and res is None and not any(out.glob("*"))
    err = outcome.stderr.strip()
    assert len(err.splitlines()) == 1 and "3 user(s) of group column 'user'" in err
    assert "suspect and the validation side" in err
    # 3 suspect users: at fit fraction 0.5 the test part would hold 1; 4 are needed
    _csv(root / "s-few.csv", s_rows[:12])
    outcome, res, out = _di(cli, root, *_args(root, suspect="s-few.csv"), "--group-by", "user")
    assert outcome.code == 2 and res is None and not any(out.glob("*"))
    err = outcome.stderr.strip()
    assert len(err.splitlines()) == 1 and "3 suspect user(s) of group column 'user'" in err
    assert "at least 4 users per side" in err
    # --fdr without users has nothing to control: refused, not silently ignored
    outcome, res, out = _di(cli, root, *_args(root), "--fdr", "0.1")
    assert outcome.code == 2 and res is None
    assert "--fdr" in outcome.stderr and len(outcome.stderr.strip().splitlines()) == 1
