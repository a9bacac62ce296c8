"""Near-duplicates of the split check (issue 38): the vectorised exact join against a
plain per-pair computation of the Jaccard similarity of 5-gram shingle sets.

Known answer: every member/non-member pair of a few hundred real texts (Python's own
documentation), with planted near-copies at Jaccard similarities spread around the 0.8
threshold, compared by brute force with Python sets of 5-character strings; both the
pairs found and their Jaccard values must match, and nothing below 0.8 is reported.
"""

from __future__ import annotations

import numpy as np
import pytest

from privacy_audit.stats import near_duplicates as nd
from privacy_audit.stats import partition_join, shingles, split_check
from privacy_audit.stats.near_duplicates import duplicate_groups, near_duplicates, similar_pairs
from privacy_audit.stats.shingles import normalise, normalise_all


def _real_texts(n: int, seed: int) -> list[str]:
    import pydoc_data.topics as topics

    paras = []
    for text in topics.topics.values():
        for p in text.split("\n\n"):
            p = " ".join(p.split())
            if len(p) >= 20:
                paras.append(p)
    paras = list(dict.fromkeys(paras))
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.permutation(len(paras))[:n]:
        p = paras[i]
        # lengths from a few characters to a few hundred: small shingle sets put the
        # prefix and size filters at their boundaries
        k = int(rng.choice([6, 9, 14, 30, 80, 300]))
        out.append(p[:k])
    return out


def _edit(text: str, rng: np.random.Generator) -> str:
    """A near-copy: a few characters changed, inserted or deleted, or the case / white
    space changed (equal after normalising)."""
    kind = int(rng.integers(0, 4))
    if kind == 0:
        return "  " + text.upper().replace(" ", "\n ") + " "
    chars = list(text)
    for _ in range(int(rng.integers(1, 4))):
        if not chars:
            break
        p = int(rng.integers(0, len(chars)))
        if kind == 1:
            chars[p] = "#"
        elif kind == 2:
            chars.insert(p, "~")
        else:
            del chars[p]
    return "".join(chars)


def _shingles(text: str) -> set[str]:
    t = normalise(text)
    return {t} if len(t) < 5 else {t[i : i + 5] for i in range(len(t) - 4)}


def _brute_pairs(members: list[str], nonmembers: list[str]) -> dict[tuple[int, int], float]:
    out = {}
    sm = [_shingles(t) for t in members]
    sn = [_shingles(t) for t in nonmembers]
    for i, a in enumerate(members):
        for j, b in enumerate(nonmembers):
            na, nb = normalise(a), normalise(b)
            if not na or not nb:
                continue
            if na == nb:
                out[(i, j)] = 1.0
                continue
            jac = len(sm[i] & sn[j]) / len(sm[i] | sn[j])
            if jac >= 0.8:
                out[(i, j)] = jac
    return out


def _corpus(seed: int) -> tuple[list[str], list[str]]:
    rng = np.random.default_rng(seed)
    base = _real_texts(400, seed)
    members, nonmembers = base[:200], base[200:]
    for k in range(120):  # near-copies of members among the non-members
        nonmembers[k] = _edit(members[(7 * k) % 200], rng)
    for k in range(120, 140):  # and of non-members among the members
        members[k] = _edit(nonmembers[k + 40], rng)
    # edge cases: shorter than 5 characters, equal after normalising, empty, exactly 5
    members[140:150] = [
        "abc",
        "ab c",
        "",
        "x",
        "abcde",
        "ΟΔΟΣ ΟΔΟΣ",
        "a\x00b",
        " ",
        "Hello",
        "hello",
    ]
    nonmembers[140:150] = [
        " ABC ",
        "ab\tc",
        "",
        "y",
        "abcde",
        "οδος οδοσ",
        "a\x00b",
        "",
        "hellO",
        "world",
    ]
    return members, nonmembers


@pytest.mark.parametrize("seed", [0, 1])
def test_near_duplicates_equal_a_brute_force_jaccard_of_every_pair(seed):
    members, nonmembers = _corpus(seed)
    brute = _brute_pairs(members, nonmembers)
    got = near_duplicates(members, nonmembers)
    assert len(got) == len({(i, j) for i, j, _ in got})  # each pair once
    assert {(i, j) for i, j, _ in got} == set(brute)
    for i, j, v in got:
        assert v == pytest.approx(brute[(i, j)], abs=1e-12)
        assert v >= 0.8
    # the planted pairs span the threshold: some just above 0.8, some edits fall below it
    jac = [v for v in brute.values() if v < 1]
    assert len(brute) >= 50 and len(jac) >= 15 and min(jac) < 0.83
    below = []
    for k in range(120):
        a, b = _shingles(members[(7 * k) % 200]), _shingles(nonmembers[k])
        below.append(len(a & b) / len(a | b) < 0.8)
    assert sum(below) >= 10  # edits that the check must not report
    assert got == sorted(got)


def test_duplicate_groups_are_the_components_of_the_brute_force_pairs():
    members, nonmembers = _corpus(3)
    texts = members + nonmembers
    n = len(texts)
    parent = list(range(n))

    def find(i):
        while parent[i] != i:
            i = parent[i]
        return i

    sh = [_shingles(t) for t in texts]
    norm = [normalise(t) for t in texts]
    for i in range(n):
        for j in range(i + 1, n):
            if norm[i] == norm[j] or len(sh[i] & sh[j]) / len(sh[i] | sh[j]) >= 0.8:
                parent[find(i)] = find(j)
    want = [find(i) for i in range(n)]
    got = duplicate_groups(texts)
    same_want = np.equal.outer(want, want)
    assert (np.equal.outer(got, got) == same_want).all()


def test_normalise_all_equals_normalise_per_text():
    texts = _real_texts(200, 4) + ["ΟΔΟΣ", "ΣΑΣ Σ", "  A\tB ", "İstanbul", "", "\u2028 a", " x "]
    assert normalise_all(texts) == [normalise(t) for t in texts]
    with_nul = [*texts, "x\x00Y "]  # a text holding the separator: per text
    assert normalise_all(with_nul) == [normalise(t) for t in with_nul]
    assert normalise_all([]) == []


def test_a_two_letter_alphabet_keeps_every_shingle_apart():
    """Exact shingle ids: over the alphabet {a, b} every 5-gram has its own id (a base
    other than the alphabet's size would merge some and inflate the Jaccard values)."""
    rng = np.random.default_rng(6)
    base = ["".join(rng.choice(["a", "b"], size=int(rng.integers(8, 30)))) for _ in range(160)]
    members, nonmembers = base[:80], base[80:]
    brute = _brute_pairs(members, nonmembers)
    got = near_duplicates(members, nonmembers)
    assert {(i, j): v for i, j, v in got} == pytest.approx(brute, abs=1e-12)
    assert 0 < len(brute) < 80 * 80 / 4


def test_a_large_alphabet_uses_hashed_shingles_with_the_same_answer():
    """Over 3,100 distinct characters the shingle ids are 58-bit hashes (not exact); the
    pairs still equal the brute force on these texts."""
    rng = np.random.default_rng(5)
    cjk = [chr(c) for c in range(0x4E00, 0x4E00 + 4000)]
    base = ["".join(rng.choice(cjk, size=int(rng.integers(30, 60)))) for _ in range(120)]
    members = base[:60]
    nonmembers = base[60:]
    for k in range(30):
        t = list(members[k])
        t[int(rng.integers(len(t)))] = "z"
        nonmembers[k] = "".join(t)
    brute = _brute_pairs(members, nonmembers)
    got = near_duplicates(members, nonmembers)
    assert {(i, j) for i, j, _ in got} == set(brute) and len(brute) >= 5


# --------------------------------------------------------------------------- #
# The partition join (pigeonhole on hashed shingle groups) and its fallbacks
# --------------------------------------------------------------------------- #
def _jaccard(a: str, b: str) -> float:
    sa, sb = _shingles(a), _shingles(b)
    return len(sa & sb) / len(sa | sb)


def _bench_texts(n: int, seed: int, vocab: int = 20_000) -> list[str]:
    """``score``'s benchmark texts: 8-30 words ``w<k>`` (12 distinct characters), the
    join's worst case (even a text's rarest shingles are shared by many texts)."""
    rng = np.random.default_rng(seed)
    return [
        " ".join(f"w{w}" for w in rng.integers(0, vocab, size=int(rng.integers(8, 31))))
        for _ in range(n)
    ]


def _near_copy(text: str, rng: np.random.Generator, edits: int) -> str:
    """``text`` with ``edits`` characters substituted, inserted or deleted (alphabet of
    the benchmark texts, so the copy stays low-entropy)."""
    chars = list(text)
    for _ in range(edits):
        p = int(rng.integers(0, len(chars) + 1))
        kind = int(rng.integers(0, 3))
        c = str(rng.choice(list("0123456789 w")))
        if kind == 0 and p < len(chars):
            chars[p] = c
        elif kind == 1 or not chars:
            chars.insert(p, c)
        elif p < len(chars):
            del chars[p]
    return "".join(chars)


def _hard_pairs(seed: int, count: int) -> tuple[list[str], list[str]]:
    """Member k and non-member k are near-copies with Jaccard at or just around 0.8 (the
    pairs whose symmetric difference is near the bound, where every identical group may
    be light), of every size from a few shingles to a few hundred."""
    rng = np.random.default_rng(seed)
    members, nonmembers = [], []
    while len(members) < count:
        words = int(rng.choice([1, 2, 3, 5, 8, 14, 30, 60]))
        vocab = int(rng.choice([30, 20_000]))
        a = _bench_texts(1, int(rng.integers(1 << 30)), vocab)[0]
        a = " ".join(a.split()[:words])
        b = _near_copy(a, rng, int(rng.integers(1, 2 + len(a) // 25)))
        if len(normalise(a)) < 5 or len(normalise(b)) < 5:
            continue
        if 0.76 <= _jaccard(a, b) <= 0.9 or rng.random() < 0.1:
            members.append(a)
            nonmembers.append(b)
    return members, nonmembers


@pytest.mark.parametrize(
    "light_keys",
    [partition_join.MAX_LIGHT_KEYS, 1, -1],
    ids=["partition", "mixed", "all-overflow"],
)
def test_no_planted_pair_at_the_threshold_is_missed(monkeypatch, light_keys):
    """700 near-copy pairs with Jaccard around 0.8 (sizes 1 to ~400 shingles): every
    pair at >= 0.8 is found with its exact Jaccard, every reported pair is verified. With
    no light-group keys allowed, every text goes to the prefix-filter fallback."""
    monkeypatch.setattr(partition_join, "MAX_LIGHT_KEYS", light_keys)
    members, nonmembers = _hard_pairs(7, 700)
    got = near_duplicates(members, nonmembers)
    found = {(i, j): v for i, j, v in got}
    planted = {k: _jaccard(members[k], nonmembers[k]) for k in range(len(members))}
    at = [
        k
        for k, v in planted.items()
        if v >= 0.8 or normalise(members[k]) == normalise(nonmembers[k])
    ]
    assert len(at) >= 300 and sum(0.8 <= v < 0.82 for v in planted.values()) >= 30
    for k in at:
        assert (k, k) in found, (members[k], nonmembers[k], planted[k])
    for (i, j), v in found.items():
        assert v == pytest.approx(_jaccard(members[i], nonmembers[j]), abs=1e-12) and v >= 0.8
    stats = shingles.JOIN_STATS
    if light_keys < 0:
        assert stats["overflow"] == stats["texts"]
    elif light_keys == 1:  # overflow texts pair with partition-keyed ones too
        assert 0.2 * stats["texts"] < stats["overflow"] < 0.8 * stats["texts"]


@pytest.mark.parametrize(
    ("light", "light_keys"), [(3, 10**6), (6, 1000)], ids=["all-keyed", "some-overflow"]
)
def test_pairs_whose_identical_groups_are_all_light_are_found(monkeypatch, light, light_keys):
    """Groups of up to 3 (or 6) shingles made light (most groups are): many pairs near
    the threshold then share no heavy group and are found only by their light-group
    subsets, which must all be keyed, or, for a text with too many of them, by the
    prefix filter against every text of a size it can pair with (some of these pairs
    hold one overflow text and one keyed text and share no key)."""
    monkeypatch.setattr(partition_join, "_LIGHT", light)
    monkeypatch.setattr(partition_join, "MAX_LIGHT_KEYS", light_keys)
    members, nonmembers = _hard_pairs(8, 300)
    got = {(i, j) for i, j, _ in near_duplicates(members, nonmembers)}
    for k in range(len(members)):
        if _jaccard(members[k], nonmembers[k]) >= 0.8:
            assert (k, k) in got, (members[k], nonmembers[k])
    over = shingles.JOIN_STATS["overflow"] / shingles.JOIN_STATS["texts"]
    assert over == 0 if light_keys > 10**5 else 0 < over < 1


@pytest.mark.parametrize("jaccard", [0.75, 0.9, 1.0, 0.6])
def test_similar_pairs_equal_brute_force_at_other_thresholds(jaccard):
    """The join at other thresholds (0.6: the prefix filter alone) on the benchmark's
    low-entropy texts with planted near-copies, against every pair by brute force."""
    rng = np.random.default_rng(11)
    texts = _bench_texts(160, 12, vocab=300)
    texts += [
        _near_copy(texts[int(rng.integers(160))], rng, int(rng.integers(1, 6))) for _ in range(160)
    ]
    # periodic texts: different strings, equal shingle sets (Jaccard exactly 1)
    texts += [" ".join([f"w{k}"] * r) for k in (7, 12, 345, 6789) for r in (3, 4, 6)]
    norm = sorted(set(normalise_all(texts)))
    u, v, jac = similar_pairs(norm, jaccard)
    got = dict(zip(zip(u.tolist(), v.tolist(), strict=True), jac.tolist(), strict=True))
    sh = [_shingles(t) for t in norm]
    want = {}
    for i in range(len(norm)):
        for j in range(i + 1, len(norm)):
            if len(norm[i]) >= 5 and len(norm[j]) >= 5:
                x = len(sh[i] & sh[j]) / len(sh[i] | sh[j])
                if x >= jaccard:
                    want[(i, j)] = x
    assert got == pytest.approx(want, abs=1e-12)
    assert len(want) >= (20 if jaccard < 1 else 12)


def test_benchmark_texts_with_near_copies_equal_brute_force():
    """``score``'s benchmark texts (worst case of the join) with planted near-copies on
    both sides: the cross pairs equal a brute force over every member/non-member pair."""
    rng = np.random.default_rng(3)
    members = _bench_texts(300, 4)
    nonmembers = _bench_texts(300, 5)
    for k in range(80):
        nonmembers[k] = _near_copy(members[3 * k], rng, int(rng.integers(1, 8)))
    brute = _brute_pairs(members, nonmembers)
    got = near_duplicates(members, nonmembers)
    assert {(i, j): v for i, j, v in got} == pytest.approx(brute, abs=1e-12)
    assert len(brute) >= 20
    assert shingles.JOIN_STATS["overflow"] == 0  # the partition join did the work


def test_partition_groups_guarantee_identical_groups():
    """The pigeonhole bound itself: for the smaller size a, m_c exceeds the largest
    symmetric difference of a pair at J >= t by at least _PART_EXTRA + 1, for every size
    and every class that keys it (checked by enumerating sizes and overlaps)."""
    from fractions import Fraction

    for t in (0.75, 0.8, 0.9, 0.95, 1.0):
        edges, m = partition_join.size_classes(2000, t)
        tf = Fraction(t).limit_denominator(1000)
        for a in range(1, 2000):
            c = np.searchsorted(edges, a, "right") - 1
            # largest b with J(a, b) >= t possible, and the fewest shared shingles
            b = np.arange(a, int(a / tf) + 1)
            o = -((-tf.numerator * (a + b)) // (tf.numerator + tf.denominator))  # ceil
            d = np.where(o <= a, a + b - 2 * o, 0)
            assert m[c] - d.max() >= partition_join.PART_EXTRA + 1, (t, a)


def test_size_compatible_equals_a_per_pair_check():
    """The fallback's size window: a text is joined with the overflow texts exactly when
    some overflow size allows J >= t (t s <= o <= s / t)."""
    rng = np.random.default_rng(9)
    sizes = rng.integers(1, 200, size=300)
    others = rng.integers(1, 200, size=12)
    for t in (0.8, 0.9, 0.75):
        want = [any(t * s - 1e-9 <= o <= s / t + 1e-9 for o in others) for s in sizes]
        got = nd.size_compatible(sizes, others, t)
        assert got.tolist() == want and 0 < sum(want) < len(want)
    assert nd.size_compatible(np.array([4, 5, 6]), np.array([5]), 0.8).all()


def _as_dict(pairs) -> dict[tuple[int, int], float]:
    u, v, jac = pairs
    return dict(zip(zip(u.tolist(), v.tolist(), strict=True), jac.tolist(), strict=True))


def test_the_join_is_chosen_by_cost_and_both_joins_agree(monkeypatch):
    """On a sample the cheaper exact join is chosen: the partition join for the
    benchmark's low-entropy texts, the prefix filter for real text; forcing either join
    gives the same pairs and Jaccard values."""
    monkeypatch.setattr(nd, "_CHOOSE_FROM", 1000)
    monkeypatch.setattr(nd, "_CHOOSE_SAMPLE", 600)
    rng = np.random.default_rng(2)
    bench = _bench_texts(3000, 21, vocab=2000)
    bench += [_near_copy(bench[int(rng.integers(3000))], rng, 2) for _ in range(200)]
    real = _real_texts(2500, 22)
    real += [_edit(real[int(rng.integers(len(real)))], rng) for _ in range(200)]
    for texts, want in ((bench, "partition"), (real, "prefix")):
        norm = sorted(set(normalise_all(texts)))
        chosen = similar_pairs(norm)
        assert shingles.JOIN_STATS["join"] == want
        for forced in (True, False):
            with monkeypatch.context() as m:
                m.setattr(nd, "_use_partition", lambda *a, f=forced: f)
                other = similar_pairs(norm)
            assert _as_dict(other) == _as_dict(chosen)
        assert chosen[0].size >= 40


# --------------------------------------------------------------------------- #
# Above the exact join's cost budget: MinHash LSH, every candidate verified
# --------------------------------------------------------------------------- #
def test_lsh_bands_meet_the_stated_miss_bound():
    """The fewest bands with (1 - t^6)^b <= 1e-6, by hand at t = 0.8: 0.8^6 = 0.262144,
    ln(1e-6) / ln(0.737856) = 45.44, so 46 bands and a bound of 8.45e-7."""
    assert nd.lsh_bands(0.8) == 46
    assert nd.lsh_miss_bound(0.8, 6, 46) == pytest.approx(0.737856**46, rel=1e-12)
    assert 8.4e-7 < nd.lsh_miss_bound(0.8, 6, 46) < 8.5e-7
    for t in (0.75, 0.8, 0.9, 0.95):
        b = nd.lsh_bands(t)
        assert (1 - t**6) ** b <= 1e-6 < (1 - t**6) ** (b - 1)
    assert nd.lsh_bands(1.0) == 1


def _minhash_of(texts: list[str], count: int) -> np.ndarray:
    norm = normalise_all(texts)
    table = shingles.Shingles(norm)
    xor, mult = nd.lsh_hashes(count)
    sig = np.zeros((len(norm), count), dtype=np.uint64)
    for rows, ids, distinct in table.key_blocks(np.arange(len(norm)), by_frequency=False):
        sig[rows] = nd.minhash_signatures(ids, distinct, xor, mult)
    return sig


def test_a_min_hash_agrees_with_probability_jaccard():
    """Min-wise hashing, measured: 300 pairs of real texts and their edited copies (J
    from about 0.3 to 1, Python sets), 276 min-hashes each. The share of agreeing
    min-hashes equals J: pooled within 4 binomial SDs, and per J bin within 0.03 of the
    bin's mean J."""
    rng = np.random.default_rng(31)
    base = [t for t in _real_texts(2000, 30) if len(t) >= 80][:300]
    copies = [_near_copy(t, rng, int(rng.integers(1, 1 + len(t) // 8))) for t in base]
    sig = _minhash_of(base + copies, 276)
    agree = (sig[: len(base)] == sig[len(base) :]).mean(axis=1)
    jac = np.array([_jaccard(a, b) for a, b in zip(base, copies, strict=True)])
    assert jac.min() < 0.5 and jac.max() > 0.9
    k = sig.shape[1]
    z = (agree.sum() - jac.sum()) * k / np.sqrt((k * jac * (1 - jac)).sum())
    assert abs(z) < 4, z
    for lo, hi in ((0.0, 0.6), (0.6, 0.8), (0.8, 0.9), (0.9, 1.01)):
        sel = (jac >= lo) & (jac < hi)
        assert sel.sum() >= 20, (lo, sel.sum())
        assert abs(agree[sel].mean() - jac[sel].mean()) < 0.03, (lo, hi)


def test_the_lsh_miss_rate_is_the_stated_formula(monkeypatch):
    """The bound's model, measured where misses are frequent: with 3 bands of 6 rows a
    pair at Jaccard J is missed with probability (1 - J^6)^3 (about 0.4 at 0.8). On 700
    planted pairs around the threshold the pairs at >= 0.8 that are missed number the
    sum of those probabilities within 4 SDs; with the default 46 bands none is missed,
    and every pair found equals the exact join's (all verified)."""
    members, nonmembers = _hard_pairs(7, 700)
    jac = np.array([_jaccard(a, b) for a, b in zip(members, nonmembers, strict=True)])
    at = np.flatnonzero(jac >= 0.8)
    monkeypatch.setattr(nd, "_LSH_FROM", 1)
    monkeypatch.setattr(nd, "_EXACT_BUDGET_S", -1.0)
    with monkeypatch.context() as m:
        m.setattr(nd, "_exact_over_budget", lambda *a: None)
        exact = {(i, j): v for i, j, v in near_duplicates(members, nonmembers, 0.8)}
    full = {(i, j): v for i, j, v in near_duplicates(members, nonmembers, 0.8)}
    assert shingles.JOIN_STATS["join"] == "minhash-lsh"
    assert full == exact and all((k, k) in full for k in at)
    monkeypatch.setattr(nd, "lsh_bands", lambda *a, **k: 3)
    weak = {(i, j) for i, j, _ in near_duplicates(members, nonmembers, 0.8)}
    assert weak <= set(exact)
    missed = sum((k, k) not in weak for k in at)
    p = (1 - jac[at] ** 6) ** 3
    assert abs(missed - p.sum()) < 4 * np.sqrt((p * (1 - p)).sum()), (missed, p.sum())
    assert missed > 50


def test_lsh_is_chosen_only_above_the_exact_join_budget():
    """1,100 texts of 264 random prose words (the scale benchmark's: rare words shared by
    most pairs, so the exact join would verify a fixed share of all pairs) take MinHash
    LSH, and the split check's record says so with its miss bound; 1,100 real texts keep
    the exact join. Planted near-copies are found either way."""
    from privacy_audit.audit.benchmarks.scale import make_texts

    rng = np.random.default_rng(4)
    members, nonmembers = make_texts(550, 256, 3)
    for k in range(30):
        nonmembers[k] = _near_copy(members[k], rng, 10)
    check = split_check.SplitCheck(permutations=19)
    dups = check.duplicates(members, nonmembers)
    assert dups["join"]["method"] == "minhash-lsh"
    assert dups["join"]["miss_bound"] <= 1e-6 and "MinHash LSH" in dups["criterion"]
    assert dups["join"]["estimated_exact_cpu_s"] > 1e-3 * 1100
    assert set(range(30)) <= set(dups["member_index"]) & set(dups["nonmember_index"])
    real = _real_texts(1100, 40)
    dups = check.duplicates(real[:550], real[550:])
    assert dups["join"]["method"] == "exact" and "exact join" in dups["criterion"]


def _real_sentences(n: int, seed: int) -> list[str]:
    """Sentences of the Python documentation, installed packages' descriptions and
    Debian changelogs (where the old CRC-32 MinHash missed 10 of 113 pairs)."""
    import glob
    import gzip
    import pydoc_data.topics as topics
    from importlib import metadata

    paras = []
    for t in topics.topics.values():
        paras += t.split("\n\n")
    for d in metadata.distributions():
        paras += (d.metadata.get_payload() or "").split("\n\n")
    for f in sorted(glob.glob("/usr/share/doc/*/changelog.Debian.gz"))[:400]:
        try:
            paras += gzip.open(f, "rt", errors="replace").read().split("\n\n")
        except OSError:
            continue
    sents = [s[:200] for p in paras for s in " ".join(p.split()).split(". ") if len(s) >= 40]
    sents = list(dict.fromkeys(sents))
    rng = np.random.default_rng(seed)
    return [sents[i] for i in rng.permutation(len(sents))[:n]]


def test_lsh_finds_every_near_duplicate_of_real_sentences(monkeypatch):
    """Forced MinHash LSH on 12,000 real sentences (templated changelog lines, package
    descriptions, documentation) finds exactly the exact join's pairs (the old CRC-32
    hash family missed 9% of them here)."""
    texts = sorted(set(normalise_all(_real_sentences(12_000, 6))))
    exact = _as_dict(similar_pairs(texts))
    assert shingles.JOIN_STATS["join"] != "minhash-lsh" and len(exact) >= 50
    monkeypatch.setattr(nd, "_LSH_FROM", 1)
    # a negative budget: even an estimate of 0 (a sample without candidates, as on some
    # machines' package mix) is over it, so LSH is forced
    monkeypatch.setattr(nd, "_EXACT_BUDGET_S", -1.0)
    lsh = _as_dict(similar_pairs(texts))
    assert shingles.JOIN_STATS["join"] == "minhash-lsh"
    assert lsh == exact
