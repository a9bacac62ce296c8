"""Character 5-gram shingles of normalised texts, built in numpy blocks of bounded
size: the table both exact near-duplicate joins and the MinHash candidates read
(:mod:`privacy_audit.stats.near_duplicates`, :mod:`privacy_audit.stats.partition_join`),
and the block helpers they share (pairs within runs of equal keys, the splitmix64
finaliser). Texts are compared after :func:`normalise` (lower case, collapsed white
space)."""

from __future__ import annotations

import re

import numpy as np

SHINGLE = 5

_WS = re.compile(r"\s+")


def normalise(text: str) -> str:
    return _WS.sub(" ", text.lower()).strip()


#: Elements (texts x padded shingles, or candidate pairs) per numpy block: bounds memory
#: (about 100 MB per block) whatever the number of texts.
BLOCK = 1 << 22
SENTINEL = np.uint64(np.iinfo(np.uint64).max)
#: Bits of a shingle id; the 6 bits above hold the shingle's frequency class.
_ID_BITS = 58
#: log2 of the buckets of the shingle-frequency estimate (a count per hash bucket).
FREQ_BITS = 22
GOLDEN = np.uint64(0x9E3779B97F4A7C15)


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


def bucket(x: np.ndarray) -> np.ndarray:
    """Multiplicative hash of uint64 values into ``2^FREQ_BITS`` buckets."""
    return (x * GOLDEN) >> np.uint64(64 - FREQ_BITS)


class Shingles:
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
        counts = np.zeros(1 << FREQ_BITS, dtype=np.int64)
        for _, ids, valid in self._id_blocks(which):
            counts += np.bincount(bucket(ids[valid]).astype(np.int64), minlength=counts.size)
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
            j = min(which.size, i + max(1, BLOCK // int(k[i])))
            while j > i + 1 and (j - i) * int(k[j - 1]) > BLOCK:
                j = i + max(1, BLOCK // int(k[j - 1]))
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
            keys = self.freq[bucket(ids)] | ids if by_frequency else ids
            keys[~valid] = SENTINEL
            keys.sort(axis=1)
            distinct = np.empty(keys.shape, dtype=bool)
            distinct[:, 0] = True
            np.not_equal(keys[:, 1:], keys[:, :-1], out=distinct[:, 1:])
            distinct &= keys != SENTINEL
            yield rows, keys, distinct


#: Extra shingles each prefix is extended by: a pair at Jaccard >= t then shares at least
#: ``_EXTRA + 1`` of its prefix shingles (see :func:`_prefix_length`), a filter that drops
def ragged_arange(counts: np.ndarray) -> np.ndarray:
    """``concatenate([arange(c) for c in counts])``."""
    counts = np.asarray(counts, dtype=np.int64)
    total = int(counts.sum())
    return np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)


def pairs_within_runs(head: np.ndarray):
    """Blocks ``(a, b)`` of the index pairs ``a < b`` of equal neighbours' runs in the
    sorted array ``head`` (every pair of entries sharing a key), about ``BLOCK`` pairs a
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
        stop = max(int(np.searchsorted(cum, base + BLOCK, "right")), start + 1)
        c = partners[start:stop]
        a = np.repeat(np.arange(start, stop), c)
        start = stop
        if a.size:
            yield a, a + 1 + ragged_arange(c)


#: Diagnostics of the last near-duplicate join (keys, candidates before and after the
#: filters, which join ran).
JOIN_STATS: dict[str, int] = {}
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def mix64(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 that spreads every input bit."""
    x = np.asarray(x, dtype=np.uint64)
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))
