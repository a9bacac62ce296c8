"""Input-space canaries: unique, unseen, inserted with probability 1/2, deterministic."""

import re

import numpy as np
import pytest

import fixtures
from audit.canaries import CANARY_KINDS, make_canaries, with_canaries
from defenses.base import Examples

CORPUS = [r["text"] for r in fixtures.load_corpus("private")[:500]]


@pytest.mark.parametrize("kind", CANARY_KINDS)
def test_canaries_are_unique_unseen_and_half_included(kind):
    c = make_canaries(400, kind, 4, CORPUS, seed=0)
    texts = c.examples.texts
    assert len(set(texts)) == 400 and not set(texts) & set(CORPUS)
    assert set(np.unique(c.examples.labels)) <= {0, 1, 2, 3}
    assert set(np.unique(c.included)) == {0, 1}
    assert 160 <= c.included.sum() <= 240  # Bin(400, 1/2): mean 200, sd 10
    assert all(i.startswith("canary-") for i in c.examples.ids)


def test_pii_canaries_look_like_pii_and_random_token_canaries_use_corpus_words():
    pii = make_canaries(20, "pii", 4, CORPUS, seed=1)
    assert all(
        re.search(r"555-01\d\d-\d{4}", t) and "@canary-mail.test" in t for t in pii.examples.texts
    )
    words = {w for t in CORPUS for w in re.findall(r"[a-z]+", t.lower())}
    tok = make_canaries(20, "random-token", 4, CORPUS, seed=1)
    assert all(len(t.split()) == 12 and set(t.split()) <= words for t in tok.examples.texts)


def test_canaries_are_deterministic_per_seed():
    a = make_canaries(50, "random-token", 4, CORPUS, seed=3)
    b = make_canaries(50, "random-token", 4, CORPUS, seed=3)
    c = make_canaries(50, "random-token", 4, CORPUS, seed=4)
    assert a.examples.texts == b.examples.texts and np.array_equal(a.included, b.included)
    assert a.examples.texts != c.examples.texts


def test_with_canaries_appends_exactly_the_included_ones():
    c = make_canaries(30, "pii", 4, CORPUS, seed=0)
    train = Examples(["m1", "m2"], ["a", "b"], np.array([0, 1]))
    merged = with_canaries(train, c)
    assert merged.ids[:2] == ["m1", "m2"]
    assert merged.ids[2:] == [i for i, inc in zip(c.examples.ids, c.included, strict=True) if inc]
    assert len(merged) == 2 + int(c.included.sum())


def test_bad_canary_requests_are_errors():
    with pytest.raises(ValueError, match="unknown canary kind"):
        make_canaries(10, "emoji", 4, CORPUS, seed=0)
    with pytest.raises(ValueError, match="at least 2"):
        make_canaries(1, "pii", 4, CORPUS, seed=0)
    with pytest.raises(ValueError, match="too few distinct words"):
        make_canaries(10, "random-token", 4, ["a b"], seed=0)
