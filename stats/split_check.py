"""Is the member / non-member split valid? A model-free *blind baseline* and a
near-duplicate check, run before any membership attack.

Why: where members and non-members differ in source, time or style, every membership
attack "succeeds" on a model that never saw the members. Model-free classifiers (bag of
words, dates, length) beat published LLM membership attacks on eight benchmark splits
(Das, Zhang and Tramèr 2024); on same-distribution splits the same attacks are near chance
(Duan et al. 2024; Meeus et al. 2024). So before reading any attack we ask: can a
classifier that never sees the model tell the two sets apart?

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
- **Cost and size**: above ``MAX_BLIND_PER_CLASS`` texts per class the blind classifier
  reads a seeded random sample of that many per class (conditionally on the sample the
  labels are still exchangeable, so the test stays exact; with users, whole users,
  :func:`sample_users`); the per-family AUCs (word,
  char, word + char, length, numbers / dates) are diagnostics only, never tested.
- **Near-duplicates across the sets**: a member and a non-member whose normalised texts
  (lower case, collapsed white space) are equal, or whose character 5-gram shingle sets
  have Jaccard similarity >= ``jaccard`` (0.8). Found by an exact set-similarity join (no
  pair is missed, unlike MinHash LSH), vectorised in numpy blocks of bounded size: a
  pigeonhole partition join (hashed groups of shingles per size class; proof in
  ``_partition_candidates``) for low-entropy text such as templates, where even the
  rarest shingles are common, or prefix filtering (Bayardo, Ma and Srikant 2007, with a
  length filter) for ordinary text, whichever a 5,000-text sample says is cheaper; every
  candidate is verified by counting its shared shingles. **Above a cost
  budget** (``_EXACT_BUDGET_S`` = 1 ms CPU per text, the exact join's cost estimated by
  running it on a seeded 400-text sample and scaling its verified pairs by ``(n /
  400)^2``; only above 1,000 texts and at thresholds >= 0.75) the candidates come from
  MinHash LSH instead: 6 rows x 46 bands at 0.8, so a pair at Jaccard >= 0.8 is missed
  with probability <= (1 - 0.8^6)^46 = 8.4e-7 (Broder 1997; the model measured in
  tests/stats/test_near_duplicates.py), and every candidate is still verified (no false
  pair). Which join ran, with its bound, is stated in the record (``duplicates.join``,
  ``criterion``). Long texts of shared rare words make the exact join verify a fixed
  share of all pairs (40% of them on the scale benchmark's 256-token texts: n^2); LSH
  keeps it linear (docs/large-inputs-one-machine.md). Both texts of
  each pair are removed from the attack set (a text counted as member and non-member
  measures nothing) and counted; a few pairs are kept as examples, except in
  aggregate-only mode.
- **Attack vs blind**: each attack's AUC beside the blind AUC on the same examples, with
  the paired DeLong interval of the difference (DeLong, DeLong and Clarke-Pearson 1988)
  at ``DIFFERENCE_CONFIDENCE`` (95%, the audit's usual level): these rows describe the
  attacks and decide nothing, so they keep the level of the attacks' own intervals.

Everything returned is a plain dict stored in the run record (``run["split_check"]``);
the report, the verdict and the gate read only that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.special import ndtri

#: Near-duplicate threshold on the Jaccard similarity of character 5-gram shingle sets.
NEAR_DUP_JACCARD = 0.8
SHINGLE = 5
#: The split check's own confidence: ``split-shifted`` needs the one-sided permutation
#: p-value <= (1 - c) / 2 = 0.01 and the c = 98% interval (the same test inverted) above
#: 0.5. Lower than the audit's 95% on purpose: a false ``split-shifted`` blocks a valid
#: audit (module docstring; the power it costs is measured in docs/split-validity.md).
SHIFT_CONFIDENCE = 0.98
#: Level of the descriptive attack-vs-blind difference intervals (paired DeLong).
DIFFERENCE_CONFIDENCE = 0.95
#: Pairs kept as examples in results.json (none in aggregate-only mode).
MAX_EXAMPLES = 3
#: Characters of each example text kept.
EXAMPLE_CHARS = 300
#: Texts per class the blind classifier reads at most (a seeded sample beyond it): the
#: operator H is N x N, so time grows as N^2 to N^3; 1,000 per class keeps the check near
#: a tenth of a default own-model audit (privacy-audit bench split-check).
MAX_BLIND_PER_CLASS = 1000

ADVICE = (
    "Sample the non-members from the same source and the same time period as the members "
    "(e.g. hold out a random part of the training data before training), or audit with "
    "canaries (random texts inserted into training, privacy-audit epsilon), whose "
    "non-members are the same kind of text by construction."
)

_WS = re.compile(r"\s+")
_NUMBER = re.compile(r"(?<![A-Za-z])[-+]?\d[\d,.]*")
_DATE = re.compile(
    r"\b(?:1[5-9]\d\d|20\d\d)\b"
    r"|\b\d{1,4}[-/.]\d{1,2}[-/.]\d{1,4}\b"
    r"|\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\.?\s+\d{1,2}\b"
    r"|\b\d{1,2}\s+(?:jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*\b",
    re.IGNORECASE,
)


def normalise(text: str) -> str:
    return _WS.sub(" ", text.lower()).strip()


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
# Near-duplicates: an exact set-similarity join on 5-gram shingles, vectorised
# --------------------------------------------------------------------------- #
#: Elements (texts x padded shingles, or candidate pairs) per numpy block: bounds memory
#: (about 100 MB per block) whatever the number of texts.
_BLOCK = 1 << 22
_SENTINEL = np.uint64(np.iinfo(np.uint64).max)
#: Bits of a shingle id; the 6 bits above hold the shingle's frequency class.
_ID_BITS = 58
#: log2 of the buckets of the shingle-frequency estimate (a count per hash bucket).
_FREQ_BITS = 22
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


def normalise_all(texts: list[str]) -> list[str]:
    """``[normalise(t) for t in texts]`` in three C calls over all texts joined by NUL:
    ``lower()`` and the white-space regex treat a NUL as they treat the end of a text (it
    is neither cased, case-ignorable nor white space, so even a final sigma lower-cases
    the same); per text when a text holds a NUL itself."""
    texts = list(texts)
    big = "\x00".join(texts)
    if not texts or big.count("\x00") != len(texts) - 1:
        return [normalise(t) for t in texts]
    return [s.strip() for s in _WS.sub(" ", big.lower()).split("\x00")]


def _bucket(x: np.ndarray) -> np.ndarray:
    """Multiplicative hash of uint64 values into ``2^_FREQ_BITS`` buckets."""
    return (x * _GOLDEN) >> np.uint64(64 - _FREQ_BITS)


class _Shingles:
    """Character ``SHINGLE``-gram shingles of normalised texts, built in numpy blocks.

    A shingle's id is exact, ``sum_k c_k A^(4-k)`` over the characters' ranks ``c_k`` in
    the texts' alphabet of ``A`` characters, when ``A^5 <= 2^58`` (``A <= 3,100``
    distinct characters); above that it is a 58-bit hash (two distinct shingles share
    one with probability 2^-58 per pair). Texts are joined by ``key = (f << 58) | id``,
    where ``f = floor(log2 c)`` and ``c`` is the number of shingles in the id's hash
    bucket (at least the id's own count), so that ascending keys put rare shingles first
    and the keys' order is one fixed total order on shingles (what prefix filtering needs).
    """

    def __init__(self, norm: list[str]):
        self.lens = np.fromiter(map(len, norm), dtype=np.int64, count=len(norm))
        self.starts = np.zeros(len(norm) + 1, dtype=np.int64)
        np.cumsum(self.lens, out=self.starts[1:])
        raw = np.frombuffer("".join(norm).encode("utf-32-le", "surrogatepass"), dtype="<u4")
        present = np.zeros(0x110000, dtype=bool)
        present[raw] = True
        self.alphabet = max(int(present.sum()), 1)
        rank = np.cumsum(present, dtype=np.int64) - 1
        self.codes = rank.astype(np.uint16 if self.alphabet <= 1 << 16 else np.uint32)[raw]
        self.exact = self.alphabet**SHINGLE <= 1 << _ID_BITS
        # number of shingles per text (texts shorter than SHINGLE have none: their only
        # near-duplicates are the equal texts, which the callers pair by equality)
        self.count = np.maximum(self.lens - SHINGLE + 1, 0)
        self._freq: np.ndarray | None = None

    @property
    def freq(self) -> np.ndarray:
        """Frequency class per hash bucket, in the key's top bits (counted over every
        text with shingles unless :meth:`count_frequencies` chose the texts)."""
        if self._freq is None:
            self.count_frequencies(np.flatnonzero(self.count))
        return self._freq

    def count_frequencies(self, which: np.ndarray) -> None:
        """The frequency classes from the texts ``which``: any fixed order of the
        shingles keeps prefix filtering exact; counts make rare shingles come first."""
        counts = np.zeros(1 << _FREQ_BITS, dtype=np.int64)
        for _, ids, valid in self._id_blocks(which):
            counts += np.bincount(_bucket(ids[valid]).astype(np.int64), minlength=counts.size)
        f = np.frexp(np.maximum(counts, 1))[1] - 1  # floor(log2 c), exact for integers
        self._freq = f.astype(np.uint64) << np.uint64(_ID_BITS)

    def _ids(self, pos: np.ndarray) -> np.ndarray:
        c = self.codes
        h = c[pos].astype(np.uint64)
        if self.exact:
            a = np.uint64(self.alphabet)
            for k in range(1, SHINGLE):
                h = h * a + c[pos + k]
            return h
        for k in range(1, SHINGLE):  # FNV-style mixing, then a splitmix64 finaliser
            h = (h * np.uint64(0x100000001B3)) ^ c[pos + k]
        h ^= h >> np.uint64(31)
        h *= np.uint64(0xBF58476D1CE4E5B9)
        h ^= h >> np.uint64(29)
        return h >> np.uint64(64 - _ID_BITS)

    def _id_blocks(self, which: np.ndarray):
        """``(texts, ids, valid)`` blocks: the shingle ids of ``which`` (texts with at
        least one shingle) as rows padded to the block's longest text; texts go in order
        of length so that padding stays small."""
        which = np.asarray(which, dtype=np.int64)
        which = which[np.argsort(self.count[which], kind="stable")]
        k = self.count[which]
        i = 0
        while i < which.size:
            j = min(which.size, i + max(1, _BLOCK // int(k[i])))
            while j > i + 1 and (j - i) * int(k[j - 1]) > _BLOCK:
                j = i + max(1, _BLOCK // int(k[j - 1]))
            rows, width = which[i:j], int(k[j - 1])
            col = np.arange(width)
            valid = col[None, :] < k[i:j, None]
            pos = np.where(valid, self.starts[rows][:, None] + col[None, :], 0)
            yield rows, self._ids(pos), valid
            i = j

    def key_blocks(self, which: np.ndarray, by_frequency: bool = True):
        """``(texts, keys, distinct)``: each row's keys ascending (padding last), and which
        entries are the first of their value (each text's shingle *set*). Keys are the
        ids under the frequency order (rare first), or the bare ids."""
        for rows, ids, valid in self._id_blocks(which):
            keys = self.freq[_bucket(ids)] | ids if by_frequency else ids
            keys[~valid] = _SENTINEL
            keys.sort(axis=1)
            distinct = np.empty(keys.shape, dtype=bool)
            distinct[:, 0] = True
            np.not_equal(keys[:, 1:], keys[:, :-1], out=distinct[:, 1:])
            distinct &= keys != _SENTINEL
            yield rows, keys, distinct


#: Extra shingles each prefix is extended by: a pair at Jaccard >= t then shares at least
#: ``_EXTRA + 1`` of its prefix shingles (see :func:`_prefix_length`), a filter that drops
#: most candidates before the exact count.
_EXTRA = 3


def _prefix_length(size: np.ndarray, jaccard: float) -> np.ndarray:
    """Prefix filtering (Chaudhuri, Ganti and Kaushik 2006; Bayardo, Ma and Srikant 2007;
    Xiao et al. 2008): if ``J(x, y) >= t`` then ``o = |x & y| >= ceil(t max(|x|, |y|))``.
    List x's shingles in one fixed order; x has at most ``|x| - o`` shingles outside y, so
    the k-th smallest shared shingle lies within x's first ``|x| - o + k`` and likewise
    within y's. Hence, with prefixes of ``|x| - ceil(t |x|) + 1 + _EXTRA`` shingles, a
    pair at ``J >= t`` shares at least ``min(_EXTRA + 1, o)`` shingles of both prefixes.
    (``- 1e-9`` keeps a float product such as 0.8 x 5 = 4.000000000000001 from shortening
    the prefix.)"""
    return np.clip(size - np.ceil(jaccard * size - 1e-9).astype(np.int64) + 1 + _EXTRA, 1, size)


def _ragged_arange(counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(c) for c in counts])``."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def _pairs_within_runs(head: np.ndarray):
    """Blocks ``(a, b)`` of the index pairs ``a < b`` of equal neighbours' runs in the
    sorted array ``head`` (every pair of entries sharing a key), about ``_BLOCK`` pairs a
    block, so memory stays bounded however large a run is. Sets
    ``JOIN_STATS["shared_keys"]`` to the number of pairs."""
    run_end = np.r_[np.flatnonzero(head[1:] != head[:-1]) + 1, head.size]
    end_of = np.repeat(run_end, np.diff(np.r_[0, run_end]))
    partners = end_of - 1 - np.arange(head.size)
    cum = np.cumsum(partners)
    JOIN_STATS["shared_keys"] = int(cum[-1]) if cum.size else 0
    start = 0
    while start < head.size:
        base = cum[start - 1] if start else 0
        stop = max(int(np.searchsorted(cum, base + _BLOCK, "right")), start + 1)
        c = partners[start:stop]
        a = np.repeat(np.arange(start, stop), c)
        start = stop
        if a.size:
            yield a, a + 1 + _ragged_arange(c)


def similar_pairs(
    norm: list[str], jaccard: float = NEAR_DUP_JACCARD, keep=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair ``u < v`` of the normalised texts ``norm`` (both at least ``SHINGLE``
    characters) whose shingle sets have Jaccard ``>= jaccard``, as arrays ``(u, v, J)``.

    Exact (no missed pair) while the exact join's estimated cost is within
    ``_EXACT_BUDGET_S`` per text (:func:`_exact_over_budget`); above it the candidates
    come from MinHash LSH (:func:`_lsh_candidates`, each pair at ``J >= jaccard`` missed
    with probability <= :func:`lsh_miss_bound`). Exact candidates come from the partition join
    (:func:`_partition_candidates`, at ``jaccard >= _MIN_PARTITION_JACCARD``) and, for the
    texts it cannot key in bounded work and at lower thresholds, from the prefix filter
    (:func:`_prefix_candidates`); each filter provably keeps every pair at ``J >=
    jaccard``; ``keep(u, v)`` (a vectorised filter) drops pairs the caller does not want,
    and every candidate left is verified by counting its shared shingles. All in numpy
    blocks of ``_BLOCK`` elements: per-text Python work is one ``len`` per text."""
    empty = np.zeros(0, dtype=np.int64)
    table = _Shingles(norm)
    which = np.flatnonzero(table.count)
    JOIN_STATS.clear()
    if which.size < 2:
        return empty, empty, np.zeros(0)
    lsh = _exact_over_budget(table, which, jaccard)
    if lsh:
        u, v, size = _lsh_candidates(table, which, jaccard, keep)
        JOIN_STATS.update(lsh)
    else:
        u, v, size = _exact_candidates(table, which, jaccard, keep)
    JOIN_STATS["verified"] = int(u.size)
    if not u.size:
        return empty, empty, np.zeros(0)
    inter = _shared_shingles(table, u, v)
    jac = inter / (size[u] + size[v] - inter)
    ok = jac >= jaccard
    return u[ok], v[ok], jac[ok]


# --------------------------------------------------------------------------- #
# Above a cost budget: MinHash LSH candidates (a stated miss bound), verified exactly
# --------------------------------------------------------------------------- #
#: Texts above which the exact join's cost is estimated (at most this many: exact always).
_LSH_FROM = 1_000
#: Texts in the seeded sample on which the exact join is run to estimate its cost.
_LSH_SAMPLE = 400
#: The exact join may cost this many CPU seconds per text (about 2% of one 256-token text
#: through a 4-layer x 256 GPT-2 on the 2-core machine); above it MinHash LSH is used.
_EXACT_BUDGET_S = 1e-3
#: CPU seconds per shingle of a verified candidate pair (sorting its two sets; measured
#: 87 us a pair of 2 x 1,130 shingles on the 2-core machine).
_VERIFY_S = 3.8e-8
#: MinHash rows per band, and the largest probability that a pair at ``J >= t`` is missed.
_LSH_ROWS = 6
_LSH_MISS = 1e-6
#: Thresholds below this keep the exact join whatever its cost (bands grow as t^-r).
_MIN_LSH_JACCARD = 0.75


def lsh_bands(jaccard: float, rows: int = _LSH_ROWS, miss: float = _LSH_MISS) -> int:
    """The fewest bands ``b`` with ``(1 - t^r)^b <= miss`` (Broder 1997; Indyk and Motwani
    1998: with min-wise independent hashes a band of ``r`` min-hashes of two sets agrees
    with probability ``J^r``, independently across bands)."""
    p = float(jaccard) ** rows
    if p >= 1.0:
        return 1
    return max(1, int(np.ceil(np.log(miss) / np.log1p(-p) - 1e-12)))


def lsh_miss_bound(jaccard: float, rows: int, bands: int) -> float:
    """``(1 - t^r)^b``: the probability that a pair at Jaccard ``>= t`` shares no band
    (it decreases in J, so the pair at exactly t is the worst); assumes min-wise
    independent hashes (measured against it in tests/stats/test_near_duplicates.py)."""
    return float((1.0 - float(jaccard) ** rows) ** bands)


def _exact_over_budget(table: _Shingles, which: np.ndarray, jaccard: float) -> dict | None:
    """The LSH settings when the exact join would cost more than ``_EXACT_BUDGET_S`` per
    text, else None. The exact join is run on a seeded sample of ``_LSH_SAMPLE`` texts;
    the pairs it verifies grow as the square of the texts, so its count is scaled by
    ``(n / sample)^2`` and priced at ``_VERIFY_S`` per shingle of a pair. Low-entropy long
    texts (every text sharing rare words with most others) make that count a fixed
    fraction of all pairs; ordinary text makes it nearly zero."""
    n = which.size
    if n <= _LSH_FROM or jaccard < _MIN_LSH_JACCARD:
        return None
    rng = np.random.default_rng(0x15B)
    sample = np.sort(rng.choice(which, min(_LSH_SAMPLE, n), replace=False))
    saved = table._freq
    stats = dict(JOIN_STATS)
    try:
        table.count_frequencies(sample)
        u, v, _ = _exact_candidates(table, sample, jaccard)
    finally:
        table._freq = saved
        JOIN_STATS.clear()
        JOIN_STATS.update(stats)
    width = float((table.count[u] + table.count[v]).mean()) if u.size else 0.0
    estimate = u.size * (n / sample.size) ** 2 * width * _VERIFY_S
    JOIN_STATS.update(estimated_exact_s=round(estimate, 1), budget_s=round(_EXACT_BUDGET_S * n, 1))
    if estimate <= _EXACT_BUDGET_S * n:
        return None
    bands = lsh_bands(jaccard)
    return {
        "join": "minhash-lsh",
        "rows": _LSH_ROWS,
        "bands": bands,
        "miss_bound": lsh_miss_bound(jaccard, _LSH_ROWS, bands),
    }


def _exact_candidates(table: _Shingles, which: np.ndarray, jaccard: float, keep=None):
    """``(u, v, size)``: the candidate pairs of the exact join on ``which`` (every pair
    at ``J >= jaccard`` among them) and each text's set size. The partition join, whose
    overflow texts the prefix filter pairs, or the prefix filter alone, whichever
    :func:`_use_partition` says is cheaper."""
    n = len(table.lens)
    if _use_partition(table, which, jaccard):
        JOIN_STATS["join"] = "partition"
        u, v, size, overflow = _partition_candidates(table, which, jaccard, keep)
        if overflow.any():  # texts with too many light groups: the prefix filter pairs them
            near = which[_size_compatible(size[which], size[overflow], jaccard)]
            u2, v2, _ = _prefix_candidates(table, near, jaccard, keep, must=overflow)
            pair = np.unique(np.r_[u * n + v, u2 * n + v2])
            u, v = pair // n, pair % n
        return u, v, size
    JOIN_STATS["join"] = "prefix"
    u, v, size = _prefix_candidates(table, which, jaccard, keep)
    JOIN_STATS["candidates"] = int(u.size)
    return u, v, size


#: Seeds of the min-hashes (fixed: same texts, same candidates).
_LSH_SEED = 0x6A09E667F3BCC908


def lsh_hashes(count: int) -> tuple[np.ndarray, np.ndarray]:
    """The fixed seeds ``(s_k, a_k)`` of ``count`` min-hashes (``a_k`` odd)."""
    rng = np.random.default_rng(_LSH_SEED)
    xor = rng.integers(0, 1 << 63, size=count, dtype=np.uint64) * np.uint64(2)
    mult = rng.integers(0, 1 << 62, size=count, dtype=np.uint64) * np.uint64(2) + np.uint64(1)
    return xor, mult


def minhash_signatures(
    ids: np.ndarray, distinct: np.ndarray, xor: np.ndarray, mult: np.ndarray
) -> np.ndarray:
    """Per row of shingle ids (``distinct`` marks each set's members; at least one per
    row), min-hash ``k`` = the smallest ``(x XOR s_k) * a_k mod 2^64`` over the row's
    mixed ids ``x``: for each k a fixed bijection of the 64-bit ids, so two sets share
    min-hash k exactly when their union's smallest element under it is shared."""
    # padding and repeats take the row's first shingle: a set's minimum is unchanged
    x = _mix(np.where(distinct, ids, ids[:, :1]))
    sig = np.empty((ids.shape[0], xor.size), dtype=np.uint64)
    h = np.empty_like(x)
    for k in range(xor.size):
        np.bitwise_xor(x, xor[k], out=h)
        np.multiply(h, mult[k], out=h)
        h.min(axis=1, out=sig[:, k])
    return sig


def _lsh_candidates(
    table: _Shingles, which: np.ndarray, jaccard: float, keep=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate pairs ``(u < v)`` of MinHash LSH (``_LSH_ROWS`` rows x
    :func:`lsh_bands` bands) and each text's set size. Min-hash ``k`` of a set is the
    smallest ``(x XOR s_k) * a_k`` over its shingles' mixed 64-bit ids ``x`` (``a_k`` odd:
    a bijection); a band's key hashes its ``r`` min-hashes with the band's index. Pairs
    sharing a key, of compatible sizes (``min >= t max``) and kept by ``keep``, are the
    candidates; the caller verifies each exactly, so no reported pair is false, and a
    pair at ``J >= t`` is missed with probability at most :func:`lsh_miss_bound`."""
    empty = np.zeros(0, dtype=np.int64)
    n = len(table.lens)
    rows_ = _LSH_ROWS
    bands = lsh_bands(jaccard)
    xor, mult = lsh_hashes(rows_ * bands)
    size = np.zeros(n, dtype=np.int64)
    keys = np.empty((n, bands), dtype=np.uint64)
    band_salt = _mix(np.arange(1, bands + 1, dtype=np.uint64) * _GOLDEN)
    for rows, ids, distinct in table.key_blocks(which, by_frequency=False):
        size[rows] = distinct.sum(axis=1)
        sig = minhash_signatures(ids, distinct, xor, mult)
        for b in range(bands):
            acc = band_salt[b] ^ sig[:, b * rows_]
            for k in range(1, rows_):
                acc = _mix(acc) ^ sig[:, b * rows_ + k]
            keys[rows, b] = _mix(acc)
    key = keys[which].ravel()
    text = np.repeat(which, bands)
    order = np.argsort(key, kind="stable")
    key, text = key[order], text[order]
    found = [empty]
    for a, b in _pairs_within_runs(key):
        u, v = np.minimum(text[a], text[b]), np.maximum(text[a], text[b])
        ok = (u != v) & (
            np.minimum(size[u], size[v]) >= jaccard * np.maximum(size[u], size[v]) - 1e-9
        )
        if keep is not None:
            ok[ok] = keep(u[ok], v[ok])
        found.append(np.unique(u[ok] * n + v[ok]))
    pair = np.unique(np.concatenate(found))
    JOIN_STATS["candidates"] = int(pair.size)
    return pair // n, pair % n, size


#: Texts from which the join is chosen on a sample (below it: the partition join).
_CHOOSE_FROM = 40_000
#: Texts in that sample.
_CHOOSE_SAMPLE = 5_000
#: Process CPU seconds per text and per pair of entries sharing a key, of the prefix
#: filter and of the partition join (measured on the 2-core machine at 10^5 texts:
#: score's benchmark texts and real sentences; they only choose which exact join runs).
_COST = {"prefix": (1.5e-5, 1.7e-7), "partition": (4.5e-5, 3.5e-7)}


def _use_partition(table: _Shingles, which: np.ndarray, jaccard: float) -> bool:
    """Whether the partition join (rather than the prefix filter) pairs these texts.
    Both are exact; this only picks the cheaper. Low-entropy text (few distinct
    characters, templates) makes even the rarest shingles common, so the prefix
    filter's candidates grow as n^2; on ordinary text the rarest shingles are nearly
    unique and the prefix filter is cheaper, while templated parts make large groups of
    equal content. On a seeded sample of ``_CHOOSE_SAMPLE`` texts each join's pairs of
    entries sharing a key are counted; pairs grow as the square of the texts, so the
    sample's counts are scaled by ``(n / sample)^2`` into the cost model ``_COST``."""
    if jaccard < _MIN_PARTITION_JACCARD or int(table.count.max()) >= _MAX_PARTITION_SIZE:
        return False
    if which.size < _CHOOSE_FROM:
        return True
    rng = np.random.default_rng(0x5EED)
    sample = np.sort(rng.choice(which, _CHOOSE_SAMPLE, replace=False))
    scale = (which.size / sample.size) ** 2
    _partition_candidates(table, sample, jaccard)
    part_pairs = JOIN_STATS.get("shared_keys", 0) * scale
    # the prefix filter's entries on the sample, its frequency order from the sample
    keys = []
    saved, table._freq = table._freq, None
    table.count_frequencies(sample)
    for _, k, distinct in table.key_blocks(sample):
        rank = np.cumsum(distinct, axis=1, dtype=np.int32)
        s = distinct.sum(axis=1)
        keys.append(k[distinct & (rank <= _prefix_length(s, jaccard)[:, None])])
    table._freq = saved
    _, c = np.unique(np.concatenate(keys), return_counts=True)
    prefix_pairs = float((c * (c - 1) // 2).sum()) * scale
    cost = {
        name: per_text * which.size + per_pair * pairs
        for name, (per_text, per_pair), pairs in (
            ("prefix", _COST["prefix"], prefix_pairs),
            ("partition", _COST["partition"], part_pairs),
        )
    }
    JOIN_STATS.clear()
    JOIN_STATS.update(
        chosen_on_sample=sample.size,
        estimated_prefix_pairs=int(prefix_pairs),
        estimated_partition_pairs=int(part_pairs),
    )
    return bool(cost["partition"] < cost["prefix"])


def _size_compatible(sizes: np.ndarray, others: np.ndarray, jaccard: float) -> np.ndarray:
    """Which ``sizes`` may reach ``J >= t`` with some size in ``others``: ``t s <= o <=
    s / t`` (``J <= min / max``)."""
    o = np.sort(others)
    lo = np.searchsorted(o, np.ceil(sizes * jaccard - 1e-9), "left")
    return lo < np.searchsorted(o, np.floor(sizes / jaccard + 1e-9), "right")


def _prefix_candidates(
    table: _Shingles, which: np.ndarray, jaccard: float, keep=None, must=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Candidate pairs ``(u < v)`` of the prefix filter and each text's set size: the
    pairs whose prefixes (:func:`_prefix_length`) share a shingle, then the pairs whose
    sizes allow ``J >= t`` (``min <= t max`` excludes), then the extended-prefix count,
    then ``keep(u, v)``. With ``must`` (a mask of texts) only the pairs holding at least
    one such text are wanted: entries whose shingle no ``must`` text has in its prefix
    are dropped before the pairs are made."""
    empty = np.zeros(0, dtype=np.int64)
    n = len(table.lens)
    size = np.zeros(n, dtype=np.int64)
    if must is not None:
        table.count_frequencies(which)
    ent_key, ent_text = [], []
    for rows, keys, distinct in table.key_blocks(which):
        s = distinct.sum(axis=1)
        size[rows] = s
        rank = np.cumsum(distinct, axis=1, dtype=np.int32)  # 1-based rank among distinct
        sel = distinct & (rank <= _prefix_length(s, jaccard)[:, None])
        ent_key.append(keys[sel])
        ent_text.append(np.broadcast_to(rows[:, None], keys.shape)[sel])
    key, text = np.concatenate(ent_key), np.concatenate(ent_text)
    # a shingle in one prefix only pairs nothing: drop (most) of them before sorting
    b = _bucket(key).astype(np.int64)
    shared = np.bincount(b, minlength=1 << _FREQ_BITS)[b] >= 2
    if must is not None:
        shared &= np.isin(key, key[must[text]])
    key, text = key[shared], text[shared]
    if not key.size:
        return empty, empty, size
    sz = size[text]
    # sort by (shingle, size, text): runs of one shingle, sizes ascending within a run
    order = np.lexsort((text, sz, key))
    key, text, sz = key[order], text[order], sz[order]
    run_id = np.cumsum(np.r_[True, key[1:] != key[:-1]]) - 1
    # length filter (J <= min / max): a pair is made once per shared prefix shingle, by
    # its smaller (size, text) end, with the later entries of the run of size <= size / t
    top = np.floor(sz / jaccard + 1e-6).astype(np.int64)
    width = int(top.max()) + 1
    run_sz = run_id * width + sz
    hi = np.searchsorted(run_sz, run_id * width + top, "right")
    if must is None:
        src = np.arange(key.size)
        first = src + 1
    else:
        # only the pairs of a must text: each must entry with every entry of its run
        # whose size allows J >= t (both directions); a pair of two must texts is made
        # from its lower text only, so each pair is made from one text, as above
        src = np.flatnonzero(must[text])
        first = np.searchsorted(run_sz, run_id[src] * width + np.ceil(sz[src] * jaccard - 1e-9))
        hi = hi[src]
    partners = hi - first
    # blocks of whole texts (every pair of a text is counted in one block), about _BLOCK
    # pairs each: memory stays bounded however many candidates there are
    by_text = np.argsort(text[src], kind="stable")
    tt = text[src][by_text]
    last = np.r_[np.flatnonzero(tt[1:] != tt[:-1]), tt.size - 1]  # a text's last entry
    cum = np.cumsum(partners[by_text])
    found_u, found_v = [empty], [empty]
    start = 0
    while start < by_text.size:
        base = cum[start - 1] if start else 0
        stop = int(np.searchsorted(cum, base + _BLOCK, "right"))
        stop = int(last[np.searchsorted(last, max(stop, start + 1) - 1)]) + 1
        q = by_text[start:stop]
        c = partners[q]
        i = np.repeat(src[q], c)
        j = np.repeat(first[q], c) + _ragged_arange(c)
        if must is not None:
            ti, tj = text[i], text[j]
            made = (ti != tj) & ~(must[tj] & (tj < ti))
            i, j = i[made], j[made]
        pair = np.sort(text[i] * n + text[j])
        start = stop
        if not pair.size:
            continue
        # each pair once, with the number of prefix shingles it shares; a pair at J >= t
        # shares at least min(_EXTRA + 1, ceil(t max size)) of them (_prefix_length)
        first_of = np.r_[True, pair[1:] != pair[:-1]]
        shared_n = np.diff(np.r_[np.flatnonzero(first_of), pair.size])
        pair = pair[first_of]
        u, v = pair // n, pair % n
        need = np.ceil(jaccard * np.maximum(size[u], size[v]) - 1e-9).astype(np.int64)
        ok = shared_n >= np.minimum(_EXTRA + 1, need)
        if keep is not None:
            ok &= keep(np.minimum(u, v), np.maximum(u, v))
        found_u.append(u[ok])
        found_v.append(v[ok])
    u, v = np.concatenate(found_u), np.concatenate(found_v)
    return np.minimum(u, v), np.maximum(u, v), size


# --------------------------------------------------------------------------- #
# The partition join (pigeonhole on hashed groups of shingles)
# --------------------------------------------------------------------------- #
#: Groups beyond the distance bound: a pair within it has at least ``_PART_EXTRA + 1``
#: identical groups (:func:`_partition_candidates`).
_PART_EXTRA = 2
#: A group of at most this many shingles is *light*: keyed only in ``_PART_EXTRA + 1``-
#: subsets of a text's light groups (an empty or one-shingle group alone is shared by
#: too many texts to be a useful key).
_LIGHT = 1
#: Light-group subsets per text and size class at most (C(22, 3)); a text with more is
#: paired by the prefix filter instead.
_MAX_LIGHT_KEYS = 1540
#: Below this threshold the groups would be nearly all light (a group holds about
#: t / (1 - t) shingles): the prefix filter is used.
_MIN_PARTITION_JACCARD = 0.75
#: Width (largest / smallest size) of a size class of the partition join.
_CLASS_RATIO = 1.25
#: Diagnostics of the last partition join (keys, candidates before and after the filters).
JOIN_STATS: dict[str, int] = {}
#: Set sizes below this keep the float64 content sums exact (size x 2^32 < 2^53).
_MAX_PARTITION_SIZE = 1 << 20
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_LOW32 = np.uint64(0xFFFFFFFF)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 that spreads every input bit."""
    x = np.asarray(x, dtype=np.uint64)
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


def _max_distance(size: np.ndarray, jaccard: float) -> np.ndarray:
    """``floor(a (1 - t) / t)``: the largest ``|A ^ B|`` of a pair at ``J >= t`` whose
    smaller set has ``a`` elements (rounded up past float error: a larger bound only
    adds groups)."""
    return np.floor(np.asarray(size) * (1.0 - jaccard) / jaccard + 1e-6).astype(np.int64)


def _size_classes(max_size: int, jaccard: float) -> tuple[np.ndarray, np.ndarray]:
    """Size classes ``[lo_c, lo_{c+1})``, each ``_CLASS_RATIO`` wide, and each class's
    number of groups ``m_c = floor(hi_c (1 - t) / t) + 1 + _PART_EXTRA`` (``hi_c`` the
    class's largest size). Narrow classes keep ``m_c`` near what the smallest size needs
    (groups of about t / (1 - t) shingles, few of them light) at the price of keying a
    text under more classes (``log(1 / t) / log(_CLASS_RATIO)`` + 1)."""
    lo = [1]
    while lo[-1] <= max_size:
        lo.append(max(lo[-1] + 1, int(np.floor(lo[-1] * _CLASS_RATIO)) + 1))
    edges = np.asarray(lo, dtype=np.int64)
    return edges, _max_distance(edges[1:] - 1, jaccard) + 1 + _PART_EXTRA


def _triples(counts: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray]:
    """Every 3-subset ``i < j < k`` of ``range(counts[r])`` for each segment ``r``, as
    ``(segment, (i, j, k))`` rows; segments with more than ``cap`` subsets are skipped."""
    segs, idx = [np.zeros(0, np.int64)], [np.zeros((0, 3), np.int64)]
    for size in np.unique(counts):
        if size < 3 or size * (size - 1) * (size - 2) // 6 > cap:
            continue
        comb = np.array(
            [
                (i, j, k)
                for i in range(size)
                for j in range(i + 1, size)
                for k in range(j + 1, size)
            ],
            dtype=np.int64,
        )
        r = np.flatnonzero(counts == size)
        segs.append(np.repeat(r, comb.shape[0]))
        idx.append(np.tile(comb, (r.size, 1)))
    return np.concatenate(segs), np.concatenate(idx)


#: Groups whose bound is summed first for every chance pair (:func:`_group_bound`).
_FIRST_GROUPS = 12


def _group_bound(vec_w, vec_s, bu, bv, m, lo: int, hi: int) -> np.ndarray:
    """Per pair, the sum over its class's groups ``lo .. min(hi, m) - 1`` of a lower
    bound of ``|A & g ^ B & g|``: ``|W_A(g) - W_B(g)|`` (shingle counts, clipped at 255),
    else 2 when the content sums differ (two different sets of one size; 1 where the
    count was clipped). ``bu``, ``bv``: where each text's group vectors of the class
    start in ``vec_w`` / ``vec_s``."""
    col = np.arange(lo, hi)[None, :]
    valid = col < m[:, None]
    ou = np.where(valid, bu[:, None] + col, 0)
    ov = np.where(valid, bv[:, None] + col, 0)
    wu = vec_w[ou].astype(np.int16)
    dw = np.abs(wu - vec_w[ov])
    diff = np.where(dw > 0, dw, (2 - (wu == 255)) * (vec_s[ou] != vec_s[ov]))
    return np.where(valid, diff, 0).sum(axis=1)


def _partition_candidates(
    table: _Shingles, which: np.ndarray, jaccard: float, keep=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Candidate pairs ``(u < v)`` of the partition join, each text's set size, and the
    texts it could not key (``overflow``: the caller pairs those by the prefix filter).

    **No pair at J >= t is missed** (for the texts not in ``overflow``). Let ``a <= b``
    be the pair's set sizes. ``J = o / (a + b - o) >= t`` gives ``o >= t (a + b) / (1 +
    t)``; since ``o <= a``, ``a >= t b``, and the symmetric difference ``d = a + b - 2 o
    <= (a + b)(1 - t) / (1 + t) <= a (1 - t) / t`` (:func:`_max_distance`, ``D(a)``).
    Sizes fall in classes (:func:`_size_classes`); class ``c`` splits the shingle
    universe into ``m_c >= D(a) + 1 + e`` groups (``e = _PART_EXTRA``) by a hash of the
    shingle, the same for every text. Each text is keyed under its own class and under
    every class that may hold a smaller partner (sizes ``floor(t s) .. s``), so both
    texts of the pair are keyed under ``c = class(a)``. The ``d`` differing shingles lie
    in at most ``d`` groups, so at least ``m_c - d >= e + 1`` groups ``g`` have ``A & g
    == B & g``. A text emits (1) for each *heavy* group (more than ``_LIGHT`` shingles) a
    key of (class, group, its content), and (2) for each ``(e + 1)``-subset of its *light*
    groups a key of (class, the groups, their contents). If one of the identical groups
    is heavy, both texts emit its key (1); otherwise ``e + 1`` of them are light in both
    and both emit that subset's key (2). Either way the pair shares a key. A text with
    more than ``_MAX_LIGHT_KEYS`` subsets in some class emits no subsets there and is
    returned in ``overflow``. Content keys are hashes: a collision adds a candidate,
    never removes one.

    Each shared key makes a candidate, filtered (never dropping a pair at J >= t) by:
    the class is that of the smaller size (each pair is made under one class); ``a >=
    t b``; ``keep``; and the group counts: per group ``|A & g ^ B & g| >= |W_A(g) -
    W_B(g)|`` (shingle counts), and ``>= 2`` when the counts are equal but the content
    sums differ (equal-sized different sets), so the sum over groups of these bounds is
    a lower bound of ``d``, which must not exceed ``(a + b)(1 - t) / (1 + t)``."""
    n = len(table.lens)
    max_size = int(table.count[which].max())
    edges, m_of = _size_classes(max_size, jaccard)
    n_cls = edges.size - 1
    size = np.zeros(n, dtype=np.int64)
    first_cls = np.zeros(n, dtype=np.int64)
    overflow = np.zeros(n, dtype=bool)
    vec_w, vec_s, at = [], [], 0
    # each key as one sortable word: class | key bits | text (runs of equal class and key)
    tb = max(1, int(n - 1).bit_length())
    cb = max(1, int(n_cls - 1).bit_length())
    ent = []

    def pack(key, text, cls):
        return (
            (cls.astype(np.uint64) << np.uint64(64 - cb))
            | ((key >> np.uint64(tb + cb)) << np.uint64(tb))
            | text.astype(np.uint64)
        )

    off_list = []  # (texts, slot, offset)
    for rows, ids, distinct in table.key_blocks(which, by_frequency=False):
        s = distinct.sum(axis=1)
        size[rows] = s
        c_lo = np.searchsorted(edges, np.floor(jaccard * s + 1e-9), "right") - 1
        c_lo = np.maximum(c_lo, 0)
        c_hi = np.searchsorted(edges, s, "right") - 1
        first_cls[rows] = c_lo
        h = _mix(ids)
        grp = h >> np.uint64(32)
        content = (h & _LOW32).astype(np.float64)
        for k in range(int((c_hi - c_lo).max()) + 1):
            r = np.flatnonzero(c_hi - c_lo >= k)
            cls = c_lo[r] + k
            m = m_of[cls]
            mm = int(m.max())
            g = ((grp[r] * m[:, None].astype(np.uint64)) >> np.uint64(32)).astype(np.int64)
            idx = (np.arange(r.size)[:, None] * mm + g)[distinct[r]]
            cnt = np.bincount(idx, minlength=r.size * mm).reshape(r.size, mm)
            tot = np.bincount(idx, weights=content[r][distinct[r]], minlength=r.size * mm)
            csum = (tot.astype(np.uint64) & _LOW32).reshape(r.size, mm)
            col = np.arange(mm)[None, :]
            valid = col < m[:, None]
            # the group vectors, for the count filter
            per = m
            off_list.append((rows[r], np.full(r.size, k), at + np.cumsum(per) - per))
            at += int(per.sum())
            # counts clipped to 255 and 16 bits of the content sums: enough for a filter
            vec_w.append(np.minimum(cnt[valid], 255).astype(np.uint8))
            vec_s.append((csum[valid] & np.uint64(0xFFFF)).astype(np.uint16))
            # keys: (class, group, content) of heavy groups
            base = _mix(cls[:, None].astype(np.uint64) * np.uint64(1 << 32) + col.astype(np.uint64))
            item = _mix(base ^ (csum | (cnt.astype(np.uint64) << np.uint64(32))))
            heavy = valid & (cnt > _LIGHT)
            rr, gg = np.nonzero(heavy)
            ent.append(pack(item[rr, gg], rows[r][rr], cls[rr]))
            # light groups: every 3-subset of them
            light = valid & (cnt <= _LIGHT)
            n_light = light.sum(axis=1)
            n_sub = n_light * (n_light - 1) * (n_light - 2) // 6
            overflow[rows[r][n_sub > _MAX_LIGHT_KEYS]] = True
            lr, lg = np.nonzero(light)  # row-major: each row's light groups in order
            start = np.cumsum(n_light) - n_light
            seg, tri = _triples(n_light, _MAX_LIGHT_KEYS)
            if seg.size:
                pos = start[seg][:, None] + tri
                it = item[lr[pos], lg[pos]]
                key = _mix(_mix(it[:, 0] ^ np.uint64(0x5851F42D4C957F2D)) ^ it[:, 1])
                key = _mix(key ^ it[:, 2])
                ent.append(pack(key, rows[r][seg], cls[seg]))
    vec_w = np.concatenate(vec_w)
    vec_s = np.concatenate(vec_s)
    n_slots = max(int(o[1].max()) + 1 for o in off_list)
    off = np.full((n, n_slots), -1, dtype=np.int64)
    for t_, k_, o_ in off_list:
        off[t_, k_] = o_
    empty = np.zeros(0, dtype=np.int64)
    JOIN_STATS.update(texts=int(which.size), overflow=int(overflow.sum()))
    packed = np.concatenate(ent)
    del ent
    JOIN_STATS["keys"] = int(packed.size)
    packed.sort()
    # keep the entries of keys held by two or more texts
    head = packed >> np.uint64(tb)
    same = head[1:] == head[:-1]
    del head
    multi = np.zeros(packed.size, dtype=bool)
    multi[1:] = same
    multi[:-1] |= same
    del same
    packed = packed[multi]
    del multi
    JOIN_STATS["shared_keys"] = 0
    if not packed.size:
        return empty, empty, size, overflow
    text = (packed & np.uint64((1 << tb) - 1)).astype(np.int64)
    cls = (packed >> np.uint64(64 - cb)).astype(np.int64)
    head = packed >> np.uint64(tb)
    del packed
    kept = 0
    bound_num = 1.0 - jaccard
    found = [empty]
    for a, b in _pairs_within_runs(head):
        u, v, cc = text[a], text[b], cls[a]
        su, sv = size[u], size[v]
        small = np.minimum(su, sv)
        big = np.maximum(su, sv)
        ok = (np.searchsorted(edges, small, "right") - 1 == cc) & (small >= jaccard * big - 1e-9)
        if keep is not None:
            ok[ok] = keep(np.minimum(u[ok], v[ok]), np.maximum(u[ok], v[ok]))
        u, v, cc, su, sv = u[ok], v[ok], cc[ok], su[ok], sv[ok]
        if not u.size:
            continue
        # the group-count lower bound of |A ^ B|: first over the first _FIRST_GROUPS
        # groups (a partial sum of non-negative terms bounds the whole from below, and
        # drops nearly every chance pair), then over the rest for the pairs left
        m = m_of[cc]
        bu = off[u, cc - first_cls[u]]
        bv = off[v, cc - first_cls[v]]
        limit = np.floor((su + sv) * bound_num / (1.0 + jaccard) + 1e-6).astype(np.int64)
        lb = np.zeros(u.size, dtype=np.int64)
        step = max(1, _BLOCK // _FIRST_GROUPS)
        for i in range(0, u.size, step):
            sl = slice(i, i + step)
            lb[sl] = _group_bound(vec_w, vec_s, bu[sl], bv[sl], m[sl], 0, _FIRST_GROUPS)
        rest = np.flatnonzero((lb <= limit) & (m > _FIRST_GROUPS))
        step = max(1, _BLOCK // int(m.max()))
        for i in range(0, rest.size, step):
            r = rest[i : i + step]
            lb[r] += _group_bound(vec_w, vec_s, bu[r], bv[r], m[r], _FIRST_GROUPS, int(m[r].max()))
        ok = lb <= limit
        u, v = u[ok], v[ok]
        kept += int(u.size)
        found.append(np.minimum(u, v) * n + np.maximum(u, v))
    pair = np.unique(np.concatenate(found))
    JOIN_STATS.update(after_filters=kept, candidates=int(pair.size))
    return pair // n, pair % n, size, overflow


def _shared_shingles(table: _Shingles, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``|S(u_k) & S(v_k)|`` for each candidate pair: the involved texts' shingle sets
    are rebuilt, each pair's two sets written side by side in a padded row, the rows
    sorted, and equal neighbours counted (each set holds a shingle once)."""
    involved = np.unique(np.r_[u, v])
    flat, first, n_sh = [], np.zeros(len(table.lens), np.int64), np.zeros(len(table.lens), np.int64)
    at = 0
    for rows, keys, distinct in table.key_blocks(involved):
        k = distinct.sum(axis=1)
        n_sh[rows] = k
        first[rows] = at + np.cumsum(k) - k
        at += int(k.sum())
        flat.append(keys[distinct])
    flat = np.r_[np.concatenate(flat), _SENTINEL]  # the last entry pads the rows
    width = n_sh[u] + n_sh[v]
    order = np.argsort(width, kind="stable")  # similar widths per block: little padding
    out = np.zeros(u.size, dtype=np.int64)
    i = 0
    while i < order.size:
        w = int(width[order[min(order.size, i + max(1, _BLOCK // int(width[order[i]]))) - 1]])
        j = min(order.size, i + max(1, _BLOCK // w))
        w = int(width[order[j - 1]])
        k = order[i:j]
        col = np.arange(w)[None, :]
        nu, nv = n_sh[u[k]][:, None], n_sh[v[k]][:, None]
        idx = np.where(col < nu, first[u[k]][:, None] + col, first[v[k]][:, None] + col - nu)
        idx[col >= nu + nv] = flat.size - 1
        row = flat[idx]
        row.sort(axis=1)
        same = (row[:, 1:] == row[:, :-1]) & (row[:, 1:] != _SENTINEL)
        out[k] = same.sum(axis=1)
        i = j
    return out


def _unique_texts(norm: list[str]) -> tuple[list[str], np.ndarray]:
    """The distinct normalised texts (in order of first appearance) and each text's
    index among them."""
    first: dict[str, int] = {}
    uid = np.fromiter(
        (first.setdefault(t, len(first)) for t in norm), dtype=np.int64, count=len(norm)
    )
    return list(first), uid


def _by_unique(uid: np.ndarray, n_unique: int) -> tuple[np.ndarray, np.ndarray]:
    """Positions grouped by unique text: ``pos[off[k]:off[k + 1]]`` hold text k."""
    pos = np.argsort(uid, kind="stable")
    off = np.zeros(n_unique + 1, dtype=np.int64)
    np.cumsum(np.bincount(uid, minlength=n_unique), out=off[1:])
    return pos, off


def join_description(stats: dict, jaccard: float) -> dict[str, Any]:
    """How the near-duplicate pairs were found, for the run record: the exact join, or
    MinHash LSH with its stated miss bound (every reported pair is verified either way)."""
    if stats.get("join") != "minhash-lsh":
        return {"method": "exact", "text": "exact join, every pair verified"}
    bound = float(stats["miss_bound"])
    return {
        "method": "minhash-lsh",
        "rows": int(stats["rows"]),
        "bands": int(stats["bands"]),
        "miss_bound": bound,
        "estimated_exact_cpu_s": stats.get("estimated_exact_s"),
        "text": f"MinHash LSH candidates ({stats['rows']} rows x {stats['bands']} bands: a "
        f"pair at Jaccard >= {jaccard:g} is missed with probability <= {bound:.1e}), chosen "
        f"because the exact join was estimated at {stats.get('estimated_exact_s')} CPU-s "
        f"against a budget of {stats.get('budget_s')}; every pair verified",
    }


class Join:
    """Every near-duplicate pair among ``texts`` (:func:`similar_pairs` of their distinct
    normalised texts, no filter): what :func:`near_duplicates` and
    :func:`duplicate_groups` each join for themselves, computed once when both run on the
    same texts (the split check without sub-sampling). Whether a pair is found depends on
    the pair alone (exact join) or on its two texts' band keys (LSH), so the pairs among
    any subset of the texts are this join's pairs restricted to that subset: the results
    are those of the separate joins, pair for pair and group for group (unless the
    subset's own join would take the exact join where this one took LSH: it would then
    add only pairs LSH missed, each with probability <= :func:`lsh_miss_bound`)."""

    def __init__(self, texts: list[str], jaccard: float = NEAR_DUP_JACCARD) -> None:
        self.jaccard = jaccard
        self.uniq, self.uid = _unique_texts(normalise_all(list(texts)))
        self.u, self.v, self.jac = similar_pairs(self.uniq, jaccard)
        self.stats = dict(JOIN_STATS)


def near_duplicates(
    members: list[str],
    nonmembers: list[str],
    jaccard: float = NEAR_DUP_JACCARD,
    join: Join | None = None,
) -> list[tuple[int, int, float]]:
    """``(member index, non-member index, Jaccard)`` of every cross-set pair whose
    normalised texts are equal (Jaccard reported as 1) or whose 5-gram shingle sets have
    Jaccard >= ``jaccard``; an empty text duplicates nothing. Equal texts are joined
    once (:func:`similar_pairs` runs on the distinct texts), then pairs are expanded.
    ``join``: a :class:`Join` of ``members + nonmembers`` at ``jaccard`` (its cross-set
    pairs are these; no second join)."""
    nm = len(members)
    if join is not None:
        if join.jaccard != jaccard or join.uid.size != nm + len(nonmembers):
            raise ValueError("the join is not of these texts at this Jaccard threshold")
        uniq, uid = join.uniq, join.uid
    else:
        uniq, uid = _unique_texts(normalise_all(list(members) + list(nonmembers)))
    n_u = len(uniq)
    has_m = np.zeros(n_u, dtype=bool)
    has_n = np.zeros(n_u, dtype=bool)
    has_m[uid[:nm]] = True
    has_n[uid[nm:]] = True
    m_pos, m_off = _by_unique(uid[:nm], n_u)
    n_pos, n_off = _by_unique(uid[nm:], n_u)
    nonempty = np.fromiter(map(bool, uniq), dtype=bool, count=n_u)
    a_list = [np.flatnonzero(has_m & has_n & nonempty)]
    b_list = [a_list[0]]
    v_list = [np.ones(a_list[0].size)]

    def cross(a, b):
        return (has_m[a] & has_n[b]) | (has_n[a] & has_m[b])

    if join is not None:  # the same pairs as the filtered join (the filter is per pair)
        ok = cross(join.u, join.v)
        u, v, jac = join.u[ok], join.v[ok], join.jac[ok]
    else:
        u, v, jac = similar_pairs(uniq, jaccard, keep=cross)
    a_list += [u, v]  # member side a, non-member side b, both orientations
    b_list += [v, u]
    v_list += [jac, jac]
    a, b, val = np.concatenate(a_list), np.concatenate(b_list), np.concatenate(v_list)
    ok = has_m[a] & has_n[b]
    a, b, val = a[ok], b[ok], val[ok]
    # expand each unique pair to every member copy x every non-member copy
    cm = m_off[a + 1] - m_off[a]
    cn = n_off[b + 1] - n_off[b]
    rep = cm * cn
    k = _ragged_arange(rep)
    cn_r = np.repeat(cn, rep)
    i = m_pos[np.repeat(m_off[a], rep) + k // cn_r]
    j = n_pos[np.repeat(n_off[b], rep) + k % cn_r]
    vals = np.repeat(val, rep)
    o = np.lexsort((j, i))
    return list(zip(i[o].tolist(), j[o].tolist(), vals[o].tolist(), strict=True))


def duplicate_groups(
    texts: list[str],
    jaccard: float = NEAR_DUP_JACCARD,
    join: Join | None = None,
    positions: np.ndarray | None = None,
) -> np.ndarray:
    """A group id per text: texts joined by a chain of near-duplicates (or equal
    normalised texts) share one. The blind classifier's folds keep each group together,
    or a text's twin in the training folds would score it by memory, not by shift.
    ``join`` (a :class:`Join` at ``jaccard``) and ``positions``: ``texts`` are the joined
    texts at ``positions``; their pairs are read from the join (no second join), and the
    ids are those the texts' own join gives (nodes numbered as there)."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    if join is None:
        uniq, uid = _unique_texts(normalise_all(texts))
        u, v, _ = similar_pairs(uniq, jaccard)
    else:
        positions = np.asarray(positions, dtype=np.int64)
        if join.jaccard != jaccard or positions.size != len(texts):
            raise ValueError("the join is not of these texts at this Jaccard threshold")
        uniq, uid = _unique_texts([join.uniq[k] for k in join.uid[positions]])
        node = np.full(len(join.uniq), -1, dtype=np.int64)  # joined distinct text -> ours
        node[join.uid[positions]] = uid
        ok = (node[join.u] >= 0) & (node[join.v] >= 0)
        u, v = node[join.u[ok]], node[join.v[ok]]
    graph = coo_matrix((np.ones(u.size), (u, v)), shape=(len(uniq), len(uniq)))
    _, comp = connected_components(graph, directed=False)
    return comp[uid]


# --------------------------------------------------------------------------- #
# Blind baseline: cross-fitted kernel ridge and its label-permutation test
# --------------------------------------------------------------------------- #
def _dense_features(texts: list[str]) -> np.ndarray:
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
_DENSE_BLOCK = 2048


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
    for j in range(0, common.size, _DENSE_BLOCK):
        sl = slice(j, j + _DENSE_BLOCK)
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
    dense = _dense_features(texts)
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


def _user_counts(y: np.ndarray, users, clusters: np.ndarray) -> dict[str, Any]:
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


@dataclass(frozen=True)
class SplitCheck:
    """Settings of the split check (small estimator object; :meth:`run` returns the dict
    stored in ``run["split_check"]``)."""

    folds: int = 5
    confidence: float = SHIFT_CONFIDENCE
    jaccard: float = NEAR_DUP_JACCARD
    seed: int = 0
    aggregate_only: bool = False
    families: bool = True
    permutations: int = PERMUTATIONS

    def __post_init__(self) -> None:
        if self.permutations < 19:
            raise ValueError(f"permutations must be at least 19, got {self.permutations}")
        if self.folds < 2:
            raise ValueError(f"split check folds must be at least 2, got {self.folds}")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {self.confidence}")
        if not 0 < self.jaccard <= 1:
            raise ValueError(f"near-duplicate Jaccard must be in (0, 1], got {self.jaccard}")

    def duplicates(
        self, members: list[str], nonmembers: list[str], join: Join | None = None
    ) -> dict[str, Any]:
        pairs = near_duplicates(members, nonmembers, self.jaccard, join)
        how = join_description(join.stats if join is not None else JOIN_STATS, self.jaccard)
        drop_m = sorted({i for i, _, _ in pairs})
        drop_n = sorted({j for _, j, _ in pairs})
        out: dict[str, Any] = {
            "criterion": f"equal normalised text, or Jaccard >= {self.jaccard:g} of "
            f"character {SHINGLE}-gram shingles ({how['text']})",
            "join": how,
            "pairs": len(pairs),
            "exact_pairs": sum(1 for *_, v in pairs if v >= 1.0),
            "members_removed": len(drop_m),
            "nonmembers_removed": len(drop_n),
            "member_index": drop_m,
            "nonmember_index": drop_n,
        }
        if not self.aggregate_only:
            out["examples"] = [
                {
                    "member": members[i][:EXAMPLE_CHARS],
                    "nonmember": nonmembers[j][:EXAMPLE_CHARS],
                    "jaccard": round(v, 4),
                }
                for i, j, v in pairs[:MAX_EXAMPLES]
            ]
        return out

    def blind(
        self,
        members: list[str],
        nonmembers: list[str],
        join: Join | None = None,
        positions: np.ndarray | None = None,
        users=None,
    ) -> tuple[dict, np.ndarray]:
        """Blind AUC with its permutation p-value and interval (and per-family AUCs) on
        members + non-members; also the out-of-fold scores of the combined classifier, in
        that order (``nan`` where subsampled out). ``join`` / ``positions``: a
        :class:`Join` holding these texts at ``positions`` (members then non-members), for
        their near-duplicate groups. ``users``: one user id per text (same order); the
        units are then users (:func:`user_clusters` folds, :func:`user_permutations`,
        :func:`sample_users`)."""
        texts = list(members) + list(nonmembers)
        y = np.r_[np.ones(len(members), int), np.zeros(len(nonmembers), int)]
        rng = np.random.default_rng(self.seed)
        keep = np.arange(len(texts))
        sampled = False
        if users is not None:
            users = list(users)
            if len(users) != len(texts):
                raise ValueError(f"{len(users)} user ids for {len(texts)} texts")
            chosen = sample_users(y, users, MAX_BLIND_PER_CLASS, rng)
            if chosen is not None:
                keep, sampled = chosen, True
        else:
            for cls in (1, 0):
                idx = np.flatnonzero(y == cls)
                if idx.size > MAX_BLIND_PER_CLASS:
                    drop = rng.choice(idx, idx.size - MAX_BLIND_PER_CLASS, replace=False)
                    keep = np.setdiff1d(keep, drop)
                    sampled = True
        sub = [texts[i] for i in keep]
        ys = y[keep]
        result: dict[str, Any] = {"n_members": int(ys.sum()), "n_nonmembers": int((1 - ys).sum())}
        full = np.full(len(texts), np.nan)
        fams = FAMILIES if self.families else {"combined": FAMILIES["combined"]}
        if join is not None:
            groups = duplicate_groups(sub, self.jaccard, join, np.asarray(positions)[keep])
        else:
            groups = duplicate_groups(sub, self.jaccard)
        sub_users = None
        if users is not None:
            sub_users = [users[i] for i in keep]
            groups = user_clusters(sub_users, groups)
            result.update(_user_counts(ys, sub_users, groups))
        fold_id = text_folds(sub, groups, self.folds, self.seed)
        scores, h = cross_fit(sub, fold_id, ys, fams, "combined")
        full[keep] = scores["combined"]
        perm = permutation_test(
            h,
            ys,
            groups,
            self.permutations,
            self.seed,
            confidence=self.confidence,
            users=sub_users,
        )
        dl = delong_auc(scores["combined"], ys, self.confidence)
        # the interval inverts the permutation test under a shift of the AUC: its half-
        # widths are the distances from 0.5 to the relabelled AUCs' (1 -+ c) / 2
        # quantiles, so under H0 it misses 0.5 with probability <= 1 - c whatever the
        # texts' clusters (Ojala and Garriga 2010); never narrower than DeLong's z SE
        # (which assumes independent texts and one fixed classifier)
        auc = perm["value"]
        lo, hi = blind_interval(
            auc, perm["null_q_low"], perm["null_q_high"], dl["se"], self.confidence
        )
        result["auc"] = {
            "value": auc,
            "ci_low": lo,
            "ci_high": hi,
            "se": max(perm["null_sd"], dl["se"]),
            "null_q_low": perm["null_q_low"],
            "null_q_high": perm["null_q_high"],
            "p_value": perm["p_value"],
            "null_mean": perm["null_mean"],
            "null_sd": perm["null_sd"],
            "delong_se": dl["se"],
            "permutations": perm["permutations"],
        }
        result["detectable_auc"] = round(detectable_auc(perm["null_sd"], self.confidence), 4)
        result["families"] = {
            name: round(delong_auc(s, ys, self.confidence)["value"], 4)
            for name, s in scores.items()
            if name != "combined"
        }
        result["subsampled"] = sampled
        return result, full

    def run(
        self,
        members: list[str],
        nonmembers: list[str],
        dedupe: bool = True,
        users: list[str] | None = None,
    ) -> tuple[dict[str, Any], np.ndarray | None]:
        """The split check of two text lists: near-duplicates (counted, and removed when
        ``dedupe``) then the blind baseline on what is left. Returns the results dict and
        the out-of-fold blind scores of the kept members then kept non-members.

        ``users``: one user id per text, members then non-members in the order of the
        texts (``len(members) + len(nonmembers)`` ids; any hashable id, compared by
        equality). Every user must be on one side (a ``ValueError`` names how many are on
        both), with at least 2 users a side. The unit is then the user: the folds never
        split a user (nor a near-duplicate group: users sharing a near-duplicate text are
        one cluster), the permutation test permutes users' labels (H0 "users were
        assigned to the sides at random", :func:`user_permutations`), the sub-sample above
        ``MAX_BLIND_PER_CLASS`` draws whole users (:func:`sample_users`), and the record
        states the unit (``unit``, ``users``, the blind part's user counts). Cross-set
        near-duplicates are found and removed as without users, also when the two texts
        are two users' texts. ``None``: texts are the units (results as before)."""
        if len(members) < 2 or len(nonmembers) < 2:
            raise ValueError(
                "the split check needs at least 2 members and 2 non-members, got "
                f"{len(members)} and {len(nonmembers)}"
            )
        if users is not None:
            users = check_users(users, len(members), len(nonmembers))
        # Without sub-sampling the blind baseline groups the very texts the near-duplicate
        # pass joins (less the removed ones): join them once, not twice (at
        # 1,600-character texts the join is most of the split check's cost).
        join = None
        if len(members) <= MAX_BLIND_PER_CLASS and len(nonmembers) <= MAX_BLIND_PER_CLASS:
            join = Join(list(members) + list(nonmembers), self.jaccard)
        dups = self.duplicates(members, nonmembers, join)
        keep_m, keep_n = list(range(len(members))), list(range(len(nonmembers)))
        if dedupe:
            dm, dn = set(dups["member_index"]), set(dups["nonmember_index"])
            keep_m = [i for i in keep_m if i not in dm]
            keep_n = [j for j in keep_n if j not in dn]
        kept_users = None
        if users is not None:
            nm = len(members)
            dups["member_users_involved"] = len({users[i] for i in dups["member_index"]})
            dups["nonmember_users_involved"] = len({users[nm + j] for j in dups["nonmember_index"]})
            kept_users = [users[i] for i in keep_m] + [users[nm + j] for j in keep_n]
        out: dict[str, Any] = {
            "method": "cross-fitted kernel ridge (word 1-2-gram and char 2-4-gram TF-IDF, "
            f"length, number and date tokens; pre-specified block weights), {self.folds} "
            f"label-free folds; label-permutation test ({self.permutations} relabellings): "
            f"split-shifted when the one-sided p <= {(1 - self.confidence) / 2:g} and the "
            f"{100 * self.confidence:g}% interval (the same test inverted: relabelled AUC "
            "quantiles, each half-width at least DeLong's z SE) lies above 0.5",
            "confidence": self.confidence,
            "difference_confidence": DIFFERENCE_CONFIDENCE,
            "duplicates": dups,
            "removed_from_attack_set": bool(dedupe),
            "advice": ADVICE,
        }
        if users is not None:
            nm = len(members)
            out["method"] += (
                "; users as units: folds never split a user (users sharing a near-duplicate "
                "text are one cluster), the relabellings permute whole users' labels among "
                "clusters of as many users (number of member users kept)"
            )
            out["unit"] = "user"
            out["users"] = {
                "members": len(set(users[:nm])),
                "nonmembers": len(set(users[nm:])),
            }
        left_m = len(keep_m) if kept_users is None else len(set(kept_users[: len(keep_m)]))
        left_n = len(keep_n) if kept_users is None else len(set(kept_users[len(keep_m) :]))
        if len(keep_m) < 2 or len(keep_n) < 2 or left_m < 2 or left_n < 2:
            out.update(status="not-measured", shifted=None, blind={})
            out["reason"] = (
                "fewer than 2 members or non-members left after removing duplicates"
                if kept_users is None
                else "fewer than 2 member or non-member users left after removing duplicates"
            )
            return out, None
        blind, scores = self.blind(
            [members[i] for i in keep_m],
            [nonmembers[j] for j in keep_n],
            join,
            np.r_[np.asarray(keep_m, np.int64), len(members) + np.asarray(keep_n, np.int64)],
            users=kept_users,
        )
        out["blind"] = blind
        out["shifted"] = is_shifted(blind["auc"], self.confidence)
        out["status"] = "shifted" if out["shifted"] else "ok"
        out["text"] = split_text(out)
        return out, scores


def check_users(users, n_members: int, n_nonmembers: int) -> list:
    """The user ids as a list, after the checks :meth:`SplitCheck.run` needs: one id per
    text, no user on both sides, at least 2 users a side (``ValueError`` otherwise)."""
    users = list(users)
    if len(users) != n_members + n_nonmembers:
        raise ValueError(
            f"{len(users)} user ids for {n_members} members and {n_nonmembers} non-members "
            "(one id per text, members first)"
        )
    if any(u is None for u in users):
        raise ValueError(f"{sum(u is None for u in users)} text(s) have no user id")
    m, n = set(users[:n_members]), set(users[n_members:])
    both = m & n
    if both:
        raise ValueError(
            f"{len(both)} of {len(m | n)} users have texts on both sides (e.g. "
            f"{sorted(map(str, both))[0]!r}); every user must be a member or a non-member"
        )
    if len(m) < 2 or len(n) < 2:
        raise ValueError(
            "the split check with users as units needs at least 2 member users and 2 "
            f"non-member users, got {len(m)} and {len(n)}"
        )
    return users


def split_text(check: dict[str, Any]) -> str:
    """One plain-language paragraph on the split check (for the report and the verdict)."""
    blind = check.get("blind") or {}
    auc = blind.get("auc") or {}
    d = check.get("duplicates") or {}
    parts = []
    if auc:
        conf = check.get("confidence")
        level = f"{100 * conf:g}% interval; " if isinstance(conf, int | float) else ""
        head = (
            f"A classifier that never sees the model tells members from non-members with "
            f"blind AUC {auc['value']:.3f} [{auc['ci_low']:.3f}, {auc['ci_high']:.3f}] "
            f"({level}{_side(blind, 'member')}, {_side(blind, 'nonmember')}"
            + (
                f"; permutation p = {auc['p_value']:.3g}"
                + (" with users as the units" if "n_member_users" in blind else "")
                if isinstance(auc.get("p_value"), int | float)
                else ""
            )
            + ")"
        )
        if check.get("shifted"):
            head += (
                ": the two sets differ in their text itself, so the membership attacks "
                "measure that difference as well as any memorisation."
            )
        else:
            head += ": not significantly above chance, so no shift between the sets was found"
            det = blind.get("detectable_auc")
            head += (
                f" (on this many texts the check detects a blind AUC of {det:.2f} or more "
                "with 80% power)."
                if isinstance(det, int | float)
                else "."
            )
        parts.append(head)
    if d.get("pairs"):
        parts.append(
            f"{d['pairs']} near-duplicate member/non-member pair(s) found "
            f"({d.get('exact_pairs', 0)} identical after normalising); "
            f"{d.get('members_removed', 0)} member(s) and {d.get('nonmembers_removed', 0)} "
            "non-member(s) were removed from the attack set."
        )
    return " ".join(parts)


def _side(blind: dict[str, Any], side: str) -> str:
    """``"40 members"``, or ``"40 members of 12 users"`` when users were the units."""
    label = "members" if side == "member" else "non-members"
    out = f"{blind.get(f'n_{side}s')} {label}"
    if f"n_{side}_users" in blind:
        out += f" of {blind[f'n_{side}_users']} users"
    return out


def compare_attacks(
    check: dict[str, Any],
    attacks: list[dict[str, Any]],
    blind: np.ndarray,
    users: list[str] | None = None,
) -> list[dict[str, Any]]:
    """Each ``ok`` attack's AUC beside the blind AUC on the same examples, with the paired
    DeLong interval of (attack AUC - blind AUC). ``blind`` holds the blind out-of-fold
    score of every example of the attack set, in its order (members then non-members, as
    the attack records store them; ``nan`` where the blind classifier did not score it).
    ``users`` (one per example, same order): the difference's interval treats users as
    clusters (:func:`clustered_difference`)."""
    conf = float(check.get("difference_confidence", DIFFERENCE_CONFIDENCE))
    blind = np.asarray(blind, dtype=np.float64)
    rows = []
    for att in attacks:
        ex = att.get("examples") if isinstance(att, dict) else None
        if att.get("status") != "ok" or not isinstance(ex, dict):
            continue
        scores = np.asarray(ex.get("scores", []), dtype=np.float64)
        mem = np.asarray(ex.get("members", []))
        if scores.size != blind.size:
            continue  # not scored on this attack set
        keep = np.isfinite(blind) & np.isfinite(scores)
        m = mem[keep]
        if keep.sum() < 4 or m.min() == m.max():
            continue
        if users is not None and len(users) == keep.size:
            kept_users = [g for g, k in zip(users, keep, strict=True) if k]
            diff = clustered_difference(scores[keep], blind[keep], m, kept_users, conf)
        else:
            diff = delong_difference(scores[keep], blind[keep], m, conf)
        rows.append(
            {
                "attack": att.get("attack"),
                "auc": delong_auc(scores[keep], m, conf)["value"],
                "blind_auc": delong_auc(blind[keep], m, conf)["value"],
                "difference": {k: diff[k] for k in ("value", "ci_low", "ci_high")},
                "n": int(keep.sum()),
            }
        )
    return rows
