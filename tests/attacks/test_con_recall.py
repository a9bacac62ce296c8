"""Con-ReCall's prefix pools (attacks/con_recall.py ``prefix_pools``): which texts each
prefix is drawn from and how many, checked against the labels written out here."""

from __future__ import annotations

import numpy as np
import pytest

from privacy_audit.attacks.con_recall import ConRecallAttack
from privacy_audit.defenses.base import Examples


def _examples(n_members, n_nonmembers):
    texts = [f"member text {i}" for i in range(n_members)]
    texts += [f"nonmember text {i}" for i in range(n_nonmembers)]
    members = np.r_[np.ones(n_members, int), np.zeros(n_nonmembers, int)]
    # shuffled, so position says nothing about membership
    order = np.random.default_rng(1).permutation(len(texts))
    texts = [texts[i] for i in order]
    return Examples(
        [str(i) for i in range(len(texts))], texts, np.zeros(len(texts)), members[order]
    )


def _public(n):
    return Examples(
        [f"p{i}" for i in range(n)], [f"public text {i}" for i in range(n)], np.zeros(n)
    )


@pytest.mark.parametrize("shots", [1, 3])
def test_member_pool_from_members_and_nonmember_pool_from_nonmembers(shots):
    att = ConRecallAttack(shots=shots)
    att.prepare(public=None, seed=0)
    mem_pool, non_pool = att.prefix_pools(_examples(8, 9))
    # shots + 1 distinct texts each, so a text drawn into a pool still gets `shots` others
    assert len(mem_pool) == len(set(mem_pool)) == shots + 1
    assert len(non_pool) == len(set(non_pool)) == shots + 1
    assert all(t.startswith("member text") for t in mem_pool)
    assert all(t.startswith("nonmember text") for t in non_pool)


def test_nonmember_pool_from_the_public_split_when_it_has_enough_texts():
    ex = _examples(8, 9)
    att = ConRecallAttack(shots=3)
    att.prepare(public=_public(4), seed=0)  # more than shots: the public split is used
    mem_pool, non_pool = att.prefix_pools(ex)
    assert all(t.startswith("public text") for t in non_pool) and len(non_pool) == 4
    assert all(t.startswith("member text") for t in mem_pool)
    att.prepare(public=_public(3), seed=0)  # only shots public texts: audited non-members
    _, non_pool = att.prefix_pools(ex)
    assert all(t.startswith("nonmember text") for t in non_pool)


def test_pools_need_more_than_shots_texts_per_side():
    att = ConRecallAttack(shots=3)
    att.prepare(public=None, seed=0)
    for n_mem, n_non in ((3, 9), (9, 3)):
        with pytest.raises(ValueError, match="more than shots = 3"):
            att.prefix_pools(_examples(n_mem, n_non))
    mem_pool, non_pool = att.prefix_pools(_examples(4, 4))  # shots + 1: every text drawn
    assert len(mem_pool) == len(non_pool) == 4


# --------------------------------------------------------------------------- #
# issue 49: one-line mutants that survived the suite
# --------------------------------------------------------------------------- #
def test_gamma_zero_is_allowed_and_a_negative_gamma_refused():
    assert ConRecallAttack(gamma=0.0).gamma == 0.0
    with pytest.raises(ValueError, match="gamma"):
        ConRecallAttack(gamma=-0.1)


def test_a_prefix_that_swallows_the_text_is_refused(monkeypatch):
    from privacy_audit.attacks import con_recall

    # the joined text encodes to exactly the prefix's tokens: x has no tokens of its own
    enc = {"pre x": [1, 2, 3], "pre": [1, 2, 3]}
    monkeypatch.setattr(con_recall, "text_token_ids", lambda release, t: enc[t])
    with pytest.raises(ValueError, match="does not tokenize"):
        con_recall.x_start(None, "pre x", "pre", np.array([2, 3]))
    # with a token of its own, x starts after the prefix's targets
    enc["pre x"] = [1, 2, 3, 4]
    assert con_recall.x_start(None, "pre x", "pre", np.array([2, 3, 4])) == 2
