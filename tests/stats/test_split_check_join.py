"""The split check joins its texts once (issue 38): without sub-sampling, the near-duplicate
pass and the blind baseline's groups read one :class:`Join` of members + non-members
instead of joining twice. The results must be those of the two separate joins, pair for
pair, group id for group id, and the whole check's dict and blind scores bit for bit.

Data: real prose (Python's documentation) with planted near-copies across and within the
sets, exact repeats, a chain of near-copies and texts shorter than a shingle.
"""

from __future__ import annotations

import numpy as np

import privacy_audit.stats.near_duplicates as nd
import privacy_audit.stats.split_check as sc


def _texts(seed: int) -> tuple[list[str], list[str]]:
    import pydoc_data.topics as topics

    paras = []
    for text in topics.topics.values():
        for p in text.split("\n\n"):
            p = " ".join(p.split())
            if 120 <= len(p) <= 600:
                paras.append(p)
    paras = list(dict.fromkeys(paras))
    rng = np.random.default_rng(seed)
    pick = [paras[i] for i in rng.permutation(len(paras))[:70]]
    members, nonmembers = pick[:35], pick[35:]

    def near(t: str, k: int) -> str:  # k words changed: Jaccard around the 0.8 threshold
        w = t.split()
        for j in rng.choice(len(w), size=min(k, len(w)), replace=False):
            w[j] = w[j][::-1] + "x"
        return " ".join(w)

    members += [near(nonmembers[0], 1), near(nonmembers[1], 2), nonmembers[2], "abc"]
    nonmembers += [near(members[3], 1), members[4], members[4], "abc", "hi"]
    members += [near(members[5], 1), near(near(members[5], 1), 1)]  # a chain inside one set
    return members, nonmembers


def test_one_join_gives_the_pairs_and_groups_of_two_separate_joins():
    members, nonmembers = _texts(0)
    join = nd.Join(members + nonmembers)
    want = nd.near_duplicates(members, nonmembers)
    assert len(want) >= 5  # planted pairs are found (the test can see a difference)
    assert nd.near_duplicates(members, nonmembers, join=join) == want
    # groups of a subset (the texts left after removing the pairs): read from the join
    dm, dn = {i for i, _, _ in want}, {j for _, j, _ in want}
    pos = [i for i in range(len(members)) if i not in dm]
    pos += [len(members) + j for j in range(len(nonmembers)) if j not in dn]
    texts = members + nonmembers
    sub = [texts[p] for p in pos]
    got = nd.duplicate_groups(sub, join=join, positions=np.array(pos))
    ref = nd.duplicate_groups(sub)
    assert len(set(ref.tolist())) < len(sub)  # some group holds several texts
    np.testing.assert_array_equal(got, ref)
    np.testing.assert_array_equal(
        nd.duplicate_groups(texts, join=join, positions=np.arange(len(texts))),
        nd.duplicate_groups(texts),
    )


def test_the_split_check_with_one_join_equals_the_check_with_two(monkeypatch):
    members, nonmembers = _texts(1)
    one, s1 = sc.SplitCheck(seed=3).run(members, nonmembers)
    calls = []

    def no_join(*args, **kwargs):  # the old path: each pass joins for itself
        calls.append(1)
        return None

    monkeypatch.setattr(sc, "Join", no_join)
    two, s2 = sc.SplitCheck(seed=3).run(members, nonmembers)
    assert calls  # the shared join was really bypassed
    assert one["duplicates"]["pairs"] >= 5
    assert one == two
    np.testing.assert_array_equal(s1, s2)
