"""Every verdict, headline and reason sentence, rendered for every branch the rules can
take, read by a linter that fails on doubled words, empty slots, leftovers of formatting
and contradictions (a TPR both "not resolvable" and a number; "no leakage" beside HIGH)."""

from __future__ import annotations

import functools
import itertools
import re

import numpy as np
import pytest

from privacy_audit.attacks.base import AttackResult, MetricSettings
from privacy_audit.audit.results import pick_strongest, run_record
from privacy_audit.defenses.base import PrivacyClaim

DOUBLED = re.compile(r"\b(\w+)\s+\1\b", re.IGNORECASE)
# a doubled word that is English ("had had", "that that") does not occur in these texts
SLOTS = re.compile(
    r"\{[a-z_]*\}|\bNone\b|\bnan\b|\binf\b(?!ini)|\(\s*\)|\[\s*\]|\s[,.;:](?!\d)|,,|\.\.(?!\.)|  "
)


def lint(text: str) -> list[str]:
    problems = []
    if not text.strip():
        problems.append("empty")
    m = DOUBLED.search(text)
    if m and m.group(1).lower() not in {"very"}:
        problems.append(f"doubled word {m.group(0)!r}")
    m = SLOTS.search(text)
    if m:
        problems.append(
            f"slot or leftover {m.group(0)!r} at {m.start()}: …{text[max(0, m.start() - 40) : m.end() + 40]}…"
        )
    if re.search(r"not resolvable at this n", text) and re.search(
        r"identifies \d+\.\d% \[[^\]]*\] of members at 1% false positives", text
    ):
        problems.append("TPR at 1% both unresolvable and a number")
    if text.lower().startswith("no leakage") and "HIGH" in text:
        problems.append("no leakage beside HIGH")
    return problems


def _attack(name, sep, n_in, n_out, seed):
    rng = np.random.default_rng(seed)
    m = np.r_[np.ones(n_in, dtype=int), np.zeros(n_out, dtype=int)]
    s = rng.normal(size=n_in + n_out) + sep * m
    return AttackResult.from_scores(name, s, m, None, MetricSettings(n_boot=100), name)


CLAIMS = {
    "none": PrivacyClaim.none(),
    "dp-8": PrivacyClaim(8.0, 1e-5, "example", "central-dp", "rdp", True, "DP-SGD"),
    "dp-0.1": PrivacyClaim(0.1, 1e-5, "example", "central-dp", "rdp", True, "DP-SGD"),
    "heuristic": PrivacyClaim(2.0, None, "token", "metric-dp", None, False, "heuristic"),
}


BRANCHES = list(
    itertools.product(
        (0.0, 0.3, 3.0, -2.0),
        ((60, 60), (300, 298), (400, 1200)),
        CLAIMS,
        (False, True),
        (False, True),
    )
)


def _label(sep, sizes, claim, shifted, two) -> str:
    return f"sep={sep} n={sizes[0]}/{sizes[1]} claim={claim} shifted={shifted} two={two}"


@functools.cache
def _run(sep, sizes, claim, shifted, two) -> dict:
    """One run over the branches: separations (none, weak, strong, inverted), sizes around
    the resolution thresholds, two attacks that disagree, claims, a shifted split. Built
    when a test asks for it (not at collection: 192 runs with bootstraps take seconds)."""
    n_in, n_out = sizes
    attacks = [_attack("lm-loss", sep, n_in, n_out, 1)]
    if two:
        attacks.append(_attack("zlib", sep / 2 + 0.2, n_in, n_out, 2))
    run = run_record("model", "as-is", CLAIMS[claim], None, attacks)
    p = pick_strongest(run["attacks"])
    run.update(
        strongest_attack=p["attack"],
        strongest_attack_by_auc=p["by_auc"],
        strongest_attack_low_fpr=p["low_fpr"],
    )
    if shifted:
        run["split_check"] = {
            "shifted": True,
            "status": "shifted",
            "confidence": 0.98,
            "text": "the two sets differ in their text itself",
            "blind": {"auc": {"value": 0.8, "ci_low": 0.7, "ci_high": 0.9}},
            "duplicates": {"pairs": 0},
        }
    return run


@pytest.mark.parametrize("branch", BRANCHES, ids=[_label(*b) for b in BRANCHES])
def test_every_verdict_sentence_reads_cleanly(branch):
    from privacy_audit.audit.integrations.cli import verdict_line
    from privacy_audit.reports.verdict import (
        epsilon_headline,
        headline_text,
        strongest_two_ways,
        verdict_for_run,
    )

    run = _run(*branch)
    v = verdict_for_run(run)
    texts = {
        "verdict": v["text"],
        "verdict line": verdict_line(run),
        "headline": headline_text(epsilon_headline(run)) or "none",
        "strongest": strongest_two_ways(run) or "none",
    }
    for where, text in texts.items():
        assert lint(text) == [], (where, text)


def test_the_levels_and_claims_reached_cover_every_branch():
    from privacy_audit.reports.verdict import verdict_for_run

    runs = [_run(*b) for b in BRANCHES]
    levels = {verdict_for_run(r)["level"] for r in runs}
    assert {"high", "low", "inconclusive", "invalid-attack", "split-shifted"} <= levels, levels
    claims = {verdict_for_run(r)["claim_status"] for r in runs}
    assert len(claims) >= 3, claims


@pytest.mark.parametrize(
    "bad",
    [
        "the the attack",
        "ε ≥ None (strongest attack)",
        "AUC nan [0.5, 0.6]",
        "identifies {tpr} of members",
        "reaches AUC 0.6 , which",
        "TPR ()",
        "its TPR at 1% false positives is not resolvable at this n; it identifies 5.0% [1.0, 9.0] of members at 1% false positives",
    ],
)
def test_the_linter_catches_what_it_looks_for(bad):
    assert lint(bad) != []
