"""The utility floor: an arm of a comparison counts only when it learned.

Every arm a comparison reads (a defense in ``compare``, a run's defenses in the verdict, a
row of the paper-claims table in ``experiments/claims.py``) must clear a trivial baseline
with its CI: the majority-class rate for classifiers (the arm's accuracy CI entirely above
it), the unigram perplexity for LMs and, where the arms start from public pretraining, the
public-only start (the arm's perplexity CI entirely below the baseline's CI), chance (0.5)
for AUCs, a random ranking for recommenders. A comparison of models that learned nothing
says nothing about the mechanisms, so an arm that does not clear its floor makes the
comparison "not comparable", never a finding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Baseline:
    """A trivial baseline an arm must clear (majority class, unigram LM, public start...)."""

    name: str
    value: float
    ci_low: float | None = None
    ci_high: float | None = None


@dataclass
class Arm:
    """One arm of a comparison with its utility CI and the baselines it must clear."""

    name: str
    value: float
    ci_low: float | None
    ci_high: float | None
    higher_is_better: bool
    floors: list[Baseline]


def clears(arm: Arm, floor: Baseline) -> bool:
    """True when the arm's CI lies entirely on the better side of the baseline's CI (of its
    value when it has none). An arm without a finite CI never clears: not shown to learn."""
    lo, hi = arm.ci_low, arm.ci_high
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return False
    if arm.higher_is_better:
        ref = floor.ci_high if floor.ci_high is not None else floor.value
        return lo > ref
    ref = floor.ci_low if floor.ci_low is not None else floor.value
    return hi < ref


def floor_checks(arms: list[Arm]) -> list[dict[str, Any]]:
    """One record per (arm, baseline): both intervals and whether the arm cleared it."""
    return [
        {
            "arm": a.name,
            "value": a.value,
            "ci_low": a.ci_low,
            "ci_high": a.ci_high,
            "higher_is_better": a.higher_is_better,
            "baseline": f.name,
            "baseline_value": f.value,
            "baseline_ci_low": f.ci_low,
            "baseline_ci_high": f.ci_high,
            "cleared": clears(a, f),
        }
        for a in arms
        for f in a.floors
    ]
