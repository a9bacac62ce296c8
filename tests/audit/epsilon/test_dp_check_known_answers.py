"""dp-check's measurements against independent computations on mechanisms whose
parameters are known: dp-accounting's own accountants, closed forms solved with scipy,
numpy privatize steps with a known σ, C and scale, and index counts.

Each check's number must equal what the mechanism really is (sensitivity C, 2C, C·√L;
σ_eff = σ/√k; q̂ = count/(N·T)), and each interval's coverage is measured by simulation.
"""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
import torch
from scipy import optimize, stats

from privacy_audit.audit.epsilon.dp_check import accounting, mechanism, sampling
from privacy_audit.audit.epsilon.dp_check.contract import from_module
from privacy_audit.audit.epsilon.dp_check.harness import Coupler, build

DELTA = 1e-5


def gaussian_eps(mu: float, delta: float) -> float:
    """Balle & Wang's exact ε of a Gaussian mechanism with sensitivity/σ = mu (scipy)."""

    def d(e):
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2)

    if d(0.0) <= delta:
        return 0.0
    return optimize.brentq(lambda e: d(e) - delta, 0.0, 500.0, xtol=1e-12)


# ----------------------------------------------------------------------------- accounting


def test_poisson_interval_brackets_dp_accountings_own_accountants():
    import dp_accounting

    sigma, q, t = 1.1, 0.0625, 32
    iv = accounting.poisson_interval(sigma, q, t, DELTA, rel_gap=0.005)
    acc = dp_accounting.pld.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(
        dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(q, dp_accounting.GaussianDpEvent(sigma)), t
        )
    )
    ref = acc.get_epsilon(DELTA)
    assert iv.lower <= ref <= iv.upper * (1 + 1e-9)
    assert iv.upper - iv.lower <= 0.01 * iv.upper
    assert iv.lower <= accounting.rdp_epsilon(sigma, q, t, DELTA)


def test_poisson_lower_bound_is_below_the_pessimistic_one_at_every_grid():
    for vdi in (1e-1, 1e-2, 1e-3):
        lo = accounting.poisson_epsilon(0.7, 0.1, 50, DELTA, False, vdi)
        hi = accounting.poisson_epsilon(0.7, 0.1, 50, DELTA, True, vdi)
        assert lo <= hi


def test_replace_one_without_subsampling_is_the_gaussian_at_twice_the_sensitivity():
    # replace-one: each contribution bounded by C, so one replacement moves the sum 2C
    iv = accounting.poisson_interval(2.0, 1.0, 10, DELTA, relation="replace-one", rel_gap=0.002)
    exact = gaussian_eps(2 * math.sqrt(10) / 2.0, DELTA)
    assert iv.lower <= exact <= iv.upper
    assert iv.lower >= exact * 0.99


@pytest.mark.parametrize("sigma,releases", [(1.0, 1), (1.117, 2), (2.0, 10)])
def test_gaussian_composition_is_the_closed_form(sigma, releases):
    got = accounting.gaussian_composition_epsilon(sigma, releases, DELTA)
    assert got == pytest.approx(gaussian_eps(math.sqrt(releases) / sigma, DELTA), rel=1e-6)


def test_shuffle_bound_with_one_step_per_epoch_is_the_gaussian_from_below():
    # one step per epoch: the record's step is known, P = N(2, σ²), Q = N(1, σ²) per epoch
    for sigma, epochs in ((1.0, 1), (1.117, 3)):
        exact = gaussian_eps(math.sqrt(epochs) / sigma, DELTA)
        got = accounting.shuffle_lower_bound(sigma, 1, epochs, DELTA)
        assert got <= exact + 1e-9
        assert got >= exact - 0.03


def _product_shuffle(sigma: float, t: int, epochs: int, bins: int = 1500) -> float:
    """Chua et al.'s max statistic binned and composed by an explicit product (test's own)."""
    edges = np.concatenate([[-np.inf], np.linspace(-8 * sigma, 2 + 12 * sigma, bins), [np.inf]])

    def mass(mu):
        cdf = stats.norm.cdf((edges - mu) / sigma) * stats.norm.cdf(edges / sigma) ** (t - 1)
        return np.diff(cdf)

    p, q = mass(2.0), mass(1.0)
    keep = (p > 0) & (q > 0)
    p, q = p[keep], q[keep]
    pp, qq = p, q
    for _ in range(epochs - 1):
        pp, qq = np.outer(pp, p).ravel(), np.outer(qq, q).ravel()

    def hockey(eps):
        return np.clip(pp - math.exp(eps) * qq, 0, None).sum()

    return optimize.brentq(lambda e: hockey(e) - DELTA, 0.0, 50.0)


def test_shuffle_bound_matches_an_independent_product_composition():
    got = accounting.shuffle_lower_bound(1.117, 19, 2, DELTA)
    ref = _product_shuffle(1.117, 19, 2)
    assert got <= ref + 1e-9
    assert got >= ref - 0.01
    assert got > 5.0  # docs/dp-bugs.md: 5.11, 2.6x the claim of 2


def test_persistence_bound_of_full_accumulation_at_q1_is_below_the_transcripts_gaussian():
    # q = 1, constant response r: release t (1-based) is shifted by r·t, noise N(0, 1) each,
    # so the whole transcript is a Gaussian mechanism with μ = r·√(Σ t²); the bound looks
    # at sums of the last W releases, μ_W = r·W(2T − W + 1)/(2√W), and is at most the
    # transcript's ε and at least the best window's
    r, t = 0.5, 6
    exact = gaussian_eps(r * math.sqrt(sum(k * k for k in range(1, t + 1))), DELTA)
    windows = [r * w * (2 * t - w + 1) / 2 / math.sqrt(w) for w in (1, 2, 4, 6)]
    best_window = gaussian_eps(max(windows), DELTA)
    got = accounting.persistence_lower_bound([r] * t, 1.0, t, DELTA, grid=0.001)
    assert got <= exact + 1e-9
    assert got >= best_window - 0.05


def test_persistence_bound_rounds_shifts_down_on_a_coarse_grid():
    """A response just above a grid point: rounding the shifts down keeps the bound below
    the transcript's Gaussian ε even on a grid as coarse as the response itself."""
    r, t = 0.26, 6
    exact = gaussian_eps(r * math.sqrt(sum(k * k for k in range(1, t + 1))), DELTA)
    got = accounting.persistence_lower_bound([r] * t, 1.0, t, DELTA, grid=0.25)
    assert 0 < got <= exact


def test_persistence_bound_of_a_correct_mechanism_stays_below_its_true_epsilon():
    sigma, q, t = 1.1, 1 / 16, 32
    got = accounting.persistence_lower_bound([1 / sigma] + [0.0] * (t - 1), q, t, DELTA)
    assert 0 < got <= accounting.poisson_interval(sigma, q, t, DELTA).upper


def test_persistence_bound_refuses_negative_responses():
    assert accounting.persistence_lower_bound([1.0, -0.5, 0.2], 0.5, 3, DELTA) == 0.0


# ----------------------------------------------------------------------------- mechanisms


def privatize_module(fn, params, claim, n=200, loader=None):
    m = types.SimpleNamespace(PARAMS=params, privatize=fn, CLAIM=claim)
    if loader is not None:
        m.make_dataset = lambda: list(range(n))
        m.make_loader = loader
    return from_module(m)


CLAIM = {
    "epsilon": 5.0,
    "delta": DELTA,
    "noise_multiplier": 1.5,
    "max_grad_norm": 2.0,
    "sample_rate": 0.1,
    "epochs": 1,
}
PARAMS = {"w": (6, 5), "b": (5,), "g": (4, 3)}
SCALE = 1 / 20  # the release's known divisor


def dp_step(clip_mode="flat", noise_factor=1.0, clip=2.0, sigma=1.5, micro=1):
    """A numpy DP-SGD step: clip per example (or per tensor, or the batch's sum, or
    micro-batch means), sum, add N(0, (noise_factor·σC)²), divide by 20."""

    def privatize(g):
        names = list(g)
        b = g[names[0]].shape[0]
        flat = {n: g[n].reshape(b, -1) for n in names}
        if clip_mode == "flat":
            norms = np.sqrt(sum((flat[n] ** 2).sum(1) for n in names))
            f = np.minimum(1, clip / np.maximum(norms, 1e-12))
            sums = {n: (flat[n] * f[:, None]).sum(0) for n in names}
        elif clip_mode == "per-tensor":
            sums = {}
            for n in names:
                norms = np.linalg.norm(flat[n], axis=1)
                sums[n] = (flat[n] * np.minimum(1, clip / np.maximum(norms, 1e-12))[:, None]).sum(0)
        elif clip_mode == "sum":
            tot = {n: flat[n].sum(0) for n in names}
            norm = math.sqrt(sum((tot[n] ** 2).sum() for n in names))
            sums = {n: tot[n] * min(1, clip / max(norm, 1e-12)) for n in names}
        elif clip_mode == "none":
            sums = {n: flat[n].sum(0) for n in names}
        else:
            raise ValueError(clip_mode)
        return {
            n: (
                (sums[n] + np.random.normal(0, noise_factor * sigma * clip, sums[n].shape)) * SCALE
            ).reshape(g[n].shape[1:])
            for n in names
        }

    return privatize


def _effects(fn, claim=CLAIM, replace=False):
    s = privatize_module(fn, PARAMS, claim)
    a, b = build(s, None, 0), build(s, None, 0)
    noise = mechanism.measure_noise(build(s, None, 1), 400, 4, deadline=1e18)
    des = mechanism.designs(a, claim["max_grad_norm"], replace, limit=48, seed=0)
    c = Coupler(a, b)
    return noise, {d.name: mechanism.measure_design(a, b, c, d, noise, True, 40) for d in des}


def _norm(e):
    return math.sqrt(sum(v * v for v in e.norms.values()))


def test_correct_step_moves_the_release_by_exactly_one_clipped_example():
    noise, eff = _effects(dp_step())
    for name, e in eff.items():
        assert e.exact
        if e.design.kind in ("dirac", "dirac-large", "spread"):
            assert _norm(e) == pytest.approx(2.0 * SCALE, rel=1e-9), name  # C·scale
    # μ = C·scale / s, and s = σ·C·scale: σ_eff = 1/μ ≈ σ, its interval covering σ
    mus = [e for e in eff.values() if e.design.kind == "dirac"]
    lo = min(1 / e.mu_hi for e in mus)
    hi = max(1 / e.mu_lo for e in mus)
    assert lo <= 1.5 <= hi


def test_replace_one_moves_the_release_by_two_clipped_examples():
    _, eff = _effects(dp_step(), replace=True)
    assert _norm(eff["replace"]) == pytest.approx(2 * 2.0 * SCALE, rel=1e-9)


def test_clipping_the_sum_lets_one_example_move_it_by_2C():
    _, eff = _effects(dp_step(clip_mode="sum"))
    assert _norm(eff["opposite-last-7"]) == pytest.approx(2 * 2.0 * SCALE, rel=1e-9)
    _, ok = _effects(dp_step())
    assert _norm(ok["opposite-last-7"]) == pytest.approx(2.0 * SCALE, rel=1e-9)


def test_per_tensor_clipping_lets_a_spread_example_move_it_by_C_sqrt_L():
    _, eff = _effects(dp_step(clip_mode="per-tensor"))
    assert _norm(eff["spread"]) == pytest.approx(2.0 * SCALE * math.sqrt(3), rel=1e-9)


def test_unclipped_effect_grows_with_the_gradient():
    _, eff = _effects(dp_step(clip_mode="none"))
    for t in PARAMS:
        assert _norm(eff[f"dirac-large:{t}"]) / _norm(eff[f"dirac:{t}"]) == pytest.approx(
            1e3, rel=1e-6
        )


@pytest.mark.parametrize("k", [2, 4])
def test_noise_divided_by_sqrt_k_gives_sigma_eff_sigma_over_sqrt_k(k):
    noise, eff = _effects(dp_step(noise_factor=1 / math.sqrt(k)))
    mu = max(e.mu for e in eff.values() if e.design.kind == "dirac")
    assert 1 / mu == pytest.approx(1.5 / math.sqrt(k), rel=0.02)


def test_one_tensor_with_half_the_noise_is_not_pooled_away():
    """Noise σC/2 on one tensor only: the pooled scale must not hide it; a Dirac there
    has μ = 2/σ (σ_eff = σ/2)."""

    def fn(g):
        out = dp_step()(g)
        half = dp_step(noise_factor=0.5)(g)
        out["b"] = half["b"]
        return out

    noise, eff = _effects(fn)
    assert not noise.per_tensor["b"].get("pooled")
    assert 1 / eff["dirac:b"].mu == pytest.approx(1.5 / 2, rel=0.05)
    assert 1 / eff["dirac:w"].mu == pytest.approx(1.5, rel=0.05)


def test_noise_scale_and_unnoised_tensors_are_measured():
    def fn(g):
        out = dp_step()(g)
        b = g["b"].shape[0]
        out["b"] = (g["b"].reshape(b, -1).sum(0) * SCALE).reshape(PARAMS["b"])  # no noise
        return out

    noise = mechanism.measure_noise(
        build(privatize_module(fn, PARAMS, CLAIM), None, 0), 300, 4, deadline=1e18
    )
    assert noise.per_tensor["b"]["zero"]
    for n in ("w", "g"):
        p = noise.per_tensor[n]
        assert p["lo"] <= 1.5 * 2.0 * SCALE <= p["hi"]


def test_noise_interval_coverage_by_simulation():
    """The per-tensor (two one-sided 97.5%) interval on the noise std covers the true std
    in >= 93% of 300 simulated measurements."""
    s = privatize_module(dp_step(), {"w": (3, 2)}, CLAIM)
    true = 1.5 * 2.0 * SCALE
    hits = 0
    for seed in range(300):
        np.random.seed(seed)
        torch.manual_seed(seed)
        inst = build(s, None, seed)
        noise = mechanism.measure_noise(inst, 20, 2, deadline=1e18)
        p = noise.per_tensor["w"]
        hits += p["lo"] <= true <= p["hi"]
    assert hits / 300 >= 0.93


def test_reused_noise_is_seen_as_correlated_across_steps():
    cache = {}

    def fn(g):
        if "z" not in cache:
            cache["z"] = {n: np.random.normal(0, 3 * SCALE, s) for n, s in PARAMS.items()}
        return {n: cache["z"][n] + 0 * g[n].sum(0) for n in PARAMS}

    noise = mechanism.measure_noise(
        build(privatize_module(fn, PARAMS, CLAIM), None, 0), 40, 4, deadline=1e18
    )
    # a constant release has no variance: it is flagged as noiseless, not as noise
    assert all(p["zero"] for p in noise.per_tensor.values())
    fresh = mechanism.measure_noise(
        build(privatize_module(dp_step(), PARAMS, CLAIM), None, 0), 200, 4, deadline=1e18
    )
    assert fresh.lag1["lo"] <= 0 <= fresh.lag1["hi"]


# ----------------------------------------------------------------------------- sampling


def _trace_of(loader_fn, n=200, epochs=2, q=0.05):
    claim = dict(CLAIM, sample_rate=q, epochs=epochs)
    s = privatize_module(dp_step(), PARAMS, claim, n=n, loader=loader_fn)
    inst = build(s, list(range(n)), 0)
    return sampling.drive(inst, s.claim, deadline=1e18)


def test_poisson_sampler_rate_and_interval_are_the_counts():
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    tr = _trace_of(lambda ds: UniformWithReplacementSampler(num_samples=len(ds), sample_rate=0.05))
    c = sampling.classify(tr)
    assert c["scheme"] == "poisson"
    total = sum(len(b) for b in tr.steps)
    n_t = 200 * len(tr.steps)
    assert c["rate"]["estimate"] == total / n_t
    assert c["rate"]["lower"] == pytest.approx(stats.beta.ppf(0.025, total, n_t - total + 1))
    assert c["rate"]["upper"] == pytest.approx(stats.beta.ppf(0.975, total + 1, n_t - total))
    assert len(tr.steps) == 2 * 20


def test_schemes_are_told_apart():
    from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler

    def shuffled(ds):
        return BatchSampler(RandomSampler(ds), 10, drop_last=False)

    def ordered(ds):
        return BatchSampler(SequentialSampler(ds), 10, drop_last=False)

    def with_replacement(ds):
        return BatchSampler(RandomSampler(ds, replacement=True, num_samples=len(ds)), 10, False)

    class IndependentFixedSize:
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return 20

        def __iter__(self):
            for _ in range(20):
                yield np.random.choice(self.n, 10, replace=False).tolist()

    assert sampling.classify(_trace_of(shuffled))["scheme"] == "shuffle"
    assert sampling.classify(_trace_of(ordered))["scheme"] == "fixed"
    assert sampling.classify(_trace_of(with_replacement))["scheme"] == "with-replacement"
    assert sampling.classify(_trace_of(lambda ds: IndependentFixedSize(len(ds))))["scheme"] == (
        "fixed-size"
    )

    def dropping(ds):  # 205 examples, batches of 10: 5 dropped each epoch
        return BatchSampler(RandomSampler(ds), 10, drop_last=True)

    class OnePermutation:  # shuffled once, the same batches every epoch
        def __init__(self, n):
            self.order = np.random.default_rng(0).permutation(n).tolist()

        def __len__(self):
            return len(self.order) // 10

        def __iter__(self):
            for i in range(0, len(self.order), 10):
                yield self.order[i : i + 10]

    assert sampling.classify(_trace_of(dropping, n=205))["scheme"] == "shuffle-drop-last"
    assert sampling.classify(_trace_of(lambda ds: OnePermutation(len(ds))))["scheme"] == (
        "fixed-shuffled-once"
    )


def test_poisson_is_never_called_otherwise_and_its_rate_interval_covers():
    """Over 300 simulated Poisson traces: no other scheme, and the rate's two-sided 95%
    interval covers the true q in >= 93%."""
    q, n, t = 0.05, 200, 40
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(300):
        steps = [np.nonzero(rng.random(n) < q)[0].tolist() for _ in range(t)]
        tr = sampling.Trace(n=n, epochs=[steps[:20], steps[20:]], epochs_wanted=2)
        c = sampling.classify(tr)
        assert c["scheme"] == "poisson"
        hits += c["rate"]["lower"] <= q <= c["rate"]["upper"]
    assert hits / 300 >= 0.93


# ----------------------------------------------------------------------------- verdict


def test_an_untested_check_is_never_consistent():
    """privatize without make_loader: the sampling cannot be driven, so a correct step is
    inconclusive (exit 4) naming the check, and consistent only when the user accepts it."""
    from privacy_audit.audit.epsilon.dp_check import dp_check

    m = types.SimpleNamespace(PARAMS=PARAMS, privatize=dp_step(), CLAIM=dict(CLAIM, epsilon=50.0))
    r = dp_check(m, budget=60)
    assert r.verdict == "inconclusive" and r.exit_code == 4
    assert r.check("sampling") == "not-tested"
    assert "sampling" in r.headline
    ok = dp_check(m, budget=60, accept_untested=("sampling", "schedule"))
    assert ok.verdict == "consistent" and ok.exit_code == 0
    assert ok.check("sampling") == "not-tested (accepted)"


def test_correlated_noise_is_reported_and_lowers_sigma_eff():
    """Noise drawn once per pair of adjacent coordinates (correlation 1 inside a pair):
    the finding is reported and σ_eff is multiplied by √(1 − ρ²) ≈ 0 for the sound side."""
    from privacy_audit.audit.epsilon.dp_check import dp_check

    def fn(g):
        out = {}
        for n, x in g.items():
            b = x.shape[0]
            flat = x.reshape(b, -1)
            norms = np.linalg.norm(flat, axis=1)
            s = (flat * np.minimum(1, 2.0 / np.maximum(norms, 1e-12))[:, None]).sum(0)
            z = np.repeat(np.random.normal(0, 3.0, (s.size + 1) // 2), 2)[: s.size]
            out[n] = ((s + z) * SCALE).reshape(x.shape[1:])
        return out

    m = types.SimpleNamespace(PARAMS={"w": (8, 6)}, privatize=fn, CLAIM=CLAIM)
    r = dp_check(m, budget=60, accept_untested=("sampling", "schedule"))
    assert any(f["bug_class"] == "noise: correlated coordinates" for f in r.findings)
    assert r.sigma_eff["upper"] < 0.2


def test_the_state_across_steps_bound_applies_only_when_its_assumptions_were_checked():
    """Each assumption alone withholds the bound: fresh noise (|ρ| < 0.05 with a defined
    interval), a second insertion that was exact and moved the releases the same way, and
    Poisson sampling; the response used is the smaller of the two insertions'."""
    from types import SimpleNamespace

    from privacy_audit.audit.epsilon.dp_check.findings_schedule import persistence_conditions

    fresh = {"rho": 0.01, "lo": -0.03, "hi": 0.05}
    same = SimpleNamespace(exact=True, response=[1.0, 0.5, 0.25])
    ok, used, why = persistence_conditions(fresh, [1.0, 0.5, 0.25], same, "poisson")
    assert ok and used == [1.0, 0.5, 0.25] and why == ""
    # a later insertion that moves the releases differently (a warm-up that carries state)
    other = SimpleNamespace(exact=True, response=[1.0, 0.0, 0.0])
    ok, _, why = persistence_conditions(fresh, [1.0, 0.5, 0.25], other, "poisson")
    assert not ok and why == "the response depends on when the example came"
    # within 1e-3 of the largest response: the same; the smaller is used
    near = SimpleNamespace(exact=True, response=[1.0, 0.4999, 0.25])
    ok, used, _ = persistence_conditions(fresh, [1.0, 0.5, 0.25], near, "poisson")
    assert ok and used == [1.0, 0.4999, 0.25]
    # 2% of the largest response apart: a response that changes with time, not rounding
    drift = SimpleNamespace(exact=True, response=[1.0, 0.48, 0.25])
    assert not persistence_conditions(fresh, [1.0, 0.5, 0.25], drift, "poisson")[0]
    # not exact, or never run: not checked, so not assumed
    inexact = SimpleNamespace(exact=False, response=[1.0, 0.5, 0.25])
    assert not persistence_conditions(fresh, [1.0, 0.5, 0.25], inexact, "poisson")[0]
    assert not persistence_conditions(fresh, [1.0, 0.5, 0.25], None, "poisson")[0]
    # correlated or untested noise
    ok, _, why = persistence_conditions({"rho": 0.3, "hi": 0.4}, [1.0, 0.5], same, "poisson")
    assert not ok and why == "the noise is correlated across steps"
    nan = float("nan")
    assert not persistence_conditions({"rho": 0.0, "hi": nan}, [1.0, 0.5], same, "poisson")[0]
    assert not persistence_conditions(None, [1.0, 0.5], same, "poisson")[0]
    # not Poisson
    ok, _, why = persistence_conditions(fresh, [1.0, 0.5, 0.25], same, "shuffle")
    assert not ok and why == "the sampling is not Poisson"
