"""Known answers for the threshold membership attacks (attacks/membership.py).

Convention: a higher score means "member"; members are the positive class (1).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from privacy_audit.attacks import ATTACKS, MetricSettings, run_attack
from privacy_audit.attacks.membership import (
    ConfidenceAttack,
    EntropyAttack,
    LossAttack,
    ModifiedEntropyAttack,
    entropy,
    modified_entropy,
)
from privacy_audit.defenses.base import Examples, PrivacyClaim, ReleasedModel, Surface

# attacks on classifier outputs (causal-LM attacks declare target_kind = "lm")
CLASSIFIER_ATTACKS = [
    n for n, c in ATTACKS.items() if getattr(c, "target_kind", "classifier") == "classifier"
]

SETTINGS = MetricSettings(n_boot=200, seed=0)


class FixedRelease(ReleasedModel):
    """Returns fixed class probabilities per text; the loss is −log p_y of them."""

    surfaces = frozenset({Surface.PROBABILITIES, Surface.LOSS})

    def __init__(self, table: dict[str, list[float]]):
        self.table = table
        self.claim = PrivacyClaim.none()
        self.label_names = ["a", "b", "c"]

    def probabilities(self, texts):
        return np.array([self.table[t] for t in texts], dtype=np.float64)

    def loss(self, texts, labels):
        p = self.probabilities(texts)
        return -np.log(p[np.arange(len(texts)), np.asarray(labels)])


def _examples(rows: list[tuple[str, list[float], int, int]]):
    """rows: (text, probabilities, true label, member flag)."""
    table = {t: p for t, p, _, _ in rows}
    ex = Examples(
        ids=[t for t, *_ in rows],
        texts=[t for t, *_ in rows],
        labels=[y for *_, y, _ in rows],
        members=[m for *_, m in rows],
    )
    return FixedRelease(table), ex


def _scores(attack, rows):
    release, ex = _examples(rows)
    return attack.score(release, ex)


P = [0.7, 0.2, 0.1]


def test_loss_score_is_minus_the_cross_entropy():
    s = _scores(LossAttack(), [("x", P, 0, 1), ("y", P, 1, 0), ("z", P, 2, 1)])
    np.testing.assert_allclose(s, [math.log(0.7), math.log(0.2), math.log(0.1)], rtol=1e-12)
    assert s[0] == pytest.approx(-0.35667494393873245)


def test_confidence_score_is_the_max_probability_whatever_the_label():
    s = _scores(ConfidenceAttack(), [("x", P, 0, 1), ("y", [0.1, 0.3, 0.6], 0, 0)])
    np.testing.assert_allclose(s, [0.7, 0.6])


def test_entropy_score_by_hand():
    s = _scores(EntropyAttack(), [("x", P, 0, 1), ("u", [1 / 3] * 3, 0, 0), ("d", [1, 0, 0], 0, 1)])
    h = -(0.7 * math.log(0.7) + 0.2 * math.log(0.2) + 0.1 * math.log(0.1))
    assert h == pytest.approx(0.8018185525433372)
    np.testing.assert_allclose(s, [-h, -math.log(3), 0.0], atol=1e-12)
    np.testing.assert_allclose(entropy(np.array([P])), [h])


def test_modified_entropy_matches_song_and_mittal():
    # Mentr(p, y) = −(1 − p_y) log p_y − Σ_{c≠y} p_c log(1 − p_c)   (Song & Mittal 2021, Eq. 5)
    p = np.array([P, P, P])
    y = np.array([0, 1, 2])
    by_hand = [
        -(1 - 0.7) * math.log(0.7) - 0.2 * math.log(1 - 0.2) - 0.1 * math.log(1 - 0.1),
        -(1 - 0.2) * math.log(0.2) - 0.7 * math.log(1 - 0.7) - 0.1 * math.log(1 - 0.1),
        -(1 - 0.1) * math.log(0.1) - 0.7 * math.log(1 - 0.7) - 0.2 * math.log(1 - 0.2),
    ]
    assert by_hand[0] == pytest.approx(0.16216724501024432)
    assert by_hand[1] == pytest.approx(2.140867344541218)
    np.testing.assert_allclose(modified_entropy(p, y), by_hand, rtol=1e-12)
    s = _scores(ModifiedEntropyAttack(), [("a", P, 0, 1), ("b", P, 1, 0), ("c", P, 2, 0)])
    np.testing.assert_allclose(s, [-v for v in by_hand], rtol=1e-12)


def test_modified_entropy_is_finite_at_the_extremes():
    p = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    m = modified_entropy(p, np.array([0, 0]))
    assert np.all(np.isfinite(m))
    assert m[0] == pytest.approx(0.0)  # perfectly confident and correct
    assert m[1] > 60  # perfectly confident and wrong: huge Mentr (log of the 1e-30 floor)


def test_modified_entropy_uses_the_label_confidence_does_not():
    right = ("right", [0.9, 0.05, 0.05], 0, 1)
    wrong = ("wrong", [0.05, 0.9, 0.05], 0, 0)  # equally confident, but in the wrong class
    conf = _scores(ConfidenceAttack(), [right, wrong])
    assert conf[0] == pytest.approx(conf[1])
    mentr = _scores(ModifiedEntropyAttack(), [right, wrong])
    assert mentr[0] > mentr[1] + 1.0
    loss = _scores(LossAttack(), [right, wrong])
    assert loss[0] > loss[1]


@pytest.mark.parametrize("name", CLASSIFIER_ATTACKS)
def test_orientation_member_scores_higher(name):
    member = ("member", [0.98, 0.01, 0.01], 0, 1)  # confident and correct
    nonmember = ("nonmember", [0.4, 0.35, 0.25], 0, 0)  # uncertain
    s = _scores(ATTACKS[name](), [member, nonmember])
    assert s[0] > s[1], (name, s)


def _population(rng, n, p_lo, p_hi, member):
    rows = []
    for i in range(n):
        p_y = rng.uniform(p_lo, p_hi)
        y = int(rng.integers(3))
        p = np.full(3, (1 - p_y) / 2)
        p[y] = p_y
        rows.append((f"{'in' if member else 'out'}-{i}", p.tolist(), y, int(member)))
    return rows


@pytest.mark.parametrize("name", CLASSIFIER_ATTACKS)
def test_memorising_model_is_detected(name):
    rng = np.random.default_rng(1)
    rows = _population(rng, 60, 0.97, 0.999, True) + _population(rng, 60, 0.45, 0.75, False)
    release, ex = _examples(rows)
    res = run_attack(ATTACKS[name](), release, ex, SETTINGS)
    assert res.status == "ok"
    assert res.metrics["auc"]["value"] > 0.9
    assert res.metrics["auc"]["ci_low"] > 0.8
    tpr = res.metrics["tpr_at_fpr_0.01"]
    if res.n_nonmembers < 100:  # 1% FPR is below the resolution 1/n_nonmembers: no number
        assert tpr["below_resolution"] is True and tpr["value"] is None
    else:
        assert tpr["value"] > 0.5


@pytest.mark.parametrize("name", CLASSIFIER_ATTACKS)
def test_non_memorising_model_is_near_chance(name):
    rng = np.random.default_rng(2)
    rows = _population(rng, 200, 0.45, 0.95, True) + _population(rng, 200, 0.45, 0.95, False)
    release, ex = _examples(rows)
    res = run_attack(ATTACKS[name](), release, ex, SETTINGS)
    auc = res.metrics["auc"]
    assert auc["ci_low"] < 0.5 < auc["ci_high"] or abs(auc["value"] - 0.5) < 0.06
    assert auc["value"] < 0.6
