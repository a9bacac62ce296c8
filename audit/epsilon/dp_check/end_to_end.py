"""Crafted-dataset many-run audits on the user's own setup: a distribution-free ε bound.

The part checks turn measurements into ε through an accountant, which assumes Gaussian
noise and a release linear in the clipped gradients. Where those assumptions fail, or to
confirm a finding without them, these audits run the user's optimizer many times on two
crafted datasets that differ in one example and bound ε from how often a fixed test tells
them apart (Clopper–Pearson at a threshold chosen on a disjoint half of the runs:
:func:`privacy_audit.stats.epsilon_bounds.epsilon_lower_bound`). Each run is a fresh instance
(``make_private`` again), so runs are independent as the bound needs.

- :func:`lone_canary` — the dataset is one example whose gradient is a large Dirac on one
  coordinate (clipped to C by the code), drawn at every step with probability q, against
  the empty dataset; score: the likelihood ratio of the releases' coordinate for the
  claimed mechanism (any fixed score is valid). Catches noise, clipping and state across
  steps.
- :func:`anchor_pair` — the same example among K anchors whose gradients point the other
  way (−A·e_j each, A ≫ C): clipping after aggregation lets the example flip the sum.
- :func:`duplicate_record` — one step of the user's model on D copies of a dataset item
  against the same plus one other item (cross-example layers), scored by the release's
  projection on the pilot runs' mean difference.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from privacy_audit.audit.epsilon.dp_check.harness import Instance, crafted_step, zero_rows


@dataclass
class EndToEnd:
    design: str
    runs_per_side: int
    steps_per_run: int
    epsilon_lower: float
    delta: float
    cpu_s: float
    wall_s: float
    stopped_at_budget: bool
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "design": self.design,
            "runs_per_side": self.runs_per_side,
            "steps_per_run": self.steps_per_run,
            "epsilon_lower": self.epsilon_lower,
            "delta": self.delta,
            "kind": "sound lower bound (Clopper–Pearson at 99.9%, threshold chosen on a "
            "disjoint half)",
            "cpu_s": self.cpu_s,
            "wall_s": self.wall_s,
            "stopped_at_budget": self.stopped_at_budget,
            **self.detail,
        }


#: confidence of the many-run bound: a VIOLATED verdict may rest on it alone, and a claim
#: calibrated to be tight must not be called violated once in twenty runs
CONFIDENCE = 0.999


def _bound(scores_in: list[float], scores_out: list[float], delta: float, seed: int) -> float:
    from privacy_audit.stats.epsilon_bounds import epsilon_lower_bound

    n = min(len(scores_in), len(scores_out))
    if n < 4:
        return 0.0
    s = np.asarray(scores_in[:n] + scores_out[:n], dtype=float)
    if not np.isfinite(s).all():  # a score is a fixed function of the runs: clip it
        s = np.nan_to_num(s, nan=0.0, posinf=1e300, neginf=-1e300)
    m = np.repeat([1, 0], n)
    return float(epsilon_lower_bound(s, m, delta, confidence=CONFIDENCE, seed=seed))


def many_runs(
    factory: Callable[[int], Instance],
    rows_for: Callable[[Instance, bool, np.random.Generator], Any],
    score: Callable[[list[dict]], float],
    steps: int,
    runs: int,
    deadline: float,
    seed: int,
) -> tuple[list[float], list[float], bool]:
    """Alternate runs with (in) and without (out) the example until ``runs`` per side or
    the deadline; each run a fresh instance and its own sampling stream."""
    s_in: list[float] = []
    s_out: list[float] = []
    stopped = False
    first_out: list[dict] = []
    for r in range(runs):
        for present, bucket in ((True, s_in), (False, s_out)):
            if time.perf_counter() > deadline:  # the budget wins over the run count
                stopped = True
                break
            inst = factory(r)
            rng = np.random.default_rng([seed, r, int(present)])
            rels = []
            for _ in range(steps):
                rel = crafted_step(inst, rows_for(inst, present, rng))
                if rel is not None:
                    rels.append(rel)
            if not present and rels and len(first_out) < 2:
                first_out.append(rels[0])
                if len(first_out) == 2 and all(
                    torch.equal(first_out[0][n], first_out[1][n]) for n in first_out[0]
                ):
                    raise DependentRuns(
                        "two runs released the same noise: the runs are not independent "
                        "(does the setup seed its own noise?)"
                    )
            bucket.append(score(rels))
        if stopped:
            break
    return s_in, s_out, stopped


class DependentRuns(Exception):
    """Two runs of the setup drew the same noise: a many-run bound would not be valid."""


def lone_canary(
    factory: Callable[[int], Instance],
    tensor: str,
    clip: float,
    q: float,
    steps: int,
    noise_std: float,
    mu: float,
    delta: float,
    runs: int,
    deadline: float,
    seed: int = 0,
    anchors: int = 0,
) -> EndToEnd:
    """See the module docstring; ``anchors`` > 0 is the anchor-pair design."""
    w0, c0 = time.perf_counter(), time.process_time()
    big = 1e3 * clip * max(1, anchors + 1)

    def rows_for(inst: Instance, present: bool, rng: np.random.Generator):
        k = int(rng.binomial(anchors, q)) if anchors else 0
        has = present and rng.random() < q
        rows = zero_rows(inst, k + int(has))
        for i in range(k):
            rows[tensor][i].reshape(-1)[0] = -100.0 * clip
        if has:
            rows[tensor][-1].reshape(-1)[0] = big
        return rows

    def score(rels: list[dict]) -> float:
        x = np.array([float(r[tensor].reshape(-1)[0]) / noise_std for r in rels])
        if anchors:  # the example's +1 against the anchors' −1: a larger sum is "in"
            return float(x.sum())
        # log-likelihood ratio of Poisson(q)-sampled N(μ, 1) against N(0, 1), per release
        return float(np.logaddexp(np.log1p(-q), mu * x - mu * mu / 2 + np.log(q)).sum())

    try:
        s_in, s_out, stopped = many_runs(factory, rows_for, score, steps, runs, deadline, seed)
    except DependentRuns as exc:
        return EndToEnd(
            "anchor pair" if anchors else "lone canary",
            0,
            steps,
            0.0,
            delta,
            time.process_time() - c0,
            time.perf_counter() - w0,
            False,
            {"refused": str(exc)},
        )
    eps = _bound(s_in, s_out, delta, seed)
    return EndToEnd(
        "anchor pair" if anchors else "lone canary",
        min(len(s_in), len(s_out)),
        steps,
        eps,
        delta,
        time.process_time() - c0,
        time.perf_counter() - w0,
        stopped,
        {"tensor": tensor, "anchors": anchors, "q": q},
    )


def duplicate_record(
    factory: Callable[[int], Instance],
    step: Callable[[Instance, Any], dict | None],
    base_batch: Any,
    other_batch: Any,
    delta: float,
    runs: int,
    deadline: float,
    seed: int = 0,
    pilots: int = 8,
) -> EndToEnd:
    """One step of the model on ``base_batch`` (D copies of one item) against
    ``other_batch`` (one copy replaced by another item); score = the release projected on
    the pilot runs' mean difference (pilots are not counted)."""
    w0, c0 = time.perf_counter(), time.process_time()

    def release(r: int, present: bool) -> torch.Tensor | None:
        torch.manual_seed(seed * 1_000_003 + 2 * r + int(present))
        inst = factory(r)
        rel = step(inst, other_batch if present else base_batch)
        if rel is None:
            return None
        return torch.cat([rel[n].reshape(-1).double() for n in sorted(rel)])

    diffs = []
    for r in range(pilots):
        if time.perf_counter() > deadline:
            break
        a, b = release(10_000 + r, True), release(10_000 + r, False)
        if a is None or b is None:
            break
        diffs.append(a - b)
    if not diffs:
        return EndToEnd("duplicate record", 0, 1, 0.0, delta, 0.0, 0.0, False)
    u = torch.stack(diffs).mean(0)
    u = u / (u.norm() + 1e-300)
    s_in, s_out = [], []
    stopped = False
    for r in range(runs):
        if time.perf_counter() > deadline:
            stopped = True
            break
        a, b = release(r, True), release(r, False)
        if a is None or b is None:
            break
        s_in.append(float(a @ u))
        s_out.append(float(b @ u))
    eps = _bound(s_in, s_out, delta, seed)
    return EndToEnd(
        "duplicate record",
        min(len(s_in), len(s_out)),
        1,
        eps,
        delta,
        time.process_time() - c0,
        time.perf_counter() - w0,
        stopped,
        {
            "pilot_runs": len(diffs),
            "note": "information only: a replace-one pair forced into one step, not the "
            "claim's Poisson add/remove mechanism",
        },
    )


def runs_for_budget(seconds: float, seconds_per_run: float, cap: int = 5000) -> int:
    """Runs per side that fit ``seconds`` at the measured cost of one run (both sides)."""
    if not (seconds_per_run > 0 and math.isfinite(seconds_per_run)):
        return 0
    return int(max(0, min(cap, seconds / (2 * seconds_per_run))))
