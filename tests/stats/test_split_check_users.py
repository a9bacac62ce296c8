"""The split check with users as the units (stats/split_check.py, ``users=``): folds
never split a user, relabellings keep users whole and keep the number of member users,
the sub-sample draws whole users, the record states the unit, bad user lists are refused,
``users=None`` gives the results of the text-unit check bit for bit, and random user
splits of real text are flagged at no more than the check's level (docs/split-validity.md,
"Users as clusters", has the full figure)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import beta, chisquare

from privacy_audit.stats.blind_baseline import (
    auc_rows,
    cross_fit,
    permutation_test,
    sample_users,
    text_folds,
    user_clusters,
    user_permutations,
)
from privacy_audit.stats.near_duplicates import duplicate_groups
from privacy_audit.stats.split_check import SplitCheck

DATA = Path(__file__).parents[1] / "data" / "split-check-text-units.json"


# --------------------------------------------------------------------------- #
# users=None: bit-identical to the text-unit check of the main branch
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("case", ["default", "no_families_199"])
def test_without_users_the_record_is_the_main_branchs_bit_for_bit(case):
    """Regression: the fixed input of tests/data/split-check-text-units.json (synthetic
    sentences with a near-duplicate inside the members and two across the sets) and the
    record and scores the main branch's code wrote for it (before users existed)."""
    doc = json.loads(DATA.read_text(encoding="utf-8"))
    want = doc[case]
    record, scores = SplitCheck(**want["settings"]).run(doc["members"], doc["nonmembers"])
    assert json.loads(json.dumps(record)) == want["record"]
    assert scores.tolist() == want["scores"]
    assert "unit" not in record and "n_member_users" not in record["blind"]


# --------------------------------------------------------------------------- #
# Folds: never split a user or a near-duplicate group
# --------------------------------------------------------------------------- #
@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 7), st.integers(0, 9)), min_size=3, max_size=40),
    st.integers(2, 6),
    st.integers(0, 3),
)
def test_folds_never_split_a_user_nor_a_near_duplicate_group(rows, folds, seed):
    """Property: for any users and near-duplicate groups, every user's texts and every
    group's texts fall in one fold (so two users sharing a group share a fold)."""
    users = [f"u{u}" for u, _ in rows]
    groups = np.array([g for _, g in rows])
    texts = [f"text {i} of {u}" for i, u in enumerate(users)]
    clusters = user_clusters(users, groups)
    if np.unique(clusters).size < 2:
        with pytest.raises(ValueError):
            text_folds(texts, clusters, folds, seed)
        return
    fold = text_folds(texts, clusters, folds, seed)
    for key in (np.array(users), groups):
        for k in np.unique(key):
            assert np.unique(fold[key == k]).size == 1
    # clusters are exactly the components of "same user or same group" (brute force)
    parent = list(range(len(rows)))

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i

    for i, j in itertools.combinations(range(len(rows)), 2):
        if users[i] == users[j] or groups[i] == groups[j]:
            parent[find(i)] = find(j)
    roots = [find(i) for i in range(len(rows))]
    for i, j in itertools.combinations(range(len(rows)), 2):
        assert (clusters[i] == clusters[j]) == (roots[i] == roots[j])


def test_folds_are_label_free_and_the_same_whatever_the_text_order():
    """The folds read texts, users and groups, never the labels: the same texts in
    another order get the same folds (the permutation test needs one operator H)."""
    rng = np.random.default_rng(1)
    users = [f"u{k}" for k in rng.integers(0, 12, 50)]
    texts = [f"entry {i} by {u}" for i, u in enumerate(users)]
    groups = np.arange(50)
    fold = text_folds(texts, user_clusters(users, groups), 5, 0)
    order = rng.permutation(50)
    again = text_folds(
        [texts[i] for i in order], user_clusters([users[i] for i in order], groups[order]), 5, 0
    )
    assert (again == fold[order]).all()


# --------------------------------------------------------------------------- #
# Relabellings: users whole, member users counted, uniform over the orbit
# --------------------------------------------------------------------------- #
def test_relabellings_keep_users_whole_and_the_number_of_member_users():
    rng = np.random.default_rng(2)
    sizes = [1, 1, 2, 3, 5, 8, 1, 2, 4, 6]  # texts per user, users 0-4 members
    users = np.repeat(np.arange(10), sizes)
    y = (users < 5).astype(int)
    groups = np.arange(users.size)
    groups[[0, 1]] = 0  # users 0 and 1 share a near-duplicate text: one 2-user cluster
    clusters = user_clusters(users.tolist(), groups)
    perm = user_permutations(y, users.tolist(), clusters, 2000, rng)
    for row in perm:
        for u in range(10):
            assert np.unique(row[users == u]).size == 1
        labels = np.array([row[users == u][0] for u in range(10)])
        assert labels.sum() == 5  # member users kept (member texts vary)
        assert labels[0] == labels[1] == 1  # the 2-user cluster is the only one of its kind
    member_texts = perm.sum(axis=1)
    assert np.unique(member_texts).size > 5  # users of different sizes do swap


def test_relabellings_are_uniform_over_the_user_labellings():
    """Hand example: 3 member and 3 non-member users of sizes 1-4 and no near-duplicate:
    every one of the C(6, 3) = 20 user labellings is equally likely (chi-square against
    the uniform counts, scipy), and none other occurs."""
    users = np.repeat(np.arange(6), [1, 2, 4, 1, 3, 2])
    y = (users < 3).astype(int)
    perm = user_permutations(
        y, users.tolist(), np.arange(6)[users], 20000, np.random.default_rng(3)
    )
    patterns = [tuple(row[np.searchsorted(users, np.arange(6))]) for row in perm]
    expected = {tuple(int(i in c) for i in range(6)) for c in itertools.combinations(range(6), 3)}
    counts = {p: patterns.count(p) for p in set(patterns)}
    assert set(counts) == expected
    assert chisquare(list(counts.values())).pvalue > 1e-3


def test_a_cluster_holding_both_sides_keeps_its_labels():
    """Only with cross-set near-duplicates kept (``dedupe=False``): such a cluster's
    labels cannot move without splitting users or changing the member users."""
    users = np.array([0, 0, 1, 1, 2, 3, 4, 5])
    y = np.array([1, 1, 0, 0, 1, 1, 0, 0])
    groups = np.array([0, 1, 1, 2, 3, 4, 5, 6])  # users 0 (member) and 1 (not) share a group
    clusters = user_clusters(users.tolist(), groups)
    perm = user_permutations(y, users.tolist(), clusters, 500, np.random.default_rng(4))
    assert (perm[:, :4] == y[:4]).all()
    assert np.unique(perm[:, 4:], axis=0).shape[0] == 6  # C(4, 2) labellings of the rest


def test_the_user_permutation_test_equals_an_enumeration_by_hand():
    """Known answer: on 3 + 3 users of 1, 2 and 3 texts the exact permutation p-value is
    #{labellings with AUC >= observed} / 20 over the C(6, 3) user labellings, each AUC by
    sklearn's roc_auc_score of H y; the suite's Monte Carlo p-value (B = 4,999) lies
    within 4 binomial SDs of (1 + 4999 p) / 5000. (Relabelling only users of equal size
    would draw from 8 labellings, not 20: its null SD differs, checked too.)"""
    from sklearn.metrics import roc_auc_score

    texts = [
        "apt dpkg package upload fixed the build", "new upstream release with the build fix",
        "the build of the package now uses dh", "debhelper compat level raised, build fixed",
        "translation updates for german and french", "updated french and spanish translations",
        "typo fixes in the manual page", "manual page typo corrected, thanks",
        "security fix for the parser overflow", "parser overflow fixed, security upload",
        "standards version bumped, no changes", "bumped standards version to 4.6",
    ]  # fmt: skip
    users = [0, 1, 1, 2, 2, 2, 3, 4, 4, 5, 5, 5]  # sizes 1, 2, 3 on each side
    y = np.array([1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0])
    groups = duplicate_groups(texts)
    clusters = user_clusters(users, groups)
    fold = text_folds(texts, clusters, 3, 0)
    _, h = cross_fit(texts, fold, y, {"combined": ("word", "char", "length", "numbers")})
    observed = roc_auc_score(y, h @ y)
    aucs = []
    for c in itertools.combinations(range(6), 3):
        lab = np.isin(users, c).astype(int)
        aucs.append(roc_auc_score(lab, h @ lab))
    exact = float(np.mean(np.array(aucs) >= observed - 1e-12))
    b = 4999
    got = permutation_test(h, y, clusters, b, seed=0, users=users)
    assert got["value"] == pytest.approx(observed, abs=1e-12)
    assert float(auc_rows(h @ y, y[None])[0]) == pytest.approx(observed, abs=1e-12)
    mean = (1 + b * exact) / (b + 1)
    sd = np.sqrt(exact * (1 - exact) / b)
    assert abs(got["p_value"] - mean) <= 4 * sd + 1e-9, (got["p_value"], exact)
    assert got["null_sd"] == pytest.approx(np.std(aucs, ddof=0), rel=0.05)


# --------------------------------------------------------------------------- #
# The sub-sample: whole users, a label-free number of them per side
# --------------------------------------------------------------------------- #
def test_the_sub_sample_draws_whole_users_n_star_a_side():
    """Hand example: 300 member users of 4 texts and 200 non-member users of 2 texts
    (T = 1,600 texts, U = 500 users) under a cap of 500 a side: n* = floor(500 x 500 /
    1600) = 156 users a side, whole."""
    users = np.r_[np.repeat(np.arange(300), 4), np.repeat(np.arange(300, 500), 2)]
    y = (users < 300).astype(int)
    keep = sample_users(y, users.tolist(), 500, np.random.default_rng(5))
    kept = users[keep]
    assert np.unique(kept[y[keep] == 1]).size == 156
    assert np.unique(kept[y[keep] == 0]).size == 156
    for u in np.unique(kept):
        assert (kept == u).sum() == (users == u).sum()  # whole users
    assert sample_users(y, users.tolist(), 800, np.random.default_rng(5)) is None  # T <= 2 cap


def test_the_sub_sample_probability_is_the_same_for_every_relabelling():
    """Exactness of the sample (conditionally on it the test is exact): the rule reads the
    labels only through the number of users a side, so swapping a sampled member user
    with a sampled non-member user of another size leaves the chance of drawing the same
    sample unchanged. Measured: how often each of two labellings draws one fixed sample."""
    sizes = np.array([1, 2, 3, 4, 1, 2, 3, 4])
    users = np.repeat(np.arange(8), sizes)
    y1 = (users < 4).astype(int)
    swap = {0: 7, 7: 0}  # member user 0 (1 text) <-> non-member user 7 (4 texts)
    y2 = np.array([1 - y1[i] if u in swap else y1[i] for i, u in enumerate(users)])
    target = {0, 1, 6, 7}  # a sample holding both swapped users
    freq = []
    for y in (y1, y2):
        hits = 0
        for s in range(3000):
            keep = sample_users(y, users.tolist(), 4, np.random.default_rng(s))
            hits += set(np.unique(users[keep]).tolist()) == target
        freq.append(hits / 3000)
    # n* = max(2, floor(4 x 8 / 20)) = 2 users a side: probability 1 / C(4, 2)^2 = 1/36
    for f in freq:
        assert abs(f - 1 / 36) <= 4 * np.sqrt((1 / 36) * (35 / 36) / 3000)


# --------------------------------------------------------------------------- #
# The record, the text, bad input
# --------------------------------------------------------------------------- #
def _prose(n_users: int, per_user: int, seed: int) -> tuple[list[str], list[str]]:
    """Texts with a style per user (each user's own random 6-letter words), from one
    vocabulary: the users are exchangeable, so any split of them into sides is a
    random user split (words derived from the user's index would not be: their digits
    would differ between the first and the last users)."""
    rng = np.random.default_rng(seed)
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    common = ["".join(rng.choice(letters, 5)) for _ in range(200)]
    texts, users = [], []
    for u in range(n_users):
        own = ["".join(rng.choice(letters, 6)) for _ in range(5)]
        for _ in range(per_user):
            words = list(rng.choice(common, 14)) + list(rng.choice(own, 3))
            rng.shuffle(words)
            texts.append(" ".join(words))
            users.append(f"user-{u}")
    return texts, users


def test_the_record_states_the_unit_and_the_users():
    texts, users = _prose(24, 3, 6)
    members, nonmembers = texts[:36], texts[36:]
    nonmembers[0] = members[0]  # a cross-set duplicate: two users' identical text
    record, scores = SplitCheck(seed=1, families=False, permutations=199).run(
        members, nonmembers, users=users
    )
    assert record["unit"] == "user"
    assert record["users"] == {"members": 12, "nonmembers": 12}
    d = record["duplicates"]
    assert d["pairs"] == 1 and d["member_users_involved"] == 1 == d["nonmember_users_involved"]
    b = record["blind"]
    assert b["n_members"] == 35 and b["n_nonmembers"] == 35
    assert b["n_member_users"] == 12 and b["n_nonmember_users"] == 12
    assert b["clusters"] == 24 and b["clusters_of_several_users"] == 0
    assert "users as units" in record["method"]
    assert "35 members of 12 users" in record["text"]
    assert "with users as the units" in record["text"]
    assert scores.shape == (70,)


def test_users_change_the_answer_on_user_styled_text():
    """The same user split with and without users: texts as units, the classifier learns
    each user's words from the user's other texts in the training folds and calls a random
    user split shifted; users as units, it does not."""
    texts, users = _prose(40, 4, 7)
    m, n = texts[:80], texts[80:]
    with_users, _ = SplitCheck(seed=0, families=False).run(m, n, users=users)
    without, _ = SplitCheck(seed=0, families=False).run(m, n)
    assert without["shifted"] is True
    assert with_users["shifted"] is False
    # folds by user keep the blind AUC's meaning: its null is centred on 0.5 (folds that
    # split users would stay exact, the relabellings keeping users whole, but would centre
    # the null, and the reported AUC, near 0.75 on this random split)
    a = with_users["blind"]["auc"]
    assert abs(a["null_mean"] - 0.5) < 0.03
    assert a["ci_low"] <= 0.5 <= a["ci_high"]


@pytest.mark.parametrize(
    "users, message",
    [
        (["a", "b", "c", "a"], "1 of 3 users have texts on both sides"),
        (["a", "b", "c"], "3 user ids for 2 members and 2 non-members"),
        (["a", "a", "c", "d"], "at least 2 member users and 2 non-member users, got 1 and 2"),
        (["a", None, "c", "d"], "1 text(s) have no user id"),
    ],
)
def test_bad_user_lists_are_refused_with_one_line(users, message):
    texts = ["one two three four", "five six seven eight", "nine ten eleven", "twelve thirteen"]
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SplitCheck().run(texts[:2], texts[2:], users=users)


def test_too_few_users_left_after_removing_cross_set_duplicates_is_not_measured():
    texts, users = _prose(6, 2, 8)
    members, nonmembers = texts[:6], texts[6:]
    nonmembers[:] = [members[0], members[2], nonmembers[2], nonmembers[3], members[1], members[3]]
    record, scores = SplitCheck(permutations=99).run(members, nonmembers, users=users)
    assert record["status"] == "not-measured" and scores is None
    assert "users" in record["reason"]


# --------------------------------------------------------------------------- #
# Calibration: random user splits of real text (modules as users)
# --------------------------------------------------------------------------- #
def test_random_module_splits_of_stdlib_docstrings_are_not_called_shifted():
    """200 random user splits of stdlib docstring paragraphs, the module being the user
    (20 + 20 modules, at most 3 paragraphs each; B = 199): the one-sided 95%
    Clopper-Pearson upper limit of the false ``split-shifted`` rate is at most 5%. A check
    that treated the texts as independent fails it (it learns each module's words from
    the module's other paragraphs: 13 of the first 50 splits flagged when measured, against
    3 of the 200 with the modules as users)."""
    from experiments.split_users import user_split
    from experiments.split_validity import docstring_corpus

    items = docstring_corpus()
    trials, flagged = 200, 0
    for t in range(trials):
        m, n, users = user_split(items, 20, 3, np.random.default_rng([48, t]))
        record, _ = SplitCheck(seed=t, families=False, permutations=199).run(m, n, users=users)
        flagged += bool(record["shifted"])
    upper = float(beta.ppf(0.95, flagged + 1, trials - flagged))
    assert upper <= 0.05, (flagged, trials, upper)


def test_blind_scores_with_users_fold_by_user_clusters():
    """``blind_scores(..., users=)`` scores with the folds of the user clusters: the
    same scores as a cross-fit on those folds, and not those of the text folds."""
    from privacy_audit.stats.blind_baseline import blind_scores

    texts, users = _prose(12, 3, 9)
    y = np.r_[np.ones(18, int), np.zeros(18, int)]
    fams = {"combined": ("word", "char", "length", "numbers")}
    got = blind_scores(texts, y, 4, 0, fams, users=users)["combined"]
    folds = text_folds(texts, user_clusters(users, duplicate_groups(texts)), 4, 0)
    want, _ = cross_fit(texts, folds, y, fams, None)
    np.testing.assert_array_equal(got, want["combined"])
    plain = blind_scores(texts, y, 4, 0, fams)["combined"]
    assert not np.array_equal(got, plain)


def test_the_check_reads_whole_users_when_it_sub_samples(monkeypatch):
    """Above twice the cap the blind classifier reads n* whole users a side: every user's
    texts are all scored or all left out (``nan``), n* = floor(cap U / T) a side."""
    import privacy_audit.stats.split_check as sc

    monkeypatch.setattr(sc, "MAX_BLIND_PER_CLASS", 20)
    texts, users = _prose(30, 3, 10)  # T = 90 > 2 x 20: n* = floor(20 x 30 / 90) = 6
    record, scores = SplitCheck(seed=2, families=False, permutations=99).run(
        texts[:45], texts[45:], users=users
    )
    b = record["blind"]
    assert b["subsampled"] is True
    assert b["n_member_users"] == 6 == b["n_nonmember_users"]
    assert b["n_members"] == 18 == b["n_nonmembers"]
    scored = np.isfinite(scores)
    for u in set(users):
        mine = scored[np.array(users) == u]
        assert mine.all() or not mine.any()
