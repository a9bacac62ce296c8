"""Known-answer tests for every LM membership score formula and for LiRA / RMIA.

A 5-token vocabulary with given logits at three predicted positions: the log-softmax, the
next-token mean and variance of log p, and every score are computed by hand here (plain
``math``), then compared with the suite's functions. Each test also guards a mutation
(e.g. Min-K% taking the largest k% of tokens, RMIA-offline with a and 1 − a swapped).
"""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
import torch
from scipy.stats import norm

from privacy_audit.attacks.dc_pdd import dc_pdd_score, token_frequencies
from privacy_audit.attacks.llm_membership import (
    loss_scores,
    min_k_scores,
    zlib_scores,
    zlib_total_scores,
)
from privacy_audit.attacks.lowercase import lowercase_ratio
from privacy_audit.attacks.min_k_pp import min_k_pp_scores
from privacy_audit.attacks.neighbourhood import embedding_neighbour_table, neighbourhood_scores
from privacy_audit.attacks.recall_mia import recall_ratio
from privacy_audit.attacks.shadow import lira_scores, rmia_scores
from privacy_audit.defenses.base import TokenStats
from privacy_audit.targets.lm import token_statistics

# three positions over a 5-token vocabulary; targets x_1..x_3 = 2, 0, 2 (token 2 repeats)
LOGITS = [[2.0, 1.0, 0.0, -1.0, 0.5], [0.0, 0.0, 3.0, 0.0, 0.0], [1.0, 2.0, 1.5, -0.5, 0.0]]
TARGETS = [2, 0, 2]


def _hand_stats() -> TokenStats:
    lp, mu, var = [], [], []
    for row, y in zip(LOGITS, TARGETS, strict=True):
        z = sum(math.exp(v) for v in row)
        logq = [v - math.log(z) for v in row]
        p = [math.exp(v) for v in logq]
        m = sum(pi * li for pi, li in zip(p, logq, strict=True))
        lp.append(logq[y])
        mu.append(m)
        var.append(sum(pi * (li - m) ** 2 for pi, li in zip(p, logq, strict=True)))
    return TokenStats(np.array(TARGETS), np.array(lp), np.array(mu), np.array(var))


HAND = _hand_stats()


class _FixedLogits(torch.nn.Module):
    """A 'model' whose logits at position t are LOGITS[t] (input ids are ignored)."""

    config = type("C", (), {"n_positions": 16})()

    def forward(self, input_ids, attention_mask=None):
        out = torch.zeros(input_ids.shape[0], input_ids.shape[1], 5, dtype=torch.float64)
        out[:, : len(LOGITS)] = torch.tensor(LOGITS, dtype=torch.float64)
        return type("O", (), {"logits": out})()


def test_token_statistics_match_the_hand_computed_distribution():
    ids = torch.tensor([[1, *TARGETS]])
    (s,) = token_statistics(_FixedLogits(), ids)
    assert s.token_ids.tolist() == TARGETS
    np.testing.assert_allclose(s.log_probs, HAND.log_probs, rtol=1e-12)
    np.testing.assert_allclose(s.mean_log_prob, HAND.mean_log_prob, rtol=1e-12)
    np.testing.assert_allclose(s.var_log_prob, HAND.var_log_prob, rtol=1e-10)


def test_loss_zlib_and_min_k_known_answers():
    lp = list(HAND.log_probs)
    assert loss_scores([HAND.log_probs])[0] == pytest.approx(sum(lp) / 3)
    text = "abcabcabc hello"
    nbytes = len(zlib.compress(text.encode()))
    # as cited (Carlini et al. 2021, MIMIR): mean log p / zlib bytes
    assert zlib_scores([HAND.log_probs], [text])[0] == pytest.approx(sum(lp) / 3 / nbytes)
    # the earlier variant, kept as zlib-total: total log2 p / zlib bits
    assert zlib_total_scores([HAND.log_probs], [text])[0] == pytest.approx(
        sum(lp) / math.log(2) / (8 * nbytes)
    )
    # k = 0.4 of 3 tokens -> ceil(1.2) = 2 lowest log-probs; the largest two would differ
    low2 = sorted(lp)[:2]
    assert min_k_scores([HAND.log_probs], 0.4)[0] == pytest.approx(sum(low2) / 2)
    assert min_k_scores([HAND.log_probs], 0.4)[0] != pytest.approx(sum(sorted(lp)[1:]) / 2)
    assert min_k_scores([HAND.log_probs], 1.0)[0] == pytest.approx(sum(lp) / 3)


def test_min_k_plus_plus_known_answer():
    z = [
        (HAND.log_probs[t] - HAND.mean_log_prob[t]) / math.sqrt(HAND.var_log_prob[t])
        for t in range(3)
    ]
    assert min_k_pp_scores([HAND], 0.2)[0] == pytest.approx(min(z))  # ceil(0.6) = 1 token
    assert min_k_pp_scores([HAND], 0.5)[0] == pytest.approx(sum(sorted(z)[:2]) / 2)
    assert min_k_pp_scores([HAND], 1.0)[0] == pytest.approx(sum(z) / 3)
    with pytest.raises(ValueError, match="fraction"):
        min_k_pp_scores([HAND], 0.0)


def test_dc_pdd_known_answer_first_occurrence_and_clip():
    counts = np.array([0.0, 3.0, 1.0, 0.0, 6.0])  # reference-corpus counts of the 5 tokens
    f = [(c + 1) / (10 + 5) for c in counts]
    np.testing.assert_allclose(token_frequencies(counts), f)
    p = [math.exp(v) for v in HAND.log_probs]
    # first occurrences: positions 0 (token 2) and 1 (token 0); position 2 repeats token 2
    a0, a1 = p[0] * math.log(1 / f[2]), p[1] * math.log(1 / f[0])
    assert dc_pdd_score(HAND, np.array(f), clip=100.0) == pytest.approx((a0 + a1) / 2)
    clip = min(a0, a1) + 0.5 * abs(a0 - a1)
    expect = (min(a0, clip) + min(a1, clip)) / 2
    assert dc_pdd_score(HAND, np.array(f), clip=clip) == pytest.approx(expect)
    assert expect < (a0 + a1) / 2  # the clip binds


def test_recall_neighbourhood_and_lowercase_known_answers():
    # ReCaLL: LL(x|P)/LL(x); a larger drop under the prefix gives a larger ratio
    np.testing.assert_allclose(recall_ratio([-3.0, -2.1], [-1.0, -2.0]), [3.0, 1.05])
    # neighbourhood: mean NLL of neighbours minus NLL of x
    np.testing.assert_allclose(
        neighbourhood_scores([1.0, 2.0], [np.array([1.5, 2.5]), np.array([2.0])]), [1.0, 0.0]
    )
    # lowercase: mean NLL of the lowercased text over mean NLL of the original
    lowered = TokenStats(np.array([1, 1]), np.array([-2.0, -4.0]), np.zeros(2), np.zeros(2))
    nll = -sum(HAND.log_probs) / 3
    assert lowercase_ratio([HAND], [lowered])[0] == pytest.approx(3.0 / nll)


def test_embedding_neighbours_are_the_nearest_by_cosine():
    emb = np.array([[1, 0], [0, 1], [1, 0.1], [1, 0.5], [-1, 0]], dtype=float)
    table = embedding_neighbour_table(emb, 2, exclude={1})
    assert table[0].tolist() == [2, 3]  # cos(0,2) > cos(0,3); token 1 is special
    assert 1 not in table.ravel().tolist() and all(table[i, 0] != i for i in range(5))


# --------------------------------------------------------------------------- LiRA / RMIA
# 4 shadow models x 3 examples; keep[i, j]: example j in shadow model i's training set
KEEP = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0], [0, 0, 0]], dtype=bool)
PHI = np.array([[2.0, 0.0, 1.0], [0.5, 1.5, 3.0], [3.0, 2.5, -1.0], [1.0, -0.5, 0.0]])
TARGET = np.array([2.5, 1.0, 0.5])


def _side(j, inside):
    xs = [PHI[i, j] for i in range(4) if KEEP[i, j] == inside]
    m = sum(xs) / len(xs)
    return m, math.sqrt(sum((x - m) ** 2 for x in xs) / len(xs))


def test_lira_online_and_offline_known_answers_against_scipy():
    online, offline = [], []
    for j in range(3):
        mi, si = _side(j, True)
        mo, so = _side(j, False)
        online.append(norm.logpdf(TARGET[j], mi, si) - norm.logpdf(TARGET[j], mo, so))
        offline.append(norm.logcdf(TARGET[j], mo, so))
    np.testing.assert_allclose(lira_scores(TARGET, PHI, KEEP, online=True), online, rtol=1e-9)
    np.testing.assert_allclose(lira_scores(TARGET, PHI, KEEP, online=False), offline, rtol=1e-9)
    # fixed variance: the median sigma over examples replaces each example's sigma
    so_med = np.median([_side(j, False)[1] for j in range(3)])
    fixed = [norm.logcdf(TARGET[j], _side(j, False)[0], so_med) for j in range(3)]
    np.testing.assert_allclose(
        lira_scores(TARGET, PHI, KEEP, online=False, fixed_variance=True), fixed, rtol=1e-9
    )


SHADOW_P = np.array([[0.9, 0.2, 0.6], [0.3, 0.8, 0.7], [0.8, 0.7, 0.1], [0.4, 0.1, 0.2]])
TARGET_P = np.array([0.95, 0.5, 0.3])
POP = np.array([1, 2])  # examples 1 and 2 double as population samples z


def _rmia_hand(ref):
    ratio = [TARGET_P[j] / ref[j] for j in range(3)]
    return [sum(ratio[j] > ratio[z] for z in POP) / len(POP) for j in range(3)], ratio


def test_rmia_online_known_answer():
    ref = [sum(SHADOW_P[:, j]) / 4 for j in range(3)]
    expect, ratio = _rmia_hand(ref)
    scores, got_ratio = rmia_scores(TARGET_P, SHADOW_P, KEEP, POP, online=True)
    np.testing.assert_allclose(got_ratio, ratio)
    np.testing.assert_allclose(scores, expect)


def test_rmia_offline_known_answer_and_a_not_swapped():
    a = 0.3
    p_out = [
        sum(SHADOW_P[i, j] for i in range(4) if not KEEP[i, j])
        / sum(not KEEP[i, j] for i in range(4))
        for j in range(3)
    ]
    ref = [0.5 * ((1 + a) * p + (1 - a)) for p in p_out]
    expect, ratio = _rmia_hand(ref)
    scores, got_ratio = rmia_scores(TARGET_P, SHADOW_P, KEEP, POP, online=False, a=a)
    np.testing.assert_allclose(got_ratio, ratio, rtol=1e-12)
    np.testing.assert_allclose(scores, expect)
    swapped = [0.5 * ((1 + (1 - a)) * p + (1 - (1 - a))) for p in p_out]
    assert not np.allclose(got_ratio, [TARGET_P[j] / swapped[j] for j in range(3)])


def test_membership_attack_options_are_validated_in_the_config():
    from privacy_audit.audit.config import parse_config
    from privacy_audit.ground.errors import ConfigError

    names = ["min-k++", "recall", "neighbourhood", "dc-pdd", "loss"]
    opts = {"neighbourhood": {"neighbours": 2}, "min-k++": {"k": 0.5}, "recall": {"shots": 1}}
    cfg = parse_config({"attacks": {"names": names, "options": opts}})
    assert cfg.attack_options == opts
    for bad, msg in [
        ({"neighbourhood": {"neighbours": 0}}, "at least 1"),
        ({"neighbourhood": {"source": "hub"}}, "source must be one of"),
        ({"min-k++": {"k": 1.5}}, r"\(0, 1\]"),
        ({"dc-pdd": {"frequency_file": "/nonexistent.json"}}, "no file"),
        ({"recall": {"shot": 2}}, "unknown config key"),
        ({"loss": {}}, "names no leakage attack"),
    ]:
        with pytest.raises(ConfigError, match=msg):
            parse_config({"attacks": {"names": names, "options": bad}})
