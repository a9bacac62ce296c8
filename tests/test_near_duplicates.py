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

from privacy_audit.audit.split_check import (
    duplicate_groups,
    near_duplicates,
    normalise,
    normalise_all,
)


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
