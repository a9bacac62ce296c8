"""Power of the LM canary designs on the bundled ``lm`` audit (docs/lm-canaries.md).

One training run per defense of ``audit/configs/lm.toml``: the members plus the included
canaries of every design (each design its own independent inclusion bits), trained by the
suite's own trainer for that defense. Every design is then scored on the same run (mean
log-probability of its secret tokens) and gets TPR at 1 % FPR with a bootstrap CI, AUC
and the one-run ε lower bound with its ceiling (95 %, δ of the config).

Reproduce (writes JSON and prints a table)::

    python -m audit.benchmarks.lm_canaries --out docs/lm-canaries.json

This is not registered in ``privacy-audit bench`` (which measures time, not power).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from audit.epsilon.canaries import LM_CANARY_DESIGNS, CanarySet
from defenses.base import Examples


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


def run_defense(cfg, defense_index: int, designs, n_per_design, repeat, seed, log) -> dict:
    from attacks.canary_bounds import one_run_group_best, tpr_at_1pct_fpr
    from attacks.metrics import auc
    from audit.epsilon.canaries import with_canaries
    from audit.epsilon.lm_canaries import CanaryTarget, make_lm_canaries, release_secret_scores
    from audit.scale.tasks import _data, _defense, _target, _training

    data = _data(cfg)
    dcfg, defense = _defense(cfg, {"defense": defense_index})
    target = _target(cfg, data)
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
    target = CanaryTarget(target, union.new_tokens)
    t0 = time.perf_counter()
    release, report = defense.fit(target, train, _training(cfg, dcfg), seed)
    train_s = time.perf_counter() - t0
    log(f"  trained {dcfg.label} on {len(train)} sequences in {train_s:.0f}s")
    delta = float(dcfg.params.get("delta", cfg.metrics["delta"]))
    rows = {}
    for s in sets:
        scores = release_secret_scores(release, s)
        b = one_run_group_best(scores, s.included, delta, group=repeat)
        t = tpr_at_1pct_fpr(scores, s.included, n_boot=1000, seed=seed)
        rows[s.kind] = {
            "tpr_at_1pct_fpr": t["tpr"],
            "tpr_ci95": t["ci"],
            "auc": auc(scores, s.included),
            "epsilon_lb": b["epsilon"],
            "ceiling": b["ceiling"],
            "guesses": b["guesses"],
            "correct": b["correct"],
            "n_in": int(s.included.sum()),
            "n_out": int(len(s.included) - s.included.sum()),
        }
        log(
            f"    {s.kind:<13} TPR@1%FPR {t['tpr']:.3f} [{t['ci'][0]:.3f}, {t['ci'][1]:.3f}]  "
            f"AUC {rows[s.kind]['auc']:.3f}  eps_lb {b['epsilon']:.3f} (ceiling {b['ceiling']:.3f})"
        )
    white_box = []
    if getattr(release, "schedule", None) is not None and getattr(
        release, "gradient_mechanism", None
    ):
        from attacks.gradient_canary import OneRunWhiteBoxAudit

        for a in OneRunWhiteBoxAudit(canaries=1000, seed=seed).run(release, delta):
            keep = ("name", "epsilon_lb", "ceiling", "n_in", "n_out", "mu_hat", "mu_lo", "regime")
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
        "designs": rows,
        "white_box_one_run": white_box,
        "sampling": (
            {"sample_rate": release.schedule.sample_rate, "steps": release.schedule.steps}
            if getattr(release, "schedule", None) is not None
            else None
        ),
    }


def main(argv: list[str] | None = None) -> int:
    from audit.config import load_config

    p = argparse.ArgumentParser(prog="python -m audit.benchmarks.lm_canaries")
    p.add_argument("--config", default="lm", help="config (default: the bundled lm audit)")
    p.add_argument("--defenses", default="none,dp-sgd,phantom-dp-sgd")
    p.add_argument("--designs", default=",".join(LM_CANARY_DESIGNS))
    p.add_argument("--n", type=int, default=100, help="canaries per design (default 100)")
    p.add_argument("--repeat", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--epochs", type=int, help="override [train] epochs (a weaker-memorisation regime)"
    )
    p.add_argument("--out", default="lm-canaries.json")
    args = p.parse_args(argv)
    cfg = load_config(args.config)
    if args.epochs is not None:
        cfg.train["epochs"] = args.epochs
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
        runs.append(run_defense(cfg, idx[0], designs, args.n, args.repeat, args.seed, log))
        Path(args.out).write_text(
            json.dumps(
                {
                    "command": "python -m audit.benchmarks.lm_canaries "
                    + " ".join(argv or sys.argv[1:]),
                    "config": args.config,
                    "n_per_design": args.n,
                    "repeat": args.repeat,
                    "epochs": cfg.train["epochs"],
                    "seed": args.seed,
                    "confidence": 0.95,
                    "runs": runs,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
