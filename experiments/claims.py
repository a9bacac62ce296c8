"""The paper-claims table: one row per headline claim of each of the five seed papers.

Every row carries the paper's number (quoted from the paper), our measurement with its CI
read from a recorded JSON under ``docs/records/`` (never typed here), a verdict and the exact
command that writes that JSON. A row whose file is missing, or lacks the measured key, is
"not yet measured" (never "reproduced"); a claim that cannot be tested on this suite's
CPU setting is "not testable here" with the reason.

Verdicts: ``reproduced`` (our CI is on the paper's side of its threshold), ``refuted``
(our CI is on the other side), ``inconclusive`` (the CI straddles it), ``not testable here``,
``not yet measured``. Each measured row stores the JSON ``pointer`` (a list of keys and
indices) of the value it quotes, so a test can re-read the file and check the number.

The comparison rule (:func:`judge`), applied to every measured row in this order:

1. **Utility floor.** Every arm the row compares must clear a trivial baseline with its CI:
   the majority-class rate for classifiers (the arm's accuracy CI entirely above it), the
   unigram perplexity for LMs and, where the arms start from public pretraining, the
   public-only start (the arm's perplexity CI entirely below the baseline's CI), chance
   (0.5) for AUCs, a random ranking for recommenders. An arm that does not clear it makes
   the row ``not comparable (arm X did not learn)``, never reproduced or refuted: a
   comparison of models that learned nothing says nothing about the mechanisms.
2. **Timing over process runs.** A timing claim is judged on at least
   :data:`MIN_PROCESS_RUNS` separate process runs, with the interval across runs (the
   envelope of the runs' own intervals). A claim whose per-run verdict flips between
   reproduced and refuted is ``unstable``; fewer runs leave it ``inconclusive``.
3. **Setting.** Where the measurement's setting differs from the paper's (frozen encoder,
   another S2, another library, another metric, another dataset), the row is
   ``setting differs`` and names each difference; what the measurement alone would say is
   kept in the detail.
4. Otherwise the measured verdict stands.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privacy_audit.reports.utility_floor import Arm, Baseline, floor_checks

REPRODUCED, REFUTED, INCONCLUSIVE = "reproduced", "refuted", "inconclusive"
NOT_TESTABLE, NOT_MEASURED = "not testable here", "not yet measured"
#: Measured in an adapted setting (other hardware or implementation of the baseline) where the
#: claimed effect did not appear; not a refutation of the paper's own setting.
NOT_REPRODUCED = "not reproduced here"
#: An arm of the comparison did not clear its trivial baseline (see :func:`judge`).
NOT_COMPARABLE = "not comparable"
#: The measurement's setting differs from the paper's; the differences are named.
SETTING_DIFFERS = "setting differs"
#: A timing claim whose verdict flips between separate process runs.
UNSTABLE = "unstable"
VERDICTS = (
    REPRODUCED,
    REFUTED,
    SETTING_DIFFERS,
    NOT_COMPARABLE,
    UNSTABLE,
    NOT_REPRODUCED,
    INCONCLUSIVE,
    NOT_TESTABLE,
    NOT_MEASURED,
)
#: Separate process runs a timing claim needs before it gets a decisive verdict.
MIN_PROCESS_RUNS = 3


class Missing(Exception):
    """The recorded file lacks what a row needs."""


def default_docs() -> Path:
    return Path(__file__).resolve().parent.parent / "docs" / "records"


def follow(doc: Any, pointer: list) -> Any:
    """``doc[p0][p1]...``; Missing if any step is absent."""
    cur = doc
    for key in pointer:
        try:
            cur = cur[key]
        except (KeyError, IndexError, TypeError):
            raise Missing(f"no {key!r} at {pointer}") from None
    return cur


def find_key(doc: Any, key: str, path: list | None = None) -> list:
    """Pointer to the first ``key`` found depth-first (dicts then lists); Missing if none."""
    path = path or []
    if isinstance(doc, dict):
        if key in doc:
            return [*path, key]
        for k, v in doc.items():
            try:
                return find_key(v, key, [*path, k])
            except Missing:
                continue
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            try:
                return find_key(v, key, [*path, i])
            except Missing:
                continue
    raise Missing(f"no key {key!r}")


def _ci_text(v: float, lo: float | None, hi: float | None) -> str:
    return f"{_fmt(v)}" + (
        f" [{_fmt(lo)}, {_fmt(hi)}]" if lo is not None and hi is not None else ""
    )


def judge(
    measured: str,
    arms: list[Arm] | None = None,
    differences: list[str] | None = None,
    run_verdicts: list[str] | None = None,
) -> tuple[str, str, str]:
    """The comparison rule of the module docstring: ``(verdict, reason, extra detail)``.

    ``measured`` is what the interval alone says; ``arms`` the arms with their baselines;
    ``differences`` the ways the setting differs from the paper's; ``run_verdicts`` the
    per-process-run verdicts of a timing claim (None when the row is not a timing claim).
    """
    failed = [c for c in floor_checks(arms or []) if not c["cleared"]]
    if failed or any(not a.floors for a in arms or []):
        names = list(dict.fromkeys(c["arm"] for c in failed))
        names += [a.name for a in arms or [] if not a.floors and a.name not in names]
        detail = "; ".join(
            f"{c['arm']} {_ci_text(c['value'], c['ci_low'], c['ci_high'])} does not clear "
            f"{c['baseline']} {_ci_text(c['baseline_value'], c['baseline_ci_low'], c['baseline_ci_high'])}"
            for c in failed
        )
        nobase = [a.name for a in arms or [] if not a.floors]
        if nobase:
            detail += ("; " if detail else "") + f"no baseline recorded for {', '.join(nobase)}"
        verb = "did not learn" if failed else "not shown to learn"
        reason = f"arm{'s' if len(names) > 1 else ''} {', '.join(names)} {verb}"
        return NOT_COMPARABLE, reason, f"{detail} (the measurement alone: {measured})"
    if run_verdicts is not None:
        runs = ", ".join(run_verdicts)
        if REPRODUCED in run_verdicts and REFUTED in run_verdicts:
            return UNSTABLE, f"flips between {len(run_verdicts)} process runs: {runs}", ""
        if len(run_verdicts) < MIN_PROCESS_RUNS:
            return (
                INCONCLUSIVE,
                f"{len(run_verdicts)} process run(s); a timing claim needs >= {MIN_PROCESS_RUNS}",
                f"(the measurement alone: {measured})",
            )
    if differences:
        return SETTING_DIFFERS, "; ".join(differences), f"(the measurement alone: {measured})"
    return measured, "", ""


def runs_envelope(
    per_run: list[tuple[float, float, float]], threshold: float, above: bool
) -> tuple[float, float, float, list[str]]:
    """Timing over separate process runs: ``(median of the run values, lowest run interval
    end, highest run interval end, per-run verdicts)``; each run is ``(value, lo, hi)``."""
    vals = sorted(v for v, _, _ in per_run)
    mid = (
        vals[len(vals) // 2]
        if len(vals) % 2
        else (vals[len(vals) // 2 - 1] + vals[len(vals) // 2]) / 2
    )
    lo = min(r[1] for r in per_run)
    hi = max(r[2] for r in per_run)
    return mid, lo, hi, [_side(r[1], r[2], threshold, above) for r in per_run]


@dataclass
class Measure:
    """What a row quotes from its file: the value at ``pointer`` with an optional CI."""

    value: float
    pointer: list
    ci_low: float | None = None
    ci_high: float | None = None
    ci_kind: str = ""
    text: str = ""  # extra context: sample sizes, setting
    verdict: str = INCONCLUSIVE
    arms: list[Arm] | None = None  # every arm of the comparison, with its baselines
    differences: list[str] | None = None  # how the setting differs from the paper's
    run_verdicts: list[str] | None = None  # timing claims: one verdict per process run
    qualifier: str = ""  # what a verdict covers, when less than the claim suggests


def _num(x) -> float:
    if x is None or isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise Missing(f"not a finite number: {x!r}")
    return float(x)


def _side(lo: float | None, hi: float | None, threshold: float, above: bool = True) -> str:
    """Verdict of an interval against a one-sided claim (value > threshold if ``above``)."""
    if lo is None or hi is None:
        return INCONCLUSIVE
    if above:
        return REPRODUCED if lo > threshold else REFUTED if hi < threshold else INCONCLUSIVE
    return REPRODUCED if hi < threshold else REFUTED if lo > threshold else INCONCLUSIVE


def _seed_ci(doc, pointer: list, what: str) -> Measure:
    s = follow(doc, pointer)
    return Measure(
        _num(s["mean"]),
        [*pointer, "mean"],
        s.get("ci_low"),
        s.get("ci_high"),
        f"95% t-CI over {s.get('n_seeds')} seeds",
        what,
    )


# --------------------------------------------------------------------------------------
# extractors (doc -> Measure); each raises Missing when the file lacks the data
# --------------------------------------------------------------------------------------


def _fmt_shuffle_range(n: int, delta: float) -> float:
    """Largest local ε₀ for which the shuffle amplification theorem of Feldman, McMillan &
    Talwar (FOCS 2021, Thm 3.1) applies: ε₀ ≤ ln(n / (16 ln(2/δ)))."""
    return math.log(n / (16.0 * math.log(2.0 / delta)))


def _dpf_sst2_accounting(doc) -> Measure:
    row = follow(doc, ["rows", "SST-2 eps~1"])
    pld = _num(row["pld"])
    m = Measure(pld, ["rows", "SST-2 eps~1", "pld"], ci_kind="exact accountant (no sampling)")
    m.text = (
        f"PRV {row['prv']:.3f}, claimed max {row['claimed']:.3f}; RDP {row['rdp']:.2f} "
        f"(not claimed); z = {row['noise_multiplier']}, N = {row['n_users']}, 3 epochs"
    )
    m.verdict = REPRODUCED if abs(pld - 1.0) <= 0.05 else REFUTED
    eps0 = [
        float(r["local_epsilon_per_release"])
        for r in follow(doc, ["rows"]).values()
        if isinstance(r, dict)
        and isinstance(r.get("local_epsilon_per_release"), (int, float))
        and r.get("dataset") == row.get("dataset")
    ]
    limit = _fmt_shuffle_range(int(row["n_users"]), float(row["delta"]))
    m.qualifier = (
        "circular: z was back-solved from PRV so that ε ≈ 1, so this shows PLD ≈ PRV only; "
        "it rests on the paper's shuffling = Poisson subsampling (q = 1/N) model, and each "
        f"local release has ε₀ = {_num(row['local_epsilon_per_release']):.1f} "
        + (
            f"({min(eps0):.1f}–{max(eps0):.1f} over the recorded {row.get('dataset')} settings) "
            if eps0
            else ""
        )
        + f"above ε₀ ≤ {limit:.2f}, the range of the formal shuffle theorem (Feldman et al. "
        "2021, Thm 3.1, at this N and δ)"
    )
    return m


def _majority(doc) -> Baseline:
    rate = _num(follow(doc, ["setup", "majority_class_rate"]))
    n = follow(doc, ["setup"]).get("n_test")
    return Baseline(f"majority class (test n = {n})", rate)


def _acc_arm(doc, key: str, name: str) -> Arm:
    a = follow(doc, ["rows", key, "accuracy"])
    return Arm(name, _num(a["mean"]), a.get("ci_low"), a.get("ci_high"), True, [_majority(doc)])


def _dpf_differences(setup: dict) -> list[str]:
    """How a recorded DP-Forward setting differs from the paper's (BERT-base fine-tuned end
    to end on SST-2 / IMDb / QQP; S2 = C in the paper's code; label RR with ε2 = ln 9)."""
    text = " ".join(str(v) for v in setup.values())
    out = []
    if "frozen" in text:
        out.append("frozen encoder (the paper fine-tunes the pre-noise layers through the noise)")
    s2 = setup.get("S2", setup.get("s2"))
    if (isinstance(s2, (int, float)) and s2 != setup.get("C", 1.0)) or "S2 = 2C" in text:
        out.append("S2 = 2C (the paper's code uses S2 = C: twice its σ)")
    if "labels not randomized" in text or "labels not randomised" in text:
        out.append("labels not randomised (the paper applies label RR, ε2 = ln 9)")
    if str(setup.get("preset", "")).lower() != "bert-base" or "fixture" in text:
        out.append(
            f"{setup.get('preset')} on the fixture corpus, N = {setup.get('n_train')} "
            "(the paper: BERT-base on SST-2 / IMDb / QQP, N = 25k–364k)"
        )
    return out


def _dpf_matched(eps: float, position: str = "pooled") -> Callable[[Any], Measure]:
    def get(doc) -> Measure:
        key = f"dp-forward {position} @ central eps {eps:g}"
        sgd_key = f"dp-sgd @ central eps {eps:g}"
        m = _seed_ci(doc, ["rows", key, "minus_dp_sgd"], "")
        dpf = follow(doc, ["rows", key, "accuracy", "mean"])
        sgd = follow(doc, ["rows", sgd_key, "accuracy", "mean"])
        setup = doc.get("setup", {})
        m.text = (
            f"accuracy DP-Forward {dpf:.3f} vs DP-SGD {sgd:.3f} (difference shown); "
            f"N = {setup.get('n_train')}, test {setup.get('n_test')}, {setup.get('preset')}"
        )
        m.verdict = _side(m.ci_low, m.ci_high, 0.0)
        m.arms = [_acc_arm(doc, key, "DP-Forward"), _acc_arm(doc, sgd_key, "DP-SGD")]
        m.differences = _dpf_differences(setup)
        return m

    return get


def _dpf_paper_setting(doc) -> Measure:
    """DP-Forward vs DP-SGD at the paper's setting as far as CPU allows
    (``dp-forward-paper-setting``): every arm at its own validation-chosen learning rate,
    test accuracy with its CI, each arm against the majority class with its CI."""
    setup = follow(doc, ["setup"])
    maj = follow(setup, ["majority_class"])
    floor = Baseline(
        f"majority class ({maj.get('class')}, test n = {maj.get('n')})",
        _num(maj["value"]),
        maj.get("ci_low"),
        maj.get("ci_high"),
    )
    names = {"dp-forward": "DP-Forward", "dp-sgd": "DP-SGD", "non-private": "non-private"}
    arms, acc = [], {}
    for key, name in names.items():
        t = follow(doc, ["rows", key, "test_accuracy"])
        acc[key] = t
        arms.append(Arm(name, _num(t["value"]), t.get("ci_low"), t.get("ci_high"), True, [floor]))
    dpf, sgd = acc["dp-forward"], acc["dp-sgd"]
    lo = hi = None
    if None not in (dpf.get("ci_low"), dpf.get("ci_high"), sgd.get("ci_low"), sgd.get("ci_high")):
        lo, hi = dpf["ci_low"] - sgd["ci_high"], dpf["ci_high"] - sgd["ci_low"]
    m = Measure(
        _num(dpf["value"]) - _num(sgd["value"]),
        ["comparison", "dp_forward_minus_dp_sgd"],
        lo,
        hi,
        "difference of the two arms' 95% test CIs' far ends (joint coverage ≥ 90% by the "
        "union bound; conservative)",
    )
    acct = follow(doc, ["dp_forward_accounting"])
    rows = follow(doc, ["rows"])
    lrs = {k: rows[k]["selected_lr"] for k in names}
    edge = [names[k] for k in names if rows[k].get("selected_at_grid_edge")]
    grid = ", ".join(f"{x:g}" for x in setup.get("lr_grid", []))
    m.text = (
        "test accuracy "
        + "; ".join(
            f"{names[k]} {_ci_text(acc[k]['value'], acc[k].get('ci_low'), acc[k].get('ci_high'))}"
            f" (lr {lrs[k]:g})"
            for k in names
        )
        + f"; majority class {_ci_text(floor.value, floor.ci_low, floor.ci_high)}; "
        f"lr chosen per arm on validation n = {setup.get('n_val')} from {{{grid}}}"
        + (f" (at the grid's edge: {', '.join(edge)})" if edge else "")
        + f"; DP-Forward z = {_num(acct['noise_multiplier_z']):.3f} per entry on the unit "
        f"pooled vector (S2 = C = 1), per-release local ε "
        f"{_num(acct['local_epsilon_per_release_joint']):.2f} with its RR label; central ε "
        f"{_num(acct['central_epsilon_claimed']):.3f} (DP-SGD "
        + ", ".join(
            f"{_num(c['central_epsilon_claimed']):.3f}"
            for c in rows["dp-sgd"]["grid"][f"{lrs['dp-sgd']:g}"]["per_seed"]
        )
        + f") at δ = {setup.get('delta')}; {setup.get('shuffle_assumption')}"
    )
    m.verdict = _side(lo, hi, 0.0)
    m.arms = arms
    sep = follow(acct, ["paper_separate_composition"])
    m.differences = [
        "all-MiniLM-L6-v2 (6 layers, d = 384), not BERT-base (12 layers, d = 768)",
        f"the {len(setup.get('classes', []))}-class fixture corpus, not SST-2 (2 classes)",
        f"N = {setup.get('n_train')} training texts (the paper: 67,349), max length "
        f"{setup.get('max_length')}, {len(setup.get('seeds', []))} seed(s), one CPU thread",
        f"the label RR and the noisy vector composed before subsampling (z = "
        f"{_num(acct['noise_multiplier_z']):.3f}); the paper accounts the RR apart "
        f"(its model would give ε = {_num(sep['sum']):.2f} at this z, not a valid bound for "
        "the joint release), and labels are re-drawn every epoch (the paper's code: once)",
        "learning rate chosen per arm on a validation split (the paper: 2e-5 for all)",
    ]
    return m


def _dpf_table4(eps: float) -> Callable[[Any], Measure]:
    def get(doc) -> Measure:
        m = _seed_ci(doc, ["summary", "amgm_minus_gm_ci", f"{eps:g}"], "")
        a = follow(doc, ["rows", f"amgm @ eps {eps:g}", "accuracy", "mean"])
        g = follow(doc, ["rows", f"gm @ eps {eps:g}", "accuracy", "mean"])
        m.text = f"accuracy aMGM {a:.3f} vs GM {g:.3f} at ε = {eps:g} (difference shown)"
        m.verdict = _side(m.ci_low, m.ci_high, 0.0)
        m.arms = [
            _acc_arm(doc, f"amgm @ eps {eps:g}", "aMGM"),
            _acc_arm(doc, f"gm @ eps {eps:g}", "GM"),
        ]
        m.differences = _dpf_differences(doc.get("setup", {}))
        return m

    return get


def _dpf_mvg(doc) -> Measure:
    eps = max(float(k) for k in follow(doc, ["accuracy_table", "mvg"]))
    key = f"mvg @ eps {eps:g}"
    m = _seed_ci(doc, ["rows", key, "accuracy"], "")
    chance = _num(follow(doc, ["setup", "majority_class_rate"]))
    amgm = follow(doc, ["rows", f"amgm @ eps {eps:g}", "accuracy", "mean"])
    m.text = (
        f"MVG accuracy at ε = {eps:g}; majority-class rate {chance:.3f}; aMGM at the same ε "
        f"{amgm:.3f}"
    )
    # "≈ chance": reproduced when the CI's upper end is within 0.05 of the majority rate
    m.verdict = _side(m.ci_low, m.ci_high, chance + 0.05, above=False)
    # MVG at chance only says something about MVG when the other mechanisms learn there
    m.arms = [
        _acc_arm(doc, f"amgm @ eps {eps:g}", f"aMGM (ε = {eps:g})"),
        _acc_arm(doc, f"gm @ eps {eps:g}", f"GM (ε = {eps:g})"),
    ]
    m.differences = _dpf_differences(doc.get("setup", {}))
    return m


def _process_runs(doc) -> list[tuple[list, Any]]:
    """``(pointer prefix, bench document)`` per separate process run: a file written by
    ``python -m experiments.process_runs`` holds ``process_runs``; a plain bench JSON is
    one run."""
    if isinstance(doc, dict) and "process_runs" in doc:
        runs = follow(doc, ["process_runs"])
        if not isinstance(runs, list) or not runs:
            raise Missing("process_runs is empty")
        return [(["process_runs", i], r) for i, r in enumerate(runs)]
    return [([], doc)]


def _median_index(values: list[float]) -> int:
    """Index of the (lower) median run, so the quoted number is one run's recorded value."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    return order[(len(order) - 1) // 2]


_DPF_BENCH_DIFFERENCES = [
    "CPU process time, 1 thread, MiniLM (the paper: GPU, BERT-base on SST-2)",
]


def _dpf_bench(kind: str) -> Callable[[Any], Measure]:
    def one(bench_doc):
        b = next(x for x in follow(bench_doc, ["benchmarks"]) if x.get("name") == "dp-forward")
        return bench_doc["benchmarks"].index(b), b

    def get(doc) -> Measure:
        runs = _process_runs(doc)
        if kind in ("time", "speedup"):
            case, ratio, thr, above = (
                ("minilm/dp-forward", "minilm/dp-forward", 1.1, False)
                if kind == "time"
                else ("minilm/dp-sgd", "minilm/dp-sgd/dp-forward", 3.0, True)
            )
            per_run, ptrs = [], []
            for prefix, bench_doc in runs:
                i, b = one(bench_doc)
                cases = b["cases"]
                if kind == "time":
                    num, den = cases["minilm/dp-forward"], cases["minilm/non-private"]
                else:
                    num, den = cases["minilm/dp-sgd"], cases["minilm/dp-forward"]
                v = _num(b["ratios"][ratio])
                per_run.append((v, num["q1_ms"] / den["q3_ms"], num["q3_ms"] / den["q1_ms"]))
                ptrs.append([*prefix, "benchmarks", i, "ratios", ratio])
            j = _median_index([r[0] for r in per_run])
            _, lo, hi, verdicts = runs_envelope(per_run, thr, above)
            n_steps = one(runs[j][1])[1]["cases"][case].get("n")
            m = Measure(
                per_run[j][0],
                ptrs[j],
                lo,
                hi,
                f"median of {len(runs)} process run(s); interval = lowest to highest IQR end "
                "across runs",
                (
                    "MiniLM, DP-Forward step / non-private step"
                    if kind == "time"
                    else "MiniLM, DP-SGD step / DP-Forward step"
                )
                + f", n = {n_steps} timed steps per run; per run: "
                + ", ".join(f"{v:.2f} [{a:.2f}, {b:.2f}]" for v, a, b in per_run),
            )
            m.verdict = _side(lo, hi, thr, above)
            m.run_verdicts = verdicts
            m.differences = list(_DPF_BENCH_DIFFERENCES)
            return m
        vals, ptrs, mems = [], [], []
        for prefix, bench_doc in runs:
            i, b = one(bench_doc)
            mem = b.get("memory") or {}
            if "minilm/dp-sgd/dp-forward" not in mem:
                raise Missing("bench dp-forward has no memory figures")
            vals.append(_num(mem["minilm/dp-sgd/dp-forward"]))
            ptrs.append([*prefix, "benchmarks", i, "memory", "minilm/dp-sgd/dp-forward"])
            mems.append(mem)
        j = _median_index(vals)
        m = Measure(
            vals[j],
            ptrs[j],
            ci_kind="one measurement (peak RSS)"
            if len(vals) == 1
            else f"median of {len(vals)} process runs (peak RSS)",
            text=f"MiniLM peak step memory, DP-SGD / DP-Forward; dp-forward / "
            f"non-private = {mems[j].get('minilm/dp-forward/non-private', float('nan')):.2f}x",
        )
        m.verdict = REPRODUCED if vals[j] >= 3.0 else REFUTED
        m.differences = ["peak CPU RSS, MiniLM (the paper: GPU memory, BERT-base on SST-2)"]
        return m

    return get


def _snd_gain(baseline: str, eta: float) -> Callable[[Any], Measure]:
    def get(doc) -> Measure:
        m = _seed_ci(doc, ["snd_auc_minus_baselines", f"{eta:g}", f"snd - {baseline}"], "")
        snd = follow(doc, ["rows", f"snd @ eta {eta:g}", "auc", "mean"])
        base = follow(doc, ["rows", f"{baseline} @ eta {eta:g}", "auc", "mean"])
        clean = follow(doc, ["rows", "clean (eta = inf)", "auc", "mean"])
        rel = (snd - base) / base if base else float("nan")
        m.text = (
            f"η = {eta:g}: AUC SnD {snd:.3f} vs {baseline} {base:.3f} (relative {rel:+.1%}); "
            f"clean η = ∞ {clean:.3f}; difference shown"
        )
        if baseline == "text2text":
            kept = [
                c.get("share_tokens_unchanged_train")
                for c in follow(doc, ["rows", f"text2text @ eta {eta:g}", "per_seed"])
            ]
            if kept and all(isinstance(k, (int, float)) for k in kept):
                m.text += (
                    f"; at this η Text2Text leaves {min(kept):.0%}–{max(kept):.0%} of the "
                    "tokens unchanged (sent in clear), under the same formal η-dχ bound"
                )
        local = doc["rows"].get(f"local-only @ eta {eta:g}")
        if local:
            m.text += (
                f"; control: the client's denoiser without the server output reaches "
                f"{local['auc']['mean']:.3f}"
            )
        # the claim: ≥ 10% relative, i.e. difference above 0.10 · baseline
        m.verdict = _side(m.ci_low, m.ci_high, 0.10 * base)
        chance = [Baseline("chance AUC", 0.5)]
        m.arms = []
        for name, k in (("SnD", f"snd @ eta {eta:g}"), (baseline, f"{baseline} @ eta {eta:g}")):
            a = follow(doc, ["rows", k, "auc"])
            m.arms.append(
                Arm(name, _num(a["mean"]), a.get("ci_low"), a.get("ci_high"), True, chance)
            )
        return m

    return get


_GHOST_DIFFERENCES = [
    "Opacus's ghost clipping, not the paper's Ghost Clipping (fastDP), and untied at "
    "full d_E (the paper halves d_E for Ghost)",
    "CPU, 2 of GPT-2's 12 blocks (the paper: one V100 16 GB)",
]


def _cost_bench(bench_doc) -> tuple[int, dict]:
    b = next(x for x in follow(bench_doc, ["benchmarks"]) if x.get("name") == "cost-of-privacy")
    return bench_doc["benchmarks"].index(b), b


def _run_loads(doc, runs) -> list[str]:
    """Load average (1 min) at the start and end of each process run, as recorded."""
    out = []
    for _, bench_doc in runs:
        try:
            setup = _cost_bench(bench_doc)[1].get("setup") or {}
        except (Missing, StopIteration):
            setup = {}
        a, b = setup.get("load_average_before"), setup.get("load_average_after")
        out.append(f"{a[0]:.1f}→{b[0]:.1f}" if a and b else "n/a")
    return out


def _ghost_time_run(b: dict, key: str) -> tuple[tuple[float, float, float], int, dict, list]:
    """One run's Ghost/phantom step-time ratio at the largest vocabulary with the interval
    of its interleaved steps (ghost q1 / phantom q3 to ghost q3 / phantom q1)."""
    table = follow(b, ["setup", "cost_of_privacy_table"])
    rows = [(j, r) for j, r in enumerate(table) if r.get(key) is not None]
    if not rows:
        raise Missing(f"no {key} in the cost-of-privacy table")
    j, r = max(rows, key=lambda jr: jr[1].get("vocab", 0))
    v = _num(r[key])
    cases = b.get("cases") or {}
    g, p = cases.get(f"ghost @{r.get('label')}"), cases.get(f"phantom @{r.get('label')}")
    if g and p:
        return (v, g["q1_ms"] / p["q3_ms"], g["q3_ms"] / p["q1_ms"]), j, r, rows
    return (v, v, v), j, r, rows


def _ghost_budget(runs, doc) -> Measure | None:
    """The paper's memory metric where recorded: phantom's largest batch in N GiB over
    Ghost Clipping's, median over process runs, interval = the runs' bracket envelope."""
    per, ptrs, budgets, fixed = [], [], [], []
    for prefix, bench_doc in runs:
        i, b = _cost_bench(bench_doc)
        bud = (b.get("setup") or {}).get("largest_batch_in_budget")
        if not bud or not bud.get("phantom_over_ghost_largest_batch"):
            return None
        r = bud["phantom_over_ghost_largest_batch"]
        hi = r.get("high")
        per.append((_num(r["value"]), _num(r["low"]), hi))
        ptrs.append(
            [*prefix, "benchmarks", i, "setup", "largest_batch_in_budget"]
            + ["phantom_over_ghost_largest_batch", "value"]
        )
        budgets.append(bud)
        try:
            fixed.append(_ghost_time_run(b, "ghost_over_phantom_memory")[0][0])
        except Missing:
            pass
    k = _median_index([x[0] for x in per])
    bud = budgets[k]
    gb = bud.get("budget_gb")
    his = [x[2] for x in per]
    finite = all(isinstance(h, (int, float)) and math.isfinite(h) for h in his)

    def batches(d):
        ms = d["methods"]

        def one(r):
            lo, ub = r["largest_fit"], r.get("upper_bound")
            if lo is None:
                return "none fits"
            return f"{lo}" if ub == lo else f"{lo}–{'cap' if ub is None else ub}"

        return ", ".join(
            f"{name} {one(ms[name])}" for name in ("phantom", "ghost", "non-private") if name in ms
        )

    m = Measure(
        per[k][0],
        ptrs[k],
        min(x[1] for x in per),
        max(his) if finite else None,
        f"largest batches found by bisection; median of {len(runs)} process run(s), interval "
        "= lowest to highest ratio the runs' brackets allow",
        f"phantom's largest batch in {gb:g} GiB over Ghost's (GPT-2-small-shaped, M = "
        f"{bud['shape'].get('vocab')}, T = {bud['shape'].get('seq_len')}); largest batch per "
        "run: " + "; ".join(batches(d) for d in budgets),
    )
    if fixed:
        m.text += (
            "; at the fixed batch, Ghost/phantom peak RSS "
            + ", ".join(f"{x:.3f}" for x in fixed)
            + "×"
        )
    m.verdict = _side(m.ci_low, m.ci_high, 10.0)
    m.differences = [
        *_GHOST_DIFFERENCES,
        f"CPU peak RSS, {gb:g} GiB: the largest batch whose step's process peak RSS fits "
        f"{gb:g} GiB (the paper: the largest batch that fits 16 GB on a V100)",
    ]
    return m


def _ghost(kind: str) -> Callable[[Any], Measure]:
    key = f"ghost_over_phantom_{kind}"

    def get(doc) -> Measure:
        runs = _process_runs(doc)
        if kind == "memory":
            m = _ghost_budget(runs, doc)
            if m is not None:
                return m
        per_run, ptrs, picked = [], [], []
        for prefix, bench_doc in runs:
            i, b = _cost_bench(bench_doc)
            run, j, r, rows = _ghost_time_run(b, key)
            per_run.append(run if kind == "time" else (run[0], run[0], run[0]))
            ptrs.append([*prefix, "benchmarks", i, "setup", "cost_of_privacy_table", j, key])
            picked.append((r, rows, b))
        k = _median_index([x[0] for x in per_run])
        r, rows, b = picked[k]
        lo = 4.0 if kind == "time" else 10.0
        shape = (
            f"largest vocabulary measured ({r.get('vocab')}, B = {r.get('batch_size')}, "
            f"T = {r.get('seq_len')})"
        )
        if len(rows) > 1:
            shape += (
                f"; over all {len(rows)} shapes "
                f"{min(x[key] for _, x in rows):.2f}–{max(x[key] for _, x in rows):.2f}×"
            )
        m = Measure(
            per_run[k][0],
            ptrs[k],
            ci_kind=("medians of interleaved steps" if kind == "time" else "peak RSS")
            + (f", median of {len(runs)} process runs" if len(runs) > 1 else ""),
            text=shape,
        )
        if kind == "time":
            _, m.ci_low, m.ci_high, verdicts = runs_envelope(per_run, lo, True)
            setup = b.get("setup") or {}
            n = (b.get("cases") or {}).get(f"ghost @{r.get('label')}", {}).get("n")
            m.ci_kind = (
                f"median of {len(runs)} process run(s); interval = lowest to highest "
                "IQR-ratio end across runs"
            )
            m.text += (
                f"; Ghost step / phantom step, {setup.get('clock', 'wall time')}, "
                f"n = {n} interleaved steps per run; per run: "
                + ", ".join(f"{v:.2f} [{a:.2f}, {c:.2f}]" for v, a, c in per_run)
                + "; load average (1 min) at start→end of each run on the shared 2-core "
                "machine: " + ", ".join(_run_loads(doc, runs))
            )
            m.verdict = _side(m.ci_low, m.ci_high, lo)
            m.run_verdicts = verdicts
            m.differences = list(_GHOST_DIFFERENCES)
            return m
        if len(runs) > 1:
            m.ci_low, m.ci_high = min(x[0] for x in per_run), max(x[0] for x in per_run)
        m.verdict = _side(
            m.value if m.ci_low is None else m.ci_low,
            m.value if m.ci_high is None else m.ci_high,
            lo,
        )
        m.differences = [
            *_GHOST_DIFFERENCES,
            "peak RSS at a fixed batch (the paper: the largest batch that fits in 16 GB)",
        ]
        return m

    return get


def _blogs_audit(doc) -> Measure:
    lb = _num(follow(doc, ["summary", "epsilon_lb_min"]))
    claimed = _num(follow(doc, ["summary", "claimed_epsilon_max"]))
    trials = follow(doc, ["setup", "trials_per_world"])
    n = len(follow(doc, ["blogs"]))
    ok = follow(doc, ["summary", "control_below_true_epsilon_all_seeds"])
    m = Measure(
        lb,
        ["summary", "epsilon_lb_min"],
        ci_kind=f"valid ε lower bound (Clopper–Pearson, {trials} trials per world), "
        f"min over {n} seeds",
        text=f"accountant claims ε = {claimed:.3f}; Gaussian positive control "
        f"{'stays below' if ok else 'EXCEEDS'} its true ε",
    )
    # a valid lower bound above the claimed ε refutes the claim (if the control is sound)
    m.verdict = (REFUTED if lb > claimed else INCONCLUSIVE) if ok else INCONCLUSIVE
    return m


def _random_ndcg_at_10(n_items: int) -> float:
    """Expected leave-one-out NDCG@10 of a uniformly random ranking of ``n_items`` items
    (one held-out item): Σ_{r=1..10} (1/n) / log2(r + 1)."""
    return sum(1.0 / n_items / math.log2(r + 1) for r in range(1, min(10, n_items) + 1))


def _recsys(doc) -> Measure:
    ptr = find_key(doc, "table")
    table = follow(doc, ptr)
    n_items = int(follow(doc, ["settings", "data", "n_items"]))
    floor = Baseline(
        f"random ranking over {n_items} items (a popularity baseline is not recorded)",
        _random_ndcg_at_10(n_items),
    )
    for j, row in enumerate(table):
        if float(row.get("epsilon", -1)) == 5.0 or j == len(table) - 1:
            diff = follow(row, ["difference ndcg@10"])
            rel = _num(row["relative improvement ndcg@10"])
            m = Measure(
                rel,
                [*ptr, j, "relative improvement ndcg@10"],
                ci_kind="relative change of seed means; verdict on the t-CI of the "
                "paired NDCG@10 difference",
                text=f"ε = {row.get('epsilon')}: NDCG@10 difference "
                f"{diff.get('mean', float('nan')):.4f} "
                f"[{diff.get('ci_low')}, {diff.get('ci_high')}]",
            )
            lo, hi = diff.get("ci_low"), diff.get("ci_high")
            m.verdict = _side(lo, hi, 0.0)
            m.arms = [
                Arm(
                    f"{side} Re-Attention",
                    _num(row[f"{side} ndcg@10"]["mean"]),
                    row[f"{side} ndcg@10"].get("ci_low"),
                    row[f"{side} ndcg@10"].get("ci_high"),
                    True,
                    [floor],
                )
                for side in ("with", "without")
            ]
            m.differences = [
                "synthetic sequential-recommendation data (the paper: MovieLens-1M, Amazon Games)"
            ]
            return m
    raise Missing("empty recommendation table")


def _lm_floors(doc) -> list[Baseline]:
    """The unigram floor (the lower of the public and public + members unigrams) and, when
    the arms start from public pretraining, the public-only start."""
    floor = follow(doc, ["unigram_floor"])
    uni = [v for v in floor.values() if isinstance(v, dict) and "value" in v]
    if not uni:
        raise Missing("unigram_floor has no unigram perplexity")
    best = min(uni, key=lambda v: v["value"])
    out = [
        Baseline("unigram perplexity", _num(best["value"]), best.get("ci_low"), best.get("ci_high"))
    ]
    start = doc.get("public_pretrained_only")
    if isinstance(start, dict) and "test" in start:  # the lr-grid file: test and validation
        start = start["test"]
    if isinstance(start, dict) and start.get("value") is not None:
        out.append(
            Baseline(
                "public-only start", _num(start["value"]), start.get("ci_low"), start.get("ci_high")
            )
        )
    return out


def _lm_arm(r: dict, name: str, floors: list[Baseline]) -> Arm:
    return Arm(name, _num(r["perplexity"]), r.get("ci_low"), r.get("ci_high"), False, floors)


def _lm(doc) -> Measure:
    ptr = find_key(doc, "rows")
    rows = follow(doc, ptr)
    floors = _lm_floors(doc)
    for j, r in enumerate(rows):
        if "re-attention" in str(r.get("defense", "")) + str(r.get("run", "")):
            v = _num(r["perplexity"])
            m = Measure(
                v,
                [*ptr, j, "perplexity"],
                r.get("ci_low"),
                r.get("ci_high"),
                "95% CI (recorded)",
                f"{r.get('run')}, ε = {r.get('epsilon')}",
            )
            m.arms = [_lm_arm(r, str(r.get("run")), floors)]
            others = [
                x
                for x in rows
                if "phantom" in str(x.get("defense", "")) + str(x.get("run", ""))
                and x.get("epsilon") == r.get("epsilon")
                and x is not r
            ]
            if others and others[0].get("ci_low") is not None and m.ci_high is not None:
                o = others[0]
                m.text += f"; phantom without Re-Attention {o['perplexity']:.2f}"
                m.arms.append(_lm_arm(o, str(o.get("run")), floors))
                m.verdict = (
                    REPRODUCED
                    if m.ci_high < o["ci_low"]
                    else REFUTED
                    if m.ci_low > o["ci_high"]
                    else INCONCLUSIVE
                )
            return m
    raise Missing("no re-attention row")


def _lm_grid(doc) -> Measure:
    """Re-Attention vs phantom on the LM after public pretraining, each at its own learning
    rate from the same grid (python -m experiments.lm_lr_grid)."""
    table = follow(doc, ["table"])
    floors = _lm_floors(doc)
    j, ra = next((j, r) for j, r in enumerate(table) if r.get("arm") == "re-attention")
    ph = next(r for r in table if r.get("arm") == "phantom-dp-sgd")
    m = Measure(
        _num(ra["perplexity"]),
        ["table", j, "perplexity"],
        ra.get("ci_low"),
        ra.get("ci_high"),
        "95% bootstrap CI over test sequences",
        f"re-attention (lr {ra['learning_rate']:g}) vs phantom-dp-sgd (lr "
        f"{ph['learning_rate']:g}) {_num(ph['perplexity']):.2f} "
        f"[{_fmt(ph['ci_low'])}, {_fmt(ph['ci_high'])}], ε = {_fmt(ra.get('epsilon'))}; "
        "learning rates chosen on non-member validation perplexity from one grid",
    )
    m.verdict = (
        REPRODUCED
        if ra["ci_high"] < ph["ci_low"]
        else REFUTED
        if ra["ci_low"] > ph["ci_high"]
        else INCONCLUSIVE
    )
    m.arms = [_lm_arm(ra, "re-attention", floors), _lm_arm(ph, "phantom-dp-sgd", floors)]
    return m


def _blogs_perplexity(doc) -> Measure:
    """DP-BloGS vs DP-SGD perplexity. Reads the per-arm learning-rate grid
    (``lm_lr_grid --config dp-blogs``: ``table`` rows with ``arm``, each arm at the learning
    rate chosen on validation perplexity) or the older one-lr file (``rows`` with
    ``defense``)."""
    floors = _lm_floors(doc)
    if isinstance(doc.get("table"), list):
        rows, key, ptr = doc["table"], "arm", "table"
    else:
        rows, key, ptr = follow(doc, ["rows"]), "defense", "rows"
    j, blogs = next((j, r) for j, r in enumerate(rows) if r.get(key) == "dp-blogs")
    sgd = next(r for r in rows if r.get(key) == "dp-sgd")
    pretrained = any(b.name == "public-only start" for b in floors)

    def lr(r: dict) -> str:
        return f" (lr {r['learning_rate']:g})" if r.get("learning_rate") is not None else ""

    m = Measure(
        _num(blogs["perplexity"]),
        [ptr, j, "perplexity"],
        blogs.get("ci_low"),
        blogs.get("ci_high"),
        "95% bootstrap CI over test sequences",
        f"dp-blogs{lr(blogs)} (claimed ε = {_fmt(blogs.get('epsilon'))}, not proven: the "
        f"shuffle adds no noise) {_num(blogs['perplexity']):.2f} vs DP-SGD{lr(sgd)} (ε = "
        f"{_fmt(sgd.get('epsilon'))}) {_num(sgd['perplexity']):.2f} "
        f"[{_fmt(sgd.get('ci_low'))}, {_fmt(sgd.get('ci_high'))}], "
        + (
            "after public pretraining; learning rates chosen on non-member validation "
            "perplexity from one grid"
            if pretrained
            else "no public pretraining"
        )
        + "; the extraction half of the claim is in docs/dp-blogs.md",
    )
    # "comparable": the two perplexity CIs overlap
    lo_b, hi_b, lo_s, hi_s = blogs["ci_low"], blogs["ci_high"], sgd["ci_low"], sgd["ci_high"]
    m.verdict = REPRODUCED if lo_b <= hi_s and lo_s <= hi_b else REFUTED
    m.arms = [_lm_arm(blogs, "dp-blogs", floors), _lm_arm(sgd, "DP-SGD", floors)]
    m.differences = [
        "one word-level GPT-2 (d = 64, 2 blocks) on fixture records (the paper: 65 pretrained "
        "GPT-2 / BERT / ... models)",
        "DP-SGD via Opacus (the paper: fastDP)",
    ]
    return m


# --------------------------------------------------------------------------------------
# the claims
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Claim:
    paper: str
    claim: str
    paper_value: str
    command: str
    source: str | None = None  # file under docs/records/
    extract: Callable[[Any], Measure] | None = None
    not_testable: str | None = None  # reason


DPF, DPA, SND, BLOGS, DING = (
    "DP-Forward (Du et al., CCS 2023)",
    "DP attention (Gao et al.)",
    "Split-N-Denoise (Mai et al.)",
    "DP-BloGS (Zagardo 2024)",
    "Ding et al. (ICML 2024): Phantom Clipping / Re-Attention",
)

_COST_RUNS_CMD = (
    "python -m experiments.process_runs --runs 3 "
    "--out docs/records/bench-cost-of-privacy-runs.json -- privacy-audit bench cost-of-privacy "
    "--threads 1 --largest-only --cost-cases phantom,ghost --memory-budget-gb 2 "
    "--repeats 5 --warmup 1"
)

CLAIMS: tuple[Claim, ...] = (
    Claim(
        DPF,
        "central ε after shuffling at SST-2 (N = 67,349, 3 epochs, z = 0.460), PLD",
        "≈ 1 (PRV)",
        "privacy-audit experiment dp-forward-accounting --out docs/records/dp-forward-accounting.json",
        "dp-forward-accounting.json",
        _dpf_sst2_accounting,
    ),
    Claim(
        DPF,
        "DP-Forward beats DP-SGD at matched central ε ≈ 8 (Output position, frozen encoder)",
        ".9055 vs .8759 (SST-2, +2.96 pp)",
        "privacy-audit experiment dp-forward-matched-eps --out docs/records/dp-forward-matched-eps.json",
        "dp-forward-matched-eps.json",
        _dpf_matched(8.0),
    ),
    Claim(
        DPF,
        "DP-Forward beats DP-SGD at matched central ε ≈ 1 (Output position, frozen encoder)",
        ".8865 vs .8650 (SST-2, +2.15 pp)",
        "privacy-audit experiment dp-forward-matched-eps --out docs/records/dp-forward-matched-eps.json",
        "dp-forward-matched-eps.json",
        _dpf_matched(1.0),
    ),
    Claim(
        DPF,
        "same, full fine-tuning (f updated, paper's setting), central ε ≈ 8",
        ".9055 vs .8759 (SST-2)",
        "privacy-audit experiment dp-forward-paper-setting --seeds 1 --n-train 1500 "
        "--out docs/records/dp-forward-paper-setting.json",
        "dp-forward-paper-setting.json",
        _dpf_paper_setting,
    ),
    Claim(
        DPF,
        "aMGM beats classical GM at equal local ε = 1 (Table 4)",
        ".6021 vs .5757 (SST-2)",
        "privacy-audit experiment dp-forward-table4 --out docs/records/dp-forward-table4.json",
        "dp-forward-table4.json",
        _dpf_table4(1.0),
    ),
    Claim(
        DPF,
        "aMGM beats classical GM at equal local ε = 8 (Table 4)",
        ".8739 vs .8624 (SST-2)",
        "privacy-audit experiment dp-forward-table4 --out docs/records/dp-forward-table4.json",
        "dp-forward-table4.json",
        _dpf_table4(8.0),
    ),
    Claim(
        DPF,
        "MVG noise leaves accuracy at chance at every ε (Table 4)",
        "≈ 0.5 (binary)",
        "privacy-audit experiment dp-forward-table4 --out docs/records/dp-forward-table4.json",
        "dp-forward-table4.json",
        _dpf_mvg,
    ),
    Claim(
        DPF,
        "training time ≈ non-private (Fig. 4)",
        "≈ 1× (figure only)",
        "python -m experiments.process_runs --runs 3 --out docs/records/bench-dp-forward-runs.json "
        "-- privacy-audit bench dp-forward --threads 1",
        "bench-dp-forward-runs.json",
        _dpf_bench("time"),
    ),
    Claim(
        DPF,
        "≈ 3× faster than DP-SGD (Opacus) (Fig. 4)",
        "≈ 3× (figure only)",
        "python -m experiments.process_runs --runs 3 --out docs/records/bench-dp-forward-runs.json "
        "-- privacy-audit bench dp-forward --threads 1",
        "bench-dp-forward-runs.json",
        _dpf_bench("speedup"),
    ),
    Claim(
        DPF,
        "≈ 3× less memory than DP-SGD (Opacus) (Fig. 4)",
        "≈ 3× (figure only)",
        "privacy-audit bench dp-forward --threads 1 --repeats 3 --warmup 1 "
        "--out docs/records/bench-dp-forward-memory.json",
        "bench-dp-forward-memory.json",
        _dpf_bench("memory"),
    ),
    Claim(
        DPA,
        "attention computation is (ε, δ)-DP with bounded error (Thm 4.1)",
        "theorem; no experiments",
        "privacy-audit run dp-attention",
        not_testable="the paper is theory only (no experiments or numbers); the bound and "
        "sampler are checked by unit tests (tests/defenses/test_dp_attention.py), the audit reports "
        "leakage but there is no paper number to compare with",
    ),
    Claim(
        SND,
        "SnD's downstream AUC ≥ 10% (relative) above TokEmbPriv at equal η",
        "+10–22% AUC",
        "privacy-audit experiment snd-auc --out docs/records/snd-auc.json",
        "snd-auc.json",
        _snd_gain("tokembpriv", 100.0),
    ),
    Claim(
        SND,
        "SnD's downstream AUC ≥ 10% (relative) above Text2Text at equal η",
        "+10–22% AUC",
        "privacy-audit experiment snd-auc --out docs/records/snd-auc.json",
        "snd-auc.json",
        _snd_gain("text2text", 100.0),
    ),
    Claim(
        SND,
        "SnD's downstream AUC ≥ 10% (relative) above RAPT",
        "+10–22% AUC",
        "privacy-audit experiment snd-auc --out docs/records/snd-auc.json",
        not_testable="RAPT prompt-tunes the server LM and pre-trains a privatised-token "
        "reconstruction head; the SnD setting keeps the server frozen and that training "
        "does not fit the CPU budget (its sanitiser is the Text2Text baseline's)",
    ),
    Claim(
        BLOGS,
        "block-wise gradient shuffle is (ε, δ)-DP at the accountant's ε",
        "ε ≤ 1 claimed for the run (accountant)",
        "privacy-audit experiment dp-blogs-audit --out docs/records/dp-blogs-audit.json",
        "dp-blogs-audit.json",
        _blogs_audit,
    ),
    Claim(
        BLOGS,
        "perplexity comparable to DP-SGD; extraction lower (p = 0.002)",
        "norm. PPL diff −0.023 (p = 0.55); EXT p = 0.002",
        "python -m experiments.lm_lr_grid --config dp-blogs --lrs 3e-4,1e-3,3e-3,1e-2 "
        "--arms none,dp-sgd,dp-blogs --batch-size 1000 --epochs 10 --out docs/records/dp-blogs-utility.json",
        "dp-blogs-utility.json",
        _blogs_perplexity,
    ),
    Claim(
        DING,
        "Phantom Clipping 4–100× faster than Ghost Clipping",
        "4–100× (V100, embedding-dominated)",
        _COST_RUNS_CMD,
        "bench-cost-of-privacy-runs.json",
        _ghost("time"),
    ),
    Claim(
        DING,
        "Phantom Clipping 10–400× less memory than Ghost Clipping",
        "10–400×",
        _COST_RUNS_CMD,
        "bench-cost-of-privacy-runs.json",
        _ghost("memory"),
    ),
    Claim(
        DING,
        "Re-Attention improves NDCG@10 on sequential recommendation (ε = 5)",
        "+29% (ML-1M), +20% (Amazon)",
        "privacy-audit bench re-attention-recsys",
        "re-attention-recsys.json",
        _recsys,
    ),
    Claim(
        DING,
        "Re-Attention improves DP LM utility too (the suite's own check, not a claim of the "
        "paper; perplexity, private fine-tuning after public pretraining)",
        "no LM number in the paper (its tasks are recommendation)",
        "python -m experiments.lm_lr_grid --config lm --lrs 3e-4,1e-3,3e-3,1e-2 "
        "--batch-size 1000 --epochs 10 --out docs/records/lm-utility-lr-grid.json",
        "lm-utility-lr-grid.json",
        _lm_grid,
    ),
)


def _fmt(x: float | None) -> str:
    if x is None:
        return "—"
    ax = abs(x)
    return f"{x:.3g}" if ax >= 100 or ax < 0.01 else f"{x:.3f}"


def recorded_inputs(docs: Path | None = None) -> list[tuple[str, Path]]:
    """``(what, path)`` of the recorded result files the table reads (inputs that the
    ``claims --json / --markdown`` outputs must not overwrite)."""
    docs = Path(docs) if docs is not None else default_docs()
    names = sorted({c.source for c in CLAIMS if c.source is not None})
    return [("recorded result", docs / n) for n in names if (docs / n).exists()]


def build_claims(docs: Path | None = None) -> list[dict[str, Any]]:
    """Every claim as a row dict (see the module docstring)."""
    docs = Path(docs) if docs is not None else default_docs()
    rows = []
    for c in CLAIMS:
        row: dict[str, Any] = {
            "paper": c.paper,
            "claim": c.claim,
            "paper_value": c.paper_value,
            "command": c.command,
            "source": None if c.source is None else f"docs/records/{c.source}",
            "ours": None,
            "ci_low": None,
            "ci_high": None,
            "ci_kind": None,
            "pointer": None,
            "detail": "",
            "verdict_reason": "",
            "floor_checks": [],
            "setting_differences": [],
            "process_run_verdicts": None,
        }
        if c.not_testable:
            row.update(verdict=NOT_TESTABLE, detail=c.not_testable)
        elif c.source is None or not (docs / c.source).is_file():
            row.update(verdict=NOT_MEASURED, detail=f"docs/records/{c.source} is not recorded yet")
        else:
            try:
                doc = json.loads((docs / c.source).read_text(encoding="utf-8"))
                m = c.extract(doc)
            except (
                Missing,
                json.JSONDecodeError,
                StopIteration,
                KeyError,
                TypeError,
                ValueError,
            ) as exc:
                row.update(verdict=NOT_MEASURED, detail=f"docs/records/{c.source}: {exc}")
            else:
                recorded = doc.get("command") if isinstance(doc, dict) else None
                if isinstance(recorded, str) and recorded.strip():
                    row["command"] = recorded.strip()
                    if "--out" not in recorded and recorded.startswith("privacy-audit"):
                        row["command"] += f" --out docs/records/{c.source}"
                verdict, reason, extra = judge(m.verdict, m.arms, m.differences, m.run_verdicts)
                if verdict == m.verdict and m.qualifier:
                    reason = m.qualifier
                row.update(
                    ours=m.value,
                    ci_low=None if m.ci_low is None else float(m.ci_low),
                    ci_high=None if m.ci_high is None else float(m.ci_high),
                    ci_kind=m.ci_kind,
                    pointer=m.pointer,
                    verdict=verdict,
                    verdict_reason=reason,
                    detail=m.text + (f"; {extra}" if extra else ""),
                    floor_checks=floor_checks(m.arms or []),
                    setting_differences=list(m.differences or []),
                    process_run_verdicts=m.run_verdicts,
                )
        rows.append(row)
    return rows


def _ours(r: dict[str, Any]) -> str:
    if r["ours"] is None:
        return "—"
    ci = (
        f" [{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]"
        if r["ci_low"] is not None and r["ci_high"] is not None
        else ""
    )
    return f"{_fmt(r['ours'])}{ci}"


def _verdict_text(r: dict[str, Any]) -> str:
    """``not comparable (arm X did not learn)``, ``setting differs (...)``, ..."""
    reason = r.get("verdict_reason")
    return f"{r['verdict']} ({reason})" if reason else r["verdict"]


def format_table(rows: list[dict[str, Any]]) -> str:
    """Plain-text table for the terminal, grouped by paper."""
    out = []
    paper = None
    for r in rows:
        if r["paper"] != paper:
            paper = r["paper"]
            out.append(f"\n{paper}")
        out.append(f"  - {r['claim']}")
        out.append(
            f"      paper: {r['paper_value']}   ours: {_ours(r)}"
            + (f" ({r['ci_kind']})" if r["ci_kind"] else "")
        )
        out.append(
            f"      verdict: {r['verdict'].upper()}"
            + (f" ({r['verdict_reason']})" if r.get("verdict_reason") else "")
            + (f" — {r['detail']}" if r["detail"] else "")
        )
        out.append(f"      measured by: {r['command']}")
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    out.append("\n" + ", ".join(f"{n} {v}" for v, n in counts.items() if n))
    return "\n".join(out).lstrip("\n")


def to_markdown(rows: list[dict[str, Any]]) -> str:
    """docs/claims.md: generated from the same rows (``privacy-audit claims --markdown``)."""

    def esc(s: str) -> str:
        return str(s).replace("|", "\\|").replace("\n", " ")

    lines = [
        "# Paper claims: what the suite reproduces",
        "",
        "Generated by `privacy-audit claims --markdown docs/claims.md` from the recorded JSON "
        "under docs/records/ (do not edit by hand). One row per headline claim of the five seed "
        "papers: the paper's number, ours with its interval, the verdict and the command "
        'that records the measurement. "not yet measured" means the JSON is not recorded '
        "(or lacks the figure); it is never counted as reproduced. "
        '"not comparable" means an arm did not clear its trivial baseline (majority class, '
        "unigram perplexity, the public-only start, chance AUC) with its CI; "
        "\"setting differs\" names how the measurement's setting differs from the paper's; "
        '"unstable" marks a timing claim that flips between separate process runs '
        "(experiments/claims.py, `judge`).",
        "",
        "| paper | claim | paper | ours [interval] | verdict | detail | command |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        ours = _ours(r) + (f" ({r['ci_kind']})" if r["ci_kind"] else "")
        lines.append(
            f"| {esc(r['paper'])} | {esc(r['claim'])} | {esc(r['paper_value'])} | {esc(ours)} "
            f"| **{esc(_verdict_text(r))}** | {esc(r['detail'])} | `{esc(r['command'])}` |"
        )
    counts = {v: sum(r["verdict"] == v for r in rows) for v in VERDICTS}
    lines += ["", "Totals: " + ", ".join(f"{n} {v}" for v, n in counts.items() if n), ""]
    return "\n".join(lines)


__all__ = ["CLAIMS", "VERDICTS", "build_claims", "follow", "format_table", "to_markdown"]
