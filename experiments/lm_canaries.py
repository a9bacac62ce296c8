"""Power of the LM canary designs on the bundled ``lm`` audit (docs/lm-canaries.md).

One training run per defense of ``audit/configs/lm.toml``: the members plus the included
canaries of every design (each design its own independent inclusion bits), trained by the
suite's own trainer for that defense. Every design is then scored on the same run with two
black-box scores, each giving TPR at 1 % FPR with a bootstrap CI, AUC and the one-run ε
lower bound with its ceiling (95 %, δ of the config):

- ``raw``: the mean log-probability of its secret tokens under the released model;
- ``calibrated``: that minus the same canary's score under the model before training (the
  target at the training seed, new-token rows included), which the auditor knows and
  which does not depend on the inclusion bits.

Reproduce (writes JSON and prints a table)::

    python -m experiments.lm_canaries --out docs/records/lm-canaries.json

This is not registered in ``privacy-audit bench`` (which measures time, not power).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import numpy as np

from privacy_audit.audit.epsilon.input_canaries import LM_CANARY_DESIGNS, CanarySet
from privacy_audit.defenses.base import Examples
from privacy_audit.ground.io import atomic_write_text


def _union(sets: list[CanarySet]) -> CanarySet:
    """All designs' canaries in one set (for training); scoring uses each set alone."""
    ids, texts = [], []
    for s in sets:
        ids += [f"{s.kind}:{i}" for i in s.examples.ids]
        texts += s.examples.texts
    return CanarySet(
        Examples(ids, texts, np.zeros(len(texts), dtype=np.int64)),
        np.concatenate([s.included for s in sets]),
        "+".join(s.kind for s in sets),
        prefixes=[p for s in sets for p in (s.prefixes or [])],
        repeat=sets[0].repeat,
        new_tokens=tuple(t for s in sets for t in s.new_tokens),
    )


def _secret_token_stats(release, canaries) -> dict:
    """Per-canary, per-secret-token log p, E log p and Var log p (Min-K%++'s terms)."""
    from privacy_audit.audit.epsilon.lm_canaries import TokenView, canary_spans

    stats = release.token_stats(list(canaries.examples.texts))
    spans = canary_spans(TokenView(release.tokenizer), canaries)
    return {
        k: np.array([getattr(s, k)[a:b] for s, (a, b) in zip(stats, spans, strict=True)])
        for k in ("log_probs", "mean_log_prob", "var_log_prob")
    }


def run_defense(
    cfg,
    defense_index: int,
    designs,
    n_per_design,
    repeat,
    seed,
    log,
    dump=None,
    new_token_init="random",
) -> dict:
    from privacy_audit.audit.epsilon.input_canaries import with_canaries
    from privacy_audit.audit.epsilon.lm_canaries import (
        CanaryTarget,
        calibrated_scores,
        contrast_secret_scores,
        make_lm_canaries,
        reference_secret_scores,
        release_secret_scores,
    )
    from privacy_audit.audit.scale.tasks import task_data, task_defense, task_target, task_training
    from privacy_audit.stats.canary_bounds import one_run_group_best, tpr_at_1pct_fpr
    from privacy_audit.stats.metrics import auc

    data = task_data(cfg)
    dcfg, defense = task_defense(cfg, {"defense": defense_index})
    target = task_target(cfg, data)
    base_model, tokenizer = target.build(seed)
    texts = list(data.members.texts)
    sets = []
    for d in designs:
        t0 = time.perf_counter()
        sets.append(
            make_lm_canaries(
                n_per_design,
                d,
                tokenizer,
                texts=texts,
                base_model=base_model,
                seed=seed,
                repeat=repeat,
            )
        )
        log(f"  {d}: {n_per_design} canaries in {time.perf_counter() - t0:.1f}s")
    union = _union(sets)
    train = with_canaries(data.members, union)
    target = CanaryTarget(target, union.new_tokens, new_token_init)
    t0 = time.perf_counter()
    # the white-box one-run canaries are recorded in this very run (defenses/dp_sgd_with_canaries.py)
    training = dataclasses.replace(task_training(cfg, dcfg), gradient_canaries=1000)
    release, report = defense.fit(target, train, training, seed)
    train_s = time.perf_counter() - t0
    log(f"  trained {dcfg.label} on {len(train)} sequences in {train_s:.0f}s")
    delta = float(dcfg.params.get("delta", cfg.metrics["delta"]))
    # the model before training: the same build (seed, new rows) the trainer started from
    before_model, _ = target.build(seed)
    rows: dict[str, dict] = {}
    calibrated: dict[str, dict] = {}
    contrast: dict[str, dict] = {}
    for s in sets:
        after = release_secret_scores(release, s)
        before = reference_secret_scores(release, before_model, s)
        if dump is not None:  # per-token terms, for studying other scores offline
            import copy

            ref = copy.copy(release)
            ref.__dict__.pop("_token_stats_cache", None)
            ref.model = before_model
            for tag, rel in (("after", release), ("before", ref)):
                for k, v in _secret_token_stats(rel, s).items():
                    dump[f"{dcfg.name}/{s.kind}/{tag}/{k}"] = v
            dump[f"{dcfg.name}/{s.kind}/included"] = s.included
        variants = [
            (rows, after, "raw"),
            (calibrated, calibrated_scores(after, before), "calibrated"),
        ]
        if s.new_tokens:
            t0 = time.perf_counter()
            variants.append((contrast, contrast_secret_scores(release, s), "contrast"))
            log(f"    contrast score in {time.perf_counter() - t0:.0f}s")
        for table, scores, tag in variants:
            b = one_run_group_best(scores, s.included, delta, group=repeat)
            t = tpr_at_1pct_fpr(scores, s.included, n_boot=1000, seed=seed)
            table[s.kind] = {
                "tpr_at_1pct_fpr": t["tpr"],
                "tpr_ci95": t["ci"],
                "auc": auc(scores, s.included),
                "epsilon_lb": b["epsilon"],
                "ceiling": b["ceiling"],
                "estimator": b.get("estimator"),
                "guesses": b["guesses"],
                "correct": b["correct"],
                "n_in": int(s.included.sum()),
                "n_out": int(len(s.included) - s.included.sum()),
            }
            log(
                f"    {s.kind:<13} {tag:<10} TPR@1%FPR {t['tpr']:.3f} "
                f"[{t['ci'][0]:.3f}, {t['ci'][1]:.3f}]  AUC {table[s.kind]['auc']:.3f}  "
                f"eps_lb {b['epsilon']:.3f} (ceiling {b['ceiling']:.3f})"
            )
    white_box = []
    if getattr(release, "schedule", None) is not None and getattr(
        release, "gradient_mechanism", None
    ):
        from privacy_audit.audit.epsilon.gradient_canary_audit import OneRunWhiteBoxAudit

        for a in OneRunWhiteBoxAudit(canaries=1000, seed=seed).run(release, delta):
            keep = (
                "name",
                "source",
                "epsilon_lb",
                "ceiling",
                "n_in",
                "n_out",
                "mu_hat",
                "mu_lo",
                "regime",
            )
            white_box.append({k: a[k] for k in keep if k in a})
            log(f"    {a['name']:<34} eps_lb {a['epsilon_lb']:.3f} (ceiling {a['ceiling']})")
    claim = release.claim
    return {
        "defense": dcfg.name,
        "label": dcfg.label,
        "claimed_epsilon": claim.epsilon,
        "claimed_delta": claim.delta,
        "train_sequences": len(train),
        "train_seconds": train_s,
        "noise_multiplier": report.info.get("noise_multiplier"),
        # utility of this training choice: perplexity on the held-out test texts
        "test_perplexity": (
            float(release.perplexity(list(data.test.texts)))
            if hasattr(release, "perplexity")
            else None
        ),
        "designs": rows,
        "designs_calibrated": calibrated,
        "designs_contrast": contrast,
        "white_box_one_run": white_box,
        "sampling": (
            {"sample_rate": release.schedule.sample_rate, "steps": release.schedule.steps}
            if getattr(release, "schedule", None) is not None
            else None
        ),
    }


def envelope(
    n: int, batch_size: int, epochs: int, epsilon: float, delta: float, ms, seeds: int = 5
) -> dict:
    """What the one-run bound could reach with an *ideal* black-box score on this schedule.

    Idealisation (stated, not proven for AdamW): the released model depends on a canary
    only through the sum over the T steps of its clipped gradient (norm C) plus the noise
    N(0, σ²C²) per step, all of it in directions no other example touches. The best score
    is then that sum's projection, Gaussian with separation μ_sum = q·T / (σ·√T) = q√T/σ
    between present and absent canaries (the same statistic as the white-box one-run
    audit). The ε lower bound of ``m`` such scores (one_run_group_best: Steinke et al. and
    the f-DP estimator) is simulated over ``seeds`` seeds. A real canary shares its clip
    norm with the whole model and is read through log-probabilities, so it reaches less."""
    import math

    from privacy_audit.defenses.dp_engine import calibrate_noise, poisson_schedule
    from privacy_audit.stats.canary_bounds import one_run_group_best

    q, steps = poisson_schedule(n, batch_size, epochs)
    sigma = calibrate_noise(epsilon, delta, q, steps)
    mu = q * math.sqrt(steps) / sigma
    sims = {}
    for m in ms:
        eps = []
        for s in range(seeds):
            rng = np.random.default_rng([s, m])
            b = rng.integers(0, 2, m)
            eps.append(one_run_group_best(mu * b + rng.standard_normal(m), b, delta)["epsilon"])
        sims[str(m)] = {"mean": float(np.mean(eps)), "min": min(eps), "max": max(eps)}
    return {
        "n": n,
        "batch_size": batch_size,
        "epochs": epochs,
        "sample_rate": q,
        "steps": steps,
        "noise_multiplier": sigma,
        "mu_sum": mu,
        "epsilon_lb_ideal": sims,
        "seeds": seeds,
    }


def repetition_study(delta: float, m: int = 1000, seeds: int = 3) -> dict:
    """Does repeating each canary r times raise the per-example bound? Gaussian scores
    r·μ·b + N(0, 1) (repetition scales the signal by r under the linear idealisation of
    :func:`envelope`), bound by one_run_group_best with group = r (group privacy)."""
    from privacy_audit.stats.canary_bounds import one_run_group_best

    out = {}
    for mu in (0.3, 0.5, 0.8):
        for r in (1, 2, 4):
            eps = []
            for s in range(seeds):
                rng = np.random.default_rng(s)
                b = rng.integers(0, 2, m)
                scores = r * mu * b + rng.standard_normal(m)
                eps.append(one_run_group_best(scores, b, delta, group=r)["epsilon"])
            out[f"mu={mu},r={r}"] = {"mean": float(np.mean(eps)), "all": eps}
    return {"m": m, "seeds": seeds, "delta": delta, "bounds": out}


def main(argv: list[str] | None = None) -> int:
    from privacy_audit.audit.config import load_config

    p = argparse.ArgumentParser(prog="python -m experiments.lm_canaries")
    p.add_argument("--config", default="lm", help="config (default: the bundled lm audit)")
    p.add_argument("--defenses", default="none,dp-sgd,phantom-dp-sgd")
    p.add_argument("--designs", default=",".join(LM_CANARY_DESIGNS))
    p.add_argument("--n", type=int, default=100, help="canaries per design (default 100)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--epochs", type=int, help="override [train] epochs (a weaker-memorisation regime)"
    )
    p.add_argument(
        "--batch-size", type=int, help="override [train] batch_size (the Poisson rate q = b/n)"
    )
    p.add_argument("--learning-rate", type=float, help="override [train] learning_rate")
    p.add_argument(
        "--new-token-init",
        default="random",
        choices=("random", "mean"),
        help="new-token rows at init: a seeded N(0, 0.02²) draw (default, the suite's) or "
        "the mean of the existing rows (Hugging Face's resize_token_embeddings default)",
    )
    p.add_argument("--out", default="lm-canaries.json")
    p.add_argument(
        "--dump-scores",
        metavar="NPZ",
        help="also write per-token secret log-probs before/after and the inclusion bits "
        "(a study file: it holds the secret bits, keep it out of reports)",
    )
    p.add_argument(
        "--envelope",
        metavar="N",
        type=int,
        help="no training: the ideal black-box score's bound for N training sequences over "
        "epochs {2, 5, 10, 20, 40} x batch {config, 2x config} (see envelope())",
    )
    args = p.parse_args(argv)
    cfg = load_config(args.config)
    if args.envelope:
        eps8 = next(d for d in cfg.defenses if d.name == "dp-sgd").params
        b0 = int(cfg.train["batch_size"])
        rows = [
            envelope(args.envelope, b, e, eps8["epsilon"], eps8["delta"], (200, 1000, 2000))
            for b in (b0, 2 * b0)
            for e in (2, 5, 10, 20, 40)
        ]
        for r in rows:
            print(
                f"batch {r['batch_size']:>3} epochs {r['epochs']:>2}: q {r['sample_rate']:.4f} "
                f"T {r['steps']:>4} sigma {r['noise_multiplier']:.3f} mu_sum {r['mu_sum']:.3f} "
                + " ".join(
                    f"m={m}: {v['mean']:.2f} [{v['min']:.2f}, {v['max']:.2f}]"
                    for m, v in r["epsilon_lb_ideal"].items()
                ),
                file=sys.stderr,
            )
        rep = repetition_study(eps8["delta"])
        for k, v in rep["bounds"].items():
            print(f"repetition {k}: eps_lb mean {v['mean']:.3f}", file=sys.stderr)
        atomic_write_text(args.out, json.dumps({"envelope": rows, "repetition": rep}, indent=1))
        return 0
    if args.epochs is not None:
        cfg.train["epochs"] = args.epochs
    if args.batch_size is not None:
        cfg.train["batch_size"] = args.batch_size
    if args.learning_rate is not None:
        cfg.train["learning_rate"] = args.learning_rate
    designs = [d for d in args.designs.split(",") if d]
    wanted = [d for d in args.defenses.split(",") if d]

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    runs = []
    for name in wanted:
        idx = [i for i, d in enumerate(cfg.defenses) if d.name == name]
        if not idx:
            raise SystemExit(f"no defense {name!r} in the config")
        log(f"{name}:")
        dump: dict | None = {} if args.dump_scores else None
        runs.append(
            run_defense(
                cfg, idx[0], designs, args.n, args.repeat, args.seed, log, dump, args.new_token_init
            )
        )
        if dump is not None:
            np.savez_compressed(f"{args.dump_scores}.{name}.npz", **dump)
        atomic_write_text(
            args.out,
            json.dumps(
                {
                    "command": "python -m experiments.lm_canaries "
                    + " ".join(argv or sys.argv[1:]),
                    "config": args.config,
                    "n_per_design": args.n,
                    "repeat": args.repeat,
                    "new_token_init": args.new_token_init,
                    "epochs": cfg.train["epochs"],
                    "batch_size": cfg.train["batch_size"],
                    "learning_rate": cfg.train["learning_rate"],
                    "seed": args.seed,
                    "confidence": 0.95,
                    "runs": runs,
                },
                indent=1,
            ),
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
