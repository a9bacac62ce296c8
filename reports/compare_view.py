"""``privacy-audit compare RUN_A RUN_B ...``: one HTML page comparing finished runs.

Inputs are run output directories (holding ``results.json``) or ``results.json`` files of
the same schema. The page shows three plots (privacy-utility; AUC and TPR at 1% FPR per
attack; claimed vs audited ε) and a table of differences against the first input, for
every (run, attack, metric) that both files measured: B − A, and whether the two 95% CIs
overlap. ``differences.csv`` and ``compare.json`` hold the same table for machines.
"""

from __future__ import annotations

import math
from typing import Any

from privacy_audit.ground.errors import DataError
from privacy_audit.reports.results_record import AttackRecord, ResultsRecord, RunRecord

COMPARE_HTML = "compare.html"
METRICS = ("auc", "tpr_at_fpr_0.01", "tpr_at_fpr_0.001", "epsilon_lower_bound")


def _is_num(x: Any) -> bool:
    return x is None or (isinstance(x, (int, float)) and not isinstance(x, bool))


def validate_results(name: str, res: dict) -> None:
    """Every field ``compare`` reads has the type the schema gives it, or DataError (exit 2)
    naming it: a malformed run, attack or metric is never dropped silently."""
    where = f"results {name!r}"
    for i, run in enumerate(res["runs"]):
        if not isinstance(run, dict) or not isinstance(run.get("name"), str):
            raise DataError(f"{where}: run #{i + 1} is not an object with a string 'name'")
        rname = run["name"]
        u = run.get("utility")
        if u is not None and (
            not isinstance(u, dict)
            or not all(_is_num(u.get(k)) for k in ("value", "ci_low", "ci_high"))
        ):
            raise DataError(f"{where}: run {rname!r} has a malformed 'utility' (not numbers)")
        claim = run.get("claim")
        if claim is not None and (not isinstance(claim, dict) or not _is_num(claim.get("epsilon"))):
            raise DataError(
                f"{where}: run {rname!r} has a malformed 'claim' (an object whose 'epsilon' "
                "is a number or null)"
            )
        ea = run.get("epsilon_audit")
        if ea is not None:
            audits = ea.get("audits", []) if isinstance(ea, dict) else None
            if not isinstance(audits, list) or not all(
                isinstance(a, dict) and _is_num(a.get("epsilon_lb")) for a in audits
            ):
                raise DataError(f"{where}: run {rname!r} has a malformed 'epsilon_audit'")
        attacks = run.get("attacks", [])
        if not isinstance(attacks, list):
            raise DataError(f"{where}: run {rname!r} has 'attacks' that is not a list")
        for a in attacks:
            if not isinstance(a, dict) or not isinstance(a.get("attack"), str):
                raise DataError(
                    f"{where}: run {rname!r} has an attack that is not an object with a name"
                )
            if a.get("status") != "ok":
                continue
            metrics = a.get("metrics")
            if not isinstance(metrics, dict):
                raise DataError(
                    f"{where}: attack {a['attack']!r} of run {rname!r} has no 'metrics' object"
                )
            for key in METRICS:
                if key not in metrics:
                    continue
                m = metrics[key]
                if not isinstance(m, dict) or not all(
                    _is_num(m.get(k)) for k in ("value", "ci_low", "ci_high")
                ):
                    raise DataError(
                        f"{where}: metric {key!r} of attack {a['attack']!r} of run {rname!r} "
                        "is malformed (value, ci_low and ci_high must be numbers or null)"
                    )


def unmeasured_metrics(named: list[tuple[str, dict]]) -> list[str]:
    """``source/run/attack/metric`` of every null metric of an ``ok`` attack (not finite
    when measured); compare reports them instead of leaving them out silently."""
    out = []
    for src, res in named:
        for run in ResultsRecord.of(res).runs:
            for a in run.attacks:
                if a.status != "ok":
                    continue
                for key in METRICS:
                    m = a.metric(key)
                    if m is not None and m.raw.get("value") is None:
                        out.append(f"{src}/{run.name}/{a.name}/{key}")
    return out


def utility_floor_checks(named: list[tuple[str, dict]]) -> list[dict]:
    """Every run of every input against its trivial baseline, as the paper-claims rule
    (experiments/claims.py, ``judge``): the unigram perplexity (and the public-only start when
    the results carry it) for LMs, the majority-class rate for classifiers. ``learned`` is
    True when the run's utility CI clears every baseline, False when it does not (its
    privacy numbers then describe a model that learned nothing: not comparable), None when
    no baseline is recorded (not checked, never an all-clear)."""
    from privacy_audit.reports.utility_floor import Arm, Baseline, clears

    out = []
    for src, res in named:
        uf = res.get("utility_floor") if isinstance(res.get("utility_floor"), dict) else {}
        for run in ResultsRecord.of(res).runs:
            u = run.utility
            if u is None or not isinstance(u.get("value"), (int, float)):
                continue
            metric = u.get("metric")
            floors = []
            if metric == "perplexity":
                f = uf.get("floor", u.get("unigram_floor"))
                if isinstance(f, (int, float)):
                    floors.append(Baseline("unigram perplexity", float(f)))
                ps = uf.get("public_start")
                if isinstance(ps, dict) and isinstance(ps.get("value"), (int, float)):
                    floors.append(
                        Baseline(
                            "public-only start", ps["value"], ps.get("ci_low"), ps.get("ci_high")
                        )
                    )
            elif isinstance(u.get("majority_rate", u.get("majority_class_rate")), (int, float)):
                rate = u.get("majority_rate", u.get("majority_class_rate"))
                floors.append(Baseline("majority class", float(rate)))
            higher = bool(u.get("higher_is_better", metric != "perplexity"))
            arm = Arm(str(run.name), u["value"], u.get("ci_low"), u.get("ci_high"), higher, floors)
            out.append(
                {
                    "source": src,
                    "run": arm.name,
                    "metric": metric,
                    "value": arm.value,
                    "ci_low": arm.ci_low,
                    "ci_high": arm.ci_high,
                    "baselines": [
                        {"name": f.name, "value": f.value, "cleared": clears(arm, f)}
                        for f in floors
                    ],
                    "learned": all(clears(arm, f) for f in floors) if floors else None,
                }
            )
    return out


def floor_line(c: dict) -> str:
    if c["learned"] is None:
        return f"{c['source']}/{c['run']}: no trivial baseline recorded (utility floor not checked)"
    failed = [b for b in c["baselines"] if not b["cleared"]]
    ci = f" [{c['ci_low']:.4g}, {c['ci_high']:.4g}]" if c["ci_low"] is not None else ""
    return (
        f"{c['source']}/{c['run']}: {c['metric']} {c['value']:.4g}{ci} does not clear "
        + ", ".join(f"{b['name']} {b['value']:.4g}" for b in failed)
        + " — did not learn: not comparable"
    )


def _m(attack: AttackRecord, key: str) -> dict | None:
    """The metric's dict when it holds a number (its numbers as written: the tables and
    compare.json show them so)."""
    m = attack.metric(key)
    return m.raw if m is not None and isinstance(m.raw.get("value"), (int, float)) else None


def _audited_eps(run: RunRecord) -> float | None:
    vals = [
        m["value"]
        for a in run.attacks
        if a.status == "ok" and (m := _m(a, "epsilon_lower_bound")) is not None
    ]
    for a in run.epsilon_audit.audits if run.epsilon_audit is not None else ():
        if a.get("status") == "ok" and isinstance(a.get("epsilon_lb"), (int, float)):
            vals.append(a["epsilon_lb"])
    return max(vals) if vals else None


def records(named: list[tuple[str, dict]]) -> list[dict]:
    """One row per (input, run, attack, metric), plus utility and ε per run."""
    rows = []
    for src, res in named:
        for run in ResultsRecord.of(res).runs:
            rname = str(run.name)
            u = run.utility or {}
            if isinstance(u.get("value"), (int, float)):
                rows.append(
                    {
                        "source": src,
                        "run": rname,
                        "attack": "-",
                        "metric": f"utility ({u.get('metric', 'utility')})",
                        "value": u["value"],
                        "ci_low": u.get("ci_low"),
                        "ci_high": u.get("ci_high"),
                    }
                )
            eps = _audited_eps(run)
            if eps is not None:
                rows.append(
                    {
                        "source": src,
                        "run": rname,
                        "attack": "-",
                        "metric": "audited epsilon (best lower bound)",
                        "value": eps,
                        "ci_low": eps,
                        "ci_high": None,
                    }
                )
            for a in run.attacks:
                if a.status != "ok":
                    continue
                for key in METRICS:
                    m = _m(a, key)
                    if m is not None:
                        rows.append(
                            {
                                "source": src,
                                "run": rname,
                                "attack": str(a.name),
                                "metric": key,
                                "value": m["value"],
                                "ci_low": m.get("ci_low"),
                                "ci_high": m.get("ci_high"),
                            }
                        )
    return rows


def metric_table(rows: list[dict], source: str, metric: str) -> dict[tuple[str, str], dict]:
    """``{(run, attack): row}`` of one input's rows for one metric (what a bar shows)."""
    return {
        (r["run"], r["attack"]): r for r in rows if r["source"] == source and r["metric"] == metric
    }


def _overlap(a: dict, b: dict) -> bool | None:
    lo_a, hi_a, lo_b, hi_b = a["ci_low"], a["ci_high"], b["ci_low"], b["ci_high"]
    if None in (lo_a, lo_b):
        return None
    hi_a = math.inf if hi_a is None else hi_a
    hi_b = math.inf if hi_b is None else hi_b
    return lo_a <= hi_b and lo_b <= hi_a


def differences(named: list[tuple[str, dict]]) -> list[dict]:
    """Each later input against the first, for the rows both measured."""
    rows = records(named)
    base_name = named[0][0]
    base = {(r["run"], r["attack"], r["metric"]): r for r in rows if r["source"] == base_name}
    out = []
    for src, _ in named[1:]:
        for r in rows:
            if r["source"] != src:
                continue
            b = base.get((r["run"], r["attack"], r["metric"]))
            if b is None:
                continue
            out.append(
                {
                    "run": r["run"],
                    "attack": r["attack"],
                    "metric": r["metric"],
                    "a": base_name,
                    "b": src,
                    "value_a": b["value"],
                    "value_b": r["value"],
                    "difference": r["value"] - b["value"],
                    "ci_a": [b["ci_low"], b["ci_high"]],
                    "ci_b": [r["ci_low"], r["ci_high"]],
                    "cis_overlap": _overlap(b, r),
                }
            )
    return out


def _bar(v: float, lo: Any, hi: Any) -> list[list[float]]:
    """Error-bar lengths below and above ``v`` (never negative: an edited or rounded value
    may sit outside its interval)."""
    lo_e = max(0.0, v - lo) if isinstance(lo, (int, float)) else 0.0
    hi_e = max(0.0, hi - v) if isinstance(hi, (int, float)) else 0.0
    return [[lo_e], [hi_e]]


def _plots(named: list[tuple[str, dict]]) -> list[tuple[str, str, bytes]]:
    import numpy as np

    from privacy_audit.reports.plots import new_figure, placeholder, plain, png_bytes

    rows = records(named)
    sources = [n for n, _ in named]
    colors = [f"C{i % 10}" for i in range(len(sources))]
    figs = []

    # 1. privacy-utility: utility against the strongest attack's AUC, per run
    fig, (ax,) = new_figure(7.5, 4.5)
    plotted = False
    for src, color in zip(sources, colors, strict=True):
        for res_name, res in named:
            if res_name != src:
                continue
            for run in ResultsRecord.of(res).runs:
                u = run.utility or {}
                aucs = [m for a in run.attacks if (m := _m(a, "auc")) is not None]
                if not aucs or not isinstance(u.get("value"), (int, float)):
                    continue
                best = max(aucs, key=lambda m: m["value"])
                x, y = best["value"], u["value"]
                xerr = _bar(x, best.get("ci_low"), best.get("ci_high"))
                yerr = _bar(y, u.get("ci_low"), u.get("ci_high"))
                ax.errorbar(x, y, xerr=xerr, yerr=yerr, fmt="o", color=color, capsize=3)
                ax.annotate(plain(f"{src}: {run.name}", 40), (x, y), fontsize=7)
                plotted = True
    if plotted:
        ax.axvline(0.5, ls=":", color="#888")
        ax.set_xlabel("strongest attack AUC (95% CI)")
        ax.set_ylabel("utility (95% CI)")
    else:
        placeholder(ax, "no run has both utility and an attack AUC")
    figs.append(("Privacy / utility", "Each point is one run; colours are inputs.", png_bytes(fig)))

    # 2. AUC and TPR@1%FPR per attack
    keys = sorted({(r["run"], r["attack"]) for r in rows if r["metric"] == "auc"})
    fig, axes = new_figure(max(7.5, 0.5 * len(keys) * len(sources) + 2), 4.8, ncols=2)
    for ax, metric, title in (
        (axes[0], "auc", "AUC"),
        (axes[1], "tpr_at_fpr_0.01", "TPR at 1% FPR"),
    ):
        if not keys:
            placeholder(ax, "no attack results")
            continue
        width = 0.8 / len(sources)
        idx = np.arange(len(keys))
        for j, (src, color) in enumerate(zip(sources, colors, strict=True)):
            look = metric_table(rows, src, metric)
            vals, lo, hi = [], [], []
            for k in keys:
                r = look.get(k)
                v = r["value"] if r else np.nan
                vals.append(v)
                (e_lo,), (e_hi,) = _bar(v, r and r["ci_low"], r and r["ci_high"])
                lo.append(e_lo)
                hi.append(e_hi)
            ax.bar(idx + j * width, vals, width, color=color, label=plain(src, 30))
            ax.errorbar(idx + j * width, vals, yerr=[lo, hi], fmt="none", ecolor="#333", capsize=2)
        ax.set_xticks(idx + width * (len(sources) - 1) / 2)
        ax.set_xticklabels([plain(f"{r} · {a}", 28) for r, a in keys], rotation=60, ha="right")
        ax.set_title(title)
        if metric == "auc":
            ax.axhline(0.5, ls=":", color="#888")
        ax.legend(fontsize=7)
    figs.append(
        (
            "Attack success per attack",
            "AUC and TPR at 1% FPR with 95% CIs; dotted line: chance AUC.",
            png_bytes(fig),
        )
    )

    # 3. claimed vs audited epsilon
    fig, (ax,) = new_figure(7.5, 4.5)
    pts = 0
    for src, color in zip(sources, colors, strict=True):
        for res_name, res in named:
            if res_name != src:
                continue
            for run in ResultsRecord.of(res).runs:
                claimed = run.claim.epsilon
                audited = _audited_eps(run)
                if claimed is None or audited is None:
                    continue
                ax.scatter(claimed, audited, color=color)
                ax.annotate(plain(f"{src}: {run.name}", 40), (claimed, audited), fontsize=7)
                pts += 1
    if pts:
        top = ax.get_xlim()[1]
        ax.plot([0, top], [0, top], ls="--", color="#888", label="audited = claimed")
        ax.set_xlabel("claimed ε")
        ax.set_ylabel("audited ε (best 95% lower bound)")
        ax.legend(fontsize=7)
    else:
        placeholder(ax, "no run has both a claimed ε and an audited lower bound")
    figs.append(
        (
            "Claimed vs audited ε",
            "A point above the diagonal contradicts its claim at 95% confidence.",
            png_bytes(fig),
        )
    )
    return figs


_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>privacy-audit compare</title>
<style>
body{font-family:system-ui,sans-serif;margin:2rem;max-width:1200px}
table{border-collapse:collapse;font-size:.85rem}td,th{border:1px solid #ccc;padding:.25rem .5rem}
td.num{text-align:right;font-variant-numeric:tabular-nums}img{max-width:100%}
.up{color:#a00}.down{color:#060}
</style></head><body>
<h1>Comparison of {{ inputs|length }} runs</h1>
<ul>{% for i in inputs %}<li><b>{{ i.name }}</b>: {{ i.title }} ({{ i.created }}, {{ i.n_runs }} run(s))</li>{% endfor %}</ul>
{% if not_learned %}<p class="up"><b>Not comparable:</b> {{ not_learned|join(", ") }} did not clear the trivial baseline (utility floor below): the privacy numbers of a model that learned nothing say nothing about its defense.</p>{% endif %}
{% for f in figures %}<figure><img src="{{ f.src }}" alt="{{ f.title }}"><figcaption><b>{{ f.title }}.</b> {{ f.caption }}</figcaption></figure>{% endfor %}
<h2>Utility floor</h2>
<p>Each run's utility CI against its trivial baseline (unigram perplexity for LMs, majority class for classifiers); a run that does not clear it did not learn.</p>
<table><tr><th>run</th><th>utility (95% CI)</th><th>baselines</th><th>status</th></tr>
{% for f in floor %}<tr><td>{{ f.run }}</td><td class="num">{{ f.utility }}</td><td>{{ f.baselines }}</td><td class="{{ f.cls }}">{{ f.status }}</td></tr>{% endfor %}
</table>
<h2>Differences against {{ inputs[0].name }}</h2>
{% if diffs %}
<table><tr><th>run</th><th>attack</th><th>metric</th><th>input</th><th>A</th><th>B</th><th>B − A</th><th>95% CIs overlap</th></tr>
{% for d in diffs %}<tr><td>{{ d.run }}</td><td>{{ d.attack }}</td><td>{{ d.metric }}</td><td>{{ d.b }}</td><td class="num">{{ d.va }}</td><td class="num">{{ d.vb }}</td><td class="num {{ d.cls }}">{{ d.diff }}</td><td>{{ d.overlap }}</td></tr>{% endfor %}
</table>
{% else %}<p>No run, attack and metric is measured in both inputs.</p>{% endif %}
</body></html>
"""


def _fmt_ci(v: Any, ci: list) -> str:
    lo, hi = ci
    s = f"{v:.4g}"
    if lo is not None:
        s += f" [{lo:.3g}, {'–' if hi is None else f'{hi:.3g}'}]"
    return s


def render_compare(named: list[tuple[str, dict]]) -> tuple[str, list[dict]]:
    from jinja2 import Environment

    from privacy_audit.reports.formatting import data_uri

    diffs = differences(named)
    view = [
        {
            "run": d["run"],
            "attack": d["attack"],
            "metric": d["metric"],
            "b": d["b"],
            "va": _fmt_ci(d["value_a"], d["ci_a"]),
            "vb": _fmt_ci(d["value_b"], d["ci_b"]),
            "diff": f"{d['difference']:+.4g}",
            "cls": "up" if d["difference"] > 0 else "down" if d["difference"] < 0 else "",
            "overlap": {True: "yes", False: "no", None: "–"}[d["cis_overlap"]],
        }
        for d in diffs
    ]
    inputs = [
        {
            "name": n,
            "title": str(r.get("title", "")),
            "created": str(r.get("created", "")),
            "n_runs": len(r["runs"]),
        }
        for n, r in named
    ]
    figures = [{"title": t, "caption": c, "src": data_uri(png)} for t, c, png in _plots(named)]
    checks = utility_floor_checks(named)
    floor = [
        {
            "run": f"{c['source']}/{c['run']}",
            "utility": _fmt_ci(c["value"], [c["ci_low"], c["ci_high"]]),
            "baselines": ", ".join(f"{b['name']} {b['value']:.4g}" for b in c["baselines"]) or "–",
            "status": {
                True: "learned",
                False: "did not learn: not comparable",
                None: "not checked",
            }[c["learned"]],
            "cls": "up" if c["learned"] is False else "",
        }
        for c in checks
    ]
    not_learned = [f["run"] for f, c in zip(floor, checks, strict=True) if c["learned"] is False]
    html = (
        Environment(autoescape=True)
        .from_string(_TEMPLATE)
        .render(inputs=inputs, figures=figures, diffs=view, floor=floor, not_learned=not_learned)
    )
    return html, diffs
