"""The balanced-accuracy threshold of attacks/scores.py (``_best_threshold``), by hand:
the midpoint below the tie group with the largest TPR − FPR, and +inf ("nobody is a
member") when no group beats the starting point (0, 0) (gain exactly 0 does not)."""

from __future__ import annotations

import numpy as np

from privacy_audit.attacks.scores import _best_threshold


def test_best_threshold_known_answers():
    # scores sorted decreasing; tp / fp: members / non-members at or above each position;
    # ends: the last position of each tie group. Two members and two non-members per row.
    scores = np.array([[3.0, 3.0, 1.0, 0.0], [3.0, 2.0, 1.0, 0.0], [3.0, 2.0, 1.0, 0.0]])
    # row 0: a member and a non-member tied at 3 (gain 0), then out (−0.5), in (0)
    # row 1: in, in, out, out: gains 0.5, 1, 0.5, 0 -> best after 2.0: (2 + 1) / 2
    # row 2: out, out, in, in: gains −0.5, −1, −0.5, 0 -> nothing beats (0, 0)
    tp = np.array([[1, 1, 1, 2], [1, 2, 2, 2], [0, 0, 1, 2]])
    fp = np.array([[0, 1, 2, 2], [0, 0, 1, 2], [1, 2, 2, 2]])
    ends = np.array([[False, True, True, True], [True] * 4, [True] * 4])
    got = _best_threshold(scores, tp, fp, ends, 2, 2)
    np.testing.assert_array_equal(got, [np.inf, 1.5, np.inf])
