"""The run's verdict with users: the more severe of the per-text and per-user levels,
each sentence naming its unit; a per-example claim is never held to per-user bounds
(that would call correct DP VIOLATED), a per-user claim is."""

from __future__ import annotations

import numpy as np
import pytest

from privacy_audit.audit.results import battery_chance_test, pick_strongest
from privacy_audit.reports.user_verdict import combine_unit_verdicts, user_view
from privacy_audit.reports.verdict import verdict_for_run
from privacy_audit.stats.metrics import membership_metrics


def _attack(name: str, separation: float, n: int, seed: int, **extra) -> dict:
    rng = np.random.default_rng(seed)
    s = np.r_[rng.normal(separation, 1, n), rng.normal(0, 1, n)]
    m = np.r_[np.ones(n, int), np.zeros(n, int)]
    return {
        "attack": name,
        "status": "ok",
        "n_members": n,
        "n_nonmembers": n,
        **extra,
        "metrics": membership_metrics(s, m),
        "examples": {
            "ids": [f"{name}{i}" for i in range(2 * n)],
            "scores": s.tolist(),
            "members": m.tolist(),
        },
    }


def _with_picks(rec: dict, attacks: list[dict]) -> dict:
    picked = pick_strongest(attacks)
    rec.update(
        attacks=attacks,
        strongest_attack=picked["attack"],
        strongest_attack_by_auc=picked["by_auc"],
        strongest_attack_low_fpr=picked["low_fpr"],
        battery_chance=battery_chance_test(attacks),
    )
    return rec


def _run(text_sep: float, user_sep: float, claim: dict | None = None) -> dict:
    run = _with_picks(
        {"name": "m", "claim": claim or {"epsilon": None}},
        [_attack("lm-loss", text_sep, 600, 1)],
    )
    users = _with_picks(
        {"unit": "user", "counts": {"members": {"users": 300}, "nonmembers": {"users": 300}}},
        [_attack("lm-loss:user-mean", user_sep, 300, 2, unit="user")],
    )
    run["users"] = users
    return run


def test_a_user_level_leak_is_not_hidden_by_a_low_per_text_level():
    run = _run(0.0, 2.0)
    per_text = verdict_for_run(run)
    assert per_text["level"] in ("low", "inconclusive")
    v = combine_unit_verdicts(run, per_text)
    assert v["level"] == "high" and v["unit"] == "user"
    assert v["by_unit"] == {"example": per_text["level"], "user": "high"}
    assert v["text"].startswith("Per user (300 member and 300 non-member users")
    assert "Per text: " in v["text"] and "of member users" in v["text"]


def test_per_text_high_stays_first_and_both_units_are_named():
    run = _run(2.0, 0.0)
    v = combine_unit_verdicts(run, verdict_for_run(run))
    assert v["level"] == "high" and v["unit"] == "example"
    assert v["text"].startswith("Per text: ") and "Per user (300" in v["text"]


def test_a_per_example_claim_is_not_checked_against_user_level_bounds():
    claim = {"epsilon": 0.5, "delta": 1e-5, "unit": "example", "notion": "central-dp"}
    run = _run(0.0, 4.0, claim)
    assert user_view(run)["claim"].get("epsilon") is None  # no per-user claim to check
    v = combine_unit_verdicts(run, verdict_for_run(run))
    assert v["claim_status"] != "violated"


def test_a_per_user_claim_below_a_per_user_bound_is_violated():
    claim = {"epsilon": 0.5, "delta": 1e-5, "unit": "user", "notion": "central-dp", "proven": True}
    run = _run(0.0, 4.0, claim)
    v = combine_unit_verdicts(run, verdict_for_run(run))
    assert v["claim_status"] == "violated"
    assert "VIOLATED" in run["users"]["verdict"]["text"]


def test_a_shifted_split_stands_whatever_the_users_show():
    run = _run(0.0, 3.0)
    run["split_check"] = {
        "shifted": True,
        "blind": {"auc": {"value": 0.9, "ci_low": 0.85, "ci_high": 0.95}},
    }
    per_text = verdict_for_run(run)
    v = combine_unit_verdicts(run, per_text)
    assert v["level"] == per_text["level"] == "split-shifted"
    assert v["text"] == per_text["text"]


def test_what_a_per_example_claim_implies_for_a_person():
    import math

    from privacy_audit.audit.users import group_privacy_note
    from privacy_audit.reports.users_view import group_privacy_line
    from privacy_audit.stats.by_user import texts_per_user

    counts = texts_per_user(["a", "a", "a", "b", "c", "d"], [1, 1, 1, 1, 0, 0])
    claim = {"epsilon": 0.5, "delta": 1e-6, "unit": "example"}
    note = group_privacy_note(claim, counts)
    by = {r["user"]: r for r in note["implied"]}
    assert by["median"]["texts"] == 2 and by["largest"]["texts"] == 3  # median 2.0, max 3
    assert by["largest"]["epsilon"] == pytest.approx(1.5)
    assert by["largest"]["delta"] == pytest.approx(3 * math.exp(2 * 0.5) * 1e-6)
    line = group_privacy_line({"group_privacy": note})
    assert "a largest member user (3 texts): ε ≤ 1.50" in line
    assert group_privacy_note({**claim, "unit": "user"}, counts) is None  # already per person


@pytest.mark.parametrize("text_sep, user_sep", [(0.0, 0.0), (0.0, 2.0), (2.0, 0.0), (0.3, 0.5)])
def test_per_user_sentences_read_cleanly(text_sep, user_sep):
    from tests.reports.test_sentences import lint

    run = _run(text_sep, user_sep)
    v = combine_unit_verdicts(run, verdict_for_run(run))
    from privacy_audit.reports.html import unit_paragraphs

    assert lint(run["users"]["verdict"]["text"]) == []
    paragraphs = unit_paragraphs(v["text"])
    assert len(paragraphs) == 2  # one per unit, each linted on its own
    assert all(lint(p) == [] for p in paragraphs), paragraphs
    if "inconclusive" in run["users"]["verdict"]["text"].lower():
        assert "member users" in run["users"]["verdict"]["text"]


def test_unequal_texts_per_user_inflate_the_tail_without_any_leak():
    """Why the counts check exists: no training, one text per member user and twenty per
    non-member user; the per-user mean of the members varies more, and its tail crosses
    the non-members' 1% threshold far more often than 1%."""
    from privacy_audit.audit.users import counts_check
    from privacy_audit.stats.by_user import user_scores

    rng = np.random.default_rng(0)
    groups, members, scores = [], [], []
    for u in range(600):
        n = 1 if u < 300 else 20
        effect = rng.normal(0, 0.5)
        groups += [f"u{u}"] * n
        members += [int(u < 300)] * n
        scores += list(effect + rng.normal(0, 1, n))
    us = user_scores(np.asarray(scores), np.asarray(members), groups, "mean")
    null = np.sort(us.scores[us.members == 0])
    threshold = null[int(0.99 * null.size)]
    tpr = float((us.scores[us.members == 1] > threshold).mean())
    assert tpr > 0.05  # five times the nominal 1%, with nothing learnt
    check = counts_check(groups, members)
    assert check["differs"] and check["median_members"] == 1 and check["median_nonmembers"] == 20
    # alike counts on both sides: not flagged
    same = counts_check([f"u{i // 3}" for i in range(60)], [int(i < 30) for i in range(60)])
    assert not same["differs"] and same["p_value"] == 1.0


def test_aggregates_over_unequal_counts_are_shown_but_not_judged():
    from privacy_audit.audit.integrations.gate import check_all

    run = _run(0.0, 3.0)
    check = {"differs": True, "p_value": 1e-9, "text": "member and non-member users hold "
             "different numbers of texts (median 1 vs 20, p = 1e-09)"}  # fmt: skip
    run["users"]["counts_check"] = check
    for a in run["users"]["attacks"]:
        a["comparable"], a["not_comparable"] = False, check["text"]
    v = combine_unit_verdicts(run, verdict_for_run(run))
    assert run["users"]["verdict"]["level"] == "inconclusive"  # never HIGH from the counts
    assert "no per-user attack is comparable" in run["users"]["verdict"]["text"]
    assert v["level"] == "inconclusive" and v["by_unit"]["user"] == "inconclusive"
    _, failures = check_all({"runs": [run]}, {"max_auc": 0.99})
    assert any("not comparable across the two sides" in f.message for f in failures)
