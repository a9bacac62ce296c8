"""User-level ε audits with canary USERS: one-run (white-box canary users in the real run)
and many-runs (one canary user, training repeated with and without it).

One run (Steinke, Nasr & Jagielski 2023, with users as the units): m canary users, each
with k records, each user included with probability ½ independently of everything else;
after ONE training run each canary user gets a score from the release (here the white-box
likelihood ratio of :class:`privacy_audit.defenses.gradient_canaries.CanaryUsers`), and
the one-run bound of :func:`privacy_audit.attacks.canary_bounds.one_run_group_best`
(group = 1: a canary user is ONE unit of a user-level claim) is a lower confidence bound
on the user-level ε. It contradicts a claim whose unit is ``"user"``.

Many runs (Jagielski et al. 2020, with a user as the unit): R runs of the trainer on D and
R on D ∪ {canary user} (independent seeds), each scored by the same likelihood ratio of
the canary user's coordinate; the threshold is fixed on half the runs and the
Clopper–Pearson bound counted on the other half
(:func:`privacy_audit.attacks.epsilon.epsilon_lower_bound`, ``threshold="split"``).

A claim whose unit is ``"example"`` says nothing directly about a user with k records;
group privacy turns it into (kε, k e^{(k−1)ε} δ) (``attacks/user_level.py``), and only
then can a user-level bound be compared with it. Not done here: these audits compare
with user-level claims only and report any other unit as not comparable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privacy_audit.attacks.canary_bounds import one_run_group_best


def _comparable(claim) -> tuple[bool, str | None]:
    unit = getattr(claim, "unit", None) if not isinstance(claim, dict) else claim.get("unit")
    eps = getattr(claim, "epsilon", None) if not isinstance(claim, dict) else claim.get("epsilon")
    if eps is None or not np.isfinite(eps):
        return False, "no finite ε claimed"
    if unit != "user":
        return (
            False,
            f"the claim's unit is {unit!r}, not 'user'; a canary-user bound bounds user-level ε",
        )
    return True, None


def one_run_user_audit(
    scores, included, claim, delta: float, records: int, confidence: float = 0.95, seed: int = 0
) -> dict[str, Any]:
    """The one-run user-level audit of one run's canary users (module docstring).

    ``scores``: one per canary user (higher = present); ``included``: their secret bits;
    ``records``: texts (records) per canary user, reported only. ``status`` is
    ``"violated"`` when the bound exceeds a user-level claim, ``"consistent"`` when it
    does not and the design's ceiling could have, ``"untestable"`` when even every guess
    right could not exceed the claim, ``"not-comparable"`` for a claim on another unit."""
    best = one_run_group_best(scores, included, delta, 1, confidence, seed=seed)
    ok, why = _comparable(claim)
    eps = claim.get("epsilon") if isinstance(claim, dict) else claim.epsilon
    out = {
        "name": "canary users (one-run, white-box)",
        "unit": "user",
        "epsilon_lb": float(best["epsilon"]),
        "ceiling": float(best["ceiling"]),
        "claimed_epsilon": eps,
        "canary_users": int(len(included)),
        "records_per_user": int(records),
        "n_in": int(np.sum(included)),
        "n_out": int(len(included) - np.sum(included)),
        "guesses": int(best["guesses"]),
        "correct": int(best["correct"]),
        "method": best["method"],
        "confidence": confidence,
        "delta": delta,
    }
    if not ok:
        return {**out, "status": "not-comparable", "reason": why}
    if best["epsilon"] > eps:
        status = "violated"
    elif best["ceiling"] <= eps:
        status = "untestable"
    else:
        status = "consistent"
    return {**out, "status": status, "reason": None}


def many_run_user_audit(
    scores_with, scores_without, claim, delta: float, confidence: float = 0.95, seed: int = 0
) -> dict[str, Any]:
    """The many-runs user-level audit from the canary user's score in each run with it
    (``scores_with``) and without it (``scores_without``); runs independent."""
    from privacy_audit.attacks.epsilon import epsilon_ceiling, epsilon_lower_bound

    s_in, s_out = np.asarray(scores_with, float), np.asarray(scores_without, float)
    scores = np.concatenate([s_in, s_out])
    members = np.concatenate([np.ones(s_in.size, np.int64), np.zeros(s_out.size, np.int64)])
    lb = epsilon_lower_bound(
        scores, members, delta, confidence=confidence, threshold="split", seed=seed
    )
    ceiling = epsilon_ceiling(
        s_in.size, s_out.size, delta, confidence=confidence, threshold="split"
    )
    ok, why = _comparable(claim)
    eps = claim.get("epsilon") if isinstance(claim, dict) else claim.epsilon
    out = {
        "name": "canary user (many runs, white-box)",
        "unit": "user",
        "epsilon_lb": float(lb),
        "ceiling": float(ceiling),
        "claimed_epsilon": eps,
        "n_in": int(s_in.size),
        "n_out": int(s_out.size),
        "method": "clopper-pearson, split threshold",
        "confidence": confidence,
        "delta": delta,
    }
    if not ok:
        return {**out, "status": "not-comparable", "reason": why}
    status = "violated" if lb > eps else ("untestable" if ceiling <= eps else "consistent")
    return {**out, "status": status, "reason": None}
