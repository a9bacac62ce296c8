"""Report figures, rendered with matplotlib's Agg backend to PNG bytes.

Figures are built as :class:`matplotlib.figure.Figure` objects attached to an
Agg canvas directly, so no GUI backend and no pyplot global state is involved
(nothing to leak between calls). Every function returns PNG bytes, including
when there is nothing to plot (the figure then says so).

ROC curves are computed here from the per-example scores (higher score =
member), grouping tied scores into a single ROC point.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import NullFormatter

from privacy_audit.reports.formatting import as_finite, as_float, ci, num, small
from privacy_audit.reports.verdict import (
    TPR_1,
    audit_exceeds,
    audit_violated,
    audited_claim,
    epsilon_audit,
    epsilon_audit_entries,
    epsilon_audit_tradeoff,
    metric,
    ok_attacks,
    run_name,
    strongest_attack,
)

DPI = 100
#: zlib level of the PNGs (1-9): 6 writes files a few percent smaller than 1 at a few
#: times its cost; the report embeds them (plots rendered cheaply).
PNG_COMPRESSION = 6
_COLORS = (
    "#1f77b4",
    "#d62728",
    "#2ca02c",
    "#9467bd",
    "#ff7f0e",
    "#17becf",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
)
_MEMBER_COLOR = "#d62728"
_NONMEMBER_COLOR = "#1f77b4"


# --------------------------------------------------------------------------- #
# Helpers
# --------------------------------------------------------------------------- #
def plain(text: object, limit: int = 48) -> str:
    """Make data text safe for matplotlib: no mathtext, bounded length."""
    s = " ".join(str(text).split())
    if len(s) > limit:
        s = s[: limit - 1] + "\u2026"
    return s.replace("$", r"\$")


def new_figure(width: float, height: float, ncols: int = 1):
    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    for ax in axes:
        ax.grid(True, which="major", alpha=0.35, linewidth=0.7)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    return fig, axes


def png_bytes(fig: Figure) -> bytes:
    """PNG bytes of ``fig``, drawn once: ``savefig`` on a figure with a layout
    engine draws it twice (once, without rendering, to lay it out; then again to
    render), so the figure is drawn here once on its Agg canvas (the layout runs inside
    that draw) and the canvas's pixels are written as an 8-bit RGB PNG by Pillow
    (matplotlib's own PNG writer), with no metadata."""
    from PIL import Image

    canvas = fig.canvas
    if not isinstance(canvas, FigureCanvasAgg):
        canvas = FigureCanvasAgg(fig)
    canvas.draw()
    rgba = np.asarray(canvas.buffer_rgba())
    buf = io.BytesIO()
    Image.fromarray(rgba[..., :3]).save(buf, format="png", compress_level=PNG_COMPRESSION)
    fig.clear()
    return buf.getvalue()


def placeholder(ax, message: str) -> None:
    ax.text(
        0.5,
        0.5,
        message,
        ha="center",
        va="center",
        transform=ax.transAxes,
        color="#666666",
        fontsize=11,
        wrap=True,
    )
    ax.set_xticks([])
    ax.set_yticks([])
    ax.grid(False)


def examples_arrays(attack: dict) -> tuple[np.ndarray, np.ndarray] | None:
    """``(scores, is_member)`` from an attack record, NaN scores dropped.

    ``None`` when the record has no usable per-example scores.
    """
    ex = attack.get("examples") if isinstance(attack, dict) else None
    if not isinstance(ex, dict):
        return None
    scores, members = ex.get("scores"), ex.get("members")
    if scores is None or members is None or len(scores) != len(members):
        return None
    try:
        s = np.asarray([np.nan if v is None else v for v in scores], dtype=float).ravel()
        m = np.asarray(members, dtype=float).ravel()
    except (TypeError, ValueError):
        return None
    keep = ~np.isnan(s) & ~np.isnan(m)
    s, m = s[keep], m[keep] > 0.5
    if s.size == 0:
        return None
    return s, m


def roc_curve(scores: Sequence[float], members: Sequence[int]):
    """ROC points ``(fpr, tpr)`` for "higher score = member", or ``None`` when either
    class is empty. The one ROC implementation is :func:`privacy_audit.stats.metrics.roc_curve`
    (tied scores form one threshold); non-finite scores are dropped for plotting."""
    from privacy_audit.stats.metrics import roc_curve as exact_roc

    s = np.asarray(scores, dtype=float).ravel()
    m = np.asarray(members).ravel().astype(bool)
    keep = np.isfinite(s)
    s, m = s[keep], m[keep]
    if m.sum() == 0 or (~m).sum() == 0:
        return None
    fpr, tpr, _ = exact_roc(s, m.astype(int))
    return fpr, tpr


def roc_auc(fpr: np.ndarray, tpr: np.ndarray) -> float:
    """Trapezoidal area under ROC points (ties count one half)."""
    return float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2.0))


def _auc_label(attack: dict, fpr, tpr) -> str:
    m = metric(attack, "auc")
    if m and as_float(m.get("value")) is not None:
        return f"AUC {ci(m)}"
    return f"AUC {num(roc_auc(fpr, tpr))}"


# --------------------------------------------------------------------------- #
# ROC
# --------------------------------------------------------------------------- #
def roc_loglog(runs: Sequence[dict], all_attacks_for: int | str | None = None) -> bytes:
    """ROC curves on log-log axes, FPR from 1/n to 1, with the chance line.

    By default one curve per run: its strongest attack. ``all_attacks_for``
    (a run index or run name) additionally draws every measured attack of that
    run, dashed. Runs without per-example scores are listed as skipped.
    """
    runs = [r for r in runs or [] if isinstance(r, dict)]
    detail = None
    if isinstance(all_attacks_for, int) and 0 <= all_attacks_for < len(runs):
        detail = all_attacks_for
    elif isinstance(all_attacks_for, str):
        detail = next((i for i, r in enumerate(runs) if r.get("name") == all_attacks_for), None)

    curves = []  # (label, fpr, tpr, n_neg, n_pos, style)
    skipped = []
    for i, run in enumerate(runs):
        attacks = []
        best = strongest_attack(run)
        if i == detail:
            attacks = ok_attacks(run)
        elif best is not None:
            attacks = [best]
        if not attacks:
            skipped.append(run_name(run))
        for attack in attacks:
            arr = examples_arrays(attack)
            roc = roc_curve(*arr) if arr is not None else None
            if roc is None:
                skipped.append(f"{run_name(run)} / {attack.get('attack')}")
                continue
            fpr, tpr = roc
            is_best = attack is best
            prefix = (
                plain(attack.get("attack"), 28)
                if len(runs) == 1
                else f"{plain(run_name(run), 28)} \u2014 {plain(attack.get('attack'), 20)}"
            )
            if i == detail and is_best and len(runs) == 1:
                prefix += " (strongest)"
            curves.append(
                (
                    f"{prefix}: {_auc_label(attack, fpr, tpr)}",
                    fpr,
                    tpr,
                    int((~arr[1]).sum()),
                    int(arr[1].sum()),
                    "-" if is_best else "--",
                )
            )

    fig, (ax,) = new_figure(7.2, 5.6)
    title = "ROC, log-log (strongest attack per run)"
    if detail is not None:
        title = f"ROC, log-log \u2014 all attacks on {plain(run_name(runs[detail]), 40)}"
    ax.set_title(title, fontsize=12)
    if not curves:
        placeholder(ax, "No per-example scores available for a ROC curve.")
        return png_bytes(fig)

    lo_x = min(1.0 / c[3] for c in curves)
    lo_y = min(1.0 / c[4] for c in curves)
    lo = min(lo_x, lo_y)
    ax.set_xscale("log", nonpositive="clip")
    ax.set_yscale("log", nonpositive="clip")
    grid = np.logspace(math.log10(lo), 0, 50)
    ax.plot(grid, grid, color="#888888", linestyle=":", linewidth=1.2, label="chance")
    for k, (label, fpr, tpr, _, _, style) in enumerate(curves):
        ax.plot(
            fpr,
            tpr,
            linestyle=style,
            linewidth=1.8,
            color=_COLORS[k % len(_COLORS)],
            label=label,
        )
    ax.set_xlim(lo_x, 1.0)
    ax.set_ylim(lo_y, 1.05)
    ax.grid(True, which="minor", alpha=0.12, linewidth=0.5)
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("False positive rate (non-members flagged)")
    ax.set_ylabel("True positive rate (members identified)")
    ax.legend(loc="lower right", fontsize=8, framealpha=0.92)
    if skipped:
        ax.text(
            0.01,
            0.99,
            "no scores: " + plain(", ".join(skipped), 90),
            transform=ax.transAxes,
            va="top",
            fontsize=7,
            color="#666666",
        )
    return png_bytes(fig)


# --------------------------------------------------------------------------- #
# Histogram
# --------------------------------------------------------------------------- #
def score_histogram(attack_record: dict, title: str) -> bytes:
    """Overlaid density histograms of member and non-member scores.

    Both groups share the same bins (computed on the pooled finite scores).
    """
    fig, (ax,) = new_figure(6.0, 3.6)
    ax.set_title(plain(title, 70), fontsize=11)
    arr = examples_arrays(attack_record) if isinstance(attack_record, dict) else None
    if arr is not None:
        s, m = arr
        finite = np.isfinite(s)
        s, m = s[finite], m[finite]
    if arr is None or s.size == 0 or m.all() or not m.any():
        placeholder(ax, "No per-example scores for both members and non-members.")
        return png_bytes(fig)
    # When a few extreme values would squash the plot (full range more than 3x
    # the central 99%), bins cover the central 99% of pooled scores and the
    # values outside are counted in the edge bins.
    with np.errstate(over="ignore"):
        overflow = not np.isfinite(float(s.max()) - float(s.min()))
    if overflow:  # scores spanning the float range: rescale (order-preserving) to plot them
        s = s / np.max(np.abs(s))
    lo, hi = np.percentile(s, [0.5, 99.5])
    spread = float(s.max() - s.min())
    n_out = 0
    if hi > lo and spread > 3.0 * (hi - lo):
        n_out = int(np.sum((s < lo) | (s > hi)))
    if n_out:
        s = np.clip(s, lo, hi)
    edges = np.histogram_bin_edges(s, bins="auto")
    if edges.size > 61:
        edges = np.linspace(edges[0], edges[-1], 61)
    groups = (
        (s[~m], _NONMEMBER_COLOR, f"non-members (n={int((~m).sum())})"),
        (s[m], _MEMBER_COLOR, f"members (n={int(m.sum())})"),
    )
    for data, color, label in groups:
        density, _ = np.histogram(data, bins=edges, density=True)
        ax.stairs(density, edges, fill=True, color=color, alpha=0.35, label=label)
        ax.stairs(density, edges, color=color, linewidth=1.3)
    ax.set_xlabel(
        "Attack score / max |score| (higher = more likely member)"
        if overflow
        else "Attack score (higher = more likely member)"
    )
    if n_out:
        ax.text(
            0.01,
            0.98,
            f"{n_out} extreme score(s) counted in the edge bins",
            transform=ax.transAxes,
            va="top",
            fontsize=7,
            color="#666666",
        )
    ax.set_ylabel("Density")
    ax.legend(fontsize=8, framealpha=0.92)
    return png_bytes(fig)


# --------------------------------------------------------------------------- #
# Metric bars
# --------------------------------------------------------------------------- #
def _err(m: dict | None) -> tuple[float, float, float] | None:
    """``(value, lower error, upper error)`` for errorbar, or ``None``."""
    if not m:
        return None
    v = as_finite(m.get("value"))
    if v is None:
        return None
    lo, hi = as_finite(m.get("ci_low")), as_finite(m.get("ci_high"))
    return (
        v,
        max(v - lo, 0.0) if lo is not None else 0.0,
        max(hi - v, 0.0) if hi is not None else 0.0,
    )


def _bars(ax, labels, values, chance: float, chance_label: str, ylabel: str, title: str):
    x = np.arange(len(labels))
    for i, val in enumerate(values):
        if val is None:
            ax.text(i, chance, "n/a", ha="center", va="bottom", color="#666666", fontsize=9)
            continue
        v, el, eu = val
        ax.bar(i, v, width=0.6, color=_COLORS[i % len(_COLORS)], alpha=0.85)
        ax.errorbar(i, v, yerr=[[el], [eu]], color="black", capsize=5, linewidth=1.2)
        ax.text(i + 0.32, v, num(v), va="center", ha="left", fontsize=8)
    ax.axhline(chance, color="#888888", linestyle=":", linewidth=1.2, label=chance_label)
    ax.set_xticks(
        x,
        labels,
        rotation=20 if len(labels) > 3 else 0,
        ha="right" if len(labels) > 3 else "center",
    )
    ax.set_xlim(-0.6, len(labels) - 0.4 + 0.3)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=11)
    ax.legend(loc="upper right", fontsize=8)


def metric_bars(runs: Sequence[dict]) -> bytes:
    """Strongest-attack AUC and TPR@1%FPR per run, with 95% CI error bars."""
    runs = [r for r in runs or [] if isinstance(r, dict)]
    fig, (ax1, ax2) = new_figure(11.0, 4.4, ncols=2)
    if not runs:
        placeholder(ax1, "No runs.")
        placeholder(ax2, "No runs.")
        return png_bytes(fig)
    labels = [plain(run_name(r), 22) for r in runs]
    best = [strongest_attack(r) for r in runs]
    aucs = [_err(metric(a, "auc")) for a in best]
    tprs = [_err(metric(a, TPR_1)) for a in best]

    _bars(ax1, labels, aucs, 0.5, "chance (0.5)", "AUC", "Strongest attack: AUC (95% CI)")
    tops = [v + eu for v, _, eu in (a for a in aucs if a)] or [1.0]
    bottoms = [v - el for v, el, _ in (a for a in aucs if a)] or [0.5]
    ax1.set_ylim(min(0.4, min(bottoms) - 0.03), max(1.0, max(tops) + 0.02))

    _bars(
        ax2,
        labels,
        tprs,
        0.01,
        "chance (0.01)",
        "TPR at 1% FPR",
        "Strongest attack: TPR at 1% FPR (95% CI)",
    )
    tops = [v + eu for v, _, eu in (t for t in tprs if t)] or [0.05]
    ax2.set_ylim(0.0, max(0.05, max(tops) * 1.15))
    return png_bytes(fig)


# --------------------------------------------------------------------------- #
# Privacy / utility
# --------------------------------------------------------------------------- #
def _claimed_eps(run: dict) -> float | None:
    claim = run.get("claim")
    if not isinstance(claim, dict) or claim.get("notion") in (None, "none"):
        return None
    v = as_float(claim.get("epsilon"))
    return v if v is not None and math.isfinite(v) and v > 0 else None


def privacy_utility(runs: Sequence[dict]) -> bytes:
    """Claimed ε (x) against utility and against strongest-attack AUC.

    Runs without a finite claimed ε (non-private, heuristic defenses, missing
    claim) are placed at the right end, at a tick labelled "∞". Finite ε use a
    log axis. Points sharing an x position are spread slightly apart.
    """
    runs = [r for r in runs or [] if isinstance(r, dict)]
    fig, (ax1, ax2) = new_figure(11.0, 4.4, ncols=2)
    if not runs:
        placeholder(ax1, "No runs.")
        placeholder(ax2, "No runs.")
        return png_bytes(fig)

    eps = [_claimed_eps(r) for r in runs]
    finite = sorted({e for e in eps if e is not None})
    if finite:
        inf_x = finite[-1] * (10.0 if len(finite) == 1 else 4.0)
        lo_x, hi_x = finite[0] / 2.0, inf_x * 1.8
    else:
        inf_x, lo_x, hi_x = 1.0, 0.5, 2.0
    base_x = [e if e is not None else inf_x for e in eps]
    # Spread runs that share an x position (multiplicatively, log axis).
    seen: dict[float, int] = {}
    xs = []
    for x in base_x:
        k = seen.get(x, 0)
        seen[x] = k + 1
        xs.append(x * 1.12**k)

    metrics_used = {
        str(r["utility"].get("metric"))
        for r in runs
        if isinstance(r.get("utility"), dict) and r["utility"].get("metric")
    }
    util_label = metrics_used.pop() if len(metrics_used) == 1 else "utility"

    panels = (
        (
            ax1,
            [_err(r.get("utility") if isinstance(r.get("utility"), dict) else None) for r in runs],
            plain(util_label, 30).capitalize(),
            f"{plain(util_label, 30).capitalize()} vs claimed ε",
        ),
        (
            ax2,
            [_err(metric(strongest_attack(r), "auc")) for r in runs],
            "Strongest-attack AUC",
            "Attack AUC vs claimed ε",
        ),
    )
    for ax, values, ylabel, title in panels:
        ax.set_xscale("log")
        plotted = 0
        for i, val in enumerate(values):
            if val is None:
                continue
            v, el, eu = val
            color = _COLORS[i % len(_COLORS)]
            ax.errorbar(
                xs[i],
                v,
                yerr=[[el], [eu]],
                fmt="o",
                color=color,
                capsize=4,
                markersize=6,
                label=plain(run_name(runs[i]), 30),
            )
            ax.annotate(
                plain(run_name(runs[i]), 20),
                (xs[i], v),
                textcoords="offset points",
                xytext=(6, 6),
                fontsize=7,
                color=color,
            )
            plotted += 1
        if ax is ax2:
            ax.axhline(0.5, color="#888888", linestyle=":", linewidth=1.2, label="chance (0.5)")
        ticks = finite + [inf_x]
        ax.set_xticks(ticks, [f"{t:.3g}" for t in finite] + ["\u221e"])
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.tick_params(axis="x", which="minor", length=0)
        ax.set_xlim(lo_x, hi_x)
        ax.set_xlabel("Claimed ε (\u221e = no formal guarantee)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=11)
        if plotted:
            ax.legend(fontsize=7, loc="best", framealpha=0.92)
        else:
            ax.text(0.5, 0.5, "no values", transform=ax.transAxes, ha="center", color="#666666")
    return png_bytes(fig)


# --------------------------------------------------------------------------- #
# Epsilon audit: ROC against the claim's trade-off curve
# --------------------------------------------------------------------------- #
_IMPOSSIBLE_COLOR = "#d62728"
_BOUND_COLOR = "#8c1d18"
_ROC_COLOR = "#1f5fa8"
# Run colours for the ε-audit plots: no red, which marks violations there.
_RUN_COLORS = tuple(c for c in _COLORS if c != "#d62728")
_AUDIT_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "h", "<", ">")


def _paired(block: object, xkey: str, ykey: str) -> tuple[np.ndarray, np.ndarray] | None:
    """Finite ``(x, y)`` arrays from ``block[xkey]``, ``block[ykey]``, sorted by x."""
    if not isinstance(block, dict):
        return None
    xs, ys = block.get(xkey), block.get(ykey)
    if not isinstance(xs, list | tuple) or not isinstance(ys, list | tuple):
        return None
    pairs = [(as_finite(a), as_finite(b)) for a, b in zip(xs, ys, strict=False)]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    if not pairs:
        return None
    arr = np.asarray(sorted(pairs), dtype=float)
    return arr[:, 0], arr[:, 1]


def tradeoff_max_tpr(fpr: np.ndarray, epsilon: float, delta: float) -> np.ndarray:
    """Largest TPR an (ε, δ)-DP mechanism allows at ``fpr``:
    ``min(e^ε FPR + δ, 1 − e^{−ε}(1 − δ − FPR), 1)``, floored at 0."""
    fpr = np.clip(np.asarray(fpr, dtype=float), 0.0, 1.0)
    a = math.exp(epsilon) * fpr + delta
    b = 1.0 - math.exp(-epsilon) * (1.0 - delta - fpr)
    return np.clip(np.minimum(a, b), 0.0, 1.0)


def _claim_label(eps: float | None, delta: float | None) -> str:
    if eps is None:
        return "no claim"
    return f"ε = {num(eps)}, δ = {small(delta)}" if delta is not None else f"ε = {num(eps)}"


def _violation_points(tr: dict) -> list[tuple[float, float, float, float]]:
    """The trade-off test's significant violations as (FPR, TPR, FPR upper, TPR lower), FPR
    and TPR positive; a missing or inconsistent confidence corner is the point itself."""
    points = []
    for p in tr.get("points") if isinstance(tr.get("points"), list) else []:
        if not isinstance(p, dict):
            continue
        f, t = as_finite(p.get("fpr")), as_finite(p.get("tpr"))
        if f is None or t is None or f <= 0 or t <= 0:
            continue
        fh, tl = as_finite(p.get("fpr_hi")), as_finite(p.get("tpr_lo"))
        fh = f if fh is None or fh < f else fh
        tl = t if tl is None or tl > t or tl <= 0 else tl
        points.append((f, t, fh, tl))
    return points


def _tradeoff_verdict(ax, tr: dict, n_points: int) -> None:
    """The trade-off test's verdict in a box at the lower right: VIOLATED with the
    number of significant violations, or none, with the thresholds and confidence."""
    n_thr = tr.get("n_thresholds")
    conf = as_float(tr.get("confidence"))
    tested = f"{num(n_thr)} thresholds" if n_thr is not None else "thresholds"
    conf_txt = f" at {100 * conf:g}% confidence" if conf is not None else ""
    if tr.get("violated"):
        msg = f"VIOLATED: {n_points} of {tested} significantly above the bound{conf_txt}"
        box = {"facecolor": "#fde4e2", "edgecolor": _IMPOSSIBLE_COLOR}
        color = _BOUND_COLOR
    else:
        msg = f"No significant violation ({tested} tested{conf_txt})"
        box = {"facecolor": "#f4f6f8", "edgecolor": "#cccccc"}
        color = "#333333"
    ax.text(
        0.98,
        0.27,
        msg,
        transform=ax.transAxes,
        ha="right",
        va="bottom",
        fontsize=8.5,
        color=color,
        bbox=dict(boxstyle="round,pad=0.3", **box),
    )


def roc_vs_tradeoff(run: dict) -> bytes:
    """The strongest attack's empirical ROC over the trade-off bound of the claim.

    Reads ``run["epsilon_audit"]["tradeoff"]``: ``roc`` (the empirical ROC),
    ``curve`` (the largest TPR the claimed (ε, δ) allows at each FPR; computed
    here from the claim when missing) and ``points`` (significant violations,
    drawn in red with the corner of their confidence box, FPR upper and TPR
    lower bound). The region above the curve is shaded: no (ε, δ)-DP mechanism
    can put an ROC point there. Log-log axes.
    """
    tr = epsilon_audit_tradeoff(run)
    eps, delta = audited_claim(run) if isinstance(run, dict) else (None, None)
    attack = plain(tr.get("attack") or "strongest", 28) if tr else "strongest"
    fig, (ax,) = new_figure(7.2, 5.6)
    ax.set_title(
        f"{attack} attack ROC vs the trade-off bound of the claim ({_claim_label(eps, delta)})",
        fontsize=11,
    )
    if tr is None:
        placeholder(ax, "No trade-off test for this run.")
        return png_bytes(fig)

    roc = _paired(tr.get("roc"), "fpr", "tpr")
    curve = _paired(tr.get("curve"), "fpr", "max_tpr")
    points = _violation_points(tr)
    # The axes follow the data: the smallest positive FPR of the empirical ROC
    # and of the violations (the bound's curve only when there is no ROC).
    data_x = [x for x in (roc[0] if roc is not None else []) if x > 0]
    data_x += [p[0] for p in points]
    if not data_x and curve is not None:
        data_x = [x for x in curve[0] if x > 0]
    lo_x = max(min(data_x), 1e-7) if data_x else max(delta or 1e-5, 1e-7)
    if curve is None and eps is not None:
        grid = np.logspace(math.log10(lo_x), 0, 200)
        curve = (grid, tradeoff_max_tpr(grid, eps, delta or 0.0))
    if roc is None and curve is None:
        placeholder(ax, "The trade-off test holds no ROC and no bound to draw.")
        return png_bytes(fig)

    positive_y = [y for x, y in zip(*roc, strict=True) if x >= lo_x and y > 0] if roc else []
    if curve is not None:
        positive_y += [y for x, y in zip(*curve, strict=True) if x >= lo_x and y > 0]
    positive_y += [p[3] for p in points]
    # Square log-log axes (as in the ROC overview): both from the smaller limit.
    lo = min(lo_x, max(min(positive_y) / 1.5, 1e-7) if positive_y else lo_x)
    lo_x = lo_y = lo
    ax.set_xscale("log", nonpositive="clip")
    ax.set_yscale("log", nonpositive="clip")

    diag = np.logspace(math.log10(min(lo_x, lo_y)), 0, 50)
    ax.plot(diag, diag, color="#888888", linestyle=":", linewidth=1.2, label="chance")
    if curve is not None:
        cx, cy = curve
        keep = cx > 0
        cx, cy = cx[keep], np.maximum(cy[keep], lo_y * 0.5)
        if cx.size:
            ax.fill_between(
                cx,
                cy,
                np.full_like(cy, 1.05),
                color=_IMPOSSIBLE_COLOR,
                alpha=0.10,
                linewidth=0,
                label="impossible under the claimed (ε, δ)",
            )
            ax.plot(
                cx,
                cy,
                color=_BOUND_COLOR,
                linewidth=1.6,
                label="DP trade-off bound: max TPR at the claim",
            )
    if roc is not None:
        rx, ry = roc
        keep = (rx > 0) & (ry > 0)
        if keep.any():
            ax.plot(
                rx[keep],
                ry[keep],
                color=_ROC_COLOR,
                linewidth=1.8,
                label=f"empirical ROC ({attack})",
            )
    if points:
        f, t, fh, tl = (np.asarray(c) for c in zip(*points, strict=True))
        ax.errorbar(
            f,
            t,
            xerr=[np.zeros_like(f), fh - f],
            yerr=[t - tl, np.zeros_like(t)],
            fmt="o",
            color=_IMPOSSIBLE_COLOR,
            markersize=5,
            elinewidth=1.0,
            capsize=2,
            label=f"significant violation ({len(points)}), to its CI corner",
        )
        ax.plot(fh, tl, "x", color=_IMPOSSIBLE_COLOR, markersize=5)

    _tradeoff_verdict(ax, tr, len(points))
    ax.set_xlim(lo_x, 1.0)
    ax.set_ylim(lo_y, 1.05)
    ax.grid(True, which="minor", alpha=0.12, linewidth=0.5)
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("False positive rate (non-members flagged)")
    ax.set_ylabel("True positive rate (members identified)")
    ax.legend(loc="lower right", fontsize=8, framealpha=0.92)
    return png_bytes(fig)


# --------------------------------------------------------------------------- #
# Epsilon audit: claimed vs audited epsilon across runs
# --------------------------------------------------------------------------- #
def _nice_ticks(top: float) -> list[float]:
    ticks = [0.0, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0]
    return [t for t in ticks if t <= top]


def _audit_points(runs: Sequence[dict], claims: list[float | None]) -> tuple[list, list, list]:
    """Audit names (first seen first), one (claim, bound, ceiling, audit, run, exceeds) per
    audit with a finite bound, and "run / audit" for each without; ``claims``: each run's."""
    audit_names: list[str] = []
    plotted = []  # (x, lb, ceiling, marker_index, run_index, exceeds)
    skipped = []
    for i, run in enumerate(runs):
        for a in epsilon_audit_entries(run):
            name = plain(a.get("name") or "unnamed audit", 32)
            lb = as_finite(a.get("epsilon_lb"))
            if a.get("status", "ok") != "ok" or lb is None:
                skipped.append(f"{plain(run_name(run), 20)} / {name}")
                continue
            if name not in audit_names:
                audit_names.append(name)
            exceeds = audit_violated(run) and audit_exceeds(a, claims[i])
            plotted.append(
                (claims[i], lb, as_finite(a.get("ceiling")), audit_names.index(name), i, exceeds)
            )
    return audit_names, plotted, skipped


def _draw_claim_boundary(ax, finite, top_finite, inf_x, x_left, y_top) -> None:
    """The claim boundary y = x over the finite claims, the region above it shaded (claim
    contradicted), and a vertical rule before the "∞ (no claim)" column at ``inf_x``."""
    if finite:
        line_x = np.concatenate(
            [
                np.linspace(min(0.0, x_left), 1.0, 50),
                np.logspace(0, math.log10(top_finite * 1.3 + 1e-9), 50),
            ]
        )
        line_x = line_x[line_x <= max(top_finite * 1.3, 1.0)]
        ax.fill_between(
            line_x,
            line_x,
            np.full_like(line_x, y_top),
            color=_IMPOSSIBLE_COLOR,
            alpha=0.07,
            linewidth=0,
        )
        ax.plot(line_x, line_x, color=_BOUND_COLOR, linestyle="--", linewidth=1.3)
    ax.axvline(
        math.sqrt(max(top_finite * 1.3, 1.0) * inf_x) if finite else inf_x / 1.6,
        color="#aaaaaa",
        linewidth=0.8,
        linestyle="-",
    )


def _draw_audits(ax, plotted: list, position) -> None:
    """One marker per audit at ``position(claim, run, audit)`` (run colour, audit marker, red
    edge when it exceeds the claim), with a dotted line up to its ceiling when it has one."""
    for x, lb, ceiling, j, i, exceeds in plotted:
        px = position(x, i, j)
        color = _RUN_COLORS[i % len(_RUN_COLORS)]
        if ceiling is not None:
            ax.plot(
                [px, px],
                [lb, max(ceiling, lb)],
                color=color,
                linewidth=0.8,
                alpha=0.5,
                linestyle=":",
            )
            ax.plot(
                px, ceiling, marker="_", markersize=16, markeredgewidth=2.2, color=color, alpha=0.85
            )
        ax.scatter(
            [px],
            [lb],
            marker=_AUDIT_MARKERS[j % len(_AUDIT_MARKERS)],
            s=70,
            color=color,
            edgecolors=_IMPOSSIBLE_COLOR if exceeds else "white",
            linewidths=2.2 if exceeds else 0.8,
            zorder=5,
        )


def _audit_legends(fig, runs, plotted, audit_names, has_claim: bool) -> None:
    """The legends beside the axes: the audits (markers, ceiling tick, violation edge and,
    with a finite claim, the boundary and its region) and the runs that have a point."""
    audit_handles = [
        Line2D(
            [],
            [],
            linestyle="",
            marker=_AUDIT_MARKERS[j % len(_AUDIT_MARKERS)],
            color="#555555",
            markersize=8,
            label=n,
        )
        for j, n in enumerate(audit_names)
    ]
    audit_handles += [
        Line2D(
            [],
            [],
            linestyle="",
            marker="_",
            markersize=14,
            markeredgewidth=2.2,
            color="#555555",
            label="ceiling (most this sample could certify)",
        ),
        Line2D(
            [],
            [],
            linestyle="",
            marker="o",
            markersize=8,
            color="#bbbbbb",
            markeredgecolor=_IMPOSSIBLE_COLOR,
            markeredgewidth=2.2,
            label="bound exceeds the claim (VIOLATED)",
        ),
    ]
    if has_claim:
        audit_handles += [
            Line2D([], [], color=_BOUND_COLOR, linestyle="--", label="claim boundary y = x"),
            Patch(color=_IMPOSSIBLE_COLOR, alpha=0.15, label="above: claim contradicted"),
        ]
    fig.legend(
        handles=audit_handles,
        title="Audits",
        loc="outside right upper",
        fontsize=8,
        title_fontsize=8.5,
        framealpha=0.95,
    )
    run_handles = [
        Patch(color=_RUN_COLORS[i % len(_RUN_COLORS)], label=plain(run_name(r), 30))
        for i, r in enumerate(runs)
        if any(p[4] == i for p in plotted)
    ]
    fig.legend(
        handles=run_handles,
        title="Runs",
        loc="outside right lower",
        fontsize=8,
        title_fontsize=8.5,
        framealpha=0.95,
    )


def claimed_vs_audited(runs: Sequence[dict]) -> bytes:
    """Audited ε lower bounds (y) against the claimed ε (x), one point per audit.

    Only runs with an ``epsilon_audit`` are drawn. Runs without a finite claim
    sit at the right, at "∞". Markers distinguish audits, colours runs; a short
    horizontal tick marks each audit's ceiling (the largest bound its sample
    size could certify). Points above the y = x line contradict the claim.
    Both axes are symmetric-log (linear below 1), so 0 and the diagonal show.
    """
    runs = [r for r in runs or [] if isinstance(r, dict) and epsilon_audit(r)]
    fig, (ax,) = new_figure(10.0, 5.4)
    ax.set_title("Claimed ε vs audited ε lower bounds", fontsize=12)
    claims = [audited_claim(r)[0] for r in runs]
    finite = sorted({e for e in claims if e is not None})
    audit_names, plotted, skipped = _audit_points(runs, claims)
    if not plotted:
        placeholder(ax, "No audited ε lower bounds to compare with claims.")
        return png_bytes(fig)

    top_finite = finite[-1] if finite else 0.0
    inf_x = max(2.5 * top_finite, top_finite + 3.0, 3.0)
    ax.set_xscale("symlog", linthresh=1.0, linscale=0.6)
    ax.set_yscale("symlog", linthresh=1.0, linscale=0.6)

    # Spread runs sharing a claimed ε, and audits within a run, a little apart.
    slots: dict[float, list[int]] = {}
    for x, *_, i, _ in plotted:
        key = inf_x if x is None else x
        if i not in slots.setdefault(key, []):
            slots[key].append(i)

    def position(x: float | None, run_i: int, audit_j: int) -> float:
        base = inf_x if x is None else x
        group = slots[base]
        k = group.index(run_i) - (len(group) - 1) / 2.0
        step = 0.2 * k + 0.04 * (audit_j - (len(audit_names) - 1) / 2.0)
        return base * (1.0 + step) if base >= 1.0 else base + step

    ys = [p[1] for p in plotted] + [p[2] for p in plotted if p[2] is not None] + finite
    y_top = max(max(ys) * 1.35, 1.5)
    x_left = -0.3  # both axes start just below 0, so y = x is the diagonal
    x_right = inf_x * 1.45

    _draw_claim_boundary(ax, finite, top_finite, inf_x, x_left, y_top)
    _draw_audits(ax, plotted, position)

    # Claimed values, plus round values that are not too close to a claim.
    nice = [
        t
        for t in _nice_ticks(max(top_finite * 1.3, 1.0))
        if all(max(t, c) > 1.5 * min(t, c) if min(t, c) >= 1 else abs(t - c) > 0.3 for c in finite)
    ]
    ticks = sorted(set(finite + nice))
    ax.set_xticks(
        ticks + [inf_x],
        [num(t) if t in finite else f"{t:g}" for t in ticks] + ["\u221e\n(no claim)"],
    )
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", which="minor", length=0)
    yt = _nice_ticks(y_top)
    ax.set_yticks(yt, [f"{t:g}" for t in yt])
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(x_left, x_right)
    ax.set_ylim(min(-0.3, x_left), y_top)
    ax.set_xlabel("Claimed ε (\u221e = no formal claim)")
    ax.set_ylabel("Audited ε lower bound")

    _audit_legends(fig, runs, plotted, audit_names, bool(finite))
    if skipped:
        ax.text(
            0.01,
            0.99,
            "no bound: " + plain(", ".join(skipped), 90),
            transform=ax.transAxes,
            va="top",
            fontsize=7,
            color="#666666",
        )
    return png_bytes(fig)


def canary_histogram(audit: dict, title: str | None = None) -> bytes:
    """Member vs non-member score distributions of one ε audit (its ``examples``)."""
    name = audit.get("name") if isinstance(audit, dict) else None
    return score_histogram(
        audit if isinstance(audit, dict) else {},
        title or f"{name or 'audit'}: canary scores (in vs out)",
    )


def extraction_risk_curve(record: dict, title: str | None = None) -> bytes:
    """Risk within n queries against n (log axis) for an ``extraction-risk`` record: the
    median member and non-member (control) with their 95% intervals (left), and the
    fraction of members / non-members whose risk exceeds 1% (right)."""
    fig, (ax, ax2) = new_figure(9.6, 3.6, ncols=2)
    details = record.get("details") if isinstance(record.get("details"), dict) else {}
    metrics = record.get("metrics") if isinstance(record.get("metrics"), dict) else {}
    queries = [q for q in details.get("queries") or [] if isinstance(q, int) and q >= 1]
    if not queries:
        placeholder(ax, "no extraction risk measured")
        placeholder(ax2, "no extraction risk measured")
        return png_bytes(fig)
    x = np.array(queries, dtype=float)
    for axis, key, ylabel in (
        (ax, "{g}_median_risk@{n}", "median risk within n queries"),
        (ax2, "{g}_frac_risk>0.01@{n}", "fraction of records with risk > 1%"),
    ):
        for g, label, color in (
            ("member", "members", _MEMBER_COLOR),
            ("nonmember", "non-members (control)", _NONMEMBER_COLOR),
        ):
            ms = [metrics.get(key.format(g=g, n=n)) for n in queries]
            if not all(isinstance(m, dict) for m in ms):
                continue
            y = np.array([as_float(m.get("value")) for m in ms], dtype=float)
            lo = np.array([as_float(m.get("ci_low")) for m in ms], dtype=float)
            hi = np.array([as_float(m.get("ci_high")) for m in ms], dtype=float)
            axis.plot(x, y, marker="o", color=color, label=label)
            axis.fill_between(x, lo, hi, color=color, alpha=0.15, linewidth=0)
        axis.set_xscale("log")
        axis.set_ylim(-0.02, 1.02)
        axis.set_xlabel("queries n")
        axis.set_ylabel(ylabel)
        axis.legend(loc="upper left", fontsize=8)
    dec = details.get("decoding") if isinstance(details.get("decoding"), dict) else {}
    fig.suptitle(
        plain(
            title
            or (
                f"Extraction risk: T={dec.get('temperature')}, top-k={dec.get('top_k')}, "
                f"top-p={dec.get('top_p')}, prefix {details.get('prefix_tokens')} / "
                f"suffix {details.get('suffix_tokens')} tokens"
            ),
            120,
        ),
        fontsize=10,
    )
    return png_bytes(fig)
