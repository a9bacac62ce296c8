"""Formulas pinned by known answers (issue 34, item 5): each test compares with an
independent computation (scipy, transformers' own defaults, a hand example) so that a
changed constant or a moved term fails, where a coverage simulation cannot see it.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from privacy_audit.attacks.dataset_inference import DatasetInference, fit_aggregator


# --------------------------------------------------------------------------- #
# Dataset inference: `significant` is p < alpha, never p <= 2 alpha
# --------------------------------------------------------------------------- #
def test_dataset_inference_significant_is_p_below_alpha():
    """The p-value recomputed with sklearn-free numpy + scipy's Welch test on the same
    seeded split; alpha set on either side of it: significant exactly when p < alpha."""
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(60, 3)) + 0.25
    xv = rng.normal(size=(60, 3))
    res = DatasetInference(seed=0).test(xs, xv)
    # independent recomputation of the one split and the one-sided Welch test
    r = np.random.default_rng(0)
    ps, pv = r.permutation(60), r.permutation(60)
    fs, ts, fv, tv = ps[:30], ps[30:], pv[:30], pv[30:]
    mu, sd, w = fit_aggregator(np.vstack([xs[fs], xv[fv]]), np.r_[np.ones(30), np.zeros(30)])
    a = w[0] + ((xs[ts] - mu) / sd) @ w[1:]
    b = w[0] + ((xv[tv] - mu) / sd) @ w[1:]
    p = stats.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue
    assert res["p_value"] == pytest.approx(p, rel=1e-10)
    assert 1e-4 < p < 0.5
    assert DatasetInference(seed=0, alpha=0.6 * p).test(xs, xv)["significant"] is False
    assert DatasetInference(seed=0, alpha=0.999 * p).test(xs, xv)["significant"] is False
    assert DatasetInference(seed=0, alpha=1.5 * p).test(xs, xv)["significant"] is True


# --------------------------------------------------------------------------- #
# Extraction risk: the product's default top-k is 50 (docs/deciding-before-release.md)
# --------------------------------------------------------------------------- #
def test_extraction_default_top_k_is_50_and_cuts_like_transformers_top_k_warper():
    """The documented default decoding (temperature 1, top-k 50, top-p 1: what
    ``generate(do_sample=True)`` used by default); its distribution over 80 distinct
    logits equals transformers' own ``TopKLogitsWarper(50)`` followed by a softmax."""
    import torch
    from transformers.generation.logits_process import TopKLogitsWarper

    from privacy_audit.attacks.extraction_risk import ExtractionRisk
    from privacy_audit.targets.decoding import Decoding

    default_k = 50
    spec = ExtractionRisk().spec()
    assert spec.decoding.top_k == default_k and Decoding().top_k == default_k
    # the default decoding's distribution over 80 distinct logits keeps exactly the top 50
    logits = torch.linspace(3.0, -3.0, 80)[None]
    want = torch.log_softmax(TopKLogitsWarper(default_k)(None, logits.clone()), dim=-1)[0]
    got = spec.decoding.log_probs(logits.repeat(80, 1), torch.arange(80))
    assert torch.isinf(got[50:]).all() and torch.isfinite(got[:50]).all()
    np.testing.assert_allclose(got[:50].numpy(), want[:50].numpy(), rtol=1e-5)


# --------------------------------------------------------------------------- #
# tpr_interval_exact: alpha / 4 for each quantile and each Clopper-Pearson half
# --------------------------------------------------------------------------- #
@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_tpr_interval_exact_allocates_alpha_over_four_quarters(alpha):
    """By hand with scipy: k1, k2 = binomial quantiles at alpha/4 and 1 - alpha/4; the
    limits are one-sided Clopper-Pearson bounds at alpha/4 (scipy's beta quantiles) on
    the members strictly above the k1-th and at or above the (k2+1)-th largest
    non-member score."""
    from privacy_audit.stats.metrics import tpr_interval_exact

    rng = np.random.default_rng(0)
    n_in, n_out, fpr = 300, 400, 0.05
    s_in = rng.normal(1.0, 1.0, n_in)
    s_out = rng.normal(0.0, 1.0, n_out)
    m_desc, o_desc = -np.sort(-s_in), -np.sort(-s_out)
    q = alpha / 4
    k1 = int(stats.binom.ppf(q, n_out, fpr))
    k2 = int(stats.binom.isf(q, n_out, fpr))
    t_hi, t_lo = o_desc[k1 - 1], o_desc[k2]
    c_hi = int((s_in > t_hi).sum())
    c_lo = int((s_in >= t_lo).sum())
    want_lo = stats.beta.ppf(q, c_hi, n_in - c_hi + 1)
    want_hi = stats.beta.ppf(1 - q, c_lo + 1, n_in - c_lo)
    lo, hi = tpr_interval_exact(m_desc[None], o_desc[None], fpr, alpha)
    assert lo[0] == pytest.approx(want_lo, abs=1e-10)
    assert hi[0] == pytest.approx(want_hi, abs=1e-10)


# --------------------------------------------------------------------------- #
# experiments/claims.py: an arm learned only when its CI clears the baseline's CI
# --------------------------------------------------------------------------- #
def test_utility_floor_is_the_baselines_interval_end_not_its_point():
    from privacy_audit.reports.utility_floor import Arm, Baseline, clears

    floor = Baseline("majority class", 0.30, 0.27, 0.33)
    # lower end 0.31: above the baseline's point 0.30, inside its interval (upper 0.33)
    assert clears(Arm("a", 0.36, 0.31, 0.41, True, [floor]), floor) is False
    assert clears(Arm("a", 0.40, 0.34, 0.46, True, [floor]), floor) is True
    ppl = Baseline("unigram", 100.0, 95.0, 105.0)
    # perplexity (lower is better): upper end 98 below the point 100, above the lower end 95
    assert clears(Arm("b", 90.0, 82.0, 98.0, False, [ppl]), ppl) is False
    assert clears(Arm("b", 88.0, 80.0, 94.0, False, [ppl]), ppl) is True
    # without an interval the point is all there is
    assert clears(Arm("c", 0.36, 0.31, 0.41, True, [floor]), Baseline("m", 0.30)) is True


def test_an_arm_without_a_recorded_baseline_is_not_shown_to_learn():
    from experiments.claims import NOT_COMPARABLE, REPRODUCED, Arm, Baseline, judge

    learned = Arm("a", 0.9, 0.88, 0.92, True, [Baseline("majority class", 0.3, 0.28, 0.32)])
    nobase = Arm("b", 0.9, 0.88, 0.92, True, [])
    assert judge(REPRODUCED, [learned])[0] == REPRODUCED
    verdict, reason, detail = judge(REPRODUCED, [learned, nobase])
    assert verdict == NOT_COMPARABLE and reason == "arm b not shown to learn"
    assert "no baseline recorded for b" in detail
