"""Near-duplicate texts across the member and non-member sets, and near-duplicate groups.

**Near-duplicates across the sets**: a member and a non-member whose normalised texts
(lower case, collapsed white space) are equal, or whose character 5-gram shingle sets
have Jaccard similarity >= ``jaccard`` (0.8). Found by an exact set-similarity join (no
pair is missed, unlike MinHash LSH), vectorised in numpy blocks of bounded size: a
pigeonhole partition join (hashed groups of shingles per size class; proof in
``partition_candidates``) for low-entropy text such as templates, where even the
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
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privacy_audit.stats.partition_join import (
    MAX_PARTITION_SIZE,
    MIN_PARTITION_JACCARD,
    partition_candidates,
)
from privacy_audit.stats.shingles import (
    BLOCK,
    FREQ_BITS,
    GOLDEN,
    JOIN_STATS,
    SENTINEL,
    Shingles,
    bucket,
    mix64,
    normalise_all,
    pairs_within_runs,
    ragged_arange,
)

#: Near-duplicate threshold on the Jaccard similarity of character 5-gram shingle sets.
NEAR_DUP_JACCARD = 0.8

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


def similar_pairs(
    norm: list[str], jaccard: float = NEAR_DUP_JACCARD, keep=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every pair ``u < v`` of the normalised texts ``norm`` (both at least ``SHINGLE``
    characters) whose shingle sets have Jaccard ``>= jaccard``, as arrays ``(u, v, J)``.

    Exact (no missed pair) while the exact join's estimated cost is within
    ``_EXACT_BUDGET_S`` per text (:func:`_exact_over_budget`); above it the candidates
    come from MinHash LSH (:func:`_lsh_candidates`, each pair at ``J >= jaccard`` missed
    with probability <= :func:`lsh_miss_bound`). Exact candidates come from the partition join
    (:func:`partition_candidates`, at ``jaccard >= MIN_PARTITION_JACCARD``) and, for the
    texts it cannot key in bounded work and at lower thresholds, from the prefix filter
    (:func:`_prefix_candidates`); each filter provably keeps every pair at ``J >=
    jaccard``; ``keep(u, v)`` (a vectorised filter) drops pairs the caller does not want,
    and every candidate left is verified by counting its shared shingles. All in numpy
    blocks of ``BLOCK`` elements: per-text Python work is one ``len`` per text."""
    empty = np.zeros(0, dtype=np.int64)
    table = Shingles(norm)
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


def _exact_over_budget(table: Shingles, which: np.ndarray, jaccard: float) -> dict | None:
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


def _exact_candidates(table: Shingles, which: np.ndarray, jaccard: float, keep=None):
    """``(u, v, size)``: the candidate pairs of the exact join on ``which`` (every pair
    at ``J >= jaccard`` among them) and each text's set size. The partition join, whose
    overflow texts the prefix filter pairs, or the prefix filter alone, whichever
    :func:`_use_partition` says is cheaper."""
    n = len(table.lens)
    if _use_partition(table, which, jaccard):
        JOIN_STATS["join"] = "partition"
        u, v, size, overflow = partition_candidates(table, which, jaccard, keep)
        if overflow.any():  # texts with too many light groups: the prefix filter pairs them
            near = which[size_compatible(size[which], size[overflow], jaccard)]
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
    x = mix64(np.where(distinct, ids, ids[:, :1]))
    sig = np.empty((ids.shape[0], xor.size), dtype=np.uint64)
    h = np.empty_like(x)
    for k in range(xor.size):
        np.bitwise_xor(x, xor[k], out=h)
        np.multiply(h, mult[k], out=h)
        h.min(axis=1, out=sig[:, k])
    return sig


def _lsh_candidates(
    table: Shingles, which: np.ndarray, jaccard: float, keep=None
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
    band_salt = mix64(np.arange(1, bands + 1, dtype=np.uint64) * GOLDEN)
    for rows, ids, distinct in table.key_blocks(which, by_frequency=False):
        size[rows] = distinct.sum(axis=1)
        sig = minhash_signatures(ids, distinct, xor, mult)
        for b in range(bands):
            acc = band_salt[b] ^ sig[:, b * rows_]
            for k in range(1, rows_):
                acc = mix64(acc) ^ sig[:, b * rows_ + k]
            keys[rows, b] = mix64(acc)
    key = keys[which].ravel()
    text = np.repeat(which, bands)
    order = np.argsort(key, kind="stable")
    key, text = key[order], text[order]
    found = [empty]
    for a, b in pairs_within_runs(key):
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


def _use_partition(table: Shingles, which: np.ndarray, jaccard: float) -> bool:
    """Whether the partition join (rather than the prefix filter) pairs these texts.
    Both are exact; this only picks the cheaper. Low-entropy text (few distinct
    characters, templates) makes even the rarest shingles common, so the prefix
    filter's candidates grow as n^2; on ordinary text the rarest shingles are nearly
    unique and the prefix filter is cheaper, while templated parts make large groups of
    equal content. On a seeded sample of ``_CHOOSE_SAMPLE`` texts each join's pairs of
    entries sharing a key are counted; pairs grow as the square of the texts, so the
    sample's counts are scaled by ``(n / sample)^2`` into the cost model ``_COST``."""
    if jaccard < MIN_PARTITION_JACCARD or int(table.count.max()) >= MAX_PARTITION_SIZE:
        return False
    if which.size < _CHOOSE_FROM:
        return True
    rng = np.random.default_rng(0x5EED)
    sample = np.sort(rng.choice(which, _CHOOSE_SAMPLE, replace=False))
    scale = (which.size / sample.size) ** 2
    partition_candidates(table, sample, jaccard)
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


def size_compatible(sizes: np.ndarray, others: np.ndarray, jaccard: float) -> np.ndarray:
    """Which ``sizes`` may reach ``J >= t`` with some size in ``others``: ``t s <= o <=
    s / t`` (``J <= min / max``)."""
    o = np.sort(others)
    lo = np.searchsorted(o, np.ceil(sizes * jaccard - 1e-9), "left")
    return lo < np.searchsorted(o, np.floor(sizes / jaccard + 1e-9), "right")


def _prefix_candidates(
    table: Shingles, which: np.ndarray, jaccard: float, keep=None, must=None
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
    b = bucket(key).astype(np.int64)
    shared = np.bincount(b, minlength=1 << FREQ_BITS)[b] >= 2
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
    # blocks of whole texts (every pair of a text is counted in one block), about BLOCK
    # pairs each: memory stays bounded however many candidates there are
    by_text = np.argsort(text[src], kind="stable")
    tt = text[src][by_text]
    last = np.r_[np.flatnonzero(tt[1:] != tt[:-1]), tt.size - 1]  # a text's last entry
    cum = np.cumsum(partners[by_text])
    found_u, found_v = [empty], [empty]
    start = 0
    while start < by_text.size:
        base = cum[start - 1] if start else 0
        stop = int(np.searchsorted(cum, base + BLOCK, "right"))
        stop = int(last[np.searchsorted(last, max(stop, start + 1) - 1)]) + 1
        q = by_text[start:stop]
        c = partners[q]
        i = np.repeat(src[q], c)
        j = np.repeat(first[q], c) + ragged_arange(c)
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


def _shared_shingles(table: Shingles, u: np.ndarray, v: np.ndarray) -> np.ndarray:
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
    flat = np.r_[np.concatenate(flat), SENTINEL]  # the last entry pads the rows
    width = n_sh[u] + n_sh[v]
    order = np.argsort(width, kind="stable")  # similar widths per block: little padding
    out = np.zeros(u.size, dtype=np.int64)
    i = 0
    while i < order.size:
        w = int(width[order[min(order.size, i + max(1, BLOCK // int(width[order[i]]))) - 1]])
        j = min(order.size, i + max(1, BLOCK // w))
        w = int(width[order[j - 1]])
        k = order[i:j]
        col = np.arange(w)[None, :]
        nu, nv = n_sh[u[k]][:, None], n_sh[v[k]][:, None]
        idx = np.where(col < nu, first[u[k]][:, None] + col, first[v[k]][:, None] + col - nu)
        idx[col >= nu + nv] = flat.size - 1
        row = flat[idx]
        row.sort(axis=1)
        same = (row[:, 1:] == row[:, :-1]) & (row[:, 1:] != SENTINEL)
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
    k = ragged_arange(rep)
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
