"""Scores sorted once: the ROC counts every metric, CI and eps bound reads.

Conventions (shared by :mod:`privacy_audit.stats.metrics` and :mod:`privacy_audit.stats.epsilon_bounds`): ``scores``
is a 1-D array of finite reals, HIGHER = more likely a member; ``members`` holds 0/1 or
booleans, 1 / ``True`` = member (the positive class); a threshold ``t`` predicts
"member" iff ``score >= t``.

:class:`SortedScores` sorts once (decreasing score) and keeps, per tie group, the
number of members and non-members; every point statistic is a function of the
cumulative counts at the ends of the tie groups.  :func:`poisson_bootstrap` resamples
by drawing a weight per example on that fixed order (no per-resample sort): cumulative
sums of the weights are the resampled ROC counts.
"""

from __future__ import annotations

import contextlib
import contextvars

import numpy as np

__all__ = ["SortedScores", "poisson_bootstrap"]

#: Most bootstrap resamples a config (or ``score --bootstrap``) may ask for: the resampling
#: error of an interval end shrinks as 1/sqrt(resamples), so beyond this more only costs
#: time and memory (10^12 ran out of memory after training; 10^7 ran with no output).
#: (Here rather than in audit/config.py so that ``score`` checks it without loading torch.)
MAX_BOOTSTRAP = 100_000

# Upper limit on elements per work array of the bootstrap (resamples x examples):
# ~4e6 keeps each int32 array near 16 MB whatever n_boot is.
CHUNK_ELEMENTS = 4_000_000


# ---------------------------------------------------------------------------
# Input validation
# ---------------------------------------------------------------------------


def validate_scores(scores, members) -> tuple[np.ndarray, np.ndarray]:
    """Return ``(scores, members)`` as float64 and bool arrays, or raise ValueError."""
    s = np.asarray(scores)
    m = np.asarray(members)
    if s.ndim != 1 or m.ndim != 1:
        raise ValueError(f"scores and members must be 1-D arrays (got {s.ndim}-D and {m.ndim}-D).")
    if s.shape[0] != m.shape[0]:
        raise ValueError(
            f"scores and members must have the same length (got {s.shape[0]} and {m.shape[0]})."
        )
    if s.shape[0] == 0:
        raise ValueError("scores and members must not be empty.")
    if not (
        s.dtype == bool or np.issubdtype(s.dtype, np.integer) or np.issubdtype(s.dtype, np.floating)
    ):
        raise ValueError(f"scores must be real numbers (got dtype {s.dtype}).")
    s = s.astype(np.float64)
    if not np.all(np.isfinite(s)):
        raise ValueError("scores must be finite; found NaN or infinite values.")
    if m.dtype == bool:
        mb = m
    else:
        if not (np.issubdtype(m.dtype, np.integer) or np.issubdtype(m.dtype, np.floating)):
            raise ValueError(f"members must hold 0/1 or boolean values (got dtype {m.dtype}).")
        if not np.all((m == 0) | (m == 1)):
            raise ValueError("members must hold only 0/1 or boolean values.")
        mb = m == 1
    n_in = int(mb.sum())
    if n_in == 0 or n_in == mb.shape[0]:
        present = "members" if n_in else "non-members"
        raise ValueError(f"members must contain both classes, but only {present} are present.")
    return s, mb


def check_confidence(confidence) -> float:
    c = float(confidence)
    if not (0.0 < c < 1.0):
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}.")
    return c


def check_n_boot(n_boot) -> int:
    if isinstance(n_boot, bool) or int(n_boot) != n_boot or int(n_boot) < 1:
        raise ValueError(f"n_boot must be a positive integer, got {n_boot!r}.")
    return int(n_boot)


def check_split_sizes(n_in: int, n_out: int) -> None:
    if n_in < 2 or n_out < 2:
        raise ValueError(
            "a stratified split needs at least 2 members and 2 non-members "
            f"(got {n_in} and {n_out})."
        )


def stratified_split(members: np.ndarray, seed) -> tuple[np.ndarray, np.ndarray]:
    """Seeded stratified random halves; returns index arrays ``(half_a, half_b)``.

    Half A gets ``floor(k / 2)`` of each class (k = class size), half B the rest,
    so half B (the one used for counting) is never the smaller one.
    """
    rng = np.random.default_rng(seed)
    idx_in = rng.permutation(np.flatnonzero(members))
    idx_out = rng.permutation(np.flatnonzero(~members))
    h_in, h_out = idx_in.size // 2, idx_out.size // 2
    half_a = np.concatenate([idx_in[:h_in], idx_out[:h_out]])
    half_b = np.concatenate([idx_in[h_in:], idx_out[h_out:]])
    return half_a, half_b


# ---------------------------------------------------------------------------
# ROC counts (rows of cumulative counts; one row per data set or resample)
# ---------------------------------------------------------------------------


def sorted_counts(
    sorted_scores: np.ndarray, sorted_labels: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cumulative (TP, FP) per position of rows sorted by decreasing score.

    Inputs are 2-D ``(rows, n)``.  Returns ``(tp, fp, ends)`` where ``tp`` and
    ``fp`` hold, at every position, the counts obtained with the threshold
    equal to that position's score (so tied scores share the counts of the
    end of their tie group), and ``ends`` marks the last position of each
    tie group.  The ROC points of a row are its ``(fp, tp)`` pairs at
    ``ends``, preceded by ``(0, 0)``; repeated pairs at non-end positions are
    harmless duplicates for max/area computations.
    """
    rows, n = sorted_scores.shape
    tp = np.cumsum(sorted_labels, axis=1, dtype=np.int64)
    fp = np.arange(1, n + 1, dtype=np.int64) - tp
    ends = np.empty((rows, n), dtype=bool)
    ends[:, :-1] = sorted_scores[:, :-1] != sorted_scores[:, 1:]
    ends[:, -1] = True
    if not ends.all():
        # For each position, the index of the end of its tie group.
        pos = np.where(ends, np.arange(n), n - 1)
        nxt = np.minimum.accumulate(pos[:, ::-1], axis=1)[:, ::-1]
        tp = np.take_along_axis(tp, nxt, axis=1)
        fp = np.take_along_axis(fp, nxt, axis=1)
    return tp, fp, ends


def auc_from_counts(tp: np.ndarray, fp: np.ndarray, n_in, n_out):
    """Trapezoidal area under (fp, tp) rows that start implicitly at (0, 0)."""
    zeros = np.zeros((tp.shape[0], 1), dtype=tp.dtype)
    tp0 = np.concatenate([zeros, tp], axis=1)
    fp0 = np.concatenate([zeros, fp], axis=1)
    area2 = np.sum(np.diff(fp0, axis=1) * (tp0[:, 1:] + tp0[:, :-1]), axis=1)
    return area2 / (2.0 * n_in * n_out)


def tpr_at_fpr_from_counts(tp, fp, n_in, n_out, max_fpr: float):
    """Largest TP among positions with ``fp <= max_fpr * n_out``, over ``n_in``.

    ``fp`` rows are nondecreasing, so the largest allowed position is found by a
    binary search per row (counts are compared with the product, not a quotient, so
    FPR exactly at ``max_fpr`` is allowed without rounding trouble).
    """
    tp = np.asarray(tp)
    fp = np.asarray(fp)
    n_in = np.broadcast_to(np.asarray(n_in, dtype=np.float64), (tp.shape[0],))
    n_out = np.broadcast_to(np.asarray(n_out, dtype=np.float64), (tp.shape[0],))
    out = np.empty(tp.shape[0])
    for i in range(tp.shape[0]):
        k = int(np.searchsorted(fp[i], max_fpr * n_out[i] * (1 + 1e-12), side="right"))
        out[i] = tp[i, k - 1] / n_in[i] if k > 0 else 0.0
    return out


def advantage_from_counts(tp, fp, n_in, n_out):
    n_in = np.asarray(n_in, dtype=np.float64).reshape(-1, 1)
    n_out = np.asarray(n_out, dtype=np.float64).reshape(-1, 1)
    return np.maximum(np.max(tp / n_in - fp / n_out, axis=1), 0.0)


def best_threshold(sorted_scores, tp, fp, ends, n_in: int, n_out: int):
    """Threshold maximising TPR - FPR (= balanced accuracy) for each sorted row.

    The chosen threshold is the midpoint between the score of the best tie
    group and the next lower distinct score (``-inf`` when the best point is
    "everything is a member", ``+inf`` when no point beats (0, 0)).
    """
    rows, n = sorted_scores.shape
    gain = np.where(ends, tp / n_in - fp / n_out, -np.inf)
    best = np.argmax(gain, axis=1)
    r = np.arange(rows)
    best_gain = gain[r, best]
    here = sorted_scores[r, best]
    nxt_idx = np.minimum(best + 1, n - 1)
    below = np.where(best + 1 < n, sorted_scores[r, nxt_idx], -np.inf)
    thr = np.where(np.isfinite(below), here / 2.0 + below / 2.0, -np.inf)
    # The starting point (0, 0) has gain 0; keep it when nothing beats it.
    return np.where(best_gain > 0, thr, np.inf)


def roc_counts_1d(s: np.ndarray, m: np.ndarray):
    order = np.argsort(-s, kind="stable")
    ss = s[order][None, :]
    tp, fp, ends = sorted_counts(ss, m[order][None, :])
    return ss[0], tp[0], fp[0], ends[0]


class SortedScores:
    """Scores and membership sorted once by decreasing score, with per-tie-group counts.

    Attributes: ``scores`` (sorted, decreasing), ``labels`` (member flags in that
    order), ``group_starts`` (first position of each tie group), ``tp`` / ``fp``
    (members / non-members scoring >= each group's score), ``group_scores``,
    ``n_in`` / ``n_out``.  Statistics follow the module conventions.
    """

    def __init__(self, scores, members):
        s, m = validate_scores(scores, members)
        order = np.argsort(-s, kind="stable")
        self.scores = s[order]
        self.labels = m[order]
        self.n_in, self.n_out = int(m.sum()), int((~m).sum())
        ss, tp, fp, ends = self.scores, *sorted_counts(self.scores[None], self.labels[None])
        self.ends = ends[0]
        self.tp = tp[0][self.ends]
        self.fp = fp[0][self.ends]
        self.group_scores = ss[self.ends]
        self.group_starts = np.concatenate([[0], np.flatnonzero(self.ends)[:-1] + 1])
        self.has_ties = bool(self.tp.size < self.scores.size)

    def auc(self) -> float:
        return float(auc_from_counts(self.tp[None], self.fp[None], self.n_in, self.n_out)[0])

    def tpr_at_fpr(self, max_fpr: float) -> float:
        tp, fp = self.tp[None], self.fp[None]
        return float(tpr_at_fpr_from_counts(tp, fp, self.n_in, self.n_out, max_fpr)[0])

    def advantage(self) -> float:
        return float(advantage_from_counts(self.tp[None], self.fp[None], self.n_in, self.n_out)[0])


# ---------------------------------------------------------------------------
# Poisson bootstrap on the sorted order
# ---------------------------------------------------------------------------


def _poisson_table(bits: int = 16) -> np.ndarray:
    """Lookup table mapping a uniform ``bits``-bit integer to a Poisson(1) count.

    Each count k gets ``round(2^bits P[Poisson(1) <= k]) - round(2^bits P[.. <= k-1])``
    table entries, so every probability is Poisson(1)'s to within ``2^-bits``
    (1.5e-5): the quantisation is far below the bootstrap's own Monte-Carlo error.
    """
    size = 1 << bits
    k = np.arange(16)
    pmf = np.exp(-1.0) / np.cumprod(np.r_[1.0, np.arange(1, 16)])
    edges = np.round(np.cumsum(pmf) * size).astype(np.int64)
    edges[-1] = size
    return np.repeat(k, np.diff(np.r_[0, edges])).astype(np.int32)


POISSON = _poisson_table()
_POISSON8 = POISSON.astype(np.int8)


#: Examples per block of :func:`advantage_bootstrap`'s two-level maximum.
_BLOCK = 64


def advantage_bootstrap(
    labels: np.ndarray, n_boot: int, rng, ends: np.ndarray | None = None
) -> np.ndarray:
    """Poisson-bootstrap replicates of the advantage for ONE data set, ties allowed.

    Same resamples as :func:`poisson_bootstrap` with the same ``rng`` (the same weights
    are drawn) and the same values, computed in two levels: the weights are summed per
    block of ``_BLOCK`` consecutive examples; at block ends TPR - FPR is exact, and
    inside block b it is at most ``TP(end of b) / N_in - FP(end of b - 1) / N_out``.
    Only blocks whose bound beats the best block end are scanned example by example,
    so a resample costs about one pass over its weights.  ``labels``: member flags in
    decreasing-score order.  ``ends``: ``True`` at the last position of each tie group
    (``None``: all scores distinct); tied examples move together, so TPR - FPR is only
    read at group ends (the block bound still holds: it bounds every position of the
    block), and blocks without a group end are never scanned.
    """
    lab = np.asarray(labels, dtype=bool)
    n = lab.size
    nb = -(-n // _BLOCK)
    lab8 = np.zeros(nb * _BLOCK, dtype=np.int8)
    lab8[:n] = lab
    if ends is None:
        end_pad = np.ones(nb * _BLOCK, dtype=bool)
    else:
        end_pad = np.zeros(nb * _BLOCK, dtype=bool)
        end_pad[:n] = np.asarray(ends, dtype=bool)
        end_pad[n - 1] = True
    block_end_ok = end_pad[_BLOCK - 1 :: _BLOCK].copy()
    block_end_ok[-1] = True  # the padding carries the last example's counts
    block_has_end = end_pad.reshape(nb, _BLOCK).any(axis=1)
    rows = int(max(1, min(n_boot, CHUNK_ELEMENTS // max(n, 1))))
    out = np.empty(n_boot)
    done = 0
    w = np.zeros((rows, nb * _BLOCK), dtype=np.int8)
    while done < n_boot:
        k = min(rows, n_boot - done)
        w[:k, :n] = _POISSON8[rng.integers(0, POISSON.size, size=(k, n), dtype=np.uint16)]
        wk = w[:k]
        wm = wk * lab8
        tot = np.cumsum(wk.reshape(k, nb, _BLOCK).sum(axis=2, dtype=np.int32), axis=1)
        tp_end = np.cumsum(wm.reshape(k, nb, _BLOCK).sum(axis=2, dtype=np.int32), axis=1)
        fp_end = tot - tp_end
        n_in = tp_end[:, -1].astype(np.float64)
        n_out = fp_end[:, -1].astype(np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            inv_in, inv_out = 1.0 / n_in[:, None], 1.0 / n_out[:, None]
            at_end = np.where(block_end_ok, tp_end * inv_in - fp_end * inv_out, -np.inf)
            fp_start = np.concatenate([np.zeros((k, 1), dtype=np.int32), fp_end[:, :-1]], axis=1)
            bound = np.where(block_has_end, tp_end * inv_in - fp_start * inv_out, -np.inf)
        best = np.maximum(at_end.max(axis=1), 0.0)
        for i in range(k):
            if n_in[i] == 0 or n_out[i] == 0:
                out[done + i] = np.nan
                continue
            for b in np.flatnonzero(bound[i] > best[i]):
                lo = b * _BLOCK
                tp0 = tp_end[i, b - 1] if b else 0
                fp0 = fp_start[i, b]
                seg_m = wm[i, lo : lo + _BLOCK].astype(np.int32)
                seg_n = wk[i, lo : lo + _BLOCK] - seg_m
                g = (tp0 + np.cumsum(seg_m)) * inv_in[i, 0] - (fp0 + np.cumsum(seg_n)) * inv_out[
                    i, 0
                ]
                best[i] = max(best[i], float(g[end_pad[lo : lo + _BLOCK]].max()))
            out[done + i] = best[i]
        done += k
        _report(done, n_boot)
    return out


#: A callback ``(done, total)`` that long bootstraps report to (set by
#: :func:`bootstrap_progress`; none by default, so library calls stay silent).
_PROGRESS: contextvars.ContextVar = contextvars.ContextVar("bootstrap_progress", default=None)


@contextlib.contextmanager
def bootstrap_progress(callback):
    """Within the block, :func:`poisson_bootstrap` calls ``callback(done, total)`` after
    each chunk of resamples (the runner prints a line per tenth, for terminals and CI logs)."""
    token = _PROGRESS.set(callback)
    try:
        yield
    finally:
        _PROGRESS.reset(token)


def _report(done: int, total: int) -> None:
    if (report := _PROGRESS.get()) is not None:
        report(done, total)


def poisson_bootstrap(
    labels: np.ndarray,
    n_boot: int,
    rng,
    fprs=(),
    group_starts: np.ndarray | None = None,
    want_auc: bool = True,
    want_advantage: bool = True,
) -> dict[str, np.ndarray]:
    """Poisson-bootstrap replicates of AUC, TPR at FPRs and advantage; no sort per resample.

    ``labels`` are member flags in decreasing-score order: shape ``(n,)`` for one data
    set or ``(d, n)`` for d data sets (each gets ``n_boot`` resamples; results are
    ``(d, n_boot)``).  Each resample gives every example an independent Poisson(1)
    weight (Hanley & MacGibbon 2006; Chamandy et al. 2012): the resampled ROC counts
    are cumulative sums of the weights along the fixed order, summed within tie groups
    (``group_starts``, shared by all rows) so tied scores still move together.  Rates
    are divided by the resample's own class totals.  Weights come from
    :func:`_poisson_table`.  Work is chunked to ~``CHUNK_ELEMENTS`` elements, so
    memory does not grow with ``n_boot``.  A resample with no member or no non-member
    (only possible for tiny classes) yields NaN.
    """
    one = np.ndim(labels) == 1
    lab = np.atleast_2d(np.asarray(labels, dtype=bool))
    d, n = lab.shape
    total = d * n_boot
    rows = int(max(1, min(total, CHUNK_ELEMENTS // max(n, 1))))
    out = {"auc": [], "advantage": [], **{f"tpr_at_fpr_{x:g}": [] for x in fprs}}
    done = 0
    while done < total:
        k = min(rows, total - done)
        which = (np.arange(done, done + k) // n_boot) % d
        w = POISSON[rng.integers(0, POISSON.size, size=(k, n), dtype=np.uint16)]
        lk = lab[which]
        wm = np.where(lk, w, 0)
        wn = w - wm
        if group_starts is not None:
            wm = np.add.reduceat(wm, group_starts, axis=1)
            wn = np.add.reduceat(wn, group_starts, axis=1)
        tp = np.cumsum(wm, axis=1)
        fp = np.cumsum(wn, axis=1)
        n_in = tp[:, -1].astype(np.float64)
        n_out = fp[:, -1].astype(np.float64)
        bad = (n_in == 0) | (n_out == 0)
        n_in[bad] = np.nan
        n_out[bad] = np.nan
        if want_auc:
            # sum over groups of non-member weight x (members strictly above + half the tied)
            s2 = np.einsum("ij,ij->i", wn, 2 * tp - wm, dtype=np.int64)
            out["auc"].append(s2 / (2.0 * n_in * n_out))
        for x in fprs:
            out[f"tpr_at_fpr_{x:g}"].append(tpr_at_fpr_from_counts(tp, fp, n_in, n_out, x))
        if want_advantage:
            out["advantage"].append(advantage_from_counts(tp, fp, n_in, n_out))
        done += k
        _report(done, total)
    shape = (n_boot,) if one else (d, n_boot)
    return {key: np.concatenate(v).reshape(shape) for key, v in out.items() if v}
