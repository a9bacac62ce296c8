"""Privacy-utility curves of a sweep (``results["sweep"]``): means across seeds with CIs."""

from __future__ import annotations

from privacy_audit.reports.plots import new_figure, placeholder, plain, png_bytes


def _err(est: dict) -> tuple[float, float, float] | None:
    v = est.get("value") if isinstance(est, dict) else None
    if v is None:
        return None
    lo = est.get("ci_low")
    hi = est.get("ci_high")
    return v, v - (v if lo is None else lo), (v if hi is None else hi) - v


def sweep_curves(sweep: dict) -> bytes:
    """Utility, strongest-attack AUC and TPR@1%FPR against ε, one line per defense; error
    bars are the 95% t-intervals across seeds. Runs without an ε are drawn at "∞"."""
    curves = sweep.get("curves") or []
    eps_all = [
        p["epsilon"] for c in curves for p in c.get("points", []) if p.get("epsilon") is not None
    ]
    inf_x = (max(eps_all) * 4) if eps_all else 1.0
    fig, axes = new_figure(11, 3.8, ncols=3)
    panels = (
        ("utility", "utility (mean across seeds)"),
        ("best_auc", "strongest attack AUC"),
        ("best_tpr_at_fpr_0.01", "strongest TPR at 1% FPR"),
    )
    if not curves:
        for ax in axes:
            placeholder(ax, "no sweep points")
        return png_bytes(fig)
    for ax, (key, label) in zip(axes, panels, strict=True):
        for i, c in enumerate(curves):
            xs, ys, lo, hi = [], [], [], []
            for p in c.get("points", []):
                e = _err(p.get(key))
                if e is None:
                    continue
                xs.append(inf_x if p.get("epsilon") is None else p["epsilon"])
                ys.append(e[0])
                lo.append(e[1])
                hi.append(e[2])
            if not xs:
                continue
            ax.errorbar(
                xs,
                ys,
                yerr=[lo, hi],
                fmt="o-",
                capsize=3,
                color=f"C{i % 10}",
                label=plain(c.get("defense"), 30),
            )
        ax.set_xscale("log")
        ticks = sorted(set(eps_all))
        if any(p.get("epsilon") is None for c in curves for p in c.get("points", [])):
            ticks.append(inf_x)
        if ticks:
            ax.set_xticks(ticks)
            ax.set_xticklabels(["∞" if t == inf_x else f"{t:g}" for t in ticks])
            ax.minorticks_off()
        ax.set_xlabel("ε")
        ax.set_title(label, fontsize=9)
        if key == "best_auc":
            ax.axhline(0.5, ls=":", color="#888")
    axes[0].legend(fontsize=7)
    return png_bytes(fig)
