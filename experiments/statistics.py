"""Simulations behind the suite's statistical claims, shared by the tests and the docs.

* :func:`one_run_simulation`: soundness and tightness of the one-run eps lower bounds
  (Steinke et al. 2023; the f-DP audit of Mahloujifar, Melis & Chaudhuri 2024) on
  canaries whose true eps is known in closed form: randomised response (binary scores,
  so ties are broken by the seeded jitter of :func:`privacy_audit.stats.one_run_bounds.one_run_best`) and
  Gaussian scores (the Gaussian mechanism).

``python -m experiments.statistics --out docs/records/one-run-fdp.json`` records the tables
quoted in docs/statistics.md; the tests assert on the same functions with the same seeds.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from privacy_audit.stats.epsilon_bounds import gaussian_mechanism_epsilon
from privacy_audit.stats.one_run_bounds import (
    check_k_grid,
    fdp_bound,
    fdp_epsilon_array,
    one_run_counts,
    one_run_eps,
    tie_break_key,
)

#: name -> (mechanism, true eps at delta = 1e-5 for Gaussian; eps of randomised response).
ONE_RUN_SETTINGS = {
    "randomised response eps=1": ("rr", 1.0),
    "randomised response eps=2": ("rr", 2.0),
    "gaussian eps=1": ("gaussian", 1.0),
    "gaussian eps=2": ("gaussian", 2.0),
}


def rr_epsilon(eps: float, delta: float) -> float:
    """Smallest eps' with eps-randomised response (eps', delta)-DP: ln((p - delta) / (1 - p))."""
    p = math.exp(eps) / (1.0 + math.exp(eps))
    return math.log((p - delta) / (1.0 - p))


def gaussian_mu(eps: float, delta: float) -> float:
    """mu of the Gaussian mechanism whose exact eps at ``delta`` is ``eps``."""
    return brentq(lambda mu: gaussian_mechanism_epsilon(mu, delta) - eps, 1e-3, 50.0, xtol=1e-13)


def draw_canaries(kind: str, param: float, m: int, rng) -> tuple[np.ndarray, np.ndarray]:
    """``(scores, included)`` for m canaries, each included with probability 1/2."""
    included = rng.random(m) < 0.5
    if kind == "rr":
        keep = rng.random(m) < math.exp(param) / (1.0 + math.exp(param))
        return np.where(keep, included, ~included).astype(np.float64), included
    return rng.normal(param * included, 1.0), included


def one_run_simulation(
    name: str,
    trials: int = 200,
    canaries: int = 1000,
    delta: float = 1e-5,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict:
    """Bounds of every one-run estimator over ``trials`` seeded runs of one setting.

    Each trial draws fresh canaries and computes, on the SAME guesses (default grid of
    :func:`privacy_audit.stats.one_run_bounds.one_run_best`, random tie-breaking with the trial's seed,
    Bonferroni over the grid), the Steinke bound, the f-DP bound with the (eps, delta)-DP
    curve, their maximum (``"best"``, the default of ``one_run_best``) and the
    f-DP bound with the Gaussian curve (``"fdp-gaussian"``: valid for the Gaussian
    mechanism only, since it assumes a Gaussian trade-off curve).  Gaussian canaries score
    ``N(mu * included, 1)`` with mu calibrated so that the exact eps at ``delta`` is the
    setting's eps; randomised-response canaries report their inclusion bit, flipped with
    probability ``1 / (1 + e^eps)``.
    Returns per-estimator bound arrays, exceedance counts (bound > true eps) and the
    mean bound as a fraction of the true eps.
    """
    kind, eps = ONE_RUN_SETTINGS[name]
    if kind == "rr":
        param, eps_true = eps, rr_epsilon(eps, delta)
    else:
        param = gaussian_mu(eps, delta)
        eps_true = gaussian_mechanism_epsilon(param, delta)
    grid = check_k_grid(None, canaries)
    alpha_k = (1.0 - confidence) / len(grid)
    rng = np.random.default_rng([seed, list(ONE_RUN_SETTINGS).index(name)])
    r = np.zeros((trials, len(grid)), dtype=np.int64)
    v = np.zeros_like(r)
    for t in range(trials):
        s, inc = draw_canaries(kind, param, canaries, rng)
        key = tie_break_key(canaries, "random", [seed, t])
        for j, (kp, km) in enumerate(grid):
            v[t, j], r[t, j] = one_run_counts(s, inc, kp, km, key)
    steinke = np.array(
        [
            [one_run_eps(canaries, a, b, delta, alpha_k) for a, b in zip(ra, va, strict=True)]
            for ra, va in zip(r, v, strict=True)
        ]
    )
    bounds = {
        "steinke": steinke.max(axis=1),
        "fdp": fdp_epsilon_array(canaries, r, v, delta, alpha_k, "dp").reshape(r.shape).max(axis=1),
    }
    bounds["best"] = np.maximum(bounds["steinke"], bounds["fdp"])
    # The Gaussian curve is valid for the Gaussian mechanism only; on randomised response
    # it shows that the harness catches an unsound bound.
    mu = fdp_bound(canaries, r, v, delta, alpha_k, "gaussian").reshape(r.shape).max(axis=1)
    bounds["fdp-gaussian"] = np.array([gaussian_mechanism_epsilon(x, delta) for x in mu])
    return {
        "setting": name,
        "true_epsilon": eps_true,
        "trials": trials,
        "canaries": canaries,
        "delta": delta,
        "confidence": confidence,
        "bounds": {k: b.tolist() for k, b in bounds.items()},
        "exceedances": {k: int(np.sum(b > eps_true)) for k, b in bounds.items()},
        "mean_fraction_of_true": {k: float(np.mean(b) / eps_true) for k, b in bounds.items()},
    }


# ---------------------------------------------------------------------------
# Coverage of the intervals membership_metrics reports
# ---------------------------------------------------------------------------

#: (mu, examples per side) of the coverage simulation: members N(mu, 1), non-members N(0, 1).
COVERAGE_SETTINGS = ((1.0, 200), (2.0, 200), (1.0, 1000), (2.0, 1000))
COVERAGE_STATISTICS = (
    "auc",
    "tpr_at_fpr_0.01",
    "tpr_at_fpr_0.001",
    "advantage",
    "balanced_accuracy",
    "proportion",
)


def coverage_simulation(
    mu: float,
    n: int,
    trials: int = 1000,
    n_boot: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
    advantage: bool = True,
    keep_intervals: bool = False,
) -> dict:
    """Coverage of every interval :func:`privacy_audit.stats.metrics.membership_metrics` reports.

    ``trials`` data sets of n members ~ N(mu, 1) and n non-members ~ N(0, 1), each
    scored with the same interval code as ``membership_metrics`` (vectorised over
    trials; trial t uses split seed t), against closed-form truths:
    AUC = Phi(mu / sqrt 2); TPR at FPR x = Phi(mu - Phi^-1(1 - x)); advantage =
    2 Phi(mu/2) - 1; balanced accuracy of the threshold t chosen on half A =
    (Phi(mu - t) + Phi(t)) / 2.  TPR at an FPR below 1/n is reported as "below
    resolution" (no interval) and skipped.  ``"proportion"`` is the exact coverage of
    the Clopper-Pearson interval (the suite's interval for a rate) at n trials,
    minimised over p in {0.001, 0.01, 0.05, 0.1, 0.3, 0.5}, by summing the binomial pmf
    (no simulation).  The advantage's upper limit uses ``n_boot`` Poisson-bootstrap
    resamples per trial (``membership_metrics`` defaults to 1000).
    """
    from scipy.special import ndtr, ndtri
    from scipy.stats import binom

    from privacy_audit.stats.metrics import (
        agresti_caffo,
        cp_interval,
        delong_logit_interval,
        split_counts,
        tpr_interval_exact,
    )
    from privacy_audit.stats.scores import (
        advantage_from_counts,
        auc_from_counts,
        poisson_bootstrap,
    )

    alpha = 1.0 - confidence
    z = float(-ndtri(alpha / 2.0))
    rng = np.random.default_rng([seed, int(1000 * mu), n])
    s_in = rng.normal(mu, 1.0, (trials, n))
    s_out = rng.normal(0.0, 1.0, (trials, n))
    s = np.concatenate([s_in, s_out], axis=1)
    lab = np.zeros((trials, 2 * n), dtype=bool)
    lab[:, :n] = True
    order = np.argsort(-s, axis=1)
    lab_s = np.take_along_axis(lab, order, axis=1)
    tp = np.cumsum(lab_s, axis=1)
    fp = np.cumsum(~lab_s, axis=1)
    hits: dict[str, float | None] = {}
    kept: dict[str, tuple] = {}

    auc = auc_from_counts(tp, fp, n, n)
    tp_at_neg = tp[~lab_s].reshape(trials, n)
    fp_at_pos = fp[lab_s].reshape(trials, n)
    lo, hi = delong_logit_interval(tp_at_neg, fp_at_pos, n, n, auc, z)
    truth = float(ndtr(mu / math.sqrt(2.0)))
    hits["auc"] = float(np.mean((lo <= truth) & (truth <= hi)))
    kept["auc"] = (lo, hi)

    in_desc = -np.sort(-s_in, axis=1)
    out_desc = -np.sort(-s_out, axis=1)
    for x in (0.01, 0.001):
        key = f"tpr_at_fpr_{x:g}"
        if x < 1.0 / n:
            hits[key] = None  # below resolution: reported without a number
            continue
        lo, hi = tpr_interval_exact(in_desc, out_desc, x, alpha)
        truth = float(ndtr(mu - ndtri(1.0 - x)))
        hits[key] = float(np.mean((lo <= truth) & (truth <= hi)))
        kept[key] = (lo, hi)

    members = np.r_[np.ones(n, dtype=bool), np.zeros(n, dtype=bool)]
    split = np.array([split_counts(s[t], members, t) for t in range(trials)], dtype=np.float64)
    tp_b, nb_in, fp_b, nb_out, thr = split.T
    adv_truth = float(2.0 * ndtr(mu / 2.0) - 1.0)
    if advantage:
        adv_lo, _ = agresti_caffo(tp_b, nb_in, fp_b, nb_out, z)
        reps = poisson_bootstrap(lab_s, n_boot, rng, want_auc=False)["advantage"]
        adv = advantage_from_counts(tp, fp, n, n)
        lo = np.clip(np.minimum(adv_lo, adv), 0.0, 1.0)
        hi = np.maximum(np.nanquantile(reps, 1.0 - alpha / 2.0, axis=1), adv)
        hits["advantage"] = float(np.mean((lo <= adv_truth) & (adv_truth <= hi)))
        kept["advantage"] = (lo, hi)
    else:
        hits["advantage"] = None
    d_lo, d_hi = agresti_caffo(tp_b, nb_in, fp_b, nb_out, z)
    ba_truth = 0.5 * (ndtr(mu - thr) + ndtr(thr))
    ba_lo, ba_hi = (1.0 + d_lo) / 2.0, (1.0 + d_hi) / 2.0
    hits["balanced_accuracy"] = float(np.mean((ba_lo <= ba_truth) & (ba_truth <= ba_hi)))
    kept["balanced_accuracy"] = (ba_lo, ba_hi)

    k = np.arange(n + 1)
    lo, hi = cp_interval(k, n, alpha)
    worst = min(
        float(np.sum(binom.pmf(k, n, p)[(lo <= p) & (p <= hi)]))
        for p in (0.001, 0.01, 0.05, 0.1, 0.3, 0.5)
    )
    hits["proportion"] = worst
    out = {
        "mu": mu,
        "n_per_side": n,
        "trials": trials,
        "n_boot": n_boot if advantage else None,
        "confidence": confidence,
        "coverage": hits,
        "truths": {"auc": float(ndtr(mu / math.sqrt(2.0))), "advantage": adv_truth},
    }
    if keep_intervals:
        out["intervals"] = kept
        out["data"] = (s_in, s_out)
    return out


#: (mu, canaries / examples per side) of :func:`percentile_bootstrap_coverage`.
BOOTSTRAP_SETTINGS = ((1.0, 100), (2.0, 100), (1.0, 200), (2.0, 200), (1.0, 1000), (2.0, 1000))


def percentile_bootstrap_coverage(
    mu: float,
    n: int,
    trials: int = 1000,
    n_boot: int = 200,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict:
    """Coverage of percentile-bootstrap intervals the suite no longer reports, and of
    their replacements, on n members ~ N(mu, 1) and n non-members ~ N(0, 1).

    * ``"auc (percentile bootstrap)"``: ``bootstrap_ci("auc")`` (kept), truth
      Phi(mu / sqrt 2);
    * ``"advantage (percentile bootstrap)"``: what ``bootstrap_ci("advantage")``
      returned (Poisson bootstrap on the sorted order, ``n_boot`` resamples), against
      the truth 2 Phi(mu/2) - 1;
    * ``"tpr_at_fpr_0.01 (percentile bootstrap)"``: what ``bootstrap_ci("tpr_at_fpr_0.01")``
      returns and what the canary audit's ``tpr_at_1pct_fpr`` reported before; truth
      Phi(mu - Phi^-1(0.99));
    * ``"tpr_at_fpr_0.01 (exact)"``: :func:`privacy_audit.stats.metrics.tpr_interval_exact`, the
      interval ``tpr_at_1pct_fpr`` reports now.

    Also returns the mean interval widths. Trials share nothing; seeded by
    ``(seed, mu, n)``.
    """
    from scipy.special import ndtr, ndtri

    from privacy_audit.stats.metrics import tpr_interval_exact
    from privacy_audit.stats.scores import poisson_bootstrap

    alpha = 1.0 - confidence
    rng = np.random.default_rng([seed, int(1000 * mu), n, 26])
    s_in = rng.normal(mu, 1.0, (trials, n))
    s_out = rng.normal(0.0, 1.0, (trials, n))
    s = np.concatenate([s_in, s_out], axis=1)
    lab = np.zeros((trials, 2 * n), dtype=bool)
    lab[:, :n] = True
    lab_s = np.take_along_axis(lab, np.argsort(-s, axis=1), axis=1)
    reps = poisson_bootstrap(lab_s, n_boot, rng, fprs=(0.01,))
    q = [alpha / 2.0, 1.0 - alpha / 2.0]
    truths = {
        "auc": float(ndtr(mu / math.sqrt(2.0))),
        "advantage": float(2.0 * ndtr(mu / 2.0) - 1.0),
        "tpr_at_fpr_0.01": float(ndtr(mu - ndtri(0.99))),
    }
    intervals = {
        "auc (percentile bootstrap)": np.nanquantile(reps["auc"], q, axis=1),
        "advantage (percentile bootstrap)": np.nanquantile(reps["advantage"], q, axis=1),
        "tpr_at_fpr_0.01 (percentile bootstrap)": np.nanquantile(
            reps["tpr_at_fpr_0.01"], q, axis=1
        ),
        "tpr_at_fpr_0.01 (exact)": np.array(
            tpr_interval_exact(-np.sort(-s_in, axis=1), -np.sort(-s_out, axis=1), 0.01, alpha)
        ),
    }
    coverage, width = {}, {}
    for name, (lo, hi) in intervals.items():
        truth = truths[name.split(" ")[0]]
        coverage[name] = float(np.mean((lo <= truth) & (truth <= hi)))
        width[name] = float(np.mean(hi - lo))
    return {
        "mu": mu,
        "n_per_side": n,
        "trials": trials,
        "n_boot": n_boot,
        "confidence": confidence,
        "truths": truths,
        "coverage": coverage,
        "mean_width": width,
    }


def main(argv=None) -> int:
    """Record the coverage and one-run tables the docs quote (same seeds as the tests)."""
    import argparse
    import json
    import time

    p = argparse.ArgumentParser(prog="python -m experiments.statistics")
    p.add_argument("--coverage-out", default="docs/records/interval-coverage.json")
    p.add_argument("--one-run-out", default="docs/records/one-run-fdp.json")
    p.add_argument(
        "--bootstrap-out",
        default="docs/records/bootstrap-coverage.json",
        help="coverage of the percentile bootstrap (advantage, TPR@1%%) and the exact TPR",
    )
    p.add_argument(
        "--only-bootstrap", action="store_true", help="write only the --bootstrap-out table"
    )
    args = p.parse_args(argv)
    t0 = time.time()
    boot = [percentile_bootstrap_coverage(mu, n) for mu, n in BOOTSTRAP_SETTINGS]
    with open(args.bootstrap_out, "w", encoding="utf-8") as fh:
        json.dump(
            {
                "what": "coverage of 95% percentile-bootstrap intervals (refused or replaced) "
                "and of the exact TPR interval (tests/stats/test_interval_coverage.py)",
                "settings": boot,
                "seconds": time.time() - t0,
            },
            fh,
            indent=1,
        )
    print(json.dumps({"bootstrap": [[b["mu"], b["n_per_side"], b["coverage"]] for b in boot]}))
    if args.only_bootstrap:
        return 0
    cov = [coverage_simulation(mu, n) for mu, n in COVERAGE_SETTINGS]
    mutated = [
        coverage_simulation(mu, n, confidence=0.90, advantage=False) for mu, n in COVERAGE_SETTINGS
    ]
    payload = {
        "what": "coverage of the 95% intervals of membership_metrics (tests/stats/test_metrics_coverage.py)",
        "settings": cov,
        "a 90% interval labelled 95% (the mutation the test must catch)": mutated,
        "seconds": time.time() - t0,
    }
    with open(args.coverage_out, "w", encoding="utf-8") as fh:
        json.dump(payload, fh, indent=1)
    runs = [one_run_simulation(name) for name in ONE_RUN_SETTINGS]
    for r in runs:
        r.pop("bounds")
    with open(args.one_run_out, "w", encoding="utf-8") as fh:
        json.dump(
            {"what": "one-run estimators (tests/stats/test_one_run_fdp.py)", "settings": runs},
            fh,
            indent=1,
        )
    print(json.dumps({"coverage": [c["coverage"] for c in cov]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
