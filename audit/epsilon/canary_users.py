"""User-level ε audits with canary USERS: one-run (white-box canary users in the real run)
and many-runs (one canary user, training repeated with and without it).

One run (Steinke, Nasr & Jagielski 2023, with users as the units): m canary users, each
with k records, each user included with probability ½ independently of everything else;
after ONE training run each canary user gets a score from the release (here the white-box
likelihood ratio of :class:`privacy_audit.defenses.dp_sgd_with_canaries.CanaryUsers`), and
the one-run bound of :func:`privacy_audit.stats.canary_bounds.one_run_group_best`
(group = 1: a canary user is ONE unit of a user-level claim) is a lower confidence bound
on the user-level ε. It contradicts a claim whose unit is ``"user"``.

Many runs (Jagielski et al. 2020, with a user as the unit): R runs of the trainer on D and
R on D ∪ {canary user} (independent seeds), each scored by the same likelihood ratio of
the canary user's coordinate; the threshold is fixed on half the runs and the
Clopper–Pearson bound counted on the other half
(:func:`privacy_audit.stats.epsilon_bounds.epsilon_lower_bound`, ``threshold="split"``).

A claim whose unit is ``"example"`` says nothing directly about a user with k records;
group privacy (Dwork & Roth 2014) turns it into (kε, δ_k) for the user, δ_k =
δ Σ_{i<k} e^{iε} ≤ k e^{(k−1)ε} δ. The one-run audit then tests the EXAMPLE-level claim
with the canary users as groups of k (:func:`one_run_group_best` with ``group = k``:
ε is rejected when the one-run p-value at (kε, δ_k) is ≤ α), so its bound is on the
per-example ε and is compared with the claim; the record also states what the claim
implies for a user with k records. Other units are reported as not comparable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privacy_audit.stats.canary_bounds import group_delta, one_run_group_best


def _comparable(claim, units=("user",)) -> tuple[bool, str | None]:
    unit = getattr(claim, "unit", None) if not isinstance(claim, dict) else claim.get("unit")
    eps = getattr(claim, "epsilon", None) if not isinstance(claim, dict) else claim.get("epsilon")
    if eps is None or not np.isfinite(eps):
        return False, "no finite ε claimed"
    if unit not in units:
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
    right could not exceed the claim, ``"not-comparable"`` for a claim on another unit.
    A claim per ``"example"`` is tested through group privacy with the canary users as
    groups of ``records`` (module docstring); ``implied_user_claim`` states (kε, δ_k)."""
    ok, why = _comparable(claim, ("user", "example"))
    unit = claim.get("unit") if isinstance(claim, dict) else claim.unit
    eps = claim.get("epsilon") if isinstance(claim, dict) else claim.epsilon
    group = int(records) if ok and unit == "example" else 1
    best = one_run_group_best(scores, included, delta, group, confidence, seed=seed)
    out = {
        "name": "canary users (one-run, white-box)",
        # the unit the bound is on: per user, or per example through group privacy
        "unit": "example (group privacy over k records)" if group > 1 else "user",
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
    if group > 1:
        d_k = claim.get("delta") if isinstance(claim, dict) else claim.delta
        d_k = group_delta(eps, d_k if d_k is not None else delta, group)
        out["implied_user_claim"] = {"epsilon": group * eps, "delta": d_k, "records": group}
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
    from privacy_audit.stats.epsilon_bounds import epsilon_ceiling, epsilon_lower_bound

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
