"""Thresholded vs Gaussian one-run white-box audits on REAL DP-SGD runs (docs/lm-canaries.md).

For each DP defense of the bundled ``lm`` config: one training run of the suite's own
trainer with ``--canaries`` Dirac gradient canaries recorded inside it
(:mod:`privacy_audit.defenses.dp_sgd_with_canaries`); both one-run bounds are computed from the same
recorded signals, beside the simulated signals of the same mechanism and schedule (what
the audit used before canaries were recorded) and the accountant's ε.

Reproduce::

    python -m experiments.white_box_one_run --out docs/records/white-box-one-run.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

from privacy_audit.ground.io import atomic_write_text


def _row(a: dict) -> dict:
    keep = (
        "name",
        "source",
        "status",
        "epsilon_lb",
        "ceiling",
        "n_in",
        "n_out",
        "mu_hat",
        "mu_lo",
        "regime",
        "steps_recorded",
    )
    return {k: a[k] for k in keep if k in a}


def run_defense(cfg, index: int, canaries: int, seed: int, log) -> dict:
    from privacy_audit.audit.epsilon.gradient_canary_audit import OneRunWhiteBoxAudit
    from privacy_audit.audit.scale.tasks import task_data, task_defense, task_target, task_training

    data = task_data(cfg)
    dcfg, defense = task_defense(cfg, {"defense": index})
    training = dataclasses.replace(task_training(cfg, dcfg), gradient_canaries=canaries)
    t0 = time.perf_counter()
    release, report = defense.fit(task_target(cfg, data), data.members, training, seed)
    seconds = time.perf_counter() - t0
    delta = float(dcfg.params.get("delta", cfg.metrics["delta"]))
    claimed = release.claim.epsilon
    audit = OneRunWhiteBoxAudit(canaries=canaries, seed=seed)
    recorded = [_row(a) for a in audit.run(release, delta, claimed_epsilon=claimed)]
    record = release.gradient_canary_record
    release.gradient_canary_record = None  # the same mechanism and schedule, simulated
    simulated = [_row(a) for a in audit.run(release, delta, claimed_epsilon=claimed)]
    for r in recorded + simulated:
        log(
            f"  {r['name']:<34} {r['source']:<28} eps_lb {r['epsilon_lb']:.3f} "
            f"({r.get('status')}, ceiling {r.get('ceiling')})"
        )
    return {
        "defense": dcfg.name,
        "label": dcfg.label,
        "claimed_epsilon": claimed,
        "claimed_delta": release.claim.delta,
        "noise_multiplier": report.info.get("noise_multiplier"),
        "sampling": {"sample_rate": release.schedule.sample_rate, "steps": release.schedule.steps},
        "train_seconds": seconds,
        "mean_appearances_present": record["mean_appearances_present"],
        "selected_pilot_magnitude": record["selected_pilot_magnitude"],
        "interference_sd": record["interference_sd"],
        "recorded": recorded,
        "simulated": simulated,
    }


def main(argv: list[str] | None = None) -> int:
    from privacy_audit.audit.config import load_config

    p = argparse.ArgumentParser(prog="python -m experiments.white_box_one_run")
    p.add_argument("--config", default="lm")
    p.add_argument("--defenses", default="dp-sgd,phantom-dp-sgd")
    p.add_argument("--canaries", type=int, default=1000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="white-box-one-run.json")
    args = p.parse_args(argv)
    cfg = load_config(args.config)

    def log(msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)

    runs = []
    for name in [d for d in args.defenses.split(",") if d]:
        idx = [i for i, d in enumerate(cfg.defenses) if d.name == name]
        if not idx:
            raise SystemExit(f"no defense {name!r} in the config")
        log(f"{name}:")
        runs.append(run_defense(cfg, idx[0], args.canaries, args.seed, log))
        atomic_write_text(
            args.out,
            json.dumps(
                {
                    "command": "python -m experiments.white_box_one_run "
                    + " ".join(argv if argv is not None else sys.argv[1:]),
                    "config": args.config,
                    "canaries": args.canaries,
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
