"""The split check (issue 25): blind baseline, near-duplicates, the ``split-shifted``
verdict, the gate and the pytest plugin on a shifted split.

Known answers come from sklearn (AUC) and from planted duplicates; the blind interval's
coverage of 0.5 on same-distribution splits is measured by simulation.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import binom

from privacy_audit.audit.own_model import check_audit_data
from privacy_audit.stats.blind_baseline import blind_scores, delong_auc, delong_difference
from privacy_audit.stats.near_duplicates import near_duplicates
from privacy_audit.stats.split_check import SplitCheck


def prose(n: int, seed: int) -> list[str]:
    """Real English paragraphs from Python's own documentation topics, shuffled."""
    import pydoc_data.topics as topics

    paras = []
    for text in topics.topics.values():
        for p in text.split("\n\n"):
            p = " ".join(p.split())
            if len(p.split()) >= 12:
                paras.append(p[:300])
    paras = list(dict.fromkeys(paras))
    rng = np.random.default_rng(seed)
    return [paras[i] for i in rng.permutation(len(paras))[:n]]


def generator(n: int, seed: int, words: list[str], numbers: bool = False) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        t = list(rng.choice(words, size=int(rng.integers(8, 16))))
        if numbers:
            t.insert(int(rng.integers(0, len(t))), str(int(rng.integers(1990, 2030))))
        out.append(" ".join(t))
    return out


# --------------------------------------------------------------------------- #
# DeLong: known answers
# --------------------------------------------------------------------------- #
def test_delong_auc_matches_sklearn_and_difference_of_a_score_with_itself_is_zero():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    y = np.r_[np.ones(70, int), np.zeros(50, int)]
    s = rng.normal(size=120) + 0.8 * y
    s[:10] = np.round(s[:10])  # ties
    s[60:70] = np.round(s[60:70])
    a = delong_auc(s, y)
    assert a["value"] == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    assert a["ci_low"] < a["value"] < a["ci_high"]
    d = delong_difference(s, s, y)
    assert d["value"] == 0 and d["se"] == pytest.approx(0, abs=1e-12)
    other = rng.normal(size=120)
    d = delong_difference(s, other, y)
    assert d["value"] == pytest.approx(roc_auc_score(y, s) - roc_auc_score(y, other), abs=1e-12)


def test_delong_variance_matches_the_hand_formula():
    """Var(AUC) = Var(V10)/m + Var(V01)/n with placements computed by brute force."""
    rng = np.random.default_rng(3)
    pos, neg = rng.normal(1, 1, 15), rng.normal(0, 1, 11)
    psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
    v10, v01 = psi.mean(1), psi.mean(0)
    se = np.sqrt(v10.var(ddof=1) / 15 + v01.var(ddof=1) / 11)
    a = delong_auc(np.r_[pos, neg], np.r_[np.ones(15), np.zeros(11)])
    assert a["se"] == pytest.approx(se, rel=1e-12)


# --------------------------------------------------------------------------- #
# Near-duplicates
# --------------------------------------------------------------------------- #
def test_planted_duplicates_are_found_counted_and_removed():
    from privacy_audit.audit.data import AuditData
    from privacy_audit.defenses.base import Examples

    members, nonmembers = prose(60, 1)[:30], prose(60, 1)[30:]
    # exact after normalising (case, white space), and near (one word changed)
    nonmembers[3] = "  " + members[5].upper() + "  "
    nonmembers[7] = members[9].replace(" ", "\n")
    words = members[12].split()
    words[len(words) // 2] = "CHANGED"
    nonmembers[11] = " ".join(words)
    pairs = near_duplicates(members, nonmembers)
    found = {(i, j) for i, j, _ in pairs}
    assert {(5, 3), (9, 7), (12, 11)} <= found
    assert len(found) == 3, pairs  # nothing else in 30 x 30 distinct paragraphs
    assert all(v >= 0.8 for *_, v in pairs)

    def ex(texts, tag):
        return Examples([f"{tag}{i}" for i in range(len(texts))], texts, np.zeros(len(texts)))

    data = AuditData(ex(members, "m"), ex(nonmembers, "n"), ex(nonmembers, "n"), ["-"])
    clean, check, blind = check_audit_data(data, seed=0, aggregate_only=False)
    d = check["duplicates"]
    assert (d["pairs"], d["exact_pairs"]) == (3, 2)
    assert (d["members_removed"], d["nonmembers_removed"]) == (3, 3)
    assert len(clean.members) == 27 and len(clean.nonmembers) == 27
    assert not {"m5", "m9", "m12"} & set(clean.members.ids)
    assert not {"n3", "n7", "n11"} & set(clean.nonmembers.ids)
    assert len(d["examples"]) == 3 and blind.shape == (54,)
    # aggregate-only: counts, no text
    _, check, _ = check_audit_data(data, seed=0, aggregate_only=True)
    assert "examples" not in check["duplicates"] and check["duplicates"]["pairs"] == 3


def test_dissimilar_texts_are_not_duplicates():
    a = prose(40, 5)
    assert near_duplicates(a[:20], a[20:]) == []


# --------------------------------------------------------------------------- #
# Blind baseline
# --------------------------------------------------------------------------- #
def test_shifted_generators_give_a_blind_auc_above_0_9():
    words = [f"w{i}" for i in range(120)]
    m = generator(40, 1, words[:60])
    n = generator(40, 2, words[50:], numbers=True)
    check, scores = SplitCheck().run(m, n)
    auc = check["blind"]["auc"]
    assert auc["value"] > 0.9 and auc["ci_low"] > 0.5
    assert check["shifted"] is True and check["status"] == "shifted"
    assert scores.shape == (80,) and np.all(np.isfinite(scores))
    assert "same source" in check["advice"] and "differ in their text" in check["text"]


def test_real_prose_from_two_sources_is_shifted_and_same_source_is_not():
    """pydoc topics vs stdlib module docstrings: shifted; pydoc vs pydoc: not."""
    import collections
    import email
    import json as json_mod
    import logging
    import os

    docs = []
    for mod in (json_mod, os, collections, email, logging):
        for obj in vars(mod).values():
            d = getattr(obj, "__doc__", None)
            if isinstance(d, str):
                for p in d.split("\n\n"):
                    p = " ".join(p.split())
                    if len(p.split()) >= 12:
                        docs.append(p[:300])
    docs = list(dict.fromkeys(docs))[:60]
    pyd = prose(120, 2)
    shifted, _ = SplitCheck(families=False).run(pyd[:60], docs)
    same, _ = SplitCheck(families=False).run(pyd[:60], pyd[60:])
    assert shifted["shifted"] is True
    assert same["shifted"] is False
    assert same["blind"]["auc"]["ci_low"] <= 0.5 <= same["blind"]["auc"]["ci_high"]


def test_duplicates_inside_one_set_do_not_look_like_a_shift():
    """A member paragraph repeated inside the members must not let the cross-fitted
    classifier recognise it by its twin in the training folds (folds keep near-duplicate
    groups together)."""
    base = prose(80, 4)
    members = base[:20] * 2  # every member twice
    nonmembers = base[40:80]
    s = blind_scores(members + nonmembers, np.r_[np.ones(40), np.zeros(40)], 5, 0)["combined"]
    a = delong_auc(s, np.r_[np.ones(40), np.zeros(40)])
    assert a["ci_low"] <= 0.5, a


def _clustered(corpus: str) -> list[str]:
    from experiments.split_validity import docstring_corpus, pydoc_corpus

    return [t for _, t in (pydoc_corpus() if corpus == "pydoc" else docstring_corpus())]


@pytest.mark.parametrize("corpus", ["pydoc", "docstrings"])
def test_false_alarms_and_interval_coverage_on_clustered_real_text(corpus):
    """Random 40 + 40 splits of real paragraphs clustered by topic / module (the CI draw;
    docs/split-validity.md has the full figure, 100 + 100 splits on five corpora):
    ``split-shifted`` (p <= 0.01 and the 98% interval above 0.5) at most the 99.9%
    binomial quantile at 1%, the 98% interval missing 0.5 at most that at 2%, and the
    AUC's spread across splits within [0.7, 1.3] x the SE it reported (DeLong's
    SE alone was 1.3-1.6x too small on such text, issue 34)."""
    texts = _clustered(corpus)
    trials, shifted, missed, aucs, ses = 40, 0, 0, [], []
    for t in range(trials):
        idx = np.random.default_rng([7, t]).permutation(len(texts))[:80]
        chk, _ = SplitCheck(seed=t, families=False, permutations=199).run(
            [texts[i] for i in idx[:40]], [texts[i] for i in idx[40:]]
        )
        a = chk["blind"]["auc"]
        shifted += chk["shifted"]
        missed += not a["ci_low"] <= 0.5 <= a["ci_high"]
        aucs.append(a["value"])
        ses.append(a["se"])
    assert shifted <= binom.ppf(0.999, trials, 0.01), (shifted, trials)
    assert missed <= binom.ppf(0.999, trials, 0.02), (missed, trials)
    ratio = np.std(aucs, ddof=1) / np.mean(ses)
    assert 0.7 <= ratio <= 1.3, ratio


def _brute_force_scores(texts, y, fold_id):
    """Out-of-fold scores refitted with sklearn alone: TfidfVectorizer and StandardScaler
    fitted on the training fold, Ridge without intercept on the centred training labels
    over the weighted feature blocks (the primal form of the kernel ridge)."""
    from scipy import sparse
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import Ridge
    from sklearn.preprocessing import StandardScaler

    from privacy_audit.stats.blind_baseline import BLOCK_WEIGHTS, RIDGE, dense_features

    dense = dense_features(texts)
    out = np.zeros(len(texts))
    for f in np.unique(fold_id):
        tr, te = np.flatnonzero(fold_id != f), np.flatnonzero(fold_id == f)
        blocks_tr, blocks_te = [], []
        for name, kw in (
            ("word", dict(ngram_range=(1, 2))),
            ("char", dict(analyzer="char_wb", ngram_range=(2, 4))),
        ):
            v = TfidfVectorizer(min_df=2, sublinear_tf=True, max_features=50000, **kw)
            w = np.sqrt(BLOCK_WEIGHTS[name])
            blocks_tr.append(w * v.fit_transform([texts[i] for i in tr]))
            blocks_te.append(w * v.transform([texts[i] for i in te]))
        for name, cols in (("length", slice(0, 2)), ("numbers", slice(2, 6))):
            sc = StandardScaler().fit(dense[tr, cols])
            w = np.sqrt(BLOCK_WEIGHTS[name] / (cols.stop - cols.start))
            blocks_tr.append(sparse.csr_matrix(w * sc.transform(dense[tr, cols])))
            blocks_te.append(sparse.csr_matrix(w * sc.transform(dense[te, cols])))
        x_tr, x_te = sparse.hstack(blocks_tr).tocsr(), sparse.hstack(blocks_te).tocsr()
        yt = y[tr] - y[tr].mean()
        out[te] = (
            Ridge(alpha=RIDGE, fit_intercept=False, solver="svd")
            .fit(x_tr.toarray(), yt)
            .predict(x_te.toarray())
        )
    return out


def test_permutation_test_equals_a_brute_force_refit_loop():
    """Known answer: every relabelling refitted from scratch with sklearn (vectorisers on
    the training fold only), its AUC by sklearn's roc_auc_score, the p-value counted in a
    plain loop, against the suite's operator H and its vectorised permutation test."""
    from sklearn.metrics import roc_auc_score

    from privacy_audit.stats.blind_baseline import FAMILIES, cross_fit, permutation_test, text_folds
    from privacy_audit.stats.near_duplicates import duplicate_groups

    texts = prose(36, 11)[:18] + _clustered("docstrings")[:18]
    y = np.r_[np.ones(18, int), np.zeros(18, int)]
    groups = duplicate_groups(texts)
    fold_id = text_folds(texts, groups, 3, 0)
    scores, h = cross_fit(texts, fold_id, y, {"combined": FAMILIES["combined"]})
    np.testing.assert_allclose(
        scores["combined"], _brute_force_scores(texts, y, fold_id), atol=1e-8
    )
    rng = np.random.default_rng(5)
    relabel = np.array([rng.permutation(y) for _ in range(8)])
    observed = roc_auc_score(y, _brute_force_scores(texts, y, fold_id))
    null = []
    for yb in relabel:
        sb = _brute_force_scores(texts, yb.astype(float), fold_id)
        np.testing.assert_allclose(h @ yb, sb, atol=1e-8)
        null.append(roc_auc_score(yb, sb))
    p_loop = (1 + sum(a >= observed - 1e-12 for a in null)) / (1 + len(null))
    got = permutation_test(h, y, groups, 8, 0, relabellings=relabel)
    assert got["value"] == pytest.approx(observed, abs=1e-12)
    assert got["p_value"] == pytest.approx(p_loop, abs=1e-12)
    assert got["null_sd"] == pytest.approx(np.std(null, ddof=1), abs=1e-12)
    assert got["value"] > 0.8 and got["p_value"] == pytest.approx(1 / 9)  # two sources
    # interval ends: k = floor(0.25 x 9) = 2, the 2nd smallest and 2nd largest null AUCs
    got = permutation_test(h, y, groups, 8, 0, relabellings=relabel, confidence=0.5)
    assert got["null_q_low"] == pytest.approx(sorted(null)[1], abs=1e-12)
    assert got["null_q_high"] == pytest.approx(sorted(null)[-2], abs=1e-12)


def test_fold_tfidf_is_tfidf_vectorizer_fitted_on_the_training_rows_only():
    from sklearn.feature_extraction.text import TfidfVectorizer

    from privacy_audit.stats.blind_baseline import NGRAMS, fold_tfidf, ngram_counts

    texts = prose(120, 3)
    tr, te = np.arange(0, 120, 2), np.arange(1, 120, 2)
    counts = ngram_counts(texts)
    for name, kw in NGRAMS.items():
        v = TfidfVectorizer(min_df=2, sublinear_tf=True, max_features=50000, **kw)
        want_tr = v.fit_transform([texts[i] for i in tr])
        want_te = v.transform([texts[i] for i in te])
        got_tr, got_te = fold_tfidf(counts[name], tr, te)
        np.testing.assert_allclose(
            (got_tr @ got_tr.T).toarray(), (want_tr @ want_tr.T).toarray(), atol=1e-12
        )
        np.testing.assert_allclose(
            (got_te @ got_tr.T).toarray(), (want_te @ want_tr.T).toarray(), atol=1e-12
        )


def test_folds_and_relabellings_read_no_label_or_order():
    from privacy_audit.stats.blind_baseline import label_permutations, text_folds

    texts = prose(50, 8)
    groups = np.arange(50)
    groups[[3, 7]] = 3  # one near-duplicate pair
    f = text_folds(texts, groups, 5, 1)
    order = np.random.default_rng(0).permutation(50)
    g = text_folds([texts[i] for i in order], groups[order], 5, 1)
    assert np.array_equal(f[order], g)  # the same fold for each text, whatever its place
    assert f[3] == f[7] and sorted(np.bincount(f)) == [10, 10, 10, 10, 10]
    y = np.r_[np.ones(25, int), np.zeros(25, int)]
    y[[3, 7]] = 1
    y[[0, 1]] = 0
    rel = label_permutations(y, groups, 400, np.random.default_rng(0))
    assert np.all(rel.sum(1) == y.sum()) and np.all(rel[:, 3] == rel[:, 7])
    # every singleton is a member in about (25 - 2) / 48 of the relabellings
    share = rel[:, groups != 3].mean(0)
    assert np.all(np.abs(share - 23 / 48) < 0.1), share


def test_auc_counts_cross_class_ties_as_one_half_like_sklearn():
    from sklearn.metrics import roc_auc_score

    from privacy_audit.stats.blind_baseline import auc_rows

    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, size=(5, 60))
    s = rng.integers(0, 4, size=(5, 60)).astype(float) + 0.5 * y  # many cross-class ties
    s[:, ::3] = 1.0
    got = auc_rows(s, y)
    for r in range(5):
        want = roc_auc_score(y[r], s[r])
        assert got[r] == pytest.approx(want, abs=1e-12)
        assert delong_auc(s[r], y[r])["value"] == pytest.approx(want, abs=1e-12)


@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_intervals_use_the_normal_quantile_of_their_confidence(confidence):
    """Known answer from scipy's norm.ppf: DeLong's interval and the blind interval are
    ``AUC ± z SE`` with ``z = norm.ppf((1 + confidence) / 2)`` (1.96 at 95%, not 1.645)."""
    from scipy.stats import norm

    z = norm.ppf((1 + confidence) / 2)
    rng = np.random.default_rng(1)
    y = np.r_[np.ones(40), np.zeros(40)]
    s = rng.normal(size=80) + 0.5 * y
    a = delong_auc(s, y, confidence)
    assert a["ci_low"] == pytest.approx(a["value"] - z * a["se"], abs=1e-12)
    assert a["ci_high"] == pytest.approx(a["value"] + z * a["se"], abs=1e-12)
    pyd = prose(60, 4)
    chk, _ = SplitCheck(confidence=confidence, families=False, permutations=99).run(
        pyd[:30], pyd[30:]
    )
    b = chk["blind"]["auc"]
    assert b["se"] == max(b["null_sd"], b["delong_se"])
    # the permutation test inverted: half-widths from the null quantiles, at least z SE
    lo_half = max(b["null_q_high"] - 0.5, z * b["delong_se"])
    hi_half = max(0.5 - b["null_q_low"], z * b["delong_se"])
    assert b["ci_low"] == pytest.approx(max(0.0, b["value"] - lo_half), abs=1e-12)
    assert b["ci_high"] == pytest.approx(min(1.0, b["value"] + hi_half), abs=1e-12)
    # where DeLong's SE is the wider (a large shift), its z is the confidence's quantile
    from privacy_audit.stats.blind_baseline import blind_interval

    lo, hi = blind_interval(0.9, 0.45, 0.55, 0.04, confidence)
    assert lo == pytest.approx(0.9 - max(0.05, z * 0.04), abs=1e-12)
    assert hi == pytest.approx(min(1.0, 0.9 + max(0.05, z * 0.04)), abs=1e-12)


def test_the_split_check_decides_at_one_percent_with_the_98_percent_interval():
    """Known answer for the level (issue 34: a false ``split-shifted`` blocks a valid
    audit, so the check decides at one-sided 1%): by default ``split-shifted`` needs
    p <= 0.01, and the interval's ends are AUC - (q_hi - 0.5) and AUC + (0.5 - q_lo) with
    q the 10th smallest / largest of the 999 relabelled AUCs, recomputed here with
    sklearn's roc_auc_score on the same relabellings, half-widths at least
    norm.ppf(0.99) x DeLong's SE. A check back at 2.5% / 95% fails here."""
    from scipy.stats import norm
    from sklearn.metrics import roc_auc_score

    from privacy_audit.stats.blind_baseline import (
        FAMILIES,
        cross_fit,
        is_shifted,
        label_permutations,
        text_folds,
    )
    from privacy_audit.stats.near_duplicates import duplicate_groups

    # the decision rule at its default level: p = 0.01 is a shift, 0.011 and 0.02 are not
    assert is_shifted({"p_value": 0.01, "ci_low": 0.51}) is True
    assert is_shifted({"p_value": 0.011, "ci_low": 0.51}) is False
    assert is_shifted({"p_value": 0.02, "ci_low": 0.6}) is False
    # the interval of a real run: members from pydoc topics, non-members from docstrings
    m, n = prose(60, 8)[:30], _clustered("docstrings")[100:130]
    chk, _ = SplitCheck(families=False).run(m, n)
    assert chk["confidence"] == 0.98 and "p <= 0.01" in chk["method"]
    assert "98% interval" in chk["method"] and "98% interval" in chk["text"]
    b = chk["blind"]["auc"]
    texts, y = m + n, np.r_[np.ones(30, int), np.zeros(30, int)]
    groups = duplicate_groups(texts)
    _, h = cross_fit(texts, text_folds(texts, groups, 5, 0), y, {"c": FAMILIES["combined"]}, "c")
    relabel = label_permutations(y, groups, 999, np.random.default_rng([0, 0x9E37]))
    null = np.sort([roc_auc_score(r, h @ r) for r in relabel])
    observed = roc_auc_score(y, h @ y)
    assert b["value"] == pytest.approx(observed, abs=1e-12)
    assert b["null_q_low"] == pytest.approx(null[9], abs=1e-12)  # 10th smallest
    assert b["null_q_high"] == pytest.approx(null[-10], abs=1e-12)  # 10th largest
    z = norm.ppf(0.99)
    lo = max(0.0, observed - max(null[-10] - 0.5, z * b["delong_se"]))
    hi = min(1.0, observed + max(0.5 - null[9], z * b["delong_se"]))
    assert (b["ci_low"], b["ci_high"]) == pytest.approx((lo, hi), abs=1e-12)
    p = (1 + np.sum(null >= observed - 1e-12)) / 1000
    assert b["p_value"] == pytest.approx(p, abs=1e-12)
    assert chk["shifted"] is bool(p <= 0.01 and lo > 0.5)
    want = 0.5 + (z + norm.ppf(0.8)) * np.std(null, ddof=1)
    assert chk["blind"]["detectable_auc"] == pytest.approx(want, abs=1e-4)


def test_shifted_only_when_the_auc_is_significantly_above_chance():
    from privacy_audit.stats.blind_baseline import is_shifted

    above = {"p_value": 0.001, "ci_low": 0.6, "ci_high": 0.8}
    below = {"p_value": 0.999, "ci_low": 0.2, "ci_high": 0.4}  # anti-learning, not a shift
    edge = {"p_value": 0.03, "ci_low": 0.51, "ci_high": 0.7}  # p above 0.025
    assert is_shifted(above, 0.95) is True
    assert is_shifted(below, 0.95) is False
    assert is_shifted(edge, 0.95) is False and is_shifted(edge, 0.9) is True
    assert is_shifted({"p_value": 0.01, "ci_low": 0.49, "ci_high": 0.7}, 0.95) is False


def test_paired_difference_variance_and_the_attack_minus_blind_sign():
    """Known answer by brute-force placements: Var(AUC_a - AUC_b) = Var(V10_a - V10_b)/m +
    Var(V01_a - V01_b)/n (both terms); compare_attacks reports attack minus blind."""
    from sklearn.metrics import roc_auc_score

    from privacy_audit.stats.split_check import compare_attacks

    rng = np.random.default_rng(4)
    m, n = 30, 20
    y = np.r_[np.ones(m, int), np.zeros(n, int)]
    a = rng.normal(size=m + n) + 1.0 * y
    b = rng.normal(size=m + n) + 0.3 * y

    def placements(s):
        pos, neg = s[:m], s[m:]
        psi = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])
        return psi.mean(1), psi.mean(0)

    a10, a01 = placements(a)
    b10, b01 = placements(b)
    var = np.var(a10 - b10, ddof=1) / m + np.var(a01 - b01, ddof=1) / n
    d = delong_difference(a, b, y)
    assert d["se"] == pytest.approx(np.sqrt(var), rel=1e-12)
    want = roc_auc_score(y, a) - roc_auc_score(y, b)
    assert d["value"] == pytest.approx(want, abs=1e-12) and want > 0
    att = {"attack": "x", "status": "ok", "examples": {"scores": list(a), "members": list(y)}}
    # the difference rows stay at 95% while the check itself decides at 98%
    row = compare_attacks({"confidence": 0.98, "difference_confidence": 0.95}, [att], b)[0]
    assert row["difference"]["value"] == pytest.approx(want, abs=1e-12)
    assert row["auc"] == pytest.approx(roc_auc_score(y, a)) and row["blind_auc"] == pytest.approx(
        roc_auc_score(y, b)
    )
    assert row["difference"]["ci_low"] == pytest.approx(
        want - 1.959963984540054 * np.sqrt(var), abs=1e-9
    )


def test_the_default_near_duplicate_threshold_is_jaccard_0_8():
    """A pair at Jaccard 0.85 of character 5-gram sets (computed here by hand) is a
    near-duplicate at the default threshold, and not at 0.9."""
    from privacy_audit.stats.shingles import normalise

    def jac(s, t):
        a = {normalise(s)[i : i + 5] for i in range(len(normalise(s)) - 4)}
        b = {normalise(t)[i : i + 5] for i in range(len(normalise(t)) - 4)}
        return len(a & b) / len(a | b)

    base = prose(1, 9)[0]
    words = base.split()
    other = None
    for k in range(1, len(words)):  # change words at the end until Jaccard falls to ~0.85
        cand = " ".join(words[: len(words) - k] + ["zqx" + w for w in words[len(words) - k :]])
        if jac(base, cand) < 0.88:
            other = cand
            break
    assert other is not None and 0.8 < jac(base, other) < 0.88, jac(base, other)
    filler = prose(40, 10)[20:]
    assert [(i, j) for i, j, _ in near_duplicates([base, *filler[:5]], [*filler[5:10], other])] == [
        (0, 5)
    ]
    assert SplitCheck().duplicates([base, *filler[:5]], [*filler[5:10], other])["pairs"] == 1
    assert near_duplicates([base], [other], jaccard=0.9) == []


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        SplitCheck().run(["a b c"], ["d e f", "g h i"])
    with pytest.raises(ValueError, match="folds"):
        SplitCheck(folds=1)


# --------------------------------------------------------------------------- #
# Verdict, gate and pytest plugin read the run's split check
# --------------------------------------------------------------------------- #
def _run_with(split: dict | None, shift: float = 1.5):
    from privacy_audit.attacks.base import AttackResult, MetricSettings
    from privacy_audit.audit.results import assemble_results, run_record
    from privacy_audit.defenses.base import PrivacyClaim

    rng = np.random.default_rng(0)
    members = np.r_[np.ones(100, int), np.zeros(100, int)]
    scores = rng.normal(size=200) + shift * members
    res = AttackResult.from_scores("lm-loss", scores, members, None, MetricSettings(n_boot=100))
    run = run_record("as-is model", "as-is", PrivacyClaim.none(), None, [res])
    if split is not None:
        run["split_check"] = split
    return assemble_results([run], "split", 0, {})


def _split(shifted: bool) -> dict:
    auc = (
        {"value": 0.97, "ci_low": 0.95, "ci_high": 0.99}
        if shifted
        else {"value": 0.5, "ci_low": 0.42, "ci_high": 0.58}
    )
    check = {
        "shifted": shifted,
        "status": "shifted" if shifted else "ok",
        "confidence": 0.98,
        "difference_confidence": 0.95,
        "blind": {"auc": auc, "n_members": 100, "n_nonmembers": 100, "families": {"length": 0.6}},
        "duplicates": {
            "pairs": 1,
            "exact_pairs": 1,
            "members_removed": 1,
            "nonmembers_removed": 1,
            "examples": [{"member": "<script>x</script>", "nonmember": "<b>y", "jaccard": 1.0}],
        },
        "advice": "Sample the non-members from the same source.",
        "attacks": [
            {
                "attack": "lm-loss",
                "auc": 0.86,
                "blind_auc": 0.97,
                "n": 200,
                "difference": {"value": -0.11, "ci_low": -0.15, "ci_high": -0.07},
            }
        ],
    }
    from privacy_audit.stats.split_check import split_text

    check["text"] = split_text(check)
    return check


def test_shifted_split_never_gives_high_or_low():
    before = _run_with(None)["runs"][0]["verdict"]
    assert before["level"] == "high"  # what the attacks alone say
    v = _run_with(_split(True))["runs"][0]["verdict"]
    assert v["level"] == "split-shifted"
    assert "blind AUC 0.970" in v["text"] and "same source" in v["text"]
    assert "0.970 [0.950, 0.990] (98% interval)" in v["text"]
    assert "Certified privacy loss" not in v["text"]
    # not shifted: the verdict is exactly what it was without a split check
    assert _run_with(_split(False))["runs"][0]["verdict"] == before


def test_gate_fails_on_a_shifted_split_unless_allowed(tmp_path, cli):
    from privacy_audit.audit.integrations.gate import check_all

    res = _run_with(_split(True), shift=0.0)
    _, failures = check_all(res, {"max_auc": 0.99})
    assert [f.kind for f in failures] == ["split-shifted"]
    assert check_all(res, {"max_auc": 0.99}, allow_shifted_split=True)[1] == []
    assert check_all(_run_with(_split(False), 0.0), {"max_auc": 0.99})[1] == []
    path = tmp_path / "results.json"
    path.write_text(json.dumps(res), encoding="utf-8")
    out = cli(["gate", str(path), "--max-auc", "0.99"])
    assert out.code == 1 and "shifted member/non-member split" in out.stdout, out.stdout
    out = cli(["gate", str(path), "--max-auc", "0.99", "--allow-shifted-split"])
    assert out.code == 0, out.stdout


def test_pytest_plugin_fails_on_a_shifted_split_unless_allowed():
    from privacy_audit.audit.integrations.pytest_plugin import AuditResults

    results = AuditResults(_run_with(_split(True), shift=0.0))
    with pytest.raises(AssertionError, match="split"):
        results.assert_within(max_auc=0.99)
    results.assert_within(max_auc=0.99, allow_shifted_split=True)


def test_report_escapes_duplicate_examples_and_shows_attack_beside_blind(tmp_path):
    from privacy_audit.reports import render_html

    res = _run_with(_split(True))
    html = render_html(res)
    assert "&lt;script&gt;x&lt;/script&gt;" in html and "<script>x" not in html
    assert 'class="badge split-shifted"' in html
    assert "-0.110 [-0.150, -0.070]" in html
    # each interval under its own level: the check's 98%, the difference rows' 95%
    assert "Blind AUC [98% CI]" in html and "Difference [95% CI]" in html
    assert "98% interval; 100 members, 100 non-members" in html
    res["aggregate_only"] = True
    assert "&lt;script&gt;x" not in render_html(res)


# --------------------------------------------------------------------------- #
# End to end: a user's model audited on a shifted and on a same-distribution split
# --------------------------------------------------------------------------- #
@pytest.fixture(scope="module")
def untrained_lm(tmp_path_factory):
    """A tiny GPT-2 trained on neither set (its weights are all in the checkpoint)."""
    from tests.own_models import build_causal_lm, save, word_tokenizer

    root = tmp_path_factory.mktemp("split")
    tok = word_tokenizer()
    save(build_causal_lm("gpt2", len(tok), seed=0, d=32), tok, root / "model")
    return root


def _audit(cli, root: Path, members, nonmembers, name: str):
    from tests.own_models import write_lines

    write_lines(root / f"{name}-m.txt", members)
    write_lines(root / f"{name}-n.txt", nonmembers)
    out = root / name
    outcome = cli(
        ["run", "--model", str(root / "model"), "--members", str(root / f"{name}-m.txt")]
        + ["--nonmembers", str(root / f"{name}-n.txt"), "--out", str(out), "--quiet"]
    )
    assert outcome.code == 0, outcome.stderr[-3000:]
    (out / "stdout.txt").write_text(outcome.stdout)
    return out, json.loads((out / "results.json").read_text(encoding="utf-8"))


def test_shifted_split_end_to_end_is_split_shifted_and_gate_exits_1(untrained_lm, cli):
    from tests.own_models import WORDS

    m = generator(40, 1, WORDS[:60])
    n = generator(40, 2, WORDS[60:120])
    out, res = _audit(cli, untrained_lm, m + [m[0]], n + [m[0].upper()], "shifted")
    run = res["runs"][0]
    check = run["split_check"]
    assert check["blind"]["auc"]["value"] > 0.9 and check["shifted"] is True
    assert check["duplicates"]["pairs"] >= 1  # the planted one (and its twin member)
    assert run["attacks"][0]["n_members"] == 39 and run["attacks"][0]["n_nonmembers"] == 40
    assert run["verdict"]["level"] == "split-shifted"
    assert (out / "stdout.txt").read_text().startswith("VERDICT model: SPLIT-SHIFTED")
    assert "(split SHIFTED)" in (out / "stdout.txt").read_text()
    assert {r["attack"] for r in check["attacks"]} == {a["attack"] for a in run["attacks"]}
    gate = cli(["gate", str(out / "results.json"), "--max-auc", "1.0"])
    assert gate.code == 1, gate.stdout
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "Is the member / non-member split valid?" in html


def test_same_distribution_split_end_to_end_keeps_the_verdict(untrained_lm, cli):
    from privacy_audit.reports.verdict import verdict_for_run
    from tests.own_models import random_texts

    # two texts that differ only after 64 tokens: identical as scored (cut to max_length)
    head = random_texts(1, 9, length=70)[0]
    m, n = random_texts(39, 1) + [head + " w1 w2"], random_texts(40, 2) + [head + " w3 w4"]
    _, res = _audit(cli, untrained_lm, m, n, "same")
    run = res["runs"][0]
    # the copy is dropped from the non-members after the cut (audit/data.py), before the check
    assert run["exact_duplicates"]["removed_nonmembers"] == 1
    assert run["split_check"]["duplicates"]["pairs"] == 0
    assert run["attacks"][0]["n_members"] == 40 and run["attacks"][0]["n_nonmembers"] == 40
    auc = run["split_check"]["blind"]["auc"]
    assert auc["ci_low"] <= 0.5 <= auc["ci_high"] and run["split_check"]["shifted"] is False
    without = {k: v for k, v in run.items() if k not in ("split_check", "verdict")}
    assert run["verdict"] == verdict_for_run(without)


def test_score_with_a_text_column_runs_the_split_check(tmp_path, cli):
    import csv

    words = [f"w{i}" for i in range(120)]
    m = generator(40, 1, words[:60])
    n = generator(40, 2, words[60:], numbers=True)
    n[0] = m[0]  # an exact copy: dropped from the non-members at loading (audit/data.py)
    n[1] = m[1] + " " + words[0]  # a near-duplicate: left to the split check
    rng = np.random.default_rng(0)
    path = tmp_path / "scores.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["id", "score", "member", "text"])
        for i, t in enumerate(m + n):
            w.writerow([f"r{i}", rng.normal() + (i < 40), int(i < 40), t])
    out = cli(["score", str(path), "--out", str(tmp_path / "out")])
    assert out.code == 0, out.stderr
    res = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    run = res["runs"][0]
    assert run["exact_duplicates"]["removed_nonmembers"] == 1
    assert run["split_check"]["duplicates"]["pairs"] == 1
    assert run["attacks"][0]["n_members"] == 39 and run["attacks"][0]["n_nonmembers"] == 38
    ids = run["attacks"][0]["examples"]["ids"]
    assert "r0" in ids and "r40" not in ids  # the member of an exact copy stays
    assert "r1" not in ids and "r41" not in ids  # both texts of a near-duplicate go
    assert run["verdict"]["level"] == "split-shifted" and "SPLIT SHIFTED" in out.stdout
    assert run["split_check"]["attacks"][0]["n"] == 77


# --------------------------------------------------------------------------- #
# Browser: the split section and the new verdict level render in headless Chromium
# --------------------------------------------------------------------------- #
def test_split_section_and_level_render_in_headless_chromium(tmp_path):
    import subprocess

    from privacy_audit.reports import write_report
    from tests.end_to_end.test_browser import CHROMIUM_FLAGS, PAYLOADS, _DomScan, chromium_binary

    split = _split(True)
    split["duplicates"]["examples"][0]["member"] = PAYLOADS["script"]
    split["duplicates"]["examples"][0]["nonmember"] = PAYLOADS["img"]
    path = write_report(_run_with(split), tmp_path / "report")
    common = [chromium_binary(), *CHROMIUM_FLAGS, "--virtual-time-budget=3000"]
    dom = subprocess.run(
        [*common, f"--user-data-dir={tmp_path / 'p1'}", "--dump-dom", path.resolve().as_uri()],
        capture_output=True,
        timeout=180,
        check=True,
    ).stdout.decode("utf-8")
    scan = _DomScan()
    scan.feed(dom)
    text = "".join(scan.text)
    ids = [a.get("id") for _, a in scan.tags]
    assert "run-0-split" in ids
    badges = [a for t, a in scan.tags if t == "span" and "split-shifted" in a.get("class", "")]
    assert len(badges) >= 3  # summary, verdict, run heading (+ legend, split section)
    assert "Is the member / non-member split valid?" in text and "What to do:" in text
    assert "blind AUC 0.970" in text and "-0.110 [-0.150, -0.070]" in text
    assert PAYLOADS["script"] in text and "script" not in [t for t, _ in scan.tags]
    assert PAYLOADS["img"] in text and not any("onerror" in a for _, a in scan.tags)
    shot = tmp_path / "top.png"
    subprocess.run(
        [*common, f"--user-data-dir={tmp_path / 'p2'}", "--window-size=1280,900"]
        + [f"--screenshot={shot}", path.resolve().as_uri()],
        capture_output=True,
        timeout=180,
        check=True,
    )
    from PIL import Image

    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3).astype(int)
    orange = (np.abs(pixels - [0xFF, 0xF4, 0xE5]).sum(1) < 12).sum()  # the badge fill
    assert orange > 50  # the split-shifted badge is painted in the first screen


def test_linear_kernel_equals_the_sparse_product():
    """The split check's kernels mix dense BLAS products (columns most rows hold) with a
    sparse product (the rest): equal to scipy's plain sparse ``a @ b.T`` at 1e-12, with
    both kinds of columns present and a column block smaller than the common columns."""
    from scipy import sparse

    from privacy_audit.stats import blind_baseline

    rng = np.random.default_rng(5)
    common = sparse.random(300, 40, density=0.6, random_state=1, format="csr")
    rare = sparse.random(300, 500, density=0.004, random_state=2, format="csr")
    x = sparse.hstack([rare[:, :250], common, rare[:, 250:]], format="csr")
    a, b = x[rng.permutation(300)[:120]], x[:200]
    want = (a @ b.T).toarray()
    old = blind_baseline.DENSE_BLOCK
    try:
        blind_baseline.DENSE_BLOCK = 16
        got = blind_baseline.linear_kernel(a, b)
    finally:
        blind_baseline.DENSE_BLOCK = old
    held = np.bincount(b.indices, minlength=b.shape[1])
    assert (held >= 0.02 * 200).sum() >= 40 and (held < 0.02 * 200).sum() > 100
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert np.abs(want).max() > 0.5


def test_folds_follow_the_texts_when_group_ids_follow_positions():
    """duplicate_groups numbers groups by position (members first), so folds keyed by a
    group's id would tie folds to order, hence to labels; keyed by content they do not."""
    from privacy_audit.stats.blind_baseline import text_folds

    texts = prose(40, 3)
    order = np.random.default_rng(1).permutation(40)
    f = text_folds(texts, np.arange(40), 4, 0)  # every text its own group, id = position
    g = text_folds([texts[i] for i in order], np.arange(40), 4, 0)
    assert np.array_equal(f[order], g)
    assert sorted(np.bincount(f)) == [10, 10, 10, 10]


def test_the_blind_classifier_subsamples_only_above_its_limit(monkeypatch):
    import privacy_audit.stats.split_check as sc

    monkeypatch.setattr(sc, "MAX_BLIND_PER_CLASS", 12)
    texts = prose(50, 4)
    check = sc.SplitCheck(permutations=19, families=False)
    at, _ = check.blind(texts[:12], texts[12:24])  # exactly the limit: every text read
    assert (at["subsampled"], at["n_members"], at["n_nonmembers"]) == (False, 12, 12)
    over, scores = check.blind(texts[24:37], texts[37:50])  # 13 per class: 12 kept each
    assert (over["subsampled"], over["n_members"], over["n_nonmembers"]) == (True, 12, 12)
    assert int(np.isnan(scores).sum()) == 2  # one text of each class left out


def test_delong_se_with_member_non_member_ties_by_brute_force():
    from privacy_audit.stats.blind_baseline import delong_auc

    x = np.array([1.0, 2.0, 2.0, 3.0])  # members
    y = np.array([0.0, 2.0, 2.0])  # non-members, two tied with two members
    psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    se = np.sqrt(v10.var(ddof=1) / x.size + v01.var(ddof=1) / y.size)
    got = delong_auc(np.r_[x, y], np.r_[np.ones(4), np.zeros(3)])
    assert got["value"] == pytest.approx(psi.mean(), abs=1e-12)
    assert got["se"] == pytest.approx(se, abs=1e-12)


def test_a_relabelling_tied_with_the_observed_auc_counts_against_it():
    from privacy_audit.stats.blind_baseline import permutation_test

    # h = identity: every labelling's scores are its own labels, so every relabelled AUC
    # is 1, tied with the observed one: p = (1 + 2) / (1 + 2) = 1 (Phipson and Smyth)
    y = np.array([1, 1, 0, 0])
    relab = np.array([[1, 0, 1, 0], [0, 1, 1, 0]])
    r = permutation_test(np.eye(4), y, np.arange(4), 2, 0, relabellings=relab)
    assert r["value"] == 1.0
    assert r["p_value"] == pytest.approx(1.0)


def test_one_member_left_after_removing_duplicates_is_not_measured():
    from privacy_audit.stats.split_check import SplitCheck

    shared = "the very same sentence appears in both sets of texts"
    members = [shared, "a member text that nothing else resembles at all"]
    nonmembers = [shared, "a first non-member about something else", "a second one, different"]
    out, scores = SplitCheck().run(members, nonmembers)
    assert out["duplicates"]["members_removed"] == 1
    assert out["status"] == "not-measured" and scores is None


def _shingles(text):
    t = " ".join(text.lower().split())
    return {t[i : i + 5] for i in range(len(t) - 4)}


def test_a_member_near_duplicate_of_a_text_in_both_sets_is_paired_with_its_non_member():
    from privacy_audit.stats.near_duplicates import near_duplicates

    x = "the quick brown fox jumps over the lazy dog again"
    # x is in both sets; x + "!" only among the members, and near x (brute-force Jaccard)
    members, nonmembers = [x, x + "!"], [x, "something else entirely different here"]
    a, b = _shingles(x), _shingles(x + "!")
    jac = len(a & b) / len(a | b)
    assert jac >= 0.8
    got = near_duplicates(members, nonmembers, 0.8)
    assert [(i, j) for i, j, _ in got] == [(0, 0), (1, 0)]
    assert got[0][2] == 1.0 and got[1][2] == pytest.approx(jac, abs=1e-12)


def test_a_join_at_another_threshold_is_refused():
    from privacy_audit.stats.near_duplicates import Join, near_duplicates

    members, nonmembers = ["a member text here", "b"], ["a non-member text", "c"]
    with pytest.raises(ValueError, match="not of these texts"):
        near_duplicates(members, nonmembers, 0.8, join=Join(members + nonmembers, 0.5))
