"""The blind baseline of the split check: a model-free classifier of members vs
non-members, its exact label-permutation test, the interval that inverts it, the AUC it
detects with 80% power, and DeLong's AUC and paired AUC difference (the attack-vs-blind
rows). Why the split check runs it: :mod:`privacy_audit.stats.split_check`.

- **Blind classifier**: one pre-specified kernel ridge regression (Hastie, Tibshirani
  and Friedman, ESL 2nd ed., §5.8 / §12.3.7) on the centred member labels, cross-fitted
  over ``folds`` folds: every text is scored by a model fitted without it (TF-IDF
  vectorisers and scalers too). Kernel: word 1-2-gram TF-IDF + character 2-4-gram TF-IDF
  (unit-norm rows) + 0.01 x the standardised length block + 0.01 x the number / date
  block (``BLOCK_WEIGHTS``), ridge 1. The dense blocks carry their own, much larger
  penalty (weight 0.01 = penalty 100 on their coefficients): with one shared penalty six
  weak dense columns pulled the combined AUC below its n-gram part (measured
  weights 1, 0.25, 0.03, 0.01 on the benchmark corpora, docs/split-validity.md). The
  weights are fixed here, never chosen per run.
- **Test** of H0 "the member / non-member labels were assigned at random": under H0 the
  labels are exchangeable given the texts, whatever their cluster structure (packages,
  modules, topics), so a label-permutation test of the cross-fitted AUC is exact when
  every permutation refits the classifier (Ojala and Garriga 2010, "Permutation tests
  for studying classifier performance", JMLR 11:1833-1863, test 1; p-value
  ``(1 + #{AUC_b >= AUC}) / (1 + B)``, Phipson and Smyth 2010). The refit is cheap here:
  the folds (a seeded hash of the texts) and the features never read the labels, and
  kernel ridge predictions are linear in the labels, so the out-of-fold scores are
  ``H y`` for one ``N x N`` operator ``H`` and each of the ``B = 999`` permutations costs
  a matrix-vector product and a ranking. Near-duplicate groups (kept in one fold) are
  permuted as units among groups of the same size. DeLong's variance is not used for the
  decision: it treats the out-of-fold scores as one fixed classifier on independent
  texts, and on clustered real text the AUC's spread was 1.3-1.6x its DeLong SE.
- **Users as the units** (``SplitCheck.run(..., users=...)``: one user id per text, every
  user on one side). A user's texts share words and style, so with texts as the units the
  classifier learns each user from the user's other texts in the training folds, and a
  random split of *users* looks shifted (docs/split-validity.md, "Users as clusters":
  58/100 random maintainer splits of Debian entries and 76/100 random author splits of
  package descriptions flagged; with users 4/400 = 1.0% [0.3%, 2.5%] and 5/400 = 1.2%
  [0.4%, 2.9%], Clopper-Pearson 95%). With users, H0
  is "the users were assigned to the sides at random", and:

  - *Folds*: a cluster is a connected component of "same user" or "near-duplicates"
    (:func:`user_clusters`; label-free: after the cross-set pairs are removed every
    near-duplicate pair left lies within a side, and its two users join), each cluster
    whole in one fold (:func:`text_folds`). Not for the test's validity (relabellings
    that keep users whole would lift the relabelled AUCs as much) but for the blind AUC's
    meaning: with a user's texts in the training folds the classifier recognises the
    user, and a random user split of user-styled text showed AUC 0.75 around a null mean
    of 0.75 (tests/stats/test_split_check_users.py).
  - *Relabellings* (:func:`user_permutations`): the clusters' labels are permuted among
    the clusters holding the same number of users (among all users where no
    near-duplicate joins two), whatever their numbers of texts: the number of member
    users is kept, the number of member texts is not. Exact under complete randomisation
    of the users (every set of ``U_m`` member users equally likely): the relabellings are
    uniform on a set of labellings that H0 makes equally likely. Permuting only among
    users with equal numbers of texts (which keeps the member texts' count too) is
    exact as well, but real users' sizes are heavy-tailed: the heavy users, who hold many
    of the texts and whose style is the most learnable, mostly have a size of their own,
    would never move, and would keep their share of a real difference in every relabelled
    AUC (less power); and a split that put the heavy users on one side because they
    write differently is a shift to find, not to condition away. The price: exact on
    average over splits rather than given the split's number of member texts; measured
    by tercile of the member texts' share in docs/split-validity.md (at most 1.5%
    flagged per tercile, but over shares of 0.47-0.53 only).
  - The interval and ``detectable_auc`` are the same functions of the user-level null
    (the interval inverts the same exact test; the SD is that of the relabelled AUCs).
  - The sub-sample above ``MAX_BLIND_PER_CLASS`` draws whole users
    (:func:`sample_users`, exact conditionally on the sample).
  - As with texts, the test is conditional on the texts left after the cross-set
    near-duplicates are removed (which pairs are cross-set depends on the labels).
- **Level: 1% one-sided, a 98% two-sided interval** (``SHIFT_CONFIDENCE``, the split
  check's own level, independent of the audit's ``confidence``). A false
  ``split-shifted`` blocks a valid audit (the gate fails on it), the second-worst error
  this product can make, so the check decides at 1% rather than the 2.5% of a 95%
  interval. Measured cost in power (docs/split-validity.md, 50 draws per cell): at 50
  and 100 texts per side both shifted benchmark pairs are still flagged in every draw; at
  20 per side old vs recent Debian entries fall from 37/50 (p <= 0.025) to 30/50, package
  descriptions vs docstrings from 38/50 to 34/50. False alarms measured on five real
  corpora at this level: 44/4000 = 1.1% [0.80%, 1.47%] pooled (800 splits each).
- **Interval**: the permutation test inverted under a shift of the AUC: ``[AUC - (q_hi -
  0.5), AUC + (0.5 - q_lo)]`` with ``q_lo``, ``q_hi`` the k-th smallest and largest of the
  relabelled AUCs, ``k = floor((1 - c) / 2 (B + 1))`` (c = 0.98, B = 999: the 10th;
  each half-width at least DeLong's ``z SE``). It excludes 0.5 exactly when the observed
  AUC lies outside ``[q_lo, q_hi]``, which under H0 has probability at most ``1 - c``
  (the observed AUC is exchangeable with the relabelled ones), clustered texts or not;
  measured on five real corpora in docs/split-validity.md. (A normal interval ``AUC ± z
  x null SD`` missed 0.5 in 6.0% [4.5%, 7.9%] of 800 random splits at 95% there: the
  null is slightly heavier-tailed.) ``se`` reports ``max(null SD, DeLong SE)``.
- **Shifted**: the permutation p-value (AUC above chance) is at most ``(1 - c) / 2`` =
  0.01 *and* the interval lies above 0.5 (one coherent test: the interval inverts the
  same test at the same level). The run's verdict is then ``split-shifted``
  (reports/verdict.py), never HIGH or LOW from the attacks alone. An AUC below 0.5 is
  never a shift. ``detectable_auc`` is the blind AUC the check detects with 80% power on
  these texts at its level (``0.5 + (z_{0.99} + z_{0.8}) null SD``); dataset inference
  reports it.
- **Cost and size**: above ``MAX_BLIND_PER_CLASS`` (1,000, set in
  :mod:`privacy_audit.stats.split_check`) texts per class the blind classifier
  reads a seeded random sample of that many per class (conditionally on the sample the
  labels are still exchangeable, so the test stays exact; with users, whole users,
  :func:`sample_users`); the per-family AUCs (word,
  char, word + char, length, numbers / dates) are diagnostics only, never tested.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
from scipy.special import ndtri

from privacy_audit.stats.near_duplicates import duplicate_groups
from privacy_audit.stats.shingles import normalise

#: The split check's own confidence: ``split-shifted`` needs the one-sided permutation
#: p-value <= (1 - c) / 2 = 0.01 and the c = 98% interval (the same test inverted) above
#: 0.5. Lower than the audit's 95% on purpose: a false ``split-shifted`` blocks a valid
#: audit (module docstring; the power it costs is measured in docs/split-validity.md).
SHIFT_CONFIDENCE = 0.98

_NUMBER = re.compile(r"(?<![A-Za-z])[-+]?\d[\d,.]*")
_DATE = re.compile(
    r"\b(?:1[5-9]\d\d|20\d\d)\b"
    r"|\b\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}\b"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b"
    r"|\b\d{1,2}\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b",
    re.IGNORECASE,
)


# --------------------------------------------------------------------------- #
# DeLong AUC, its interval, and the paired difference of two AUCs
# --------------------------------------------------------------------------- #
def _placements(scores: np.ndarray, members: np.ndarray) -> tuple[float, np.ndarray, np.ndarray]:
    """AUC and DeLong's placement values: ``v10[i]`` = share of non-members a member
    outranks (ties 1/2), ``v01[j]`` = share of members that outrank non-member j."""
    s = np.asarray(scores, dtype=np.float64)
    m = np.asarray(members).astype(bool)
    pos, neg = s[m], s[~m]
    neg_sorted, pos_sorted = np.sort(neg), np.sort(pos)
    below = np.searchsorted(neg_sorted, pos, "left")
    tie = np.searchsorted(neg_sorted, pos, "right") - below
    v10 = (below + 0.5 * tie) / neg.size
    above = pos.size - np.searchsorted(pos_sorted, neg, "right")
    tie_p = np.searchsorted(pos_sorted, neg, "right") - np.searchsorted(pos_sorted, neg, "left")
    v01 = (above + 0.5 * tie_p) / pos.size
    return float(v10.mean()), v10, v01


def delong_auc(scores, members, confidence: float = 0.95) -> dict[str, float]:
    """AUC with the DeLong normal interval ``AUC ± z SE`` clipped to [0, 1]."""
    auc, v10, v01 = _placements(scores, members)
    se = float(np.sqrt(np.var(v10, ddof=1) / v10.size + np.var(v01, ddof=1) / v01.size))
    z = float(ndtri(0.5 + confidence / 2))
    return {
        "value": auc,
        "ci_low": max(0.0, auc - z * se),
        "ci_high": min(1.0, auc + z * se),
        "se": se,
    }


def delong_difference(scores_a, scores_b, members, confidence: float = 0.95) -> dict[str, float]:
    """AUC(a) - AUC(b) on the same examples, with the paired DeLong interval: the
    covariance of the two AUCs comes from the covariance of their placement values."""
    m = np.asarray(members).astype(bool)
    auc_a, a10, a01 = _placements(scores_a, m)
    auc_b, b10, b01 = _placements(scores_b, m)
    s10 = np.cov(np.vstack([a10, b10]))
    s01 = np.cov(np.vstack([a01, b01]))
    var = (s10[0, 0] + s10[1, 1] - 2 * s10[0, 1]) / a10.size + (
        s01[0, 0] + s01[1, 1] - 2 * s01[0, 1]
    ) / a01.size
    se = float(np.sqrt(max(var, 0.0)))
    z = float(ndtri(0.5 + confidence / 2))
    d = auc_a - auc_b
    return {"value": d, "ci_low": d - z * se, "ci_high": d + z * se, "se": se}


def clustered_difference(
    scores_a, scores_b, members, users, confidence: float = 0.95
) -> dict[str, float]:
    """:func:`delong_difference` with users as clusters (Obuchowski 1997): the placement
    values of the difference, ``v_a - v_b`` per text, are summed per user and their
    spread is taken over users, ``S = I / (I - 1) sum_i (D_i - n_i d)^2 / N`` per side
    (``D_i`` user i's sum, ``n_i`` its texts, I users and N texts on that side),
    ``Var(d) = S10 / N_members + S01 / N_nonmembers``. Every user is on one side, so no
    covariance across sides. One text per user gives :func:`delong_difference`."""
    m = np.asarray(members).astype(bool)
    u = np.unique(np.asarray(users, dtype=object).astype(str), return_inverse=True)[1]
    auc_a, a10, a01 = _placements(scores_a, m)
    auc_b, b10, b01 = _placements(scores_b, m)
    d = auc_a - auc_b
    var = 0.0
    for side, diff in ((m, a10 - b10), (~m, a01 - b01)):
        _, ui = np.unique(u[side], return_inverse=True)
        tot = np.bincount(ui, weights=diff)
        n = np.bincount(ui).astype(np.float64)
        k = tot.size
        if k < 2:
            raise ValueError("a clustered AUC difference needs at least 2 users per side")
        dev = tot - n * float(diff.mean())
        var += k / (k - 1.0) * float(np.sum(dev * dev)) / diff.size**2
    se = float(np.sqrt(max(var, 0.0)))
    z = float(ndtri(0.5 + confidence / 2))
    return {"value": d, "ci_low": d - z * se, "ci_high": d + z * se, "se": se}


# --------------------------------------------------------------------------- #
# Blind baseline: cross-fitted kernel ridge and its label-permutation test
# --------------------------------------------------------------------------- #
def dense_features(texts: list[str]) -> np.ndarray:
    rows = []
    for t in texts:
        words = t.split()
        n_num = len(_NUMBER.findall(t))
        n_date = len(_DATE.findall(t))
        rows.append(
            [
                np.log1p(len(t)),
                np.log1p(len(words)),
                np.log1p(n_num),
                np.log1p(n_date),
                n_num / max(len(words), 1),
                sum(c.isdigit() for c in t) / max(len(t), 1),
            ]
        )
    return np.asarray(rows, dtype=np.float64).reshape(len(texts), 6)


#: Pre-specified weight of each feature block in the combined kernel (module docstring):
#: the two TF-IDF blocks have unit-norm rows (kernel diagonal 1); the dense blocks'
#: kernels are scaled to diagonal 1 on average, then down-weighted so that weak length /
#: number columns cannot dilute the n-gram blocks (one shared penalty let them).
BLOCK_WEIGHTS = {"word": 1.0, "char": 1.0, "length": 0.01, "numbers": 0.01}
#: Ridge penalty of the kernel ridge regression (on the weighted kernel above).
RIDGE = 1.0
#: Label permutations of the test (p-value resolution 1 / (PERMUTATIONS + 1)).
PERMUTATIONS = 999

#: Feature families of the blind baseline: name -> which blocks it uses. Only
#: ``combined`` is tested; the others are shown for diagnosis.
FAMILIES = {
    "combined": ("word", "char", "length", "numbers"),
    "word + char n-grams": ("word", "char"),
    "word n-grams": ("word",),
    "char n-grams": ("char",),
    "length": ("length",),
    "numbers and dates": ("numbers",),
}


def text_folds(texts: list[str], groups: np.ndarray, folds: int, seed: int) -> np.ndarray:
    """A fold id per text that depends on the texts (and the seed) only, never on their
    order or labels, so that a relabelling sees the same folds and the permutation test
    stays exact: near-duplicate groups, in the order of a seeded hash of their texts,
    each go whole to the currently smallest fold. (Folds drawn from positions would tie
    folds to labels, since members come first.)"""
    import hashlib

    groups = np.asarray(groups)
    uniq, inv, sizes = np.unique(groups, return_inverse=True, return_counts=True)
    k = int(min(folds, uniq.size))
    if k < 2:
        raise ValueError("the blind baseline needs at least 2 distinct texts")
    salt = str(int(seed)).encode()
    key = np.full(uniq.size, np.iinfo(np.uint64).max, dtype=np.uint64)
    for i, g in enumerate(inv):
        h = hashlib.blake2b(normalise(texts[i]).encode("utf-8"), digest_size=8, salt=salt[:16])
        key[g] = min(key[g], np.uint64(int.from_bytes(h.digest(), "little")))
    load = np.zeros(k, dtype=np.int64)
    fold_of_group = np.empty(uniq.size, dtype=np.int64)
    for g in np.argsort(key, kind="stable"):
        f = int(np.argmin(load))
        fold_of_group[g] = f
        load[f] += sizes[g]
    return fold_of_group[inv]


#: The two n-gram blocks: analyser settings (TF-IDF with min_df 2, sublinear tf, at most
#: ``MAX_NGRAMS`` n-grams, each fitted on the training folds only).
NGRAMS = {
    "word": dict(ngram_range=(1, 2)),
    "char": dict(analyzer="char_wb", ngram_range=(2, 4)),
}
MAX_NGRAMS = 50000


def ngram_counts(texts: list[str]) -> dict[str, Any]:
    """Raw n-gram counts of every text (one analyser pass; counting reads no label and
    no other text, so it may be shared by the folds): ``{block: CSR counts}``."""
    from sklearn.feature_extraction.text import CountVectorizer

    return {name: CountVectorizer(**kw).fit_transform(texts).tocsr() for name, kw in NGRAMS.items()}


def fold_tfidf(counts, tr: np.ndarray, te: np.ndarray):
    """TF-IDF of the training and test rows with everything fitted on the training rows
    only, as ``TfidfVectorizer(min_df=2, sublinear_tf=True, max_features=MAX_NGRAMS)``
    fitted on the training texts would: n-grams in >= 2 training texts, the most frequent
    ``MAX_NGRAMS`` of them, smooth idf ``ln((1 + n) / (1 + df)) + 1``, tf ``1 + ln tf``,
    unit-norm rows."""
    from scipy import sparse
    from sklearn.preprocessing import normalize

    c_tr = counts[tr]
    df = np.bincount(c_tr.indices, minlength=c_tr.shape[1])
    cols = np.flatnonzero(df >= 2)
    if cols.size > MAX_NGRAMS:
        tf = np.asarray(c_tr.sum(axis=0)).ravel()[cols]
        cols = np.sort(cols[np.argsort(-tf, kind="stable")[:MAX_NGRAMS]])
    if cols.size == 0:  # no n-gram in two training texts (short or numeric texts)
        return sparse.csr_matrix((tr.size, 0)), sparse.csr_matrix((te.size, 0))
    idf = np.log((1 + tr.size) / (1 + df[cols])) + 1.0
    out = []
    for rows in (c_tr, counts[te]):
        x = rows[:, cols].astype(np.float64)
        x.data = 1.0 + np.log(x.data)
        out.append(normalize(x @ sparse.diags(idf), norm="l2", copy=False).tocsr())
    return out[0], out[1]


#: A feature column held by at least this share of the rows is multiplied densely (BLAS).
_DENSE_SHARE = 0.02
#: Dense columns per block of the dense product (bounds its memory: rows x this x 8 bytes).
DENSE_BLOCK = 2048


def linear_kernel(a, b) -> np.ndarray:
    """``a @ b.T`` of two CSR matrices, as a dense array: the columns that at least
    ``_DENSE_SHARE`` of ``b``'s rows hold (common n-grams, whose sparse product costs the
    square of their frequency) by dense BLAS products in column blocks, the rest as a
    sparse product. The same sums in another order: equal up to rounding (tested against
    the sparse product at 1e-12)."""
    held = np.bincount(b.indices, minlength=b.shape[1])
    common = np.flatnonzero(held >= max(1.0, _DENSE_SHARE * b.shape[0]))
    rare = np.setdiff1d(np.arange(b.shape[1]), common, assume_unique=True)
    out = np.zeros((a.shape[0], b.shape[0]))
    if rare.size:
        out += (a[:, rare] @ b[:, rare].T).toarray()
    ac, bc = a[:, common].tocsc(), b[:, common].tocsc()
    for j in range(0, common.size, DENSE_BLOCK):
        sl = slice(j, j + DENSE_BLOCK)
        out += ac[:, sl].toarray() @ bc[:, sl].toarray().T
    return out


def _fold_kernels(counts, dense: np.ndarray, tr: np.ndarray, te: np.ndarray):
    """Linear kernels of each feature block for one fold, every transform fitted on the
    training part only: ``{block: (K[train, train], K[test, train])}``."""
    from scipy import sparse
    from sklearn.preprocessing import StandardScaler

    out = {}
    for name in NGRAMS:
        x_tr, x_te = fold_tfidf(counts[name], tr, te)
        k = linear_kernel(sparse.vstack([x_tr, x_te], format="csr"), x_tr)
        out[name] = (k[: tr.size], k[tr.size :])
    for name, cols in (("length", slice(0, 2)), ("numbers", slice(2, 6))):
        sc = StandardScaler().fit(dense[tr, cols])
        z_tr, z_te = sc.transform(dense[tr, cols]), sc.transform(dense[te, cols])
        d = z_tr.shape[1]
        out[name] = (z_tr @ z_tr.T / d, z_te @ z_tr.T / d)
    return out


def _ridge_operator(k_tr: np.ndarray, k_te: np.ndarray, ridge: float) -> np.ndarray:
    """``M`` with ``M @ y_train`` = kernel ridge predictions of the test texts from the
    centred training labels: ``K_te (K_tr + λI)^-1 (I - 11ᵀ/n) y`` (linear in y)."""
    from scipy.linalg import solve

    a = k_tr + ridge * np.eye(k_tr.shape[0])
    m = solve(a, k_te.T, assume_a="pos").T
    return m - m.mean(axis=1, keepdims=True)


def _ridge_predict(k_tr: np.ndarray, k_te: np.ndarray, y_tr: np.ndarray, ridge: float):
    """``K_te (K_tr + λI)^-1 (y - ȳ)``, the predictions of :func:`_ridge_operator`, by
    conjugate gradients (one right-hand side: the diagnostic families need no operator;
    ``K_tr + λI`` is positive definite with condition number at most 1 + ||K|| / λ)."""
    from scipy.sparse.linalg import cg

    a = k_tr + ridge * np.eye(k_tr.shape[0])
    b = y_tr - y_tr.mean()
    x, info = cg(a, b, rtol=1e-10, atol=0.0, maxiter=10 * a.shape[0])
    if info != 0:  # not converged: solve exactly
        from scipy.linalg import solve

        x = solve(a, b, assume_a="pos")
    return k_te @ x


def cross_fit(
    texts: list[str],
    fold_id: np.ndarray,
    y: np.ndarray,
    families: dict[str, tuple[str, ...]],
    operator: str | None = "combined",
    ridge: float = RIDGE,
) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """Out-of-fold scores per family, and the ``N x N`` cross-fitted operator ``H`` of
    family ``operator``: its scores are ``H @ y`` for every labelling ``y`` (the folds and
    the features never read the labels), which makes the permutation test cheap."""
    y = np.asarray(y, dtype=np.float64)
    n = len(texts)
    dense = dense_features(texts)
    counts = ngram_counts(texts)
    scores = {name: np.zeros(n) for name in families}
    h = np.zeros((n, n)) if operator is not None else None
    for f in np.unique(fold_id):
        te, tr = np.flatnonzero(fold_id == f), np.flatnonzero(fold_id != f)
        blocks = _fold_kernels(counts, dense, tr, te)
        for name, use in families.items():
            k_tr = sum(BLOCK_WEIGHTS[b] * blocks[b][0] for b in use)
            k_te = sum(BLOCK_WEIGHTS[b] * blocks[b][1] for b in use)
            if name == operator:
                m = _ridge_operator(k_tr, k_te, ridge)
                h[np.ix_(te, tr)] = m
                scores[name][te] = m @ y[tr]
            else:  # one right-hand side: the centred training labels
                scores[name][te] = _ridge_predict(k_tr, k_te, y[tr], ridge)
    return scores, h


def blind_scores(
    texts: list[str],
    members: np.ndarray,
    folds: int = 5,
    seed: int = 0,
    families: dict[str, tuple[str, ...]] | None = None,
    groups: np.ndarray | None = None,
    users: list[str] | None = None,
) -> dict[str, np.ndarray]:
    """Cross-fitted out-of-fold scores (higher = member) of the model-free classifier per
    feature family: every text is scored by a model fitted on the other folds (vectorisers
    and scalers included). ``groups`` (default: :func:`duplicate_groups`) keep
    near-duplicates in one fold; ``users`` (one id per text) keep each user's texts, and
    the users sharing a near-duplicate, in one fold too (:func:`user_clusters`)."""
    y = np.asarray(members).astype(int)
    if np.bincount(y, minlength=2).min() < 2:
        raise ValueError("the blind baseline needs at least 2 members and 2 non-members")
    if groups is None:
        groups = duplicate_groups(texts)
    if users is not None:
        groups = user_clusters(users, groups)
    scores, _ = cross_fit(
        texts, text_folds(texts, groups, folds, seed), y, families or FAMILIES, None
    )
    return scores


def auc_rows(scores: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """AUC of each row of ``scores`` against the 0/1 ``labels`` of the same row
    (Mann-Whitney: cross-class ties count 1/2), by average ranks."""
    from scipy.stats import rankdata

    lab = np.asarray(labels, dtype=np.float64)
    ranks = rankdata(np.atleast_2d(scores), axis=1)
    m = lab.sum(axis=1)
    n = lab.shape[1] - m
    return ((ranks * lab).sum(axis=1) - m * (m + 1) / 2) / (m * n)


def label_permutations(
    y: np.ndarray, groups: np.ndarray, n_perm: int, rng: np.random.Generator
) -> np.ndarray:
    """``n_perm`` relabellings (rows) drawn uniformly from those the null allows: the
    label patterns of near-duplicate groups are permuted among groups of the same size
    (singletons: the texts' labels are permuted), so a group stays whole as the folds
    keep it whole."""
    y = np.asarray(y)
    _, inv = np.unique(np.asarray(groups), return_inverse=True)
    members_of = [[] for _ in range(inv.max() + 1)]
    for i, g in enumerate(inv):
        members_of[g].append(i)
    by_size: dict[int, list[list[int]]] = {}
    for idx in members_of:
        by_size.setdefault(len(idx), []).append(idx)
    out = np.empty((n_perm, y.size), dtype=np.int8)
    for units in by_size.values():
        idx = np.asarray(units)  # (units, size)
        pattern = y[idx]
        order = np.argsort(rng.random((n_perm, len(units))), axis=1)
        out[:, idx.ravel()] = pattern[order].reshape(n_perm, -1)
    return out


def factorize(ids) -> np.ndarray:
    """An integer per id (0, 1, ... in order of first appearance; ids compared by
    equality, so any hashable id works)."""
    first: dict[Any, int] = {}
    return np.fromiter(
        (first.setdefault(u, len(first)) for u in ids), dtype=np.int64, count=len(ids)
    )


def user_clusters(users, groups) -> np.ndarray:
    """A cluster id per text: the connected components of "same user" and "same
    near-duplicate group" (:func:`duplicate_groups`). Two users who share a
    near-duplicate text are one cluster, so the folds keep both whole together (else one
    user's text in the training folds would score its twin by memory). Reads no label."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    uid = factorize(list(users))
    gid = factorize(list(np.asarray(groups).tolist()))
    if uid.size != gid.size:
        raise ValueError(f"{uid.size} user ids for {gid.size} texts")
    n_u = int(uid.max()) + 1 if uid.size else 0
    n_g = int(gid.max()) + 1 if gid.size else 0
    # bipartite graph user -- group: a text joins its user's node and its group's node
    graph = coo_matrix((np.ones(uid.size), (uid, n_u + gid)), shape=(n_u + n_g, n_u + n_g))
    _, comp = connected_components(graph, directed=False)
    return factorize(comp[uid].tolist())


def user_permutations(
    y: np.ndarray, users, clusters: np.ndarray, n_perm: int, rng: np.random.Generator
) -> np.ndarray:
    """``n_perm`` relabellings (rows) with users as the units: each cluster
    (:func:`user_clusters`, whole users) takes one label, and the labels of the clusters
    holding the same number of users are permuted among them, whatever their numbers of
    texts. So every relabelling keeps the number of member *users* and keeps each user
    (and its near-duplicates) on one side. A cluster holding both labels (possible only
    when cross-set near-duplicates were kept, ``dedupe=False``) keeps its labels.

    Exact under H0 "the users were assigned to the sides at random" (complete
    randomisation: every set of ``U_m`` member users among the ``U`` equally likely):
    the relabellings are uniform over an orbit of labellings that H0 makes equally
    likely (same number of member users), and the orbit does not depend on which of its
    labellings was observed (pure clusters stay pure, mixed ones keep their labels)."""
    y = np.asarray(y).astype(np.int8)
    uid = factorize(list(users))
    cid = factorize(list(np.asarray(clusters).tolist()))
    n_c = int(cid.max()) + 1
    lo = np.ones(n_c, dtype=np.int8)
    hi = np.zeros(n_c, dtype=np.int8)
    np.minimum.at(lo, cid, y)
    np.maximum.at(hi, cid, y)
    pairs = np.unique(cid * (int(uid.max()) + 1) + uid)
    n_users = np.bincount(pairs // (int(uid.max()) + 1), minlength=n_c)
    pure = lo == hi
    out = np.tile(y, (n_perm, 1))
    for k in np.unique(n_users[pure]):
        units = np.flatnonzero(pure & (n_users == k))
        if units.size < 2:
            continue
        order = np.argsort(rng.random((n_perm, units.size)), axis=1)
        new = lo[units][order]  # (n_perm, units): the permuted cluster labels
        pos = np.full(n_c, -1, dtype=np.int64)
        pos[units] = np.arange(units.size)
        t = np.flatnonzero(pos[cid] >= 0)
        out[:, t] = new[:, pos[cid[t]]]
    return out


def sample_users(y: np.ndarray, users, cap: int, rng: np.random.Generator) -> np.ndarray | None:
    """The texts the blind classifier reads when users are the units: all of them
    (``None``) when there are at most ``2 cap`` texts, else whole users drawn at random,
    ``n* = max(2, floor(cap U / T))`` users per side (``U`` users and ``T`` texts in
    all: about ``cap`` texts a side when the sides' users are alike), all of a side's
    users where it has at most ``n*``.

    The rule reads the labels only through the number of users per side, and ``n*``
    and the trigger ``T > 2 cap`` are label-free, so the probability of drawing a
    given sample, ``prod_c 1 / C(U_c, n_c)``, is the same for every relabelling of
    :func:`user_permutations` within it (they keep the number of member users):
    conditionally on the sample the test stays exact. (Filling each side up to ``cap``
    *texts* would not: which users fit would depend on which side each user is on.) A
    side of users much heavier than the average may exceed ``cap`` texts; the cost then
    grows as the square to the cube of its texts."""
    y = np.asarray(y)
    uid = factorize(list(users))
    if y.size <= 2 * cap:
        return None
    n_star = max(2, int(np.floor(cap * (int(uid.max()) + 1) / y.size)))
    chosen = []
    for cls in (1, 0):
        us = np.unique(uid[y == cls])
        if us.size > n_star:
            us = np.sort(rng.choice(us, n_star, replace=False))
        chosen.append(us)
    keep = np.flatnonzero(np.isin(uid, np.concatenate(chosen)))
    return None if keep.size == y.size else keep


def permutation_test(
    h: np.ndarray,
    y: np.ndarray,
    groups: np.ndarray,
    n_perm: int,
    seed: int,
    chunk: int = 100,
    relabellings: np.ndarray | None = None,
    confidence: float = SHIFT_CONFIDENCE,
    users=None,
) -> dict[str, float]:
    """Permutation test of H0 "labels were assigned at random" on the cross-fitted AUC:
    ``p = (1 + #{b : AUC(H y_b) >= AUC(H y)}) / (1 + n_perm)`` (Phipson and Smyth 2010),
    with the null mean and SD of the AUC over the permutations. ``relabellings`` (rows of
    0/1 labels) replaces the seeded draw, for tests. ``users`` (one id per text): the
    units are users and ``groups`` their clusters (:func:`user_permutations`, H0 "users
    were assigned at random")."""
    y = np.asarray(y).astype(int)
    observed = float(auc_rows(h @ y, y[None])[0])
    if relabellings is None and users is not None:
        perm = user_permutations(y, users, groups, n_perm, np.random.default_rng([seed, 0x9E37]))
    elif relabellings is None:
        perm = label_permutations(y, groups, n_perm, np.random.default_rng([seed, 0x9E37]))
    else:
        perm = np.asarray(relabellings, dtype=np.int8)
        n_perm = perm.shape[0]
    null = np.empty(n_perm)
    for s in range(0, n_perm, chunk):
        lab = perm[s : s + chunk].astype(np.float64)
        null[s : s + chunk] = auc_rows(lab @ h.T, lab)
    exceed = int(np.sum(null >= observed - 1e-12))
    # the k-th smallest and k-th largest relabelled AUCs, k = floor((1 - c) / 2 (B + 1)):
    # the observed AUC, exchangeable with the B others under H0, lies strictly above the
    # upper one (or below the lower one) with probability <= k / (B + 1) <= (1 - c) / 2
    k = int(np.floor((1 - confidence) / 2 * (n_perm + 1) + 1e-9))
    srt = np.sort(null)
    q_lo = float(srt[k - 1]) if k >= 1 else -np.inf
    q_hi = float(srt[n_perm - k]) if k >= 1 else np.inf
    return {
        "value": observed,
        "p_value": (1 + exceed) / (1 + n_perm),
        "null_mean": float(null.mean()),
        "null_sd": float(null.std(ddof=1)),
        "null_q_low": q_lo,
        "null_q_high": q_hi,
        "permutations": n_perm,
    }


def detectable_auc(
    null_sd: float, confidence: float = SHIFT_CONFIDENCE, power: float = 0.8
) -> float:
    """Blind AUC this check detects with probability ``power`` at its one-sided level
    ``(1 - c) / 2`` (normal approximation with the null SD): ``0.5 + (z_{(1+c)/2} +
    z_power) SD`` (c = 0.98: z_0.99 = 2.326)."""
    return 0.5 + (float(ndtri(0.5 + confidence / 2)) + float(ndtri(power))) * null_sd


def blind_interval(
    auc: float, q_low: float, q_high: float, delong_se: float, confidence: float
) -> tuple[float, float]:
    """The permutation test inverted under a shift of the AUC: ``[AUC - (q_high - 0.5),
    AUC + (0.5 - q_low)]``, each half-width at least DeLong's ``z SE`` with
    ``z = Φ^-1((1 + confidence) / 2)``, clipped to [0, 1]."""
    z = float(ndtri(0.5 + confidence / 2))
    below = max(q_high - 0.5, z * delong_se)
    above = max(0.5 - q_low, z * delong_se)
    return max(0.0, auc - below), min(1.0, auc + above)


def is_shifted(auc: dict[str, float], confidence: float = SHIFT_CONFIDENCE) -> bool:
    """The decision: the permutation p-value (one-sided, AUC above chance) is at most
    ``(1 - confidence) / 2`` (0.01 at the default 98%) and the displayed interval (the
    same test inverted at ``confidence``) lies above 0.5. An AUC below 0.5 is never a
    shift of the member side."""
    return bool(auc["p_value"] <= (1 - confidence) / 2 and auc["ci_low"] > 0.5)


def user_counts(y: np.ndarray, users, clusters: np.ndarray) -> dict[str, Any]:
    """Users per side, and the clusters (users joined by near-duplicates) they form."""
    y = np.asarray(y)
    uid = factorize(list(users))
    cid = np.asarray(clusters)
    per_cluster = np.bincount(np.unique(np.c_[cid, uid], axis=0)[:, 0])
    return {
        "n_member_users": int(np.unique(uid[y == 1]).size),
        "n_nonmember_users": int(np.unique(uid[y == 0]).size),
        "clusters": int(np.unique(cid).size),
        "clusters_of_several_users": int((per_cluster > 1).sum()),
    }
