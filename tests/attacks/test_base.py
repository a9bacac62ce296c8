"""Contracts between defenses, released surfaces, attacks and results."""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pytest

from privacy_audit.attacks import ATTACKS, Attack, AttackResult, MetricSettings, run_attack
from privacy_audit.attacks.base import validate_scores
from privacy_audit.attacks.membership import ConfidenceAttack, LossAttack
from privacy_audit.defenses import DEFENSES, SurfaceNotAvailable
from privacy_audit.defenses.base import Examples, PrivacyClaim, ReleasedModel, Surface
from privacy_audit.defenses.dp_sgd import DPSGD
from privacy_audit.defenses.none import NonPrivate
from privacy_audit.targets.classifier import ClassifierRelease

SETTINGS = MetricSettings(n_boot=100, seed=0)


class ProbOnlyRelease(ReleasedModel):
    """Exposes class probabilities only; every other surface must be refused."""

    surfaces = frozenset({Surface.PROBABILITIES})

    def __init__(self, table: dict[str, list[float]]):
        self.table = table
        self.claim = PrivacyClaim.none()
        self.label_names = ["a", "b", "c"]

    def probabilities(self, texts):
        return np.array([self.table[t] for t in texts], dtype=float)


class GenerationAttack(Attack):
    name = "fake-generation"
    description = "needs generated text"
    requires = frozenset({Surface.GENERATION})

    def score(self, release, examples):  # pragma: no cover - must never be called
        raise AssertionError("score() called although the surface is missing")


def _examples(n_in: int = 6, n_out: int = 6) -> tuple[Examples, dict[str, list[float]]]:
    rng = np.random.default_rng(0)
    texts = [f"text {i}" for i in range(n_in + n_out)]
    table = {}
    for i, t in enumerate(texts):
        p_y = rng.uniform(0.9, 0.99) if i < n_in else rng.uniform(0.4, 0.7)
        table[t] = [p_y, (1 - p_y) / 2, (1 - p_y) / 2]
    ex = Examples(
        ids=[f"id-{i}" for i in range(n_in + n_out)],
        texts=texts,
        labels=np.zeros(n_in + n_out, dtype=np.int64),
        members=np.r_[np.ones(n_in), np.zeros(n_out)],
    )
    return ex, table


# --------------------------------------------------------------------------- #
# attack / surface matching
# --------------------------------------------------------------------------- #
def test_loss_attack_on_probability_only_release_is_not_applicable():
    ex, table = _examples()
    res = run_attack(LossAttack(), ProbOnlyRelease(table), ex, SETTINGS)
    assert res.status == "not_applicable"
    assert res.reason == "not applicable: needs loss"
    assert res.surfaces == ["loss"]
    assert res.metrics == {} and res.scores is None
    d = res.to_dict()
    assert d["status"] == "not_applicable" and "metrics" not in d and "examples" not in d


def test_probability_attack_on_probability_only_release_runs():
    ex, table = _examples()
    res = run_attack(ConfidenceAttack(), ProbOnlyRelease(table), ex, SETTINGS)
    assert res.status == "ok" and res.reason is None
    assert res.metrics["auc"]["value"] == 1.0  # members have p_y >= 0.9 > every non-member


def test_generation_attack_on_classifier_release_is_not_applicable(tiny_model, fixture_examples):
    model, tokenizer = tiny_model
    release = ClassifierRelease(model, tokenizer, 32, PrivacyClaim.none(), ["a", "b", "c", "d"])
    ex = Examples(
        fixture_examples.ids,
        fixture_examples.texts,
        fixture_examples.labels,
        members=[1, 0] * 4,
    )
    res = run_attack(GenerationAttack(), release, ex, SETTINGS)
    assert res.status == "not_applicable"
    assert "generation" in res.reason
    assert res.reason == "not applicable: needs generation"


def test_evaluate_release_never_raises_and_records_errors():
    """A missing surface is not_applicable, a NaN surface is an error; the run goes on."""
    from privacy_audit.audit.data import AuditData
    from privacy_audit.audit.evaluate import evaluate_release

    ex, table = _examples()
    table[ex.texts[0]] = [math.nan, 0.5, 0.5]
    members = ex.subset(np.flatnonzero(ex.members == 1))
    nonmembers = ex.subset(np.flatnonzero(ex.members == 0))
    data = AuditData(members, nonmembers, nonmembers, ["a", "b", "c"])
    run = evaluate_release(
        "fake",
        "none",
        ProbOnlyRelease(table),
        data,
        ("loss", "confidence"),
        SETTINGS,
        progress=False,
    )
    status = {a["attack"]: (a["status"], a["reason"]) for a in run["attacks"]}
    assert status["loss"] == ("not_applicable", "not applicable: needs loss")
    assert status["confidence"][0] == "error"
    assert "NaN" in status["confidence"][1]
    assert run["strongest_attack"] is None


def test_every_registered_attack_declares_surfaces():
    for name, cls in ATTACKS.items():
        assert cls.name == name
        assert cls.requires and all(isinstance(s, Surface) for s in cls.requires)


# --------------------------------------------------------------------------- #
# results from user scores
# --------------------------------------------------------------------------- #
def test_from_scores_for_user_scores():
    scores = [0.9, 0.8, 0.7, 0.2, 0.1, 0.3]
    res = AttackResult.from_scores(
        "mine", scores, [1, 1, 1, 0, 0, 0], ["a", "b", "c", "d", "e", "f"]
    )
    assert res.status == "ok"
    assert res.metrics["auc"]["value"] == 1.0
    assert res.n_members == 3 and res.n_nonmembers == 3
    d = res.to_dict()
    assert d["examples"]["ids"] == ["a", "b", "c", "d", "e", "f"]
    assert d["examples"]["scores"] == scores
    assert d["examples"]["members"] == [1, 1, 1, 0, 0, 0]
    # default ids are positions
    assert AttackResult.from_scores("x", scores, [1, 1, 1, 0, 0, 0]).ids == [
        "0",
        "1",
        "2",
        "3",
        "4",
        "5",
    ]


def test_from_scores_rejects_mismatched_ids():
    with pytest.raises(ValueError, match=r"ids \(2\) and scores \(4\)"):
        AttackResult.from_scores("x", [1, 2, 3, 4], [1, 1, 0, 0], ["a", "b"])


def test_aggregate_only_pseudonymises_ids_with_a_secret_salt():
    from privacy_audit.audit.results import new_id_salt, pseudonymise_ids, run_record

    ids = ["alice@example.com", "bob-secret", "carol", "dave"]
    res = AttackResult.from_scores("x", [3.0, 2.0, 1.0, 0.0], [1, 1, 0, 0], ids)
    salt = new_id_salt()
    run = run_record(
        "r", "none", PrivacyClaim.none(), None, [res], aggregate_only=True, id_salt=salt
    )
    text = json.dumps(run)
    out_ids = run["attacks"][0]["examples"]["ids"]
    for i in ids:
        assert i not in text
        # an unsalted hash of a guessable id must not match either
        assert hashlib.sha256(i.encode()).hexdigest()[:16] not in text
    assert out_ids == pseudonymise_ids(ids, salt) and len(set(out_ids)) == 4
    assert pseudonymise_ids(ids, new_id_salt()) != out_ids
    assert res.to_dict()["examples"]["ids"] == ids


@pytest.mark.parametrize(
    ("scores", "members", "message"),
    [
        ([0.1, math.nan, 0.3, 0.4], [1, 1, 0, 0], "1 score(s) are NaN or infinite"),
        ([0.1, math.inf, -math.inf, 0.4], [1, 1, 0, 0], "2 score(s) are NaN or infinite"),
        ([0.1, 0.2, 0.3], [1, 0], "scores (3) and member labels (2)"),
        ([0.1, 0.2, 0.3], [1, 1, 1], "got 3 members and 0 non-members"),
        ([0.1, 0.2], [0, 0], "got 0 members and 2 non-members"),
        ([], [], "no scores"),
        ([0.1, 0.2, 0.3], [1, 2, 0], "must be 0 (non-member) or 1 (member)"),
        ([0.1, 0.2, 0.3], [1, -1, 0], "must be 0 (non-member) or 1 (member)"),
    ],
)
def test_validate_scores_rejects(scores, members, message):
    with pytest.raises(ValueError) as info:
        validate_scores(scores, members)
    assert message in str(info.value)


def test_validate_scores_accepts_good_input():
    s, m = validate_scores([0.5, 0.1], [True, False])
    assert s.dtype == np.float64 and m.tolist() == [1, 0]


# --------------------------------------------------------------------------- #
# claims and defense parameters
# --------------------------------------------------------------------------- #
def test_privacy_claim_rejects_unknown_unit_and_notion():
    with pytest.raises(ValueError, match="unknown privacy unit 'household'.*example"):
        PrivacyClaim(1.0, 1e-5, "household", "central-dp", None, False)
    with pytest.raises(ValueError, match="unknown privacy notion 'pure-dp'.*central-dp"):
        PrivacyClaim(1.0, 1e-5, "example", "pure-dp", None, False)
    ok = PrivacyClaim(1.0, 1e-5, "user", "local-dp", "x", True, "n")
    assert ok.to_dict() == {
        "epsilon": 1.0,
        "delta": 1e-5,
        "unit": "user",
        "notion": "local-dp",
        "accountant": "x",
        "proven": True,
        "note": "n",
        "details": {},
    }
    none = PrivacyClaim.none()
    assert none.proven is False and none.epsilon is None and none.notion == "none"


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"epsilon": -1}, "epsilon must be a positive finite number"),
        ({"epsilon": 0}, "epsilon must be a positive finite number"),
        ({"epsilon": math.inf}, "epsilon must be a positive finite number"),
        ({"epsilon": math.nan}, "epsilon must be a positive finite number"),
        ({"delta": 0}, r"delta must be in \(0, 1\)"),
        ({"delta": 1.0}, r"delta must be in \(0, 1\)"),
        ({"max_grad_norm": 0}, "max_grad_norm must be > 0"),
        ({"accountant": "gdp"}, "unknown dp-sgd accountant 'gdp'; allowed: prv, rdp"),
        ({"sigma": 1.0}, "unknown parameter.*sigma.*'dp-sgd'.*epsilon"),
    ],
)
def test_dp_sgd_rejects_bad_parameters(params, message):
    with pytest.raises(ValueError, match=message):
        DPSGD(**params)


def test_defense_parameters_defaults_and_unknowns():
    d = DPSGD(epsilon=4)
    assert d.params == {
        "epsilon": 4,
        "delta": 1e-5,
        "max_grad_norm": 1.0,
        "accountant": "prv",
        "unit": "example",
        "users_per_step": 0,
    }
    with pytest.raises(ValueError, match="unknown parameter.*epsilon.*'none'.*allowed: none"):
        NonPrivate(epsilon=1.0)
    assert {"none", "dp-sgd"} <= set(DEFENSES)


# --------------------------------------------------------------------------- #
# surfaces
# --------------------------------------------------------------------------- #
def test_missing_surfaces_raise_surface_not_available():
    ex, table = _examples()
    release = ProbOnlyRelease(table)
    assert release.probabilities(ex.texts[:2]).shape == (2, 3)
    calls = {
        "loss": lambda: release.loss(ex.texts, ex.labels),
        "hidden": lambda: release.hidden(ex.texts),
        "gradients": lambda: release.gradient_update(ex.texts, ex.labels),
        "generation": lambda: release.generate(["prompt"]),
    }
    for surface, call in calls.items():
        with pytest.raises(SurfaceNotAvailable, match=f"does not expose {surface}"):
            call()


def test_classifier_release_surfaces(tiny_model, fixture_examples):
    model, tokenizer = tiny_model
    release = ClassifierRelease(model, tokenizer, 32, PrivacyClaim.none(), ["a", "b", "c", "d"])
    assert Surface.GENERATION not in release.surfaces
    with pytest.raises(SurfaceNotAvailable, match="generation"):
        release.generate(["hello"])
    p = release.probabilities(fixture_examples.texts)
    assert p.shape == (8, 4)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, atol=1e-12)
    loss = release.loss(fixture_examples.texts, fixture_examples.labels)
    np.testing.assert_allclose(loss, -np.log(p[np.arange(8), fixture_examples.labels]), rtol=1e-9)
    assert release.hidden(fixture_examples.texts).shape == (8, 128)


# --------------------------------------------------------------------------- #
# the gradient surface
# --------------------------------------------------------------------------- #
def _release(tiny_model, clip_norm=None, noise_multiplier=0.0) -> ClassifierRelease:
    from privacy_audit.defenses.gradient_mechanism import GaussianGradientMechanism

    model, tokenizer = tiny_model
    mechanism = GaussianGradientMechanism(clip_norm, noise_multiplier)
    return ClassifierRelease(
        model,
        tokenizer,
        32,
        PrivacyClaim.none(),
        ["a", "b", "c", "d"],
        gradient_mechanism=mechanism,
    )


def test_gradient_update_is_the_mean_of_single_updates(tiny_model, fixture_examples):
    release = _release(tiny_model)
    texts, labels = fixture_examples.texts[:2], fixture_examples.labels[:2]
    both = release.gradient_update(texts, labels)
    one = release.gradient_update(texts[:1], labels[:1])
    two = release.gradient_update(texts[1:], labels[1:])
    n_params = sum(p.numel() for p in tiny_model[0].parameters())
    assert both.shape == (n_params,)
    assert np.linalg.norm(one - two) > 1e-3  # two genuinely different examples
    np.testing.assert_allclose(both, (one + two) / 2, rtol=1e-6, atol=1e-10)
    # deterministic (dropout off) and independent of the seed without noise
    np.testing.assert_array_equal(both, release.gradient_update(texts, labels, seed=5))


def test_gradient_update_clips_each_example(tiny_model, fixture_examples):
    plain = _release(tiny_model)
    clipped = _release(tiny_model, clip_norm=0.1, noise_multiplier=0.0)
    texts, labels = fixture_examples.texts[:2], fixture_examples.labels[:2]
    for i in range(2):
        raw = plain.gradient_update(texts[i : i + 1], labels[i : i + 1])
        assert np.linalg.norm(raw) > 0.1  # so clipping is active
        single = clipped.gradient_update(texts[i : i + 1], labels[i : i + 1])
        assert np.linalg.norm(single) == pytest.approx(0.1, rel=1e-6)
        # clipping rescales, it does not change the direction
        cos = raw @ single / (np.linalg.norm(raw) * np.linalg.norm(single))
        assert cos == pytest.approx(1.0, abs=1e-6)
    both = clipped.gradient_update(texts, labels)
    assert np.linalg.norm(both) <= 0.1 + 1e-9


def test_gradient_update_noise_is_seeded(tiny_model, fixture_examples):
    noisy = _release(tiny_model, clip_norm=0.1, noise_multiplier=1.0)
    clean = _release(tiny_model, clip_norm=0.1, noise_multiplier=0.0)
    texts, labels = fixture_examples.texts[:2], fixture_examples.labels[:2]
    a = noisy.gradient_update(texts, labels, seed=1)
    b = noisy.gradient_update(texts, labels, seed=1)
    c = noisy.gradient_update(texts, labels, seed=2)
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a, c)
    # noise std on the mean update is noise_multiplier * clip_norm / batch size = 0.05
    diff = a - clean.gradient_update(texts, labels)
    assert diff.std() == pytest.approx(0.05, rel=0.02)
    assert abs(diff.mean()) < 1e-3
