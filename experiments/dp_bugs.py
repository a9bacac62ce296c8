"""Planted-bug benchmark: which ε audit catches which DP-SGD bug, how often, at what cost.

The suite's own causal-LM DP-SGD trainer (:mod:`privacy_audit.defenses.dp_engine`:
``accountant_inputs`` → ``calibrate_noise`` → ``DPSGDEngine`` (explicit per-sample
norms) → ``train_private_ids`` → ``account``) is run on a tiny GPT-2 with each bug of
:mod:`privacy_audit.defenses.dp_bugs` planted (and with none: the null), over seeds. Every
ε audit the suite has is run on each trained run:

- ``gradient-canary (many runs, declared)``: :class:`GradientCanaryAudit`, which
  simulates the mechanism and schedule the release DECLARES (100k runs per side);
- ``one-run white-box (default)``: :class:`OneRunWhiteBoxAudit` on the 1000 Dirac
  canaries recorded in the run (added to the clipped sum, self-sampled, pilot-placed);
- ``one-run white-box (record canaries)``: the improved design,
  :class:`SampledGradientCanaries` — canaries that are dataset rows, sampled by the
  trainer's own sampler, clipped by its own clipping code, stratified over parameter
  groups, scored by the likelihood ratio under the claim (500 canaries, ×10 magnitude);
- ``input canaries (one-run, black-box)``: 200 random-token canary sequences inserted
  with probability ½, scored by −loss, one-run bound (Steinke et al. / f-DP);
- ``trade-off test``: the same canary scores' ROC against the claim's trade-off curve.

Crafted-dataset many-runs audits, each its own CLI option: ``--anchor-pair RUNS`` (the
LM engine, clipping after aggregation) and ``--duplicate-record RUNS`` (the classifier
trainer, cross-example layers:
:mod:`privacy_audit.audit.epsilon.duplicate_record`).

A detection is "claim VIOLATED at 95% confidence" (the audit's bound exceeds the claimed
ε). Larger budget: the canaries of R independent runs pooled into one one-run audit
(valid: each canary influences only its own run, so the pooled release is ε-DP with
respect to each canary).

Reproduce (about 25 CPU-minutes at the default sizes, one core)::

    nice -n 10 python -m experiments.dp_bugs --seeds 20 --pool 5 \
        --out docs/records/dp-bugs.json
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from privacy_audit.defenses import dp_bugs
from privacy_audit.defenses.gradient_mechanism import realised_schedule
from privacy_audit.ground.io import atomic_write_text

#: the causal-LM engine's bugs (and the correct trainer); the classifier's are run by
#: :func:`classifier_cells`
VARIANTS = (None, *(b for b, bug in dp_bugs.BUGS.items() if bug.trainer == "causal-lm"))


@dataclass(frozen=True)
class Setup:
    """Sizes of one benchmark run (recorded in the output)."""

    n_data: int = 512
    seq_len: int = 8
    vocab: int = 64
    batch_size: int = 32
    epochs: int = 2
    target_epsilon: float = 2.0
    delta: float = 1e-5
    clip: float = 1.0
    learning_rate: float = 1e-3
    input_canaries: int = 200
    white_box_canaries: int = 1000  # the default design (OneRunWhiteBoxAudit)
    record_canaries: int = 500  # the improved design (SampledGradientCanaries)
    magnitude: float = 100.0
    gradient_trials: int = 100_000


def tiny_lm(setup: Setup, seed: int):
    """GPT-2, 1 layer, width 16, vocabulary 64 (4,592 parameters), eager attention."""
    from transformers import GPT2Config, GPT2LMHeadModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    cfg = GPT2Config(
        vocab_size=setup.vocab,
        n_positions=2 * setup.seq_len,
        n_embd=16,
        n_layer=1,
        n_head=2,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=0,
        eos_token_id=0,
    )
    cfg._attn_implementation = "eager"  # vmap (explicit per-sample gradients) needs it
    torch.manual_seed(seed)
    return GPT2LMHeadModel(cfg)


def data(setup: Setup, seed: int) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """Training rows (a fixed bigram chain, so there is something to learn) and the
    input canaries (uniform random tokens) with their inclusion bits."""
    g = torch.Generator().manual_seed(10_007 * seed + 1)
    trans = torch.softmax(3.0 * torch.randn(setup.vocab, setup.vocab, generator=g), dim=1)
    ids = torch.empty(setup.n_data, setup.seq_len, dtype=torch.long)
    ids[:, 0] = torch.randint(0, setup.vocab, (setup.n_data,), generator=g)
    for t in range(1, setup.seq_len):
        ids[:, t] = torch.multinomial(trans[ids[:, t - 1]], 1, generator=g).flatten()
    canaries = torch.randint(0, setup.vocab, (setup.input_canaries, setup.seq_len), generator=g)
    included = torch.randint(0, 2, (setup.input_canaries,), generator=g).numpy()
    return ids, canaries, included


def true_epsilon(
    bug: str | None, sigma: float, q: float, steps: int, epochs: int, expected_batch, setup: Setup
):
    """(value, how) of the real ε of the mechanism the (buggy) code ran."""
    from privacy_audit.defenses.dp_engine import epsilon_pld
    from privacy_audit.defenses.dp_sgd import dp_accounting_epsilon
    from privacy_audit.stats.epsilon_bounds import gaussian_mechanism_epsilon

    d = setup.delta
    if bug in ("unnoised-no-decay-group", "unclipped-no-decay-group"):
        return math.inf, "infinite (see the bug)"
    if bug == "noise-divided-by-batch":
        s = sigma / expected_batch
        return dp_accounting_epsilon(s, q, steps, d), f"dp-accounting RDP (upper) at σ/B = {s:.3g}"
    if bug == "accumulation-noise-once":
        s = sigma / math.sqrt(dp_bugs.ACCUMULATION)
        return epsilon_pld(s, q, steps, d), f"dp-accounting PLD at σ/√k = {s:.3g}"
    if bug == "clip-after-aggregation":
        return epsilon_pld(sigma / 2, q, steps, d), f"dp-accounting PLD at σ/2 = {sigma / 2:.3g}"
    if bug == "shuffle-as-poisson":
        mu = math.sqrt(epochs) / sigma
        low = shuffle_lower_bound(sigma, max(1, round(steps / epochs)), epochs, d)
        return (
            low,
            f"lower bound {low:.3g} (Chua et al.'s pair, exact max-statistic bound); "
            f"upper bound {gaussian_mechanism_epsilon(mu, d):.3g} ({epochs} Gaussian "
            f"releases, μ = √E/σ = {mu:.3g})",
        )
    return epsilon_pld(sigma, q, steps, d), "dp-accounting PLD at the σ, q, T run"


def train_once(bug: str | None, seed: int, setup: Setup, design: str) -> dict[str, Any]:
    """One run of the trainer with ``bug`` planted; returns what the audits need.
    ``design``: ``"default"`` (suite's recorded canaries) or ``"record"`` (improved)."""
    from privacy_audit.defenses.dp_engine import (
        DPSGDEngine,
        account,
        accountant_inputs,
        calibrate_noise,
        gradient_canaries_for,
        poisson_schedule,
        train_private_ids,
    )
    from privacy_audit.defenses.dp_sgd_with_canaries import SampledGradientCanaries, pilot_gradient
    from privacy_audit.defenses.phantom import per_sample_token_loss

    t0 = time.process_time()
    ids, canary_ids, included = data(setup, seed)
    rows = torch.cat([ids, canary_ids[torch.as_tensor(included).bool()]])
    with dp_bugs.planted(bug):
        model = tiny_lm(setup, seed)
        params = [p for p in model.parameters() if p.requires_grad]
        record = None
        if design == "record":
            pilot = pilot_gradient(model, params, setup.vocab, setup.seq_len, "causal-lm", seed)
            record = SampledGradientCanaries(
                params, setup.record_canaries, setup.clip, seed, setup.magnitude, pilot=pilot
            )
        n_rows = len(rows) + (record.present_count if record else 0)
        # q from the EXPECTED row count (canaries are present w.p. 1/2): the same q for
        # every seed of a design, so the calibration is computed once (ε does not depend
        # on N under Poisson sampling)
        expected_rows = (
            setup.n_data + (setup.input_canaries + (setup.record_canaries if record else 0)) // 2
        )
        q, steps = poisson_schedule(expected_rows, setup.batch_size, setup.epochs)
        q_acc, steps_acc = accountant_inputs(q, steps, setup.epochs)
        sigma = calibrate_noise(setup.target_epsilon, setup.delta, q_acc, steps_acc)
        claimed = account(sigma, q_acc, steps_acc, setup.delta)["claimed"]
        engine = DPSGDEngine(model, setup.clip, sigma, q * n_rows, norms="explicit")
        if design == "default":
            training = SimpleNamespace(gradient_canaries=setup.white_box_canaries, max_length=8)
            engine.canaries = gradient_canaries_for(
                training, engine.params, setup.clip, q, seed, model=model
            )
        engine.sampled_canaries = record
        mask = torch.ones_like(rows)
        ran = train_private_ids(engine, rows, mask, steps, q, setup.learning_rate, seed=seed)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=canary_ids, attention_mask=torch.ones_like(canary_ids)).logits
        loss = per_sample_token_loss(logits, canary_ids, torch.ones_like(canary_ids))
    from privacy_audit.defenses.gradient_mechanism import (
        GaussianGradientMechanism,
        SamplingSchedule,
    )

    out = {
        "realised": realised_schedule(ran["rows_sampled"], ran["rows"], ran["steps"]),
        "claimed": claimed,
        "sigma": sigma,
        "q": q,
        "steps": steps,
        "q_acc": q_acc,
        "rows": n_rows,
        "steps_acc": steps_acc,
        "input_scores": (-loss).numpy(),
        "input_included": included,
        "release": SimpleNamespace(
            gradient_mechanism=GaussianGradientMechanism(setup.clip, sigma),
            schedule=SamplingSchedule(q_acc, steps_acc),
            gradient_canary_record=engine.canaries.record() if engine.canaries else None,
            surfaces=set(),
        ),
    }
    if record is not None:
        out["record_scores"] = record.scores(sigma, q_acc)
        out["record_included"] = record.included.numpy().astype(np.int64)
    out["cpu_s"] = time.process_time() - t0
    return out


def _bound(scores, included, delta) -> float:
    from privacy_audit.stats.canary_bounds import one_run_group_best

    return float(one_run_group_best(scores, included, delta, 1, 0.95)["epsilon"])


def audit_default(
    run: dict, setup: Setup, seed: int, realised_only: bool = False
) -> dict[str, dict]:
    from privacy_audit.audit.epsilon.gradient_canary_audit import GradientCanaryAudit
    from privacy_audit.defenses.base import Surface

    d, claim = setup.delta, run["claimed"]
    res: dict[str, dict] = {}
    t = time.process_time()
    rel = run["release"]
    rel.surfaces = {Surface.GRADIENTS}
    g = GradientCanaryAudit(trials=setup.gradient_trials, seed=seed).run(rel, d, 0.95, claim)
    res["gradient-canary (many runs, declared)"] = {
        "eps": g["epsilon_lb"],
        "ceiling": g["ceiling"],
        "cpu_s": time.process_time() - t,
    }
    t = time.process_time()
    realised = SimpleNamespace(**{**rel.__dict__, "schedule": run["realised"]})
    g = GradientCanaryAudit(trials=setup.gradient_trials, seed=seed).run(realised, d, 0.95, claim)
    res["gradient-canary (many runs, realised schedule)"] = {
        "eps": g["epsilon_lb"],
        "ceiling": g["ceiling"],
        "cpu_s": time.process_time() - t,
    }
    if realised_only:
        return res
    return _one_run_cells(res, setup, rel, d, claim, seed, run)


def cell_seeds(
    bug,
    seeds: int,
    pool: int,
    setup: Setup,
    log,
    record_only: bool = False,
    realised_only: bool = False,
) -> dict[str, Any]:
    """All audits on ``bug`` over ``seeds`` seeds, at one run and pooled over ``pool`` runs
    (``record_only``: the record-canary design alone)."""
    per: dict[str, list] = {}
    meta = None
    for s in range(seeds):
        if realised_only:  # the declared-mechanism audits on the default run only
            first = train_once(bug, 1000 * s, setup, "default")
            claim = first["claimed"]
            row = audit_default(first, setup, s, realised_only=True)
            if meta is None:
                meta = {"claimed_epsilon": claim, "sigma": first["sigma"], "q": first["q"]}
                meta["true_epsilon"], meta["true_epsilon_how"] = true_epsilon(
                    bug,
                    first["sigma"],
                    first["q"],
                    first["steps"],
                    setup.epochs,
                    first["q"] * first["rows"],
                    setup,
                )
            for name, r in row.items():
                per.setdefault(name, []).append({**r, "violated": bool(r["eps"] > claim)})
            continue
        runs_r = [train_once(bug, 1000 * s + r, setup, "record") for r in range(pool)]
        runs_d = [] if record_only else [train_once(bug, 1000 * s, setup, "default")]
        runs_d += [train_once(bug, 1000 * s + r, setup, "default") for r in range(1, pool)]
        first = runs_r[0] if record_only else runs_d[0]
        claim = first["claimed"]
        if meta is None:
            eps, how = true_epsilon(
                bug,
                first["sigma"],
                first["q"],
                first["steps"],
                setup.epochs,
                first["q"] * first["rows"],
                setup,
            )
            meta = {
                "claimed_epsilon": claim,
                "true_epsilon": eps,
                "true_epsilon_how": how,
                "sigma": first["sigma"],
                "q": first["q"],
                "steps": first["steps"],
                "q_accountant": first["q_acc"],
                "steps_accountant": first["steps_acc"],
            }
        row = {} if record_only else audit_default(first, setup, s)
        rec = runs_r[0]
        t = time.process_time()
        row["one-run white-box (record canaries)"] = {
            "claim": rec["claimed"],  # its run has the canaries as rows: its own q
            "eps": _bound(rec["record_scores"], rec["record_included"], setup.delta),
            "cpu_s": time.process_time() - t + rec["cpu_s"],
        }
        if pool > 1 and not record_only:  # the larger budget: `pool` runs in one audit
            t = time.process_time()
            sig = [r["release"].gradient_canary_record for r in runs_d]
            row[f"one-run white-box (default) ×{pool} runs"] = {
                "eps": _bound(
                    np.concatenate([x["signals"] for x in sig]),
                    np.concatenate([x["included"] for x in sig]),
                    setup.delta,
                ),
                "cpu_s": time.process_time() - t + sum(r["cpu_s"] for r in runs_d),
            }
            t = time.process_time()
            row[f"input canaries ×{pool} runs"] = {
                "eps": _bound(
                    np.concatenate([r["input_scores"] for r in runs_d]),
                    np.concatenate([r["input_included"] for r in runs_d]),
                    setup.delta,
                ),
                "cpu_s": time.process_time() - t + sum(r["cpu_s"] for r in runs_d),
            }
        if pool > 1:
            t = time.process_time()
            row[f"one-run white-box (record canaries) ×{pool} runs"] = {
                "claim": max(r["claimed"] for r in runs_r),
                "eps": _bound(
                    np.concatenate([r["record_scores"] for r in runs_r]),
                    np.concatenate([r["record_included"] for r in runs_r]),
                    setup.delta,
                ),
                "cpu_s": time.process_time() - t + sum(r["cpu_s"] for r in runs_r),
            }
        for name, r in row.items():
            hit = r["violated"] if r.get("eps") is None else r["eps"] > r.get("claim", claim)
            per.setdefault(name, []).append({**r, "violated": bool(hit)})
        log(
            f"  seed {s}: "
            + ", ".join(
                f"{k.split(' (')[0][:14]}={v['eps'] if v.get('eps') is None else round(v['eps'], 2)}"
                for k, v in row.items()
            )
        )
    audits = {}
    for name, rs in per.items():
        k = sum(r["violated"] for r in rs)
        lo, hi = clopper_pearson(k, len(rs))
        eps = [r["eps"] for r in rs if r.get("eps") is not None]
        audits[name] = {
            "detected": k,
            "seeds": len(rs),
            "rate": k / len(rs),
            "ci95": [lo, hi],
            "median_bound": float(np.median(eps)) if eps else None,
            "max_bound": float(np.max(eps)) if eps else None,
            "ceiling": rs[0].get("ceiling"),
            "cpu_s_per_seed": float(np.mean([r["cpu_s"] for r in rs])),
            "violated_per_seed": [bool(r["violated"]) for r in rs],
            "bound_per_seed": [r.get("eps") for r in rs],
        }
    kind = {"class": dp_bugs.BUGS[bug].bug_class} if bug else {"class": "null"}
    return {**(meta or {}), **kind, "audits": audits}


ANCHOR_PAIR = "anchor-pair gradient canary (many runs, crafted dataset)"
LONE_CANARY = "lone-canary gradient canary (many runs, crafted dataset)"
#: the crafted-dataset many-runs designs and their audits' names
CRAFTED = {"anchor-pair": ANCHOR_PAIR, "lone-canary": LONE_CANARY}


def anchor_pair_schedule(setup: Setup) -> dict[str, Any]:
    """σ, q, T and the claim of the benchmark's default runs (the table's one-run rows):
    the anchor-pair audit runs the trainer at exactly this schedule."""
    from privacy_audit.defenses.dp_engine import account, calibrate_noise, poisson_schedule

    q, steps = poisson_schedule(
        setup.n_data + setup.input_canaries // 2, setup.batch_size, setup.epochs
    )
    sigma = calibrate_noise(setup.target_epsilon, setup.delta, q, steps)
    claimed = account(sigma, q, steps, setup.delta)["claimed"]
    return {"sigma": sigma, "q": q, "steps": steps, "claimed": claimed}


def anchor_run_seed(seed: int, run: int, present: bool) -> int:
    """The training seed of one anchor-pair run. ``train_private_ids`` seeds its sampler
    with s and its noise with s + 1: a stride of 4 keeps every run's two streams apart
    from every other run's (either side, any seed below 10⁶ runs), so trials are
    independent, as the Clopper–Pearson bound assumes."""
    return 4_000_037 * int(seed) + 4 * int(run) + 2 * int(bool(present))


def anchor_pair_run(
    bug: str | None,
    present: bool,
    seed: int,
    run: int,
    setup: Setup,
    real_rows: int = 0,
    anchors: int = 200,
    coordinate: tuple[int, int] | None = None,
    initial=None,
    design: str = "anchor-pair",
) -> dict[str, Any]:
    """One training run of the trainer (``bug`` planted) on the crafted dataset: ``anchors``
    copies of the anchor, the canary if ``present``, and ``real_rows`` rows of the
    benchmark's data; returns the run's score and what it drew
    (:class:`~privacy_audit.defenses.dp_sgd_with_canaries.AnchorPairCanary`).
    ``design="lone-canary"``: the canary alone, no anchors
    (:class:`~privacy_audit.defenses.dp_sgd_with_canaries.LoneCanary`), scored at the noise
    σ/√k of ``accumulation-noise-once``."""
    from privacy_audit.defenses.dp_engine import DPSGDEngine, train_private_ids
    from privacy_audit.defenses.dp_sgd_with_canaries import (
        AnchorPairCanary,
        LoneCanary,
        pilot_gradient,
        quiet_coordinate,
    )

    if design not in CRAFTED:
        raise ValueError(f"unknown crafted design {design!r}; allowed: {', '.join(CRAFTED)}")
    lone = design == "lone-canary"
    if lone:
        anchors = 0

    sch = anchor_pair_schedule(setup)
    ids = (
        data(setup, seed)[0][:real_rows]
        if real_rows
        else torch.zeros((0, setup.seq_len), dtype=torch.long)
    )
    with dp_bugs.planted(bug):
        # the same initial model in every run of a seed (``initial``: a copy of it)
        model = copy.deepcopy(initial) if initial is not None else tiny_lm(setup, seed)
        engine = DPSGDEngine(
            model,
            setup.clip,
            sch["sigma"],
            sch["q"] * max(real_rows + anchors, 1),
            norms="explicit",
        )
        if coordinate is None:  # data-free: the initial model on random tokens
            pilot = pilot_gradient(
                model, engine.params, setup.vocab, setup.seq_len, "causal-lm", seed
            )
            coordinate = quiet_coordinate(engine.params, pilot, seed)
        pair = (
            LoneCanary(engine.params, setup.clip, coordinate, present)
            if lone
            else AnchorPairCanary(engine.params, setup.clip, coordinate, present, anchors)
        )
        engine.sampled_canaries = pair
        train_private_ids(
            engine,
            ids,
            torch.ones_like(ids),
            sch["steps"],
            sch["q"],
            setup.learning_rate,
            seed=anchor_run_seed(seed, run, present),
        )
    drawn = np.asarray(pair.canary_steps)
    if lone:  # the bug's hypothesis: noise multiplier σ/√k
        score = pair.score(sch["sigma"] / math.sqrt(dp_bugs.ACCUMULATION), sch["q"])
        with_anchor = int(drawn.sum())  # no anchor to need
    else:
        score = pair.score(sch["sigma"], sch["q"])
        with_anchor = int((drawn & (np.asarray(pair.anchor_counts) > 0)).sum())
    return {
        "score": score,
        "canary_steps": int(drawn.sum()),
        "canary_steps_with_anchor": with_anchor,
    }


def anchor_pair_audit(
    bug: str | None,
    seed: int,
    runs_per_side: int,
    setup: Setup,
    real_rows: int = 0,
    anchors: int = 200,
    design: str = "anchor-pair",
    checkpoint: str | None = None,
    every: int = 200,
) -> dict[str, Any]:
    """The many-runs anchor-pair audit (or ``design="lone-canary"``): ``runs_per_side``
    runs with the canary and as many without, each a full training run of the trainer;
    Clopper–Pearson bound at the split threshold
    (:func:`~privacy_audit.stats.epsilon_bounds.epsilon_lower_bound`). ``checkpoint``: a file
    the finished runs are saved to every ``every`` pairs, and resumed from if it was written
    for the same audit (design, bug, seed, runs, rows, sizes); runs are seeded one by
    one (:func:`anchor_run_seed`), so a resumed audit gives the same numbers."""
    from privacy_audit.defenses.dp_sgd_with_canaries import pilot_gradient, quiet_coordinate
    from privacy_audit.stats.epsilon_bounds import epsilon_ceiling, epsilon_lower_bound

    t = time.process_time()
    key = json.loads(
        json.dumps(
            [design, bug, seed, runs_per_side, real_rows, anchors, setup.__dict__], default=float
        )
    )
    runs: list[dict] = []
    cpu_before = 0.0
    if checkpoint is not None and os.path.exists(checkpoint):
        with open(checkpoint, encoding="utf-8") as f:
            saved = json.load(f)
        if saved.get("key") == key:  # another audit's partial runs are never reused
            runs, cpu_before = saved["runs"], float(saved["cpu_s"])
    model = tiny_lm(setup, seed)
    params = [p for p in model.parameters() if p.requires_grad]
    pilot = pilot_gradient(model, params, setup.vocab, setup.seq_len, "causal-lm", seed)
    coord = quiet_coordinate(params, pilot, seed)
    for r in range(len(runs) // 2, runs_per_side):
        for present in (True, False):
            runs.append(
                anchor_pair_run(
                    bug, present, seed, r, setup, real_rows, anchors, coord, model, design
                )
            )
        if checkpoint is not None and (r + 1) % every == 0 and r + 1 < runs_per_side:
            cpu = cpu_before + time.process_time() - t
            atomic_write_text(checkpoint, json.dumps({"key": key, "cpu_s": cpu, "runs": runs}))
    scores = np.array([r["score"] for r in runs])
    members = np.array([1, 0] * runs_per_side)
    lb = epsilon_lower_bound(scores, members, setup.delta, confidence=0.95, seed=seed)
    steps_in = sum(r["canary_steps"] for r in runs)
    return {
        "eps": float(lb),
        "ceiling": float(epsilon_ceiling(runs_per_side, runs_per_side, setup.delta)),
        "runs_per_side": runs_per_side,
        "canary_steps": steps_in,
        "anchor_with_canary": sum(r["canary_steps_with_anchor"] for r in runs) / max(steps_in, 1),
        "cpu_s": cpu_before + time.process_time() - t,
        # the runs' scores, with the canary then without (for comparison with the ideal
        # mechanism, :func:`ideal_anchor_pair`); 10 decimals: the correct trainer's
        # anchor-pair scores lie within 10⁻⁵ of T·log(1 − q) in a few percent of runs,
        # so coarser rounding makes atoms the simulation does not have
        "scores_in": [round(float(x), 10) for x in scores[members == 1]],
        "scores_out": [round(float(x), 10) for x in scores[members == 0]],
    }


def anchor_pair_cells(
    names,
    seeds: int,
    runs_per_side: int,
    setup: Setup,
    log,
    out=None,
    real_rows: int = 0,
    design: str = "anchor-pair",
    checkpoint: str | None = None,
    first_seed: int = 0,
) -> dict[str, Any]:
    """The anchor-pair audit (or ``design``) on each of ``names`` over ``seeds`` seeds
    (from ``first_seed``), seeds interleaved across names (so a stopped run leaves
    balanced cells); ``out(cells)`` after each. ``checkpoint``: a path prefix for each
    audit's partial runs (:func:`anchor_pair_audit`), removed once its cell is written."""
    sch = anchor_pair_schedule(setup)
    per: dict[str, list] = {bug or "correct": [] for bug in names}
    cells: dict[str, Any] = {}
    for s in range(first_seed, first_seed + seeds):
        for bug in names:
            part = f"{checkpoint}.{design}.{bug or 'correct'}.{s}.json" if checkpoint else None
            r = anchor_pair_audit(
                bug, s, runs_per_side, setup, real_rows, design=design, checkpoint=part
            )
            r["seed"] = s
            r["violated"] = bool(r["eps"] > sch["claimed"])
            per[bug or "correct"].append(r)
            log(
                f"  {design} {bug or 'correct'} seed {s}: ε ≥ {r['eps']:.2f} ({r['cpu_s']:.0f} CPU s)"
            )
            rs = per[bug or "correct"]
            eps, how = true_epsilon(
                bug, sch["sigma"], sch["q"], sch["steps"], setup.epochs, 0, setup
            )
            cells[bug or "correct"] = {
                "claimed_epsilon": sch["claimed"],
                "true_epsilon": eps,
                "true_epsilon_how": how,
                "sigma": sch["sigma"],
                "q": sch["q"],
                "steps": sch["steps"],
                "class": dp_bugs.BUGS[bug].bug_class if bug else "null",
                "audits": {
                    f"{CRAFTED[design]}, {runs_per_side} runs per side": {
                        **_seed_summary(rs),
                        "runs_per_side": runs_per_side,
                        "real_rows": real_rows,
                        "anchor_with_canary": float(np.mean([x["anchor_with_canary"] for x in rs])),
                        "seed_per_seed": [x["seed"] for x in rs],
                        "cpu_s_per_seed_each": [x["cpu_s"] for x in rs],
                        "scores_per_seed": [
                            {"in": x["scores_in"], "out": x["scores_out"]} for x in rs
                        ],
                    }
                },
            }
            if out is not None:
                out(cells)
            if part is not None and os.path.exists(part):
                os.remove(part)
    return cells


# --------------------------------------------------------------------------- #
# the classifier trainer (defenses/dp_sgd.py, Opacus): cross-example layer
# --------------------------------------------------------------------------- #
#: the classifier trainer's bugs (and the correct trainer)
CLASSIFIER_VARIANTS = (
    None,
    *(b for b, bug in dp_bugs.BUGS.items() if bug.trainer == "classifier"),
)


@dataclass(frozen=True)
class ClassifierSetup:
    """Sizes of one classifier run: the suite's ``tiny`` BERT (2 layers, width 128) on
    512 rows of the fixture corpus, trained by the ``dp-sgd`` defense (Opacus)."""

    n_data: int = 512
    max_length: int = 32
    batch_size: int = 32
    epochs: int = 2
    target_epsilon: float = 2.0
    delta: float = 1e-5
    clip: float = 1.0
    learning_rate: float = 1e-3
    input_canaries: int = 200
    white_box_canaries: int = 1000
    gradient_trials: int = 100_000


def classifier_train_once(bug: str | None, seed: int, setup: ClassifierSetup) -> dict[str, Any]:
    """One run of the ``dp-sgd`` defense (the suite's Opacus classifier trainer) with
    ``bug`` planted, with 200 random-token input canaries (each inserted w.p. ½) and the
    1,000 recorded white-box Dirac canaries; returns what the audits need."""
    from privacy_audit import fixtures
    from privacy_audit.audit.epsilon.input_canaries import make_canaries, with_canaries
    from privacy_audit.defenses.base import Examples
    from privacy_audit.defenses.dp_sgd import DPSGD
    from privacy_audit.targets.classifier import TrainingConfig
    from privacy_audit.targets.loading import Target, TargetSpec

    t0 = time.process_time()
    rows = fixtures.load_corpus("private")
    names = sorted({r["label"] for r in rows})
    pick = np.random.default_rng([seed, 0xB0]).choice(len(rows), setup.n_data, replace=False)
    train = Examples(
        ids=[rows[i]["id"] for i in pick],
        texts=[rows[i]["text"] for i in pick],
        labels=np.array([names.index(rows[i]["label"]) for i in pick]),
    )
    canaries = make_canaries(setup.input_canaries, "random-token", len(names), train.texts, seed)
    target = Target(TargetSpec("tiny", max_length=setup.max_length), tuple(names), progress=False)
    training = TrainingConfig(
        epochs=setup.epochs,
        batch_size=setup.batch_size,
        learning_rate=setup.learning_rate,
        max_length=setup.max_length,
        progress=False,
        gradient_canaries=setup.white_box_canaries,
    )
    defense = DPSGD(epsilon=setup.target_epsilon, delta=setup.delta, max_grad_norm=setup.clip)
    with dp_bugs.planted(bug):
        release, report = defense.fit(target, with_canaries(train, canaries), training, seed)
    ex = canaries.examples
    return {
        "release": release,
        "claimed": release.claim.epsilon,
        "sigma": report.info["noise_multiplier"],
        "q": report.info["sample_rate"],
        "steps": release.schedule.steps,
        "input_scores": -release.loss(ex.texts, ex.labels),
        "input_included": canaries.included,
        "cpu_s": time.process_time() - t0,
    }


def audit_classifier(run: dict, setup: ClassifierSetup, seed: int) -> dict[str, dict]:
    """Every ε audit that applies to the classifier release: the declared-mechanism
    gradient canary, the recorded one-run white-box canaries, the input canaries and
    the trade-off test (the realised-schedule audit needs the LM trainer's row counts)."""
    from privacy_audit.audit.epsilon.gradient_canary_audit import GradientCanaryAudit

    d, claim, rel = setup.delta, run["claimed"], run["release"]
    res: dict[str, dict] = {}
    t = time.process_time()
    g = GradientCanaryAudit(trials=setup.gradient_trials, seed=seed).run(rel, d, 0.95, claim)
    res["gradient-canary (many runs, declared)"] = {
        "eps": g["epsilon_lb"],
        "ceiling": g["ceiling"],
        "cpu_s": time.process_time() - t,
    }
    return _one_run_cells(res, setup, rel, d, claim, seed, run, with_source=True)


def _one_run_cells(res, setup, rel, d, claim, seed, run, with_source=False) -> dict[str, Any]:
    """The one-run audits every trainer's row shares (white-box canaries, input canaries,
    the trade-off test on the input canaries' ROC), added to ``res``; each cell's CPU time
    includes the training run's."""
    from privacy_audit.audit.epsilon.gradient_canary_audit import OneRunWhiteBoxAudit
    from privacy_audit.stats.epsilon_bounds import tradeoff_violations

    t = time.process_time()
    wb = OneRunWhiteBoxAudit(canaries=setup.white_box_canaries, seed=seed).run(rel, d, 0.95, claim)
    cell = {"eps": wb[0]["epsilon_lb"], "ceiling": wb[0]["ceiling"]}
    if with_source:
        cell["source"] = wb[0]["source"]
    res["one-run white-box (default)"] = {**cell, "cpu_s": time.process_time() - t + run["cpu_s"]}
    t = time.process_time()
    s, inc = run["input_scores"], run["input_included"]
    res["input canaries (one-run, black-box)"] = {
        "eps": _bound(s, inc, d),
        "cpu_s": time.process_time() - t + run["cpu_s"],
    }
    tr = tradeoff_violations(s, inc, claim, d, confidence=0.95)
    res["trade-off test (input canaries' ROC)"] = {
        "eps": None,
        "violated": tr["violated"],
        "cpu_s": time.process_time() - t + run["cpu_s"],
    }
    return res


def classifier_cells(names, seeds: int, setup: ClassifierSetup, log, out=None) -> dict[str, Any]:
    """The classifier's audits on each of ``names`` over ``seeds`` seeds (interleaved)."""
    per: dict[str, list] = {bug or "correct": [] for bug in names}
    cells: dict[str, Any] = {}
    for s in range(seeds):
        for bug in names:
            key = bug or "correct"
            run = classifier_train_once(bug, 1000 * s, setup)
            row = audit_classifier(run, setup, s)
            for r in row.values():
                r["violated"] = bool(
                    r["violated"] if r["eps"] is None else r["eps"] > run["claimed"]
                )
            per[key].append(row)
            log(
                f"  classifier {key} seed {s}: "
                + ", ".join(f"{k.split(' (')[0][:14]}={v['eps']}" for k, v in row.items())
            )
            audits = {}
            for name in row:
                rs = [x[name] for x in per[key]]
                k = sum(r["violated"] for r in rs)
                eps = [r["eps"] for r in rs if r["eps"] is not None]
                audits[name] = {
                    "detected": k,
                    "seeds": len(rs),
                    "rate": k / len(rs),
                    "ci95": list(clopper_pearson(k, len(rs))),
                    "median_bound": float(np.median(eps)) if eps else None,
                    "max_bound": float(np.max(eps)) if eps else None,
                    "ceiling": rs[0].get("ceiling"),
                    "cpu_s_per_seed": float(np.mean([r["cpu_s"] for r in rs])),
                    "violated_per_seed": [r["violated"] for r in rs],
                    "bound_per_seed": [r["eps"] for r in rs],
                }
            cells[f"{key} (classifier)"] = {
                "claimed_epsilon": run["claimed"],
                "true_epsilon": math.inf if bug else run["claimed"],
                "true_epsilon_how": "infinite (see the bug)" if bug else "the claim (Opacus PRV)",
                "sigma": run["sigma"],
                "q": run["q"],
                "steps": run["steps"],
                "class": dp_bugs.BUGS[bug].bug_class if bug else "null",
                "trainer": "classifier (dp-sgd, Opacus)",
                "audits": audits,
            }
            if out is not None:
                out(cells)
    return cells


DUPLICATE_RECORD = "duplicate-record audit (many runs, crafted dataset, input space)"


def duplicate_record_cells(names, seeds: int, setup, log, out=None) -> dict[str, Any]:
    """The duplicate-record audit
    (:func:`privacy_audit.audit.epsilon.duplicate_record.duplicate_record_audit`) of the
    classifier trainer on each of ``names`` over ``seeds`` seeds, seeds interleaved across
    names; ``out(cells)`` after each seed."""
    from privacy_audit.audit.epsilon.duplicate_record import duplicate_record_audit

    per: dict[str, list] = {bug or "correct": [] for bug in names}
    cells: dict[str, Any] = {}
    for s in range(seeds):
        for bug in names:
            key = bug or "correct"
            with dp_bugs.planted(bug):
                r = duplicate_record_audit(s, setup)
            per[key].append(r)
            log(
                f"  duplicate-record {key} seed {s}: ε ≥ {r['eps']:.2f} (claim {r['claimed']:.2f}, "
                f"shift {r['shift_sigma']:.1f}σ, {r['cpu_s']:.0f} CPU s)"
            )
            rs = per[key]
            cells[f"{key} (classifier)"] = {
                "claimed_epsilon": r["claimed"],
                "true_epsilon": math.inf if bug else r["claimed"],
                "true_epsilon_how": "infinite (see the bug)" if bug else "the claim (Opacus PRV)",
                "sigma": r["sigma"],
                "q": r["q"],
                "steps": r["steps"],
                "class": dp_bugs.BUGS[bug].bug_class if bug else "null",
                "trainer": "classifier (dp-sgd, Opacus)",
                "audits": {
                    f"{DUPLICATE_RECORD}, {setup.runs_per_side} runs per side": {
                        **_seed_summary(rs),
                        "runs_per_side": setup.runs_per_side,
                        "pilot_runs_per_side": setup.pilot_runs,
                        "duplicates": setup.duplicates,
                        "median_shift_c": float(np.median([x["shift_c"] for x in rs])),
                        "median_shift_sigma": float(np.median([x["shift_sigma"] for x in rs])),
                        "errors_per_seed": [{"fp": x["fp"], "fn": x["fn"]} for x in rs],
                        "scores_per_seed": [
                            {"in": x["scores_in"], "out": x["scores_out"], "t": x["threshold"]}
                            for x in rs
                        ],
                    }
                },
            }
            if out is not None:
                out(cells)
    return cells


def _seed_summary(rs: list[dict]) -> dict[str, Any]:
    """Detections over the seeds of one crafted-dataset cell, with the Clopper-Pearson
    interval, the bounds reached and the CPU cost (shared by every crafted design)."""
    k = sum(x["violated"] for x in rs)
    return {
        "detected": k,
        "seeds": len(rs),
        "rate": k / len(rs),
        "ci95": list(clopper_pearson(k, len(rs))),
        "median_bound": float(np.median([x["eps"] for x in rs])),
        "max_bound": float(np.max([x["eps"] for x in rs])),
        "ceiling": rs[0]["ceiling"],
        "cpu_s_per_seed": float(np.mean([x["cpu_s"] for x in rs])),
        "violated_per_seed": [x["violated"] for x in rs],
        "bound_per_seed": [x["eps"] for x in rs],
    }


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """Two-sided exact interval for a binomial rate (detection or false-violation rate)."""
    from scipy.stats import beta

    a = 1 - confidence
    lo = 0.0 if k == 0 else float(beta.ppf(a / 2, k, n - k + 1))
    hi = 1.0 if k == n else float(beta.ppf(1 - a / 2, k + 1, n - k))
    return lo, hi


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m experiments.dp_bugs")
    p.add_argument("--seeds", type=int, default=20)
    p.add_argument("--pool", type=int, default=5, help="runs pooled for the larger budget")
    p.add_argument("--bugs", default="all", help="comma-separated; 'none' is the correct trainer")
    p.add_argument("--magnitude", type=float, default=Setup.magnitude, help="record canary ×C")
    p.add_argument("--record-only", action="store_true", help="the record-canary design alone")
    p.add_argument(
        "--realised-only", action="store_true", help="the declared-mechanism audits alone"
    )
    p.add_argument(
        "--anchor-pair",
        type=int,
        default=0,
        metavar="RUNS",
        help="the anchor-pair many-runs audit alone, RUNS training runs per side per seed",
    )
    p.add_argument(
        "--lone-canary",
        type=int,
        default=0,
        metavar="RUNS",
        help="the lone-canary many-runs audit alone (crafted dataset: the canary is the only "
        "row; accumulation-noise-once), RUNS training runs per side per seed",
    )
    p.add_argument("--first-seed", type=int, default=0, help="anchor-pair/lone-canary: seeds from")
    p.add_argument("--real-rows", type=int, default=0, help="anchor-pair: rows of real data")
    p.add_argument(
        "--classifier",
        action="store_true",
        help="the classifier trainer (dp-sgd, Opacus): the correct one and its planted bugs",
    )
    p.add_argument(
        "--duplicate-record",
        type=int,
        default=0,
        metavar="RUNS",
        help="the duplicate-record many-runs audit of the classifier trainer alone, RUNS "
        "training runs per side per seed",
    )
    p.add_argument(
        "--duplicates", type=int, default=16, help="duplicate-record: copies of the record"
    )
    p.add_argument("--out", default="dp-bugs.json")
    args = p.parse_args(argv)
    if args.seeds < 1 or args.pool < 1:
        print("error: --seeds and --pool must be >= 1", file=sys.stderr)
        return 2
    classifier = args.classifier or args.duplicate_record > 0
    names = (
        list(CLASSIFIER_VARIANTS if classifier else VARIANTS)
        if args.bugs == "all"
        else [None if b == "none" else b for b in args.bugs.split(",") if b]
    )
    allowed = CLASSIFIER_VARIANTS if classifier else VARIANTS
    bad = [b for b in names if b not in allowed]
    if bad:
        trainer = "classifier" if classifier else "causal-LM"
        print(
            f"error: {bad[0]!r} is not a {trainer} bug; allowed: none, "
            + ", ".join(b for b in allowed if b),
            file=sys.stderr,
        )
        return 2
    torch.set_num_threads(1)
    if not args.magnitude >= 1:
        print("error: --magnitude must be >= 1", file=sys.stderr)
        return 2
    setup = Setup(magnitude=args.magnitude)

    def dump(cells, size):
        atomic_write_text(
            args.out,
            json.dumps(
                {
                    "command": "python -m experiments.dp_bugs "
                    + " ".join(argv if argv is not None else sys.argv[1:]),
                    "setup": size.__dict__,
                    "seeds": args.seeds,
                    "confidence": 0.95,
                    "cells": cells,
                },
                indent=1,
                default=float,
            ),
        )

    if args.duplicate_record:
        from privacy_audit.audit.epsilon.duplicate_record import DuplicateRecordSetup

        size = DuplicateRecordSetup(
            duplicates=args.duplicates,
            runs_per_side=args.duplicate_record,
            batch_size=max(32, args.duplicates + 1),
        )
        try:
            size.validate()
        except ValueError as e:
            print(f"error: --duplicate-record/--duplicates: {e}", file=sys.stderr)
            return 2
        duplicate_record_cells(
            names,
            args.seeds,
            size,
            lambda m: print(m, file=sys.stderr, flush=True),
            lambda c: dump(c, size),
        )
        return 0
    if args.classifier:
        size = ClassifierSetup()
        classifier_cells(
            names,
            args.seeds,
            size,
            lambda m: print(m, file=sys.stderr, flush=True),
            lambda c: dump(c, size),
        )
        return 0
    if args.anchor_pair or args.lone_canary:
        runs = args.anchor_pair or args.lone_canary
        if (
            (args.anchor_pair and args.lone_canary)
            or runs < 2
            or args.first_seed < 0
            or not 0 <= args.real_rows <= setup.n_data
        ):
            print(
                "error: one of --anchor-pair/--lone-canary, >= 2, --first-seed >= 0 and "
                f"--real-rows in [0, {setup.n_data}]",
                file=sys.stderr,
            )
            return 2

        anchor_pair_cells(
            names,
            args.seeds,
            runs,
            setup,
            lambda m: print(m, file=sys.stderr, flush=True),
            lambda c: dump(c, setup),
            args.real_rows,
            design="anchor-pair" if args.anchor_pair else "lone-canary",
            checkpoint=args.out + ".partial",
            first_seed=args.first_seed,
        )
        return 0

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    cells = {}
    for bug in names:
        log(f"{bug or 'correct'}:")
        t0 = time.time()
        cells[bug or "correct"] = {
            **cell_seeds(
                bug, args.seeds, args.pool, setup, log, args.record_only, args.realised_only
            ),
            "wall_s": time.time() - t0,
            **(
                {"class": dp_bugs.BUGS[bug].bug_class, "what": dp_bugs.BUGS[bug].what}
                if bug
                else {}
            ),
        }
        atomic_write_text(
            args.out,
            json.dumps(
                {
                    "command": "python -m experiments.dp_bugs "
                    + " ".join(argv if argv is not None else sys.argv[1:]),
                    "setup": setup.__dict__,
                    "seeds": args.seeds,
                    "pool": args.pool,
                    "confidence": 0.95,
                    "cells": cells,
                },
                indent=1,
                default=float,
            ),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())


def ideal_one_run(
    sigma_true: float,
    sigma_claimed: float,
    q: float,
    steps: int,
    m: int,
    delta: float,
    seed: int = 0,
    shuffled: bool = False,
) -> float:
    """The one-run bound of the record-canary design on an IDEAL run of the true mechanism:
    m Dirac canaries (present w.p. ½), no real data at their coordinates (no interference),
    noise σ_true, Poisson(q) sampling or (``shuffled``) one step per epoch; same adaptive
    likelihood-ratio score. What this audit could reach at this size on this bug (its
    ceiling in practice), computed without training."""
    rng = np.random.default_rng(seed)
    inc = rng.integers(0, 2, m)
    if shuffled:
        k = max(1, round(1 / q))
        sampled = np.zeros((m, steps))
        for e in range(steps // k):
            sampled[np.arange(m), e * k + rng.integers(0, k, m)] = 1.0
    else:
        sampled = (rng.random((m, steps)) < q).astype(float)
    o = sampled * inc[:, None] + sigma_true * rng.standard_normal((m, steps))
    med = np.median(o, axis=1, keepdims=True)
    mad = 1.4826 * np.median(np.abs(o - med), axis=1, keepdims=True)
    a = (o - med - 0.5) / np.maximum(mad, 1e-3) ** 2
    del sigma_claimed  # the adaptive score does not use it
    s = np.logaddexp(np.log1p(-q), a + np.log(q)).sum(axis=1)
    return _bound(s, inc, delta)


def ideal_anchor_pair(
    sigma: float,
    q: float,
    steps: int,
    runs_per_side: int,
    delta: float,
    seed: int = 0,
    anchors: int = 200,
    bug: bool = True,
) -> dict[str, Any]:
    """The anchor-pair audit on an IDEAL run of the mechanism clipping after aggregation
    realises on the crafted dataset (no training): per step, the canary is drawn w.p. q
    and releases +1; otherwise the anchor (at least one of ``anchors`` copies drawn,
    w.p. 1 − (1 − q)^K) releases −1, else 0; plus N(0, σ²). ``bug=False``: the correct
    trainer's mechanism on the same dataset, 1[canary drawn] − K_t + N(0, σ²) with
    K_t ~ Binomial(K, q). Same score, same bound: what the audit reaches at this many
    runs when the trainer is exactly the derived mechanism (``tests/defenses/test_dp_bugs.py``
    checks the trainer releases these values at σ = 0)."""
    from privacy_audit.stats.epsilon_bounds import epsilon_lower_bound

    rng = np.random.default_rng([seed, 0xA9])
    n = int(runs_per_side)
    members = np.repeat([1, 0], n)
    canary = (rng.random((2 * n, steps)) < q) & (members[:, None] == 1)
    if bug:
        anchor = rng.random((2 * n, steps)) < 1 - (1 - q) ** anchors
        o = np.where(canary, 1.0, np.where(anchor, -1.0, 0.0))
    else:
        o = canary - rng.binomial(anchors, q, (2 * n, steps))
    o = o + sigma * rng.standard_normal((2 * n, steps))
    scores = np.logaddexp(np.log1p(-q), 2 * o / sigma**2 + np.log(q)).sum(axis=1)
    lb = epsilon_lower_bound(scores, members, delta, confidence=0.95, seed=seed)
    return {"eps": float(lb), "scores_in": scores[:n], "scores_out": scores[n:]}


def ideal_lone_canary(
    sigma: float,
    q: float,
    steps: int,
    runs_per_side: int,
    delta: float,
    seed: int = 0,
    bug: bool = True,
) -> dict[str, Any]:
    """The lone-canary audit on an IDEAL run of the mechanism ``accumulation-noise-once``
    realises on the crafted dataset (the canary alone; no training): per step the canary
    is drawn w.p. q and releases +1 (its clipped gradient, units of C), plus N(0, s²) with
    s = σ/√k; ``bug=False``: the correct trainer's s = σ. Score: the bug's likelihood
    ratio at σ/√k (:meth:`~privacy_audit.defenses.dp_sgd_with_canaries.LoneCanary.score`);
    Clopper–Pearson bound at the split threshold."""
    from privacy_audit.stats.epsilon_bounds import epsilon_lower_bound

    rng = np.random.default_rng([seed, 0x10E])
    n = int(runs_per_side)
    low = sigma / math.sqrt(dp_bugs.ACCUMULATION)
    members = np.repeat([1, 0], n)
    canary = (rng.random((2 * n, steps)) < q) & (members[:, None] == 1)
    o = canary + (low if bug else sigma) * rng.standard_normal((2 * n, steps))
    scores = np.logaddexp(np.log1p(-q), (o - 0.5) / low**2 + np.log(q)).sum(axis=1)
    lb = epsilon_lower_bound(scores, members, delta, confidence=0.95, seed=seed)
    return {"eps": float(lb), "scores_in": scores[:n], "scores_out": scores[n:]}


def shuffle_lower_bound(
    sigma: float, steps_per_epoch: int, epochs: int, delta: float, bins: int = 1500
) -> float:
    """Chua et al.'s shuffle lower bound: the product's
    :func:`privacy_audit.audit.epsilon.dp_check.accounting.shuffle_lower_bound` (its per-epoch max
    statistic binned exactly, the epochs composed with an optimistic PLD), which
    ``privacy-audit dp-check`` uses on the scheme a user's loader runs."""
    from privacy_audit.audit.epsilon.dp_check.accounting import shuffle_lower_bound as bound

    return bound(sigma, steps_per_epoch, epochs, delta, bins=bins)


def ideal_shuffle_pair(
    sigma: float, steps_per_epoch: int, epochs: int, runs_per_side: int, delta: float, seed=0
) -> float:
    """The many-runs audit of Chua et al.'s pair (see :func:`shuffle_lower_bound`) on an
    IDEAL run of the shuffled mechanism: each run releases, per epoch, T values with the
    differing record's +2 (+1 for its zero-out neighbour) at one uniform step, plus
    N(0, σ²); score = the pair's exact log-likelihood ratio; Clopper–Pearson bound at the
    split threshold. What a many-runs audit of the shuffle bug reaches at this size."""
    from scipy.special import logsumexp

    from privacy_audit.stats.epsilon_bounds import epsilon_lower_bound

    rng = np.random.default_rng([seed, 0x5F])
    n, t = int(runs_per_side), int(steps_per_epoch)
    scores = np.zeros(2 * n)
    for _ in range(int(epochs)):
        x = sigma * rng.standard_normal((2 * n, t))
        x[np.arange(2 * n), rng.integers(0, t, 2 * n)] += np.repeat([2.0, 1.0], n)
        scores += logsumexp((2 * x - 2) / sigma**2, axis=1) - logsumexp(
            (x - 0.5) / sigma**2, axis=1
        )
    return float(epsilon_lower_bound(scores, np.repeat([1, 0], n), delta, seed=seed))


def markdown_table(*results: dict) -> str:
    """The benchmark table (docs/dp-bugs.md) from one or more output files' contents:
    one row per bug and audit, detection with its 95% Clopper–Pearson interval."""

    def fmt(x):
        return "—" if x is None else ("∞" if x == math.inf else f"{x:.3g}")

    def upper(c):  # an accountant's upper bound (RDP), or a lower bound, not the exact ε
        how = c.get("true_epsilon_how") or ""
        return "≥ " if how.startswith("lower") else "≤ " if "upper" in how else ""

    lines = [
        "| bug | class | claim ε | true ε | audit | detected / seeds | 95% CI | median bound "
        "| CPU s per seed |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for res in results:
        for name, c in res["cells"].items():
            for audit, a in c["audits"].items():
                lo, hi = a["ci95"]
                lines.append(
                    f"| {name} | {c.get('class', 'null')} | {fmt(c['claimed_epsilon'])} "
                    f"| {upper(c)}{fmt(c['true_epsilon'])} | {audit} "
                    f"| {a['detected']} / {a['seeds']} "
                    f"| [{lo:.2f}, {hi:.2f}] | {fmt(a['median_bound'])} "
                    f"| {a['cpu_s_per_seed']:.1f} |"
                )
    return "\n".join(lines)


def run(settings, cells) -> dict[str, Any]:
    """``privacy-audit experiment dp-bugs``: the default budget (one run per seed) on every
    bug and the correct trainer, ``settings.seeds`` seeds, one checkpointed cell per bug,
    for the causal-LM engine and the classifier trainer (``--quick``: the correct LM
    trainer and one bug). The anchor-pair many-runs audit (thousands of runs per seed)
    is ``python -m experiments.dp_bugs --anchor-pair RUNS`` (and the
    lone-canary one, for ``accumulation-noise-once``, ``--lone-canary RUNS``)."""
    torch.set_num_threads(settings.threads or 1)
    setup = Setup()
    names = (None, "noise-divided-by-batch") if settings.quick else VARIANTS

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    out = {}
    for bug in names:
        cell = cells.get(
            bug or "correct",
            lambda bug=bug: json.loads(
                json.dumps(cell_seeds(bug, settings.seeds, 1, setup, log), default=float)
            ),
        )
        out[bug or "correct"] = cell
    if not settings.quick:  # the classifier trainer (dp-sgd, Opacus) and its planted bug
        size = ClassifierSetup()
        for bug in CLASSIFIER_VARIANTS:
            key = f"{bug or 'correct'} (classifier)"
            out[key] = cells.get(
                key,
                lambda bug=bug, key=key: json.loads(
                    json.dumps(
                        classifier_cells([bug], settings.seeds, size, log)[key], default=float
                    )
                ),
            )
    return {"setup": setup.__dict__, "cells": out, "table": markdown_table({"cells": out})}
