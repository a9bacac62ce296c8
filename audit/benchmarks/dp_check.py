"""``privacy-audit bench dp-check``: every bundled DP-SGD bug, written as a user's SETUP.py
(a DPOptimizer subclass, a data loader, a loop body or an accountant call, never a suite
flag), and every correct setup, checked over seeds.

Per setup: VIOLATED count over seeds with its Clopper–Pearson interval, the check and bug
class that caught it, the sound ε lower bound (median), CPU seconds per check (median,
max), and for bugs the true ε of what the code runs (from its mechanism, below) against
the claim. The correct setups are the null: their false-violation count, pooled with its
interval. Beside each bug class: what the end-to-end (crafted-dataset many-run) audits of
docs/dp-bugs.md needed for the same bug on the suite's trainer, as recorded there.

Setups: ``fixtures/dp_setups/*.py`` and the suite's own trainers (the ``dp-sgd``
classifier defense through its :meth:`~privacy_audit.defenses.dp_sgd.DPSGD.make_private`
and the causal-LM engine's clipping and noise through the privatize protocol), built here.
"""

from __future__ import annotations

import math
import statistics
import time
import types
from pathlib import Path
from typing import Any

import numpy as np

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings

#: bug setup -> (class, how its true ε follows from the code, end-to-end audit recorded in
#: docs/dp-bugs.md for the same bug: (audit, detected, CPU per seed))
BUGS: dict[str, tuple[str, str, tuple[str, str, str]]] = {
    "bug_noise_divided_by_batch": (
        "noise",
        "σ/B",
        ("one-run white-box canaries", "20/20", "≈1 CPU-s (suite's trainer only)"),
    ),
    "bug_accumulation_noise_once": (
        "noise",
        "σ/√4",
        ("lone canary, 5,000 runs per side", "20/20 ideal, 2/2 real", "7.6 CPU-min"),
    ),
    "bug_unnoised_no_decay_group": (
        "parameter group",
        "∞",
        ("record canaries M=100, 3 runs", "10/10", "≈3 CPU-s (suite's trainer only)"),
    ),
    "bug_unclipped_no_decay_group": (
        "parameter group",
        "∞",
        ("record canaries M=100, 3 runs", "10/10", "≈3 CPU-s (suite's trainer only)"),
    ),
    "bug_clip_after_aggregation": (
        "clipping",
        "σ/2",
        ("anchor pair, 5,000 runs per side", "19/20 ideal, 1/2 real", "14 CPU-min"),
    ),
    "bug_shuffle_as_poisson": (
        "sampling",
        "≥ Chua et al.'s bound",
        ("Chua et al.'s pair, 20,000 per side", "4/20 ideal", "≈42 CPU-min"),
    ),
    "bug_accountant_wrong_n": (
        "accounting",
        "σ at the real q",
        ("realised-schedule gradient canaries", "20/20", "no extra training"),
    ),
    "bug_accountant_steps_per_epoch": (
        "accounting",
        "σ at the real T",
        ("none caught it", "0/20", "—"),
    ),
    "bug_batch_norm": (
        "cross-example",
        "∞",
        ("duplicate record, 100 runs per side", "20/20 real", "20 CPU-s"),
    ),
    "bug_ghost_clip_norm": ("clipping (ghost, Opacus #664)", "σ/10", ("—", "—", "—")),
    "bug_ghost_unclipped": ("clipping (ghost)", "∞", ("—", "—", "—")),
    "bug_lora_head_outside": ("coverage (Opacus #436/#820)", "∞", ("—", "—", "—")),
    "bug_per_layer_noise": ("clipping (Tramèr et al. 2022)", "σ/√6", ("—", "—", "—")),
    "bug_microbatch_clipping": ("clipping (TF Privacy #620)", "σ/4", ("—", "—", "—")),
    "bug_fixed_batches": (
        "sampling (private-transformers #7)",
        "E Gaussian releases",
        ("—", "—", "—"),
    ),
    "bug_replace_one_claim": (
        "accounting (google/dp #378)",
        "replace-one at σ",
        ("—", "—", "—"),
    ),
    "bug_noise_averaged_over_replicas": ("noise (Opacus #196)", "σ/√4", ("—", "—", "—")),
    "bug_summed_grad_kept": ("state across steps", "≥ the persistence bound", ("—", "—", "—")),
}


def setups_dir() -> Path:
    from privacy_audit import fixtures

    return Path(fixtures.__file__).resolve().parent / "dp_setups"


def _true_epsilon(name: str, claim: dict, record: dict) -> float | None:
    """The ε of what the bug's code releases, from its mechanism (module docstring)."""
    from privacy_audit.audit.epsilon.dp_check import accounting

    s, q, d = claim["noise_multiplier"], claim["sample_rate"], claim["delta"]
    t = claim.get("steps") or int(claim.get("epochs", 1) / q)
    meas = record["epsilon"].get("measured", {})
    t_run = int(meas.get("steps_run") or t)
    factor = {
        "bug_noise_divided_by_batch": 32.0,
        "bug_accumulation_noise_once": 2.0,
        "bug_clip_after_aggregation": 2.0,
        "bug_ghost_clip_norm": 10.0,
        "bug_per_layer_noise": math.sqrt(6),
        # a micro-batch's clipped mean, times its size 2, moves by up to 2C each way: 4C
        "bug_microbatch_clipping": 4.0,
        "bug_noise_averaged_over_replicas": 2.0,
    }
    if name in factor:
        return accounting.poisson_interval(max(s / factor[name], 0.05), q, t, d).lower
    if name in (
        "bug_unnoised_no_decay_group",
        "bug_unclipped_no_decay_group",
        "bug_batch_norm",
        "bug_ghost_unclipped",
    ):
        return math.inf
    if name == "bug_lora_head_outside":
        return math.inf
    if name == "bug_accountant_wrong_n":
        return accounting.poisson_interval(s, q * 10, t, d).lower
    if name == "bug_accountant_steps_per_epoch":
        return accounting.poisson_interval(s, q, t_run, d).lower
    if name == "bug_shuffle_as_poisson":
        spe = int(round(1 / q))
        return accounting.shuffle_lower_bound(s, spe, claim.get("epochs", 1), d)
    if name == "bug_fixed_batches":
        return accounting.gaussian_composition_epsilon(s, claim.get("epochs", 1), d)
    if name == "bug_replace_one_claim":
        return accounting.poisson_interval(s, q, t, d, relation="replace-one").lower
    if name == "bug_summed_grad_kept":  # no closed form: the sound persistence bound
        vals = [
            f["epsilon"]["value"]
            for f in record["findings"]
            if f["check"] == "schedule" and f.get("epsilon") and f["epsilon"].get("value")
        ]
        return max(vals) if vals else None
    lb = meas.get("epsilon_lower") or {}
    return math.inf if lb.get("infinite") else lb.get("value")


def suite_dp_sgd_setup(n: int = 256, epochs: int = 2, batch: int = 32, epsilon: float = 2.0):
    """The suite's ``dp-sgd`` classifier trainer (Opacus) on the bundled corpus, as a
    SETUP: its own make_private (σ calibration, AdamW, Opacus wiring) and loop body."""
    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from privacy_audit import fixtures
    from privacy_audit.defenses.dp_sgd import DPSGD
    from privacy_audit.targets.classifier import (
        TrainingConfig,
        encode,
        forward_kwargs,
        supervised_step,
    )
    from privacy_audit.targets.loading import Target, TargetSpec

    rows = fixtures.load_corpus("private")[:n]
    names = sorted({r["label"] for r in rows})
    target = Target(TargetSpec("tiny", max_length=32), tuple(names), progress=False)
    training = TrainingConfig(
        epochs=epochs, batch_size=batch, learning_rate=1e-3, max_length=32, progress=False
    )
    defense = DPSGD(epsilon=epsilon, delta=1e-5, max_grad_norm=1.0)
    _, tokenizer = target.build(0)
    ids, mask = encode(tokenizer, [r["text"] for r in rows], 32)
    labels = torch.tensor([names.index(r["label"]) for r in rows])
    data = TensorDataset(ids, mask, labels)
    state: dict[str, Any] = {}

    def make_private(dataset):
        model, _ = target.build(0)
        model.train()
        loader = DataLoader(dataset, batch_size=batch, shuffle=True)
        engine, gsm, opt, dl, sigma, q, _ = defense.make_private(model, loader, training, 0)
        state.update(sigma=sigma, q=q)
        return gsm, opt, dl

    def loss_fn(model, b):
        x, m, y = b
        out = model(**forward_kwargs(model, x, m))
        return torch.nn.functional.cross_entropy(out.logits, y, reduction="none")

    make_private(data)  # σ and q, as the defense computes them
    steps = epochs * int(round(1 / state["q"]))
    from opacus.accountants import PRVAccountant

    acc = PRVAccountant()
    acc.history = [(state["sigma"], state["q"], steps)]
    claim = {
        "epsilon": float(acc.get_epsilon(1e-5)),  # what fit() reports after the run
        "delta": 1e-5,
        "noise_multiplier": state["sigma"],
        "max_grad_norm": 1.0,
        "sample_rate": state["q"],
        "epochs": epochs,
        "accountant": "prv",
    }
    return types.SimpleNamespace(
        make_dataset=lambda: data,
        make_private=make_private,
        train_step=lambda model, opt, b: supervised_step(model, opt, b),
        loss_fn=loss_fn,
        CLAIM=claim,
        __name__="suite dp-sgd (classifier)",
    )


def suite_lm_engine_setup(n: int = 512, epochs: int = 2, batch: int = 32, sigma: float = 1.1):
    """The suite's causal-LM DP-SGD engine (:class:`~privacy_audit.defenses.dp_engine.DPSGDEngine`:
    its clipping and noise, explicit per-sample norms) and its Poisson sampler, through the
    privatize protocol."""
    import torch

    from privacy_audit.defenses.dp_engine import DPSGDEngine, epsilon_opacus, poisson_picks

    cfg_model = _tiny_gpt2()
    engine = DPSGDEngine(
        cfg_model,
        max_grad_norm=1.0,
        noise_multiplier=sigma,
        expected_batch_size=batch,
        norms="explicit",
    )
    by_name = dict(cfg_model.named_parameters())
    params = {k: tuple(p.shape) for k, p in by_name.items() if p.requires_grad}
    q = batch / n

    def privatize(per):
        g = {k: torch.as_tensor(v, dtype=torch.float32) for k, v in per.items()}
        sums, _ = engine._clip_and_sum(g)
        out = engine.noised(sums)
        return {k: out[by_name[k]].double().numpy() for k in params}

    class Sampler:
        def __init__(self, rows):
            self.rows = rows

        def __len__(self):
            return int(round(1 / q))

        def __iter__(self):
            for pick in poisson_picks(self.rows, q, len(self), None):
                yield torch.nonzero(pick).flatten().tolist()

    steps = epochs * int(round(1 / q))
    return types.SimpleNamespace(
        PARAMS=params,
        privatize=privatize,
        make_dataset=lambda: list(range(n)),
        make_loader=lambda ds: Sampler(len(ds)),
        CLAIM={
            "epsilon": epsilon_opacus(sigma, q, steps, 1e-5),
            "delta": 1e-5,
            "noise_multiplier": sigma,
            "max_grad_norm": 1.0,
            "sample_rate": q,
            "epochs": epochs,
            "accountant": "prv",
        },
        __name__="suite DPSGDEngine (causal LM)",
    )


def _tiny_gpt2():
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(
        vocab_size=64,
        n_positions=16,
        n_embd=32,
        n_layer=1,
        n_head=2,
        bos_token_id=0,
        eos_token_id=0,
    )
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    return GPT2LMHeadModel(cfg)


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    from scipy.stats import beta

    a = (1 - confidence) / 2
    lo = 0.0 if k == 0 else float(beta.ppf(a, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a, k + 1, n - k))
    return lo, hi


def _cases(quick: bool) -> list[tuple[str, str, Any]]:
    files = sorted(p for p in setups_dir().glob("*.py") if not p.name.startswith("_"))
    out = []
    for p in files:
        kind = "bug" if p.stem.startswith("bug_") else "correct"
        out.append((p.stem, kind, p))
    out.append(("suite_dp_sgd_classifier", "correct", suite_dp_sgd_setup))
    out.append(("suite_lm_engine", "correct", suite_lm_engine_setup))
    if quick:
        keep = {
            "opacus_default",
            "privatize_correct",
            "bug_noise_divided_by_batch",
            "bug_clip_after_aggregation",
            "bug_shuffle_as_poisson",
        }
        out = [c for c in out if c[0] in keep]
    return out


def run(settings: BenchSettings) -> BenchResult:
    from privacy_audit.audit.epsilon.dp_check.contract import as_setup
    from privacy_audit.audit.epsilon.dp_check.run import check

    seeds = int(settings.extra.get("seeds") or (3 if settings.quick else 20))
    budget = float(settings.extra.get("budget") or 180.0)
    only = settings.extra.get("only")
    rows, cases = [], {}
    null_k = null_n = 0
    for name, kind, src in _cases(settings.quick):
        if only and name not in only:
            continue
        setup = as_setup(src() if callable(src) and not isinstance(src, Path) else src)
        claim = setup.claim.as_dict()
        cpus, verdicts, caught, classes, lbs, walls, true_eps = [], [], [], [], [], [], None
        for s in range(seeds):
            w0, c0 = time.perf_counter(), time.process_time()
            rec = check(setup, budget=budget, seed=settings.seed + s, progress=False)
            cpus.append(time.process_time() - c0)
            walls.append(time.perf_counter() - w0)
            verdicts.append(rec["verdict"])
            v = [f for f in rec["findings"] if f["severity"] == "violation"]
            if v:
                caught.append(v[0]["check"])
                classes.append(v[0]["bug_class"])
            lb = rec["epsilon"].get("measured", {}).get("epsilon_lower") or {}
            lbs.append(math.inf if lb.get("infinite") else (lb.get("value") or 0.0))
            if kind == "bug" and true_eps is None:
                true_eps = _true_epsilon(name, claim, rec)
        k = sum(v == "violated" for v in verdicts)
        lo, hi = clopper_pearson(k, seeds)
        row = {
            "setup": name,
            "kind": kind,
            "claimed_epsilon": claim["epsilon"],
            "violated": k,
            "seeds": seeds,
            "interval": [lo, hi],
            "consistent": sum(v == "consistent" for v in verdicts),
            "inconclusive": sum(v == "inconclusive" for v in verdicts),
            "caught_by": statistics.mode(caught) if caught else None,
            "bug_class_found": statistics.mode(classes) if classes else None,
            "epsilon_lower_median": float(np.median(lbs)),
            "cpu_s_median": float(np.median(cpus)),
            "cpu_s_max": float(np.max(cpus)),
            "wall_s_median": float(np.median(walls)),
        }
        if kind == "bug":
            cls, how, e2e = BUGS.get(name, ("?", "?", ("—", "—", "—")))
            row.update(
                bug_class=cls,
                true_epsilon=true_eps,
                true_epsilon_how=how,
                two_x_line=bool(true_eps is not None and true_eps >= 2 * claim["epsilon"]),
                end_to_end_recorded={"audit": e2e[0], "detected": e2e[1], "cpu": e2e[2]},
            )
        else:
            null_k += k
            null_n += seeds
        rows.append(row)
        ms = [c * 1000 for c in cpus]
        cases[name] = {
            "median_ms": float(np.median(ms)),
            "q1_ms": float(np.percentile(ms, 25)),
            "q3_ms": float(np.percentile(ms, 75)),
            "n": len(ms),
        }
        print(
            f"  {name:<36} {kind:<8} VIOLATED {k}/{seeds} [{lo:.2f}, {hi:.2f}]  "
            f"caught by {row['caught_by'] or '—'}  CPU {row['cpu_s_median']:.1f} s",
            flush=True,
        )
    pooled = clopper_pearson(null_k, null_n) if null_n else (float("nan"), float("nan"))
    return BenchResult(
        name="dp-check",
        reference="process CPU seconds per dp-check run (cases: median ms over seeds)",
        cases=cases,
        ratios={},
        setup={
            "seeds": seeds,
            "budget_s": budget,
            "table": rows,
            "null_pooled": {"violated": null_k, "runs": null_n, "interval": list(pooled)},
        },
        targets={
            "detection": "bugs with true ε >= 2x the claim: VIOLATED in >= 19/20 seeds",
            "null": "each correct setup <= 1/20; pooled <= 5%",
            "cpu": "<= 5 CPU-minutes per check",
        },
        notes=[
            "true ε: the mechanism each bug's code runs (module docstring of "
            "privacy_audit.audit.benchmarks.dp_check); end-to-end figures as recorded in "
            "docs/dp-bugs.md for the same bug on the suite's trainer"
        ],
    )


def markdown(result: dict[str, Any]) -> str:
    """The detection and null tables of docs/dp-check.md from a bench JSON's result."""
    rows = result["setup"]["table"]
    out = [
        "| bug | class | true ε (claim) | VIOLATED / seeds | 95% CI | caught by (finding) | ε ≥ (median) | CPU s (median, max) | end-to-end audit (docs/dp-bugs.md) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def e(x):
        return "∞" if x is None or (isinstance(x, float) and math.isinf(x)) else f"{x:.3g}"

    for r in rows:
        if r["kind"] != "bug":
            continue
        e2e = r["end_to_end_recorded"]
        out.append(
            f"| {r['setup']} | {r['bug_class']} | "
            # a true ε known only as a lower bound (no closed form) says so
            f"{'≥ ' if str(r.get('true_epsilon_how', '')).startswith('≥') else ''}"
            f"{e(r['true_epsilon'])} ({r['claimed_epsilon']:.3g}) "
            f"| {r['violated']}/{r['seeds']} | [{r['interval'][0]:.2f}, {r['interval'][1]:.2f}] "
            f"| {r['bug_class_found'] or '—'} | {e(r['epsilon_lower_median'])} "
            f"| {r['cpu_s_median']:.1f}, {r['cpu_s_max']:.1f} | {e2e['audit']}: {e2e['detected']}, {e2e['cpu']} |"
        )
    out += [
        "",
        "| correct setup | VIOLATED / seeds | 95% CI | consistent | inconclusive | ε ≥ (median) | claim | CPU s (median, max) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        if r["kind"] == "bug":
            continue
        out.append(
            f"| {r['setup']} | {r['violated']}/{r['seeds']} | [{r['interval'][0]:.2f}, {r['interval'][1]:.2f}] "
            f"| {r['consistent']} | {r['inconclusive']} | {e(r['epsilon_lower_median'])} | {r['claimed_epsilon']:.3g} "
            f"| {r['cpu_s_median']:.1f}, {r['cpu_s_max']:.1f} |"
        )
    p = result["setup"]["null_pooled"]
    out.append(
        f"\nPooled over the correct setups: VIOLATED {p['violated']} of {p['runs']} runs, "
        f"95% CI [{p['interval'][0]:.3f}, {p['interval'][1]:.3f}]."
    )
    return "\n".join(out)
