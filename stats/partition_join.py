"""The partition join of near-duplicate texts: pigeonhole on hashed groups of shingles
per size class, exact (no pair at Jaccard >= t is missed; the proof is in
:func:`partition_candidates`). Chosen by :mod:`privacy_audit.stats.near_duplicates` for
low-entropy text such as templates, where even the rarest shingles are common and the
prefix filter's candidates grow as n^2."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from privacy_audit.stats.shingles import BLOCK, JOIN_STATS, Shingles, mix64, pairs_within_runs

#: Groups beyond the distance bound: a pair within it has at least ``PART_EXTRA + 1``
#: identical groups (:func:`partition_candidates`).
PART_EXTRA = 2
#: A group of at most this many shingles is *light*: keyed only in ``PART_EXTRA + 1``-
#: subsets of a text's light groups (an empty or one-shingle group alone is shared by
#: too many texts to be a useful key).
_LIGHT = 1
#: Light-group subsets per text and size class at most (C(22, 3)); a text with more is
#: paired by the prefix filter instead.
MAX_LIGHT_KEYS = 1540
#: Below this threshold the groups would be nearly all light (a group holds about
#: t / (1 - t) shingles): the prefix filter is used.
MIN_PARTITION_JACCARD = 0.75
#: Width (largest / smallest size) of a size class of the partition join.
_CLASS_RATIO = 1.25
#: Set sizes below this keep the float64 content sums exact (size x 2^32 < 2^53).
MAX_PARTITION_SIZE = 1 << 20
_LOW32 = np.uint64(0xFFFFFFFF)


def _max_distance(size: np.ndarray, jaccard: float) -> np.ndarray:
    """``floor(a (1 - t) / t)``: the largest ``|A ^ B|`` of a pair at ``J >= t`` whose
    smaller set has ``a`` elements (rounded up past float error: a larger bound only
    adds groups)."""
    return np.floor(np.asarray(size) * (1.0 - jaccard) / jaccard + 1e-6).astype(np.int64)


def size_classes(max_size: int, jaccard: float) -> tuple[np.ndarray, np.ndarray]:
    """Size classes ``[lo_c, lo_{c+1})``, each ``_CLASS_RATIO`` wide, and each class's
    number of groups ``m_c = floor(hi_c (1 - t) / t) + 1 + PART_EXTRA`` (``hi_c`` the
    class's largest size). Narrow classes keep ``m_c`` near what the smallest size needs
    (groups of about t / (1 - t) shingles, few of them light) at the price of keying a
    text under more classes (``log(1 / t) / log(_CLASS_RATIO)`` + 1)."""
    lo = [1]
    while lo[-1] <= max_size:
        lo.append(max(lo[-1] + 1, int(np.floor(lo[-1] * _CLASS_RATIO)) + 1))
    edges = np.asarray(lo, dtype=np.int64)
    return edges, _max_distance(edges[1:] - 1, jaccard) + 1 + PART_EXTRA


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


def partition_candidates(
    table: Shingles, which: np.ndarray, jaccard: float, keep=None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Candidate pairs ``(u < v)`` of the partition join, each text's set size, and the
    texts it could not key (``overflow``: the caller pairs those by the prefix filter).

    **No pair at J >= t is missed** (for the texts not in ``overflow``). Let ``a <= b``
    be the pair's set sizes. ``J = o / (a + b - o) >= t`` gives ``o >= t (a + b) / (1 +
    t)``; since ``o <= a``, ``a >= t b``, and the symmetric difference ``d = a + b - 2 o
    <= (a + b)(1 - t) / (1 + t) <= a (1 - t) / t`` (:func:`_max_distance`, ``D(a)``).
    Sizes fall in classes (:func:`size_classes`); class ``c`` splits the shingle
    universe into ``m_c >= D(a) + 1 + e`` groups (``e = PART_EXTRA``) by a hash of the
    shingle, the same for every text. Each text is keyed under its own class and under
    every class that may hold a smaller partner (sizes ``floor(t s) .. s``), so both
    texts of the pair are keyed under ``c = class(a)``. The ``d`` differing shingles lie
    in at most ``d`` groups, so at least ``m_c - d >= e + 1`` groups ``g`` have ``A & g
    == B & g``. A text emits (1) for each *heavy* group (more than ``_LIGHT`` shingles) a
    key of (class, group, its content), and (2) for each ``(e + 1)``-subset of its *light*
    groups a key of (class, the groups, their contents). If one of the identical groups
    is heavy, both texts emit its key (1); otherwise ``e + 1`` of them are light in both
    and both emit that subset's key (2). Either way the pair shares a key. A text with
    more than ``MAX_LIGHT_KEYS`` subsets in some class emits no subsets there and is
    returned in ``overflow``. Content keys are hashes: a collision adds a candidate,
    never removes one.

    Each shared key makes a candidate, filtered (never dropping a pair at J >= t) by:
    the class is that of the smaller size (each pair is made under one class); ``a >=
    t b``; ``keep``; and the group counts: per group ``|A & g ^ B & g| >= |W_A(g) -
    W_B(g)|`` (shingle counts), and ``>= 2`` when the counts are equal but the content
    sums differ (equal-sized different sets), so the sum over groups of these bounds is
    a lower bound of ``d``, which must not exceed ``(a + b)(1 - t) / (1 + t)``.

    In three steps: :func:`_key_texts` (every text's keys and group vectors),
    :func:`_shared_keys` (the entries of keys two or more texts hold) and
    :func:`_filter_candidates` (the filters above, on every pair sharing a key)."""
    edges, m_of = size_classes(int(table.count[which].max()), jaccard)
    keys = _key_texts(table, which, jaccard, edges, m_of)
    empty = np.zeros(0, dtype=np.int64)
    JOIN_STATS.update(texts=int(which.size), overflow=int(keys.overflow.sum()))
    shared = _shared_keys(keys.entries, keys.text_bits, keys.class_bits)
    JOIN_STATS["shared_keys"] = 0
    if shared is None:
        return empty, empty, keys.size, keys.overflow
    u, v = _filter_candidates(*shared, keys, edges, m_of, jaccard, keep)
    return u, v, keys.size, keys.overflow


class _PartitionKeys(NamedTuple):
    """What :func:`_key_texts` builds: per text its set ``size``, its lowest keyed class
    ``first_cls`` and whether it ``overflow``-ed; the group vectors of every keyed (text,
    class) (``vec_w`` counts, ``vec_s`` content sums; ``off[text, class - first_cls]``
    where its vector starts); the packed key ``entries``, and the bits of the text and
    class fields in them."""

    size: np.ndarray
    first_cls: np.ndarray
    overflow: np.ndarray
    vec_w: np.ndarray
    vec_s: np.ndarray
    off: np.ndarray
    entries: list
    text_bits: int
    class_bits: int


def _pack(key, text, cls, tb: int, cb: int) -> np.ndarray:
    """Each key as one sortable word: class | key bits | text (runs of equal class and
    key), with ``tb`` bits for the text and ``cb`` for the class."""
    return (
        (cls.astype(np.uint64) << np.uint64(64 - cb))
        | ((key >> np.uint64(tb + cb)) << np.uint64(tb))
        | text.astype(np.uint64)
    )


def _key_texts(
    table: Shingles, which: np.ndarray, jaccard: float, edges: np.ndarray, m_of: np.ndarray
) -> _PartitionKeys:
    """Key every text of ``which`` under its own size class and every class that may hold
    a smaller partner (sizes ``floor(t s) .. s``), in blocks of texts: the keys of
    :func:`_class_keys` per class, and the group vectors the count filter reads."""
    n = len(table.lens)
    n_cls = edges.size - 1
    size = np.zeros(n, dtype=np.int64)
    first_cls = np.zeros(n, dtype=np.int64)
    overflow = np.zeros(n, dtype=bool)
    vec_w, vec_s, at = [], [], 0
    tb = max(1, int(n - 1).bit_length())
    cb = max(1, int(n_cls - 1).bit_length())
    ent = []
    off_list = []  # (texts, slot, offset)
    for rows, ids, distinct in table.key_blocks(which, by_frequency=False):
        s = distinct.sum(axis=1)
        size[rows] = s
        c_lo = np.searchsorted(edges, np.floor(jaccard * s + 1e-9), "right") - 1
        c_lo = np.maximum(c_lo, 0)
        c_hi = np.searchsorted(edges, s, "right") - 1
        first_cls[rows] = c_lo
        h = mix64(ids)
        grp = h >> np.uint64(32)
        content = (h & _LOW32).astype(np.float64)
        for k in range(int((c_hi - c_lo).max()) + 1):
            r = np.flatnonzero(c_hi - c_lo >= k)
            cls = c_lo[r] + k
            m = m_of[cls]
            w, sums, keys = _class_keys(
                grp[r], content[r], distinct[r], cls, m, rows[r], overflow, tb, cb
            )
            # the group vectors, for the count filter
            off_list.append((rows[r], np.full(r.size, k), at + np.cumsum(m) - m))
            at += int(m.sum())
            vec_w.append(w)
            vec_s.append(sums)
            ent.extend(keys)
    n_slots = max(int(o[1].max()) + 1 for o in off_list)
    off = np.full((n, n_slots), -1, dtype=np.int64)
    for t_, k_, o_ in off_list:
        off[t_, k_] = o_
    return _PartitionKeys(
        size, first_cls, overflow, np.concatenate(vec_w), np.concatenate(vec_s), off, ent, tb, cb
    )


def _class_keys(grp, content, distinct, cls, m, texts, overflow, tb: int, cb: int):
    """The keys of one block of texts under one class each (``cls``, with ``m`` groups):
    ``(counts, sums, keys)``: each text's group vector (shingle counts clipped to 255 and
    16 bits of the content sums: enough for a filter), and the packed keys of its heavy
    groups and of every 3-subset of its light groups. ``grp`` / ``content``: the high and
    low 32 bits of each shingle's mixed id, ``distinct`` the set's members; texts with
    more than ``MAX_LIGHT_KEYS`` subsets are marked in ``overflow`` (in place)."""
    mm = int(m.max())
    nr = texts.size
    g = ((grp * m[:, None].astype(np.uint64)) >> np.uint64(32)).astype(np.int64)
    idx = (np.arange(nr)[:, None] * mm + g)[distinct]
    cnt = np.bincount(idx, minlength=nr * mm).reshape(nr, mm)
    tot = np.bincount(idx, weights=content[distinct], minlength=nr * mm)
    csum = (tot.astype(np.uint64) & _LOW32).reshape(nr, mm)
    col = np.arange(mm)[None, :]
    valid = col < m[:, None]
    counts = np.minimum(cnt[valid], 255).astype(np.uint8)
    sums = (csum[valid] & np.uint64(0xFFFF)).astype(np.uint16)
    # keys: (class, group, content) of heavy groups
    base = mix64(cls[:, None].astype(np.uint64) * np.uint64(1 << 32) + col.astype(np.uint64))
    item = mix64(base ^ (csum | (cnt.astype(np.uint64) << np.uint64(32))))
    heavy = valid & (cnt > _LIGHT)
    rr, gg = np.nonzero(heavy)
    keys = [_pack(item[rr, gg], texts[rr], cls[rr], tb, cb)]
    # light groups: every 3-subset of them
    light = valid & (cnt <= _LIGHT)
    n_light = light.sum(axis=1)
    n_sub = n_light * (n_light - 1) * (n_light - 2) // 6
    overflow[texts[n_sub > MAX_LIGHT_KEYS]] = True
    lr, lg = np.nonzero(light)  # row-major: each row's light groups in order
    start = np.cumsum(n_light) - n_light
    seg, tri = _triples(n_light, MAX_LIGHT_KEYS)
    if seg.size:
        pos = start[seg][:, None] + tri
        it = item[lr[pos], lg[pos]]
        key = mix64(mix64(it[:, 0] ^ np.uint64(0x5851F42D4C957F2D)) ^ it[:, 1])
        key = mix64(key ^ it[:, 2])
        keys.append(_pack(key, texts[seg], cls[seg], tb, cb))
    return counts, sums, keys


def _shared_keys(entries: list, tb: int, cb: int):
    """``(text, class, key)`` of every entry whose (class, key) two or more texts hold,
    in sorted key order, or None when there is none. ``entries`` (the packed key blocks)
    is emptied as it is read, to free its memory."""
    packed = np.concatenate(entries)
    entries.clear()
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
    if not packed.size:
        return None
    text = (packed & np.uint64((1 << tb) - 1)).astype(np.int64)
    cls = (packed >> np.uint64(64 - cb)).astype(np.int64)
    head = packed >> np.uint64(tb)
    return text, cls, head


def _filter_candidates(
    text, cls, head, keys: _PartitionKeys, edges, m_of, jaccard: float, keep
) -> tuple[np.ndarray, np.ndarray]:
    """The candidate pairs ``(u < v)`` among the pairs of entries sharing a key: the class
    is that of the smaller size, ``a >= t b``, ``keep``, then the group-count lower bound
    of ``|A ^ B|`` at most ``(a + b)(1 - t) / (1 + t)`` (:func:`partition_candidates`)."""
    n = keys.size.size
    size, first_cls, off = keys.size, keys.first_cls, keys.off
    vec_w, vec_s = keys.vec_w, keys.vec_s
    empty = np.zeros(0, dtype=np.int64)
    kept = 0
    bound_num = 1.0 - jaccard
    found = [empty]
    for a, b in pairs_within_runs(head):
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
        step = max(1, BLOCK // _FIRST_GROUPS)
        for i in range(0, u.size, step):
            sl = slice(i, i + step)
            lb[sl] = _group_bound(vec_w, vec_s, bu[sl], bv[sl], m[sl], 0, _FIRST_GROUPS)
        rest = np.flatnonzero((lb <= limit) & (m > _FIRST_GROUPS))
        step = max(1, BLOCK // int(m.max()))
        for i in range(0, rest.size, step):
            r = rest[i : i + step]
            lb[r] += _group_bound(vec_w, vec_s, bu[r], bv[r], m[r], _FIRST_GROUPS, int(m[r].max()))
        ok = lb <= limit
        u, v = u[ok], v[ok]
        kept += int(u.size)
        found.append(np.minimum(u, v) * n + np.maximum(u, v))
    pair = np.unique(np.concatenate(found))
    JOIN_STATS.update(after_filters=kept, candidates=int(pair.size))
    return pair // n, pair % n
