"""Comparing the runs of one audit: the undefended run against every defended one, on
the strongest attack's AUC (results.json ``comparison``), and whether a run learned
anything at all (a model that learned nothing leaks nothing)."""

from __future__ import annotations

from typing import Any

from privacy_audit.reports import sentences as S
from privacy_audit.reports.formatting import as_float, ci
from privacy_audit.reports.results_record import RunRecord
from privacy_audit.reports.verdict import run_name


def _auc_triplet(run: dict) -> tuple[float, float | None, float | None] | None:
    attack = RunRecord.of(run).strongest()
    if attack is None:
        return None
    m = attack.metric("auc").raw
    return (
        float(m["value"]),
        as_float(m.get("ci_low")),
        as_float(m.get("ci_high")),
    )


def did_not_learn(run: dict) -> str | None:
    """Why a run did not clear its trivial baseline (the paper-claims rule, experiments/claims.py):
    its utility CI against the unigram perplexity (LMs, ``utility.unigram_floor``) or the
    majority-class rate (classifiers, ``utility.majority_rate``); None when it cleared it or
    no baseline is recorded."""
    from privacy_audit.reports.utility_floor import Arm, Baseline, clears

    u = RunRecord.of(run).utility
    if u is None or not isinstance(u.get("value"), (int, float)):
        return None
    if u.get("metric") == "perplexity" and isinstance(u.get("unigram_floor"), (int, float)):
        floor = Baseline("the unigram perplexity", float(u["unigram_floor"]))
        higher = False
    elif isinstance(u.get("majority_rate", u.get("majority_class_rate")), (int, float)):
        # majority_class_rate: the name split-n-denoise's utility already used
        rate = u.get("majority_rate", u.get("majority_class_rate"))
        floor = Baseline("the majority-class rate", float(rate))
        higher = True
    else:
        return None
    floors = [floor]
    ps = u.get("public_start")
    if not higher and isinstance(ps, dict) and isinstance(ps.get("value"), (int, float)):
        # pretrained targets: the run must also end below the model it started from
        floors.append(
            Baseline("the public-only start", ps["value"], ps.get("ci_low"), ps.get("ci_high"))
        )
    arm = Arm(run_name(run), u["value"], u.get("ci_low"), u.get("ci_high"), higher, floors)
    failed = [f for f in floors if not clears(arm, f)]
    if not failed:
        return None
    return S.DID_NOT_LEARN(
        run=arm.name,
        metric=u.get("metric") or "utility",
        value=_fmt_triplet((u["value"], u.get("ci_low"), u.get("ci_high"))),
        floors=" or ".join(
            S.FLOOR(
                name=f.name,
                value=f"{f.value:.4g}",
                interval=f" [{f.ci_low:.4g}, {f.ci_high:.4g}]" if f.ci_low is not None else "",
            )
            for f in failed
        ),
    )


def compare_runs(runs: list[dict]) -> dict:
    """Compare the undefended run with every other run on strongest-attack AUC.

    The baseline is the first run whose ``defense`` is ``"none"``. For each
    other run the higher AUC point estimate is called "more vulnerable", and
    the 95% intervals are checked for overlap. Overlapping intervals are
    reported as "this sample cannot separate them"; disjoint intervals as a
    clear difference. (Disjoint 95% intervals are a conservative criterion.)

    Returns ``{"text", "pairs"}``; each pair is a dict with ``baseline``,
    ``run``, ``baseline_auc``, ``run_auc`` (``[value, ci_low, ci_high]`` or
    ``None``), ``more_vulnerable`` (a run name or ``None``), ``overlap``
    (``True``/``False``, or ``None`` when it cannot be judged) and ``text``.
    """
    runs = [r for r in runs or [] if isinstance(r, dict)]
    base_idx = next((i for i, r in enumerate(runs) if r.get("defense") == "none"), None)
    if base_idx is None:
        return {"text": S.COMPARE_NO_BASELINE(), "pairs": []}
    base = runs[base_idx]
    b_name = run_name(base)
    b_auc = _auc_triplet(base)
    others = [r for i, r in enumerate(runs) if i != base_idx]
    if not others:
        return {"text": S.COMPARE_ONLY_BASELINE(baseline=b_name), "pairs": []}
    if b_auc is None:
        return {"text": S.COMPARE_BASELINE_UNMEASURED(baseline=b_name), "pairs": []}

    pairs = []
    for other in others:
        o_name = run_name(other)
        o_auc = _auc_triplet(other)
        pair: dict[str, Any] = {
            "baseline": b_name,
            "run": o_name,
            "baseline_auc": list(b_auc),
            "run_auc": list(o_auc) if o_auc else None,
            "more_vulnerable": None,
            "overlap": None,
        }
        if o_auc is None:
            pair["text"] = S.COMPARE_NOT_MEASURED(run=o_name)
            pairs.append(pair)
            continue
        unlearned = [w for w in (did_not_learn(base), did_not_learn(other)) if w]
        if unlearned:
            # a model that learned nothing leaks nothing: its AUC says nothing about the defense
            pair["comparable"] = False
            pair["text"] = S.COMPARE_NOT_COMPARABLE(
                run=o_name,
                baseline=b_name,
                why="; ".join(unlearned),
                run_auc=_fmt_triplet(o_auc),
                baseline_auc=_fmt_triplet(b_auc),
            )
            pairs.append(pair)
            continue
        if o_auc[0] > b_auc[0]:
            more = o_name
        elif b_auc[0] > o_auc[0]:
            more = b_name
        else:
            more = None
        pair["more_vulnerable"] = more
        if None in (o_auc[1], o_auc[2], b_auc[1], b_auc[2]):
            sep = S.COMPARE_NO_INTERVALS()
        else:
            overlap = o_auc[1] <= b_auc[2] and b_auc[1] <= o_auc[2]
            pair["overlap"] = overlap
            if overlap:
                sep = S.COMPARE_OVERLAP()
            elif more == b_name:
                sep = S.COMPARE_DEFENSE_HELPS()
            else:
                sep = S.COMPARE_DEFENSE_HURTS()
        if more is None:
            lead = S.COMPARE_SAME()
        elif more == b_name:
            lead = S.COMPARE_BASELINE_MORE(baseline=b_name)
        else:
            lead = S.COMPARE_RUN_MORE(run=o_name)
        pair["text"] = S.COMPARE_PAIR(
            run=o_name,
            baseline=b_name,
            run_auc=_fmt_triplet(o_auc),
            baseline_auc=_fmt_triplet(b_auc),
            lead=lead,
            sep=sep,
        )
        pairs.append(pair)

    text = "\n".join(p["text"] for p in pairs)
    return {"text": text, "pairs": pairs}


def _fmt_triplet(t: tuple[float, float | None, float | None]) -> str:
    return ci({"value": t[0], "ci_low": t[1], "ci_high": t[2]})
