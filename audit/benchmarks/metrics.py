"""``privacy-audit bench metrics``: membership metrics near the cost of one sort.

Cases, all on the same 10^6 Gaussian scores (5·10^5 members ~ N(0.5, 1), 5·10^5
non-members ~ N(0, 1)), timed side by side in one run:

* ``sklearn-auc`` (reference): one ``sklearn.metrics.roc_auc_score`` call;
* ``membership_metrics``: :func:`privacy_audit.stats.metrics.membership_metrics` with 1,000
  bootstrap resamples (every value, interval and the ε bound); target <= 30x the
  reference;
* ``sklearn-auc-float32`` / ``membership_metrics-float32``: the same two on the scores
  cast to float32 (as torch produces them; ~0.7 % of them then tie), so the tie-aware
  fast path is timed against its own reference; target <= 30x;
* ``one-sort``: ``numpy.argsort`` of the scores (reference for the ε bound);
* ``epsilon-split``: :func:`privacy_audit.stats.epsilon_bounds.epsilon_lower_bound` (Clopper-Pearson,
  split threshold), reported against ``one-sort``.

Times are process CPU time (``time.process_time``), which other load on a shared machine
inflates less than wall time; the load average is recorded beside them.
"""

from __future__ import annotations

import os
import time

import numpy as np

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, time_cases


def run(settings: BenchSettings) -> BenchResult:
    from sklearn.metrics import roc_auc_score

    from privacy_audit.stats.epsilon_bounds import epsilon_lower_bound
    from privacy_audit.stats.metrics import membership_metrics

    n_side, n_boot = (10_000, 100) if settings.quick else (500_000, 1000)
    rng = np.random.default_rng(settings.seed)
    scores = np.r_[rng.normal(0.5, 1.0, n_side), rng.normal(0.0, 1.0, n_side)]
    members = np.r_[np.ones(n_side, dtype=int), np.zeros(n_side, dtype=int)]
    scores32 = scores.astype(np.float32)
    tied32 = 1.0 - np.unique(scores32).size / scores32.size
    cases = {
        "sklearn-auc": lambda: roc_auc_score(members, scores),
        "membership_metrics": lambda: membership_metrics(scores, members, n_boot=n_boot),
        "sklearn-auc-float32": lambda: roc_auc_score(members, scores32),
        "membership_metrics-float32": lambda: membership_metrics(scores32, members, n_boot=n_boot),
        "one-sort": lambda: np.argsort(scores),
        "epsilon-split": lambda: epsilon_lower_bound(scores, members, 1e-5),
    }
    load_before = os.getloadavg()
    repeats = max(1, min(settings.repeats, 3))  # membership_metrics takes seconds per call
    timings = time_cases(cases, repeats, min(settings.warmup, 1), clock=time.process_time)
    med = {k: v.median_s for k, v in timings.items()}
    return BenchResult(
        name="metrics",
        reference="sklearn-auc",
        cases={k: v.summary() for k, v in timings.items()},
        ratios={
            "sklearn-auc": 1.0,
            "membership_metrics": med["membership_metrics"] / med["sklearn-auc"],
            "sklearn-auc-float32": med["sklearn-auc-float32"] / med["sklearn-auc"],
            # against sklearn on the same float32 scores (its own, faster, reference)
            "membership_metrics-float32": med["membership_metrics-float32"]
            / med["sklearn-auc-float32"],
            "one-sort": med["one-sort"] / med["sklearn-auc"],
            "epsilon-split": med["epsilon-split"] / med["sklearn-auc"],
            "epsilon-split / one-sort": med["epsilon-split"] / med["one-sort"],
        },
        setup={
            "n_members": n_side,
            "n_nonmembers": n_side,
            "n_boot": n_boot,
            "float32_tied_fraction": tied32,
            "repeats": repeats,
            "clock": "process CPU time",
            "load_average_before": list(load_before),
            "load_average_after": list(os.getloadavg()),
        },
        targets={
            "membership_metrics": "<= 30x sklearn-auc",
            "membership_metrics-float32": "<= 30x sklearn-auc-float32",
        },
        notes=[
            "membership_metrics: one sort; AUC/TPR/balanced-accuracy intervals are analytic; "
            "the advantage's upper limit uses 1,000 Poisson-bootstrap resamples on the sorted "
            "order (no per-resample sort); tied scores (float32) take the same block "
            "fast path, reading TPR - FPR at tie-group ends only.",
            "epsilon-split: ratio to one argsort of the same 10^6 scores is "
            "'epsilon-split / one-sort'.",
        ],
    )
