"""EZ-MIA's edge cases (attacks/ez_mia.py), by hand: each test kills a one-line mutant
that survived the rest of the suite (tests/attacks/test_frontier_attacks.py has the published
definition and the hand example)."""

from __future__ import annotations

import numpy as np
import pytest

from privacy_audit.attacks.ez_mia import error_zone_ratio, ez_scores
from privacy_audit.defenses.base import TokenStats


def _stats(ids, lp, top1=None):
    ids = np.asarray(ids)
    z = np.zeros(ids.size)
    return TokenStats(
        ids, np.asarray(lp, float), z, z, top1_ids=None if top1 is None else np.asarray(top1)
    )


def test_exactly_min_tokens_error_positions_are_scored():
    # errors at positions 1 and 2 (position 0 ignored): two = min_tokens, so scored;
    # shifts +1.0 and -0.5 -> 1.0 / 0.5 = 2
    ids = [1, 2, 3, 4]
    got = error_zone_ratio([-1.0, -1.0, -2.5, -1.0], [-2.0, -2.0, -2.0, -2.0], [9, 9, 9, 4], ids)
    assert got == pytest.approx(2.0, abs=1e-12)


def test_a_zero_shift_adds_to_neither_side():
    ids = [1, 2, 3, 4, 5]
    # error positions 1..4 with shifts 0, +1, -0.5, 0 -> 1 / 0.5
    tgt = [-1.0, -2.0, -1.0, -2.5, -2.0]
    got = error_zone_ratio(tgt, [-2.0] * 5, [9, 9, 9, 9, 9], ids)
    assert got == pytest.approx(2.0, abs=1e-12)


def test_ez_scores_refuse_mismatched_tokens_and_a_target_without_top1():
    tgt = _stats([1, 2, 3], [-1.0, -1.0, -1.0], top1=[9, 9, 9])
    with pytest.raises(ValueError, match="different token sequence"):
        ez_scores([tgt], [_stats([1, 2, 4], [-2.0, -2.0, -2.0])])
    with pytest.raises(ValueError, match="top-1"):
        ez_scores([_stats([1, 2, 3], [-1.0] * 3)], [_stats([1, 2, 3], [-2.0] * 3)])
    # the same tokens: scored (errors at 1, 2; shifts +1, +1; no negative shift -> 0)
    assert ez_scores([tgt], [_stats([1, 2, 3], [-2.0] * 3)]).tolist() == [0.0]
