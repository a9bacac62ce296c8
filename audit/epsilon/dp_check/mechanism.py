"""One step of the user's DP-SGD, measured with crafted per-example gradients.

The claimed step releases R = (Σ_i clip_C(g_i) + N(0, σ²C²I)) · a for a scale a fixed
by the code (Opacus: 1/expected batch size). Two quantities decide its privacy, and
both are scale-free:

- the noise: per released tensor t its standard deviation s_t, its shape (Gaussian?) and
  its independence across coordinates, tensors and steps (:func:`measure_noise`);
- one example's effect: for a pair of crafted batches that differ by one example, the
  exact difference v = R(A) − R(B) of two releases drawn with the same noise
  (:class:`~.harness.Coupler`), in the noise's units: μ = (Σ_t ‖v_t‖² / s_t²)^½.

For the claimed mechanism μ = 1/σ for every pair, so σ_eff = 1 / max μ is the effective
noise multiplier the accountant should have been given (sound: each μ is one pair the
code really releases, so the true sensitivity in noise units is at least max μ). The
pairs are the designs of :func:`designs`: a Dirac example in each tensor at two
magnitudes (clipping), one spread over every tensor (per-layer clipping), a batch of
others pointing the opposite way (clipping after aggregation, micro-batch clipping) and,
for replace-one claims, a replaced example. :func:`schedule_effect` inserts one example in
the first step of a run driven by the user's own sampler and reads every later release
(state carried across steps, gradient accumulation).

When the noise cannot be replayed (a generator dp-check cannot read), each pair is drawn
``repeats`` times and only its projection on the crafted direction is used, with a
one-sided bound on it (never the norm of a noisy difference, which is biased upwards).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from scipy import stats

from privacy_audit.audit.epsilon.dp_check.harness import (
    Coupler,
    Instance,
    Rows,
    crafted_step,
    zero_rows,
)

#: relative size of a float difference treated as exactly zero (float32 rounding of the
#: shared noise: |noise| · 2^-24 per coordinate, far below one clipped example)
EXACT_TOL = 1e-4
#: one-sided level of the intervals shown (95% two-sided)
ALPHA_SIDE = 0.025
#: one-sided level of each end that enters a VIOLATED decision: the noise scale here
#: (Bonferroni over tensors) and the sampling rate (sampling.py). A claim calibrated to be
#: tight must not be called violated one time in forty because an interval missed
DECISION_ALPHA = 1e-4


@dataclass
class Design:
    """A pair of crafted batches that differ by one example."""

    name: str
    kind: str  # dirac | dirac-large | spread | opposite | replace | ghost-clipped
    what: str  # a sentence: what the example is, what the others are
    rows_a: Callable[[], Rows]
    rows_b: Callable[[], Rows]
    direction: Callable[[], dict[str, torch.Tensor]]  # unit vector of the expected effect
    tensor: str | None = None
    relation: str = "add-remove"


@dataclass
class NoiseStats:
    steps: int
    batch: int
    per_tensor: dict[str, dict[str, Any]]
    gaussian_p: float | None
    lag1: dict[str, float] | None
    adjacent: dict[str, float] | None
    cross_tensor: dict[str, float] | None
    skipped_steps: int = 0
    reuse: dict[str, Any] | None = None  # the largest correlation between two steps' noise
    common: list[dict[str, Any]] = field(default_factory=list)  # noise shared by coordinates

    def s(self, name: str, which: str = "std") -> float:
        return float(self.per_tensor[name][which])


def _chi2_interval(ss: float, dof: int, alpha: float) -> tuple[float, float]:
    """Two one-sided (1 − alpha) bounds on σ from a sum of squares with ``dof`` degrees."""
    if dof <= 0 or ss <= 0:
        return 0.0, 0.0
    lo = math.sqrt(ss / stats.chi2.ppf(1 - alpha, dof))
    hi = math.sqrt(ss / stats.chi2.ppf(alpha, dof))
    return lo, hi


def _rho(sxy: float, sxx: float, syy: float, n: int, alpha: float) -> dict[str, float]:
    """Correlation of zero-mean pairs and its Fisher interval (two-sided 1 − 2·alpha)."""
    if n < 4 or sxx <= 0 or syy <= 0:
        return {"rho": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": n}
    r = max(-0.999999, min(0.999999, sxy / math.sqrt(sxx * syy)))
    z, h = math.atanh(r), stats.norm.ppf(1 - alpha) / math.sqrt(n - 3)
    return {"rho": r, "lo": math.tanh(z - h), "hi": math.tanh(z + h), "n": n}


#: coordinates per tensor kept for the structure tests (contiguous, so neighbours pair)
STRUCTURE_COORDS = 256


def measure_noise(
    inst: Instance,
    steps: int,
    batch: int,
    deadline: float,
    alpha: float = ALPHA_SIDE,
    progress: Callable[[str], None] | None = None,
) -> NoiseStats:
    """Releases of ``steps`` steps whose every example has a zero gradient: what is
    released is the noise (plus any data-free offset, removed per coordinate).

    Per tensor: the std with χ² intervals (sums streamed around the first release, so a
    constant release is exactly zero variance); and, on up to 256 contiguous coordinates
    kept per step and centred per coordinate, the structure tests: correlation with the
    previous step, between neighbouring coordinates and between same-shape tensors
    (Fisher intervals at the decision level, pooled), the largest correlation between
    any two steps (noise reused at any lag), the variance of the whole tensor's mean
    across steps (noise common to all coordinates: χ²), and the Gaussian shape (KS per
    tensor, Bonferroni)."""
    names = inst.names
    s1 = {n: torch.zeros(inst.shapes[n], dtype=torch.float64) for n in names}
    s2 = {n: torch.zeros(inst.shapes[n], dtype=torch.float64) for n in names}
    kept: dict[str, list[np.ndarray]] = {n: [] for n in names}
    means: dict[str, list[float]] = {n: [] for n in names}
    first = None
    k, skipped = 0, 0
    for _ in range(steps * 4):
        if k >= steps or (k >= 8 and time.perf_counter() > deadline):
            break
        rel = crafted_step(inst, zero_rows(inst, batch))
        if rel is None:
            skipped += 1
            continue
        cur = {n: rel[n].double() for n in names if n in rel}
        if first is None:
            first = cur  # sums are taken around the first release: a constant is exactly 0
        for n, x in cur.items():
            d = x - first[n]
            s1[n] += d
            s2[n] += d * d
            f = x.reshape(-1)
            kept[n].append(f[:STRUCTURE_COORDS].numpy().copy())
            means[n].append(float(f.mean()))
        k += 1
        if progress is not None and k % max(1, steps // 4) == 0:
            progress(f"noise: {k}/{steps} releases")
    per: dict[str, dict[str, Any]] = {}
    for n in names:
        numel = int(math.prod(inst.shapes[n]))
        if k < 2 or n not in first:
            per[n] = {
                "std": float("nan"),
                "lo": float("nan"),
                "hi": float("nan"),
                "lo_decision": float("nan"),
                "hi_decision": float("nan"),
                "dof": 0,
            }
            continue
        mean = s1[n] / k
        ss = float((s2[n] - k * mean * mean).clamp_min(0).sum())
        dof = numel * (k - 1)
        std = math.sqrt(ss / dof)
        scale = float((mean + first[n]).abs().max()) if numel else 0.0
        zero = ss == 0.0 or std <= 1e-9 * max(scale, 1e-30)
        lo, hi = _chi2_interval(ss, dof, alpha)
        lo_d, hi_d = _chi2_interval(ss, dof, DECISION_ALPHA / max(1, len(names)))
        per[n] = {
            "std": 0.0 if zero else std,
            "lo": 0.0 if zero else lo,
            "hi": 0.0 if zero else hi,
            "lo_decision": 0.0 if zero else lo_d,
            "hi_decision": 0.0 if zero else hi_d,
            "dof": dof,
            "numel": numel,
            "offset": scale,
            "zero": bool(zero),
        }
    _pool_if_homogeneous(per, alpha)
    st = _structure(names, inst.shapes, kept, means, per, k) if k >= 3 else {}
    return NoiseStats(
        steps=k,
        batch=batch,
        per_tensor=per,
        gaussian_p=st.get("gaussian_p"),
        lag1=st.get("lag1"),
        adjacent=st.get("adjacent"),
        cross_tensor=st.get("cross_tensor"),
        skipped_steps=skipped,
        reuse=st.get("reuse"),
        common=st.get("common", []),
    )


def _structure(names, shapes, kept, means, per, k) -> dict[str, Any]:
    """The structure tests of :func:`measure_noise` on the kept, centred coordinates."""
    live = [n for n in names if not per[n].get("zero") and kept[n] and per[n]["std"] > 0]
    xs = {n: np.asarray(kept[n]) for n in live}
    xs = {n: x - x.mean(axis=0, keepdims=True) for n, x in xs.items()}
    sums = {k: [0.0, 0.0, 0.0, 0] for k in ("lag", "adj_even", "adj_odd", "cross")}

    def add(key, a, b):
        t = sums[key]
        t[0] += float((a * b).sum())
        t[1] += float((a * a).sum())
        t[2] += float((b * b).sum())
        t[3] += a.size

    same: dict[tuple, list[str]] = {}
    for n, x in xs.items():
        add("lag", x[1:], x[:-1])
        if x.shape[1] > 1:  # neighbours (2j, 2j+1) and (2j+1, 2j+2): a pairing is not diluted
            add("adj_even", x[:, 0:-1:2], x[:, 1::2])
        if x.shape[1] > 2:
            add("adj_odd", x[:, 1:-1:2], x[:, 2::2])
        same.setdefault(tuple(shapes[n]), []).append(n)
    for group in same.values():
        for a, b in zip(group, group[1:], strict=False):
            add("cross", xs[a], xs[b])
    out: dict[str, Any] = {}
    for key, name in (
        ("lag", "lag1"),
        ("adj_even", "adjacent"),
        ("adj_odd", "adjacent_odd"),
        ("cross", "cross_tensor"),
    ):
        t = sums[key]
        out[name] = _rho(t[0], t[1], t[2], int(t[3]), DECISION_ALPHA) if t[3] else None
    odd = out.pop("adjacent_odd")
    if odd is not None and (
        out["adjacent"] is None or abs(odd["rho"]) > abs(out["adjacent"]["rho"])
    ):
        out["adjacent"] = odd
    if out["lag1"] is not None and out["lag1"]["rho"] == out["lag1"]["rho"]:
        # centring each coordinate over k steps biases a lag-1 correlation by about −1/k
        for e in ("rho", "lo", "hi"):
            out["lag1"][e] = min(1.0, out["lag1"][e] + 1.0 / k)
    # the largest correlation between two steps' noise, any lag (centred per coordinate)
    worst = (0.0, None)
    for n, x in xs.items():
        if x.shape[1] < 16:
            continue
        norms = np.linalg.norm(x, axis=1)
        g = (x @ x.T) / np.maximum(np.outer(norms, norms), 1e-300)
        np.fill_diagonal(g, 0.0)
        m = float(np.abs(g).max())
        if m > worst[0]:
            worst = (m, n)
    if worst[1] is not None:
        m_coords = min(STRUCTURE_COORDS, int(math.prod(shapes[worst[1]])))
        pairs = max(1, len(xs) * k * (k - 1) // 2)
        # centred correlations of m independent coordinates: ≈ N(0, 1/(m − 1)) each
        limit = stats.norm.isf(1e-6 / pairs) / math.sqrt(max(1, m_coords - 1))
        out["reuse"] = {"max_correlation": worst[0], "tensor": worst[1], "limit": limit}
    # noise common to every coordinate: the whole tensor's mean varies more than s²/numel
    common = []
    for n in live:
        numel = per[n].get("numel", 1)
        if numel < 2 or len(means[n]) < 3:
            continue
        mv = np.asarray(means[n])
        stat = float(((mv - mv.mean()) ** 2).sum() / (per[n]["std"] ** 2 / numel))
        p = float(stats.chi2.sf(stat, len(mv) - 1))
        if p < 1e-6 / max(1, len(live)):
            common.append({"tensor": n, "p": p, "variance_ratio": stat / (len(mv) - 1)})
    out["common"] = common
    # Gaussian shape per tensor (KS on the centred, standardised kept values), Bonferroni
    ps = []
    for n, x in xs.items():
        z = x.reshape(-1) / (per[n]["std"] * math.sqrt((k - 1) / k))
        if z.size >= 50:
            ps.append(float(stats.kstest(z[:20000], "norm").pvalue))
    out["gaussian_p"] = min(1.0, min(ps) * len(ps)) if ps else None
    return out


def _pool_if_homogeneous(per: dict[str, dict[str, Any]], alpha: float) -> None:
    """The claimed mechanism has one noise scale for every tensor. When no tensor's
    variance differs from the pooled one (χ² test per tensor at 1e-3, Bonferroni), every
    tensor gets the pooled scale and its interval (a small tensor's own estimate is
    loose); each keeps its own as ``own_std``. Otherwise each keeps its own."""
    live = {n: p for n, p in per.items() if not p.get("zero") and p.get("dof", 0) > 0}
    if len(live) < 2:
        return
    ss = {n: p["std"] ** 2 * p["dof"] for n, p in live.items()}
    dof = sum(p["dof"] for p in live.values())
    pooled = sum(ss.values()) / dof
    if pooled <= 0:
        return
    level = 1e-3 / len(live)
    for n, p in live.items():
        x = ss[n] / pooled
        pv = 2 * min(stats.chi2.cdf(x, p["dof"]), stats.chi2.sf(x, p["dof"]))
        if pv < level:
            for q in per.values():
                q["pooled"] = False
            return
    lo, hi = _chi2_interval(pooled * dof, dof, alpha)
    lo_d, hi_d = _chi2_interval(pooled * dof, dof, DECISION_ALPHA)
    for p in live.values():
        p.update(own_std=p["std"], own_lo=p["lo"], own_hi=p["hi"])
        # the decision ends stay at least as wide as the tensor's own (a pre-test that
        # does not reject equal scales does not prove them equal)
        p.update(
            std=math.sqrt(pooled),
            lo=lo,
            hi=hi,
            lo_decision=min(lo_d, p["lo_decision"]),
            hi_decision=max(hi_d, p["hi_decision"]),
            pooled=True,
        )


# --------------------------------------------------------------------------- #
# designs
# --------------------------------------------------------------------------- #


def _rows_with(inst: Instance, base: int, probe: dict[str, dict[int, float]] | None, at: str):
    """``base`` zero rows plus (``probe`` given) one example, first or last."""

    def make() -> Rows:
        b = base + (1 if probe is not None else 0)
        rows = zero_rows(inst, b)
        if probe is not None:
            r = 0 if at == "first" else b - 1
            for n, entries in probe.items():
                flatv = rows[n][r].reshape(-1)
                for i, v in entries.items():
                    flatv[i] = v
        return rows

    return make


def _with_background(inst: Instance, n: int, bg: dict[str, dict[int, float]], probe, at: str):
    def make() -> Rows:
        b = n + (1 if probe is not None else 0)
        rows = zero_rows(inst, b)
        first = 1 if (probe is not None and at == "first") else 0
        for r in range(first, first + n):
            for t, entries in bg.items():
                fv = rows[t][r].reshape(-1)
                for i, v in entries.items():
                    fv[i] = v
        if probe is not None:
            r = 0 if at == "first" else b - 1
            for t, entries in probe.items():
                fv = rows[t][r].reshape(-1)
                for i, v in entries.items():
                    fv[i] = v
        return rows

    return make


def _direction(inst: Instance, entries: dict[str, dict[int, float]]):
    def make() -> dict[str, torch.Tensor]:
        out = {}
        norm = math.sqrt(sum(v * v for e in entries.values() for v in e.values()))
        for n, e in entries.items():
            d = torch.zeros(int(math.prod(inst.shapes[n])), dtype=torch.float64)
            for i, v in e.items():
                d[i] = v / norm
            out[n] = d
        return out

    return make


def pick_tensors(inst: Instance, limit: int, seed: int) -> list[str]:
    """Every released tensor when there are at most ``limit``; otherwise one of each kind
    of name ending (weight, bias, norm, embedding, adapter ...) plus a seeded sample."""
    names = list(inst.names)
    if len(names) <= limit:
        return names
    rng = np.random.default_rng(seed)
    chosen: list[str] = []
    kinds: dict[str, str] = {}
    for n in names:
        key = ".".join(p for p in n.split(".") if not p.isdigit())[-40:]
        kinds.setdefault(key, n)
    for n in kinds.values():
        if len(chosen) < limit:
            chosen.append(n)
    rest = [n for n in names if n not in chosen]
    rng.shuffle(rest)
    chosen += rest[: max(0, limit - len(chosen))]
    return [n for n in names if n in chosen]


def designs(
    inst: Instance,
    clip: float,
    replace: bool,
    limit: int,
    seed: int,
    must: tuple[str, ...] = (),
) -> list[Design]:
    """The crafted pairs (see the module docstring), one of each kind first (a budget
    that stops early still has tried every kind), then a Dirac pair per remaining tensor.
    ``clip`` is the claimed C; the magnitudes are multiples of it, so any working
    clipping at C saturates them. ``must``: tensors probed whatever ``limit`` says (those
    without noise)."""
    return _priority(_designs(inst, clip, replace, limit, seed, must))


def _priority(ds: list[Design]) -> list[Design]:
    first: list[Design] = []
    for kind in ("dirac", "ghost-clipped", "dirac-large", "spread", "opposite", "replace"):
        of_kind = [d for d in ds if d.kind == kind]
        first += of_kind if kind in ("opposite", "replace") else of_kind[:1]
    return first + [d for d in ds if d not in first]


def _designs(inst, clip, replace, limit, seed, must) -> list[Design]:
    rng = np.random.default_rng([seed, 0xD1])
    tensors = pick_tensors(inst, limit, seed)
    tensors += [t for t in must if t in inst.shapes and t not in tensors]
    big = 1e3 * clip
    huge = 1e6 * clip
    out: list[Design] = []
    ghost = inst.ghost
    for t in tensors:
        j = int(rng.integers(0, int(math.prod(inst.shapes[t]))))
        g = clip if ghost else big
        probe = {t: {j: g}}
        out.append(
            Design(
                f"dirac:{t}",
                "ghost-clipped" if ghost else "dirac",
                f"one example whose gradient is {g:g} on one coordinate of {t}, others zero",
                _rows_with(inst, 3, probe, "last"),
                _rows_with(inst, 3, None, "last"),
                _direction(inst, probe),
                tensor=t,
            )
        )
        if not ghost:
            probe2 = {t: {j: huge}}
            out.append(
                Design(
                    f"dirac-large:{t}",
                    "dirac-large",
                    f"the same example at norm {huge:g}: clipping must give the same effect",
                    _rows_with(inst, 3, probe2, "last"),
                    _rows_with(inst, 3, None, "last"),
                    _direction(inst, probe2),
                    tensor=t,
                )
            )
    if ghost:
        return out
    # one example spread evenly over every coordinate of every tensor, norm `big`
    total = inst.n_params
    per = big / math.sqrt(total)
    if total <= 5_000_000:

        def spread_rows(present: bool):
            def make() -> Rows:
                rows = zero_rows(inst, 4 if present else 3)
                if present:
                    for n in inst.names:
                        rows[n][-1].fill_(per)
                return rows

            return make

        def spread_dir() -> dict[str, torch.Tensor]:
            return {
                n: torch.full((int(math.prod(s)),), 1 / math.sqrt(total), dtype=torch.float64)
                for n, s in inst.shapes.items()
            }

        out.append(
            Design(
                "spread",
                "spread",
                f"one example whose gradient is spread evenly over all {total:,} coordinates "
                f"(norm {big:g})",
                spread_rows(True),
                spread_rows(False),
                spread_dir,
            )
        )
    # a batch of others pointing the opposite way: clipping after aggregation, or of a
    # micro-batch's mean, lets one example flip the clipped sum (sensitivity 2C)
    t0 = max(inst.names, key=lambda n: int(math.prod(inst.shapes[n])))
    j0 = int(rng.integers(0, int(math.prod(inst.shapes[t0]))))
    bg = {t0: {j0: -3.0 * clip}}
    for n_bg, at in [(7, "last")] + [(n, "first") for n in range(3, 11)]:
        g = 1e3 * clip * (n_bg + 1)
        probe = {t0: {j0: g}}
        out.append(
            Design(
                f"opposite-{at}-{n_bg}",
                "opposite",
                f"one example of gradient +{g:g} on {t0}[{j0}] added {at} to {n_bg} others "
                f"of −{3 * clip:g} there",
                _with_background(inst, n_bg, bg, probe, at),
                _with_background(inst, n_bg, bg, None, at),
                _direction(inst, probe),
                tensor=t0,
            )
        )
    if replace:
        plus, minus = {t0: {j0: big}}, {t0: {j0: -big}}
        out.append(
            Design(
                "replace",
                "replace",
                f"one example of gradient +{big:g} on {t0}[{j0}] replaced by one of −{big:g}",
                _rows_with(inst, 3, plus, "last"),
                _rows_with(inst, 3, minus, "last"),
                _direction(inst, plus),
                tensor=t0,
                relation="replace-one",
            )
        )
    return out


# --------------------------------------------------------------------------- #
# measuring a pair
# --------------------------------------------------------------------------- #


@dataclass
class Effect:
    """One design's measured effect on the release, in noise units."""

    design: Design
    mu: float  # point: (Σ ‖v_t‖²/s_t²)^½
    mu_lo: float  # with each s_t at its upper bound (and, uncoupled, a one-sided bound)
    mu_hi: float
    norms: dict[str, float]  # ‖v_t‖ per tensor with an effect
    exact: bool  # coupled: v measured without noise
    skipped: bool = False
    infinite_in: list[str] = field(default_factory=list)  # effect on a noiseless tensor
    unmeasured: list[str] = field(default_factory=list)  # moved, but no noise measurement

    def as_dict(self, scale: float | None) -> dict[str, Any]:
        top = sorted(self.norms.items(), key=lambda kv: -kv[1])[:5]
        d = {
            "design": self.design.name,
            "kind": self.design.kind,
            "what": self.design.what,
            "relation": self.design.relation,
            "mu": self.mu,
            "mu_lower": self.mu_lo,
            "mu_upper": self.mu_hi,
            "sigma_eff": (1 / self.mu) if self.mu > 0 else math.inf,
            "exact": self.exact,
            "tensors": {k: v for k, v in top},
            "noiseless_tensors_moved": self.infinite_in,
        }
        if scale:
            d["effect_norm_gradient_units"] = (
                math.sqrt(sum(v * v for v in self.norms.values())) / scale
            )
        return d


def exact_tolerance(p: dict[str, Any]) -> float:
    """Norm below which a coupled difference of one tensor is float rounding of the
    shared noise (about 2^-24 of each noise value), not an effect of the data."""
    if p.get("zero"):  # no noise: only float rounding of the (data-free) offset itself
        return max(p.get("offset", 0.0), 1e-30) * 1e-6 * math.sqrt(p.get("numel", 1))
    ref = max(p["std"], p.get("offset", 0.0), 1e-30)
    return ref * (EXACT_TOL + 1e-6 * math.sqrt(p.get("numel", 1)))


#: tensors of the last :func:`measured_mu` call that moved but have no noise measurement
LAST_UNMEASURED: list[str] = []


def measured_mu(diff: dict[str, torch.Tensor], noise: NoiseStats):
    norms, inf_in = {}, []
    m2, m2lo, m2hi = 0.0, 0.0, 0.0
    LAST_UNMEASURED.clear()
    for n, v in diff.items():
        nv = float(v.norm())
        p = noise.per_tensor.get(n)
        if p is None:  # never skipped silently: reported, and the check is not passed
            if nv > 0:
                LAST_UNMEASURED.append(n)
            continue
        if nv <= exact_tolerance(p):
            continue
        norms[n] = nv
        if p.get("zero") or p["std"] == 0:
            inf_in.append(n)
            continue
        m2 += nv * nv / p["std"] ** 2
        m2lo += nv * nv / p["hi_decision"] ** 2
        m2hi += nv * nv / max(p["lo_decision"], 1e-300) ** 2
    return math.sqrt(m2), math.sqrt(m2lo), math.sqrt(m2hi), norms, inf_in


#: designs whose exact difference lies on one crafted direction (the spread design's
#: need not: per-tensor clipping scales each tensor's share differently)
ONE_DIRECTION = ("dirac", "dirac-large", "opposite", "replace", "ghost-clipped")


def _off_direction(diff: dict[str, torch.Tensor], design: Design, noise: NoiseStats) -> bool:
    """True when a replayed difference has more than float rounding off the design's
    direction: the two releases did not share their noise (even with every random state
    equal after both runs, e.g. noise assembled from a fixed-size draw by batch size).

    A single-direction design's difference must lie on its direction; any other design's
    (spread: per-tensor clipping scales each tensor's share differently) on the direction's
    restriction to each tensor, tensor by tensor."""
    u = {n: v.reshape(-1).double() for n, v in design.direction().items()}
    if design.kind in ONE_DIRECTION:
        proj = sum(float((diff[n].reshape(-1) * u[n]).sum()) for n in u if n in diff)
        coef = {n: proj for n in u}
    else:
        coef = {}
        for n, un in u.items():
            nn = float((un * un).sum())
            if n in diff and nn > 0:
                coef[n] = float((diff[n].reshape(-1) * un).sum()) / nn
    resid2, tol2 = 0.0, 0.0
    for n, v in diff.items():
        r = v.reshape(-1)
        if n in coef:
            r = r - coef[n] * u[n]
        resid2 += float((r * r).sum())
        p = noise.per_tensor.get(n)
        if p is not None:
            tol2 += exact_tolerance(p) ** 2
    return resid2 > tol2


def measure_design(
    a: Instance,
    b: Instance,
    coupler: Coupler,
    design: Design,
    noise: NoiseStats,
    coupled: bool,
    repeats: int,
    alpha: float = DECISION_ALPHA,
) -> Effect:
    """The effect of the design's differing example on one release. A replayed pair is
    exact only if both runs left every random state the same and, for a single-direction
    design, the difference lies on the crafted direction (noise that depends on the batch,
    or randomness drawn in amounts that depend on it, shows up off it); otherwise the pair
    is measured by repeated draws, projected on the direction."""
    if coupled:
        ra, rb = coupler.pair(
            lambda: crafted_step(a, design.rows_a()), lambda: crafted_step(b, design.rows_b())
        )
        if ra is None or rb is None:
            return Effect(design, 0.0, 0.0, 0.0, {}, True, skipped=True)
        diff = {n: ra[n].double() - rb[n].double() for n in ra if n in rb}
        if coupler.last_replayed and not _off_direction(diff, design, noise):
            mu, lo, hi, norms, inf_in = measured_mu(diff, noise)
            if inf_in:
                mu = lo = hi = math.inf
            return Effect(
                design,
                mu,
                lo,
                hi,
                norms,
                True,
                infinite_in=inf_in,
                unmeasured=list(LAST_UNMEASURED),
            )
    # the noise cannot be replayed: project each difference on the crafted direction
    u = design.direction()
    ds = []
    for _ in range(max(2, repeats)):
        ra = crafted_step(a, design.rows_a())
        rb = crafted_step(b, design.rows_b())
        if ra is None or rb is None:
            continue
        ds.append(
            sum(float(((ra[n].double() - rb[n].double()).reshape(-1) * u[n]).sum()) for n in u)
        )
    if len(ds) < 2:
        return Effect(design, 0.0, 0.0, 0.0, {}, False, skipped=True)
    d = np.asarray(ds)
    mean, se = float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size))
    t = stats.t.ppf(1 - alpha, d.size - 1)
    lo_proj = max(0.0, abs(mean) - t * se)
    s_vals = [noise.per_tensor[n] for n in u]
    s = max(p["std"] for p in s_vals)
    s_hi = max(p["hi_decision"] for p in s_vals)
    s_lo = max(p["lo_decision"] for p in s_vals)
    if s == 0:
        inf_in = list(u) if abs(mean) > 0 else []
        m = math.inf if inf_in else 0.0
        return Effect(design, m, m, m, {}, False, infinite_in=inf_in)
    return Effect(
        design,
        abs(mean) / s,
        lo_proj / s_hi,
        (abs(mean) + t * se) / max(s_lo, 1e-300),
        {next(iter(u)): abs(mean)},
        False,
    )


# --------------------------------------------------------------------------- #
# one example over the whole schedule
# --------------------------------------------------------------------------- #


@dataclass
class ScheduleEffect:
    releases: int  # releases compared
    logical_steps: int
    mu_first: float
    mu_later: float  # (Σ_{t > first} μ_t²)^½: the example's effect after its own step
    later_steps_moved: int
    first_moved_at: int | None
    release_counts_differ: bool
    exact: bool
    truncated: bool
    response: list[float] = field(default_factory=list)  # projection on the probe, noise units


def schedule_effect(
    a: Instance,
    b: Instance,
    coupler: Coupler,
    batches: list[list[int]],
    probe: dict[str, dict[int, float]],
    noise: NoiseStats,
    deadline: float,
    insert_at: int = 0,
) -> ScheduleEffect:
    """Drive both instances through the same physical batches (the user's sampler, with
    its gradient-accumulation signals replayed), every example zero except one crafted
    example added to A's first batch; compare every release."""
    from privacy_audit.audit.epsilon.dp_check.harness import replay_signals

    mus: list[float] = []
    response: list[float] = []
    ((t_probe, entries),) = probe.items()
    j_probe, g_probe = next(iter(entries.items()))
    s_hi = noise.per_tensor[t_probe]["hi_decision"]
    counts = [0, 0]
    truncated = False
    first_at = None
    exact = True
    for i, idx in enumerate(batches):
        if time.perf_counter() > deadline and i > 2:
            truncated = True
            break
        rows_b = zero_rows(b, len(idx[0]) if isinstance(idx, tuple) else len(idx))
        n_rows = rows_b[b.names[0]].shape[0]
        signal = idx[1] if isinstance(idx, tuple) else None

        def run_a(signal=signal, n_rows=n_rows, first=(i == insert_at)):
            replay_signals(a, signal)
            rows = zero_rows(a, n_rows + (1 if first else 0))
            if first:
                for n, e in probe.items():
                    fv = rows[n][-1].reshape(-1)
                    for j, v in e.items():
                        fv[j] = v
            return crafted_step(a, rows)

        def run_b(signal=signal, rows_b=rows_b):
            replay_signals(b, signal)
            return crafted_step(b, rows_b)

        ra, rb = coupler.pair(run_a, run_b)
        counts[0] += ra is not None
        counts[1] += rb is not None
        if ra is None or rb is None:
            continue
        diff = {n: ra[n].double() - rb[n].double() for n in ra if n in rb}
        on_probe = float(diff[t_probe].reshape(-1)[j_probe]) if t_probe in diff else 0.0
        resid2 = sum(float((v * v).sum()) for v in diff.values()) - on_probe**2
        tol2 = sum(exact_tolerance(noise.per_tensor[n]) ** 2 for n in diff if n in noise.per_tensor)
        if not coupler.last_replayed or resid2 > tol2:
            exact = False  # the two runs did not share their noise: no exact difference
        mu, _, _, norms, inf_in = measured_mu(diff, noise)
        if inf_in:
            mu = math.inf
        if mu > 0 and first_at is None:
            first_at = len(mus)
        mus.append(mu)
        if first_at is not None:
            proj = float(diff[t_probe].reshape(-1)[j_probe]) * (1 if g_probe > 0 else -1)
            response.append(proj / s_hi if s_hi > 0 else (math.inf if proj else 0.0))
    first = mus[first_at] if first_at is not None else 0.0
    later = [m for k, m in enumerate(mus) if first_at is not None and k > first_at]
    return ScheduleEffect(
        releases=len(mus),
        logical_steps=len(mus),
        mu_first=first,
        mu_later=math.sqrt(sum(m * m for m in later)) if later else 0.0,
        later_steps_moved=sum(1 for m in later if m > 0),
        first_moved_at=first_at,
        release_counts_differ=counts[0] != counts[1],
        exact=exact,
        truncated=truncated,
        response=response,
    )
