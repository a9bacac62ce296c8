"""Learning-rate grid for the bundled LM config: every arm (non-private, Opacus DP-SGD,
phantom-dp-sgd, re-attention, dp-blogs) gets the same grid of learning rates and the same
training budget (epochs) from the same public-pretrained start.

    python -m experiments.lm_lr_grid --config lm --out docs/records/lm-utility-lr-grid.json

Selection is honest: each arm's learning rate is the one with the lowest perplexity on the
config's non-member texts (a validation split never trained on and disjoint from the test
texts); the table then quotes the test perplexity at that learning rate with its 95%
bootstrap CI over test sequences. The table also carries the unigram floor (fitted on the
public split, and on public + members) and the public-pretrained start, each with its CI;
a DP arm "learned" only when its test CI lies entirely below the public start's CI.

Each finished cell is kept in ``<out>.cells.json`` so an interrupted grid resumes.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ARMS = ("none", "dp-sgd", "phantom-dp-sgd", "re-attention", "dp-blogs")


def _util(u: dict) -> dict[str, Any]:
    return {k: u.get(k) for k in ("value", "ci_low", "ci_high", "n", "tokens")}


def run_grid(
    config: str,
    lrs: list[float],
    arms: list[str],
    epsilon: float,
    cells_path: Path,
    blogs_micro_batch: int = 5,
    progress: bool = True,
    epochs: int | None = None,
    batch_size: int | None = None,
) -> dict[str, Any]:
    import torch

    from privacy_audit.audit.config import load_config
    from privacy_audit.audit.data import load_audit_data
    from privacy_audit.defenses import DEFENSES
    from privacy_audit.defenses.base import PrivacyClaim
    from privacy_audit.defenses.lm_baselines import utility_floor
    from privacy_audit.targets.classifier import TrainingConfig
    from privacy_audit.targets.lm import LMRelease
    from privacy_audit.targets.loading import Target

    cfg = load_config(config)
    data = load_audit_data(cfg.data, cfg.seed, train=True)
    target = Target(cfg.target, tuple(data.label_names), data.public, "cpu", False)
    fingerprint = hashlib.sha256(
        json.dumps(
            {k: cfg.to_dict().get(k) for k in ("seed", "data", "target")},
            sort_keys=True,
            default=str,
        ).encode()
    ).hexdigest()[:16]
    cells: dict[str, Any] = {}
    if cells_path.is_file():
        cells = json.loads(cells_path.read_text(encoding="utf-8"))

    def save() -> None:
        from privacy_audit.ground.io import atomic_write_text, dumps_json

        atomic_write_text(cells_path, dumps_json(cells))

    model, tokenizer = target.build(cfg.seed)
    start = LMRelease(
        model,
        tokenizer,
        cfg.target.max_length,
        PrivacyClaim.none("public pretraining only"),
        "cpu",
    )
    public_start = {
        "test": _util(start.evaluate_utility(data.test)),
        "validation": _util(start.evaluate_utility(data.nonmembers)),
    }
    floor = utility_floor(
        tokenizer,
        list(data.public.texts) if data.public is not None else [],
        list(data.members.texts),
        list(data.test.texts),
        cfg.target.max_length,
    )
    t = cfg.train
    for arm in arms:
        for lr in lrs:
            key = f"{arm} @ lr {lr:g}"
            params = {} if arm == "none" else {"epsilon": epsilon, "delta": 1e-5}
            batch = batch_size or t["batch_size"]
            n_epochs = epochs or t["epochs"]
            if arm == "dp-blogs":
                batch = blogs_micro_batch  # the paper's micro-batch; 10 accumulated per step
            setting = {
                "data_target_seed": fingerprint,
                "batch_size": batch,
                "epochs": n_epochs,
                "epsilon": None if arm == "none" else epsilon,
                "weight_decay": t.get("weight_decay", 0.0),
            }
            if key in cells:
                if cells[key].get("setting") == setting:
                    continue
                # a cell from another config, batch, budget or ε is stale: never reuse it
                print(f"{key}: checkpointed under another setting, re-running", file=sys.stderr)
            training = TrainingConfig(
                n_epochs, batch, lr, t.get("weight_decay", 0.0), cfg.target.max_length, "cpu", False
            )
            t0 = time.perf_counter()
            torch.manual_seed(cfg.seed)
            release, report = DEFENSES[arm](**params).fit(target, data.members, training, cfg.seed)
            cell = {
                "setting": setting,
                "arm": arm,
                "learning_rate": lr,
                "batch_size": batch,
                "epochs": n_epochs,
                "test": _util(release.evaluate_utility(data.test)),
                "validation": _util(release.evaluate_utility(data.nonmembers)),
                "claim": {
                    "epsilon": release.claim.epsilon,
                    "delta": release.claim.delta,
                    "proven": getattr(release.claim, "proven", None),
                },
                "train_info": {
                    k: v
                    for k, v in report.info.items()
                    if isinstance(v, (int, float, str, bool)) or v is None
                },
                "seconds": time.perf_counter() - t0,
            }
            cells[key] = cell
            save()
            if progress:
                v = cell["test"]
                print(
                    f"{key:<32} val {cell['validation']['value']:.2f}  test {v['value']:.2f} "
                    f"[{v['ci_low']:.2f}, {v['ci_high']:.2f}]  {cell['seconds']:.0f}s",
                    file=sys.stderr,
                    flush=True,
                )
    res = summarise(cells, arms, lrs, public_start, floor, cfg)
    res["data"] = {k: cfg.to_dict()["data"].get(k) for k in ("n_members", "n_nonmembers", "n_test")}
    res["train"] = {"epochs": epochs or t["epochs"], "batch_size": batch_size or t["batch_size"]}
    res["train"]["dp_blogs_micro_batch"] = blogs_micro_batch
    return res


def summarise(cells, arms, lrs, public_start, floor, cfg) -> dict[str, Any]:
    ps = public_start["test"]
    table = []
    for arm in arms:
        grid = [cells[k] for k in (f"{arm} @ lr {lr:g}" for lr in lrs) if k in cells]
        if not grid:
            continue
        best = min(grid, key=lambda c: c["validation"]["value"])
        u = best["test"]
        table.append(
            {
                "arm": arm,
                "learning_rate": best["learning_rate"],
                "selected_by": "lowest non-member (validation) perplexity",
                "perplexity": u["value"],
                "ci_low": u["ci_low"],
                "ci_high": u["ci_high"],
                "n_test_sequences": u["n"],
                "epsilon": best["claim"]["epsilon"],
                "epsilon_proven": best["claim"].get("proven"),
                "delta": best["claim"]["delta"],
                "below_public_start": bool(u["ci_high"] < ps["ci_low"]),
                "below_unigram_floor": bool(u["ci_high"] < floor["floor"]),
                "grid": {
                    f"{c['learning_rate']:g}": {
                        "validation": c["validation"]["value"],
                        "test": c["test"]["value"],
                    }
                    for c in grid
                },
            }
        )
    not_run = [f"{a} @ lr {lr:g}" for a in arms for lr in lrs if f"{a} @ lr {lr:g}" not in cells]
    return {
        "title": "LM utility at matched budget: per-arm learning rate from one grid",
        "config": cfg.to_dict().get("target"),
        "train": dict(cfg.train),
        "learning_rates": list(lrs),
        "unigram_floor": floor,
        "public_pretrained_only": public_start,
        "table": table,
        "cells": cells,
        "not_run": not_run,
        "rule": "an arm learned when its test perplexity CI lies entirely below the public "
        "start's CI (pretrained configs) and below the unigram floor",
    }


def _sizes(res: dict[str, Any]) -> str:
    d = res.get("data") or {}
    if not d:
        return "data sizes not recorded"
    return (
        f"{d.get('n_members')} members, {d.get('n_nonmembers')} non-members (validation), "
        f"{d.get('n_test')} test texts"
    )


def to_markdown(res: dict[str, Any]) -> str:
    """The LM utility table: unigram floor, public start, then every arm at its selected
    learning rate, each with its 95% CI, and the whole grid."""

    def ci(u) -> str:
        return f"{u['value']:.2f} [{u['ci_low']:.2f}, {u['ci_high']:.2f}]"

    floor = res["unigram_floor"]
    uni = min(
        (v for v in floor.values() if isinstance(v, dict) and "value" in v),
        key=lambda v: v["value"],
    )
    ps = res["public_pretrained_only"]["test"]
    train = res["train"]
    lines = [
        "# LM utility at a matched budget (per-arm learning rate)",
        "",
        f"Generated from `{res.get('json', 'docs/records/lm-utility-lr-grid.json')}` by "
        f"`{res['command']}`.",
        "",
        f"Config `{res.get('config_name', 'lm')}` (tiny word-level GPT-2 after public "
        f"pretraining; {_sizes(res)}), {train['epochs']} "
        f"epochs, batch {train['batch_size']} (dp-blogs: micro-batch "
        f"{train.get('dp_blogs_micro_batch')} × 10 accumulated), every DP arm at ε = 8, "
        "δ = 1e-5. Every arm ran the same learning-rate grid "
        f"({', '.join(f'{x:g}' for x in res['learning_rates'])}); its learning rate is the "
        "one with the lowest perplexity on the non-member texts (a validation split, never "
        "trained on, disjoint from the test texts). Test perplexity on "
        f"{ps['n']} test sequences with a 95% bootstrap CI over sequences. An arm learned "
        "from the private data only when its CI lies entirely below the public start's.",
        "",
        "| model | learning rate | ε | test perplexity [95% CI] | below public start | "
        "below unigram |",
        "|---|---|---|---|---|---|",
        f"| unigram floor ({uni.get('model', 'unigram')}, fitted on "
        f"{uni.get('fit_sequences')} sequences) | – | – | {ci(uni)} | – | – |",
        f"| public-only start | – | – | {ci(ps)} | – | yes |",
    ]
    for r in res["table"]:
        eps = "–" if r["epsilon"] is None else f"{r['epsilon']:.2f}"
        if r["epsilon"] is not None and r.get("epsilon_proven") is False:
            eps += " (not proven)"
        u = {"value": r["perplexity"], "ci_low": r["ci_low"], "ci_high": r["ci_high"]}
        lines.append(
            f"| {r['arm']} | {r['learning_rate']:g} | {eps} | {ci(u)} | "
            f"{'**yes**' if r['below_public_start'] else 'no'} | "
            f"{'yes' if r['below_unigram_floor'] else '**no**'} |"
        )
    lines += [
        "",
        "Whole grid (validation perplexity / test perplexity):",
        "",
        "| arm | " + " | ".join(f"lr {x:g}" for x in res["learning_rates"]) + " |",
        "|---|" + "---|" * len(res["learning_rates"]),
    ]
    for r in res["table"]:
        cells = [
            f"{r['grid'][f'{x:g}']['validation']:.2f} / {r['grid'][f'{x:g}']['test']:.2f}"
            if f"{x:g}" in r["grid"]
            else "not run"
            for x in res["learning_rates"]
        ]
        lines.append(f"| {r['arm']} | " + " | ".join(cells) + " |")
    if res.get("not_run"):
        lines += ["", "Not run: " + ", ".join(res["not_run"]) + "."]
    grid = sorted(res["learning_rates"])
    edge = [
        f"{r['arm']} (lr {r['learning_rate']:g})"
        for r in res["table"]
        if len(grid) > 1 and r["learning_rate"] in (grid[0], grid[-1])
    ]
    dp = [r for r in res["table"] if r["epsilon"] is not None]
    learned = [r["arm"] for r in dp if r["below_public_start"]]
    lines += [
        "",
        "**Finding.** "
        + (
            f"DP arms that beat the public-only start outside the CIs: {', '.join(learned)}."
            if learned
            else "No DP arm beats the public-only start outside the CIs at "
            + (
                "the learning rates that were run (the grid is incomplete)"
                if res.get("not_run")
                else "any learning rate of the grid"
            )
            + ": at this budget the DP models did not learn from the private data, so their "
            "leakage numbers are those of the public model."
        )
        + (
            f" Selected at the edge of the grid (the optimum may lie outside it): "
            f"{', '.join(edge)}."
            if edge
            else ""
        ),
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default="lm")
    ap.add_argument("--out", default="lm-utility-lr-grid.json")
    ap.add_argument("--lrs", default="3e-4,1e-3,3e-3")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--epsilon", type=float, default=8.0)
    ap.add_argument("--epochs", type=int, default=None, help="default: the config's")
    ap.add_argument("--batch-size", type=int, default=None, help="default: the config's")
    ap.add_argument("--markdown", help="also write the utility table as Markdown here")
    args = ap.parse_args(argv)
    out = Path(args.out)
    if not out.parent.is_dir():
        print(f"error: output directory {str(out.parent)!r} does not exist", file=sys.stderr)
        return 2
    try:
        lrs = [float(x) for x in args.lrs.split(",") if x.strip()]
    except ValueError:
        print(f"error: --lrs must be comma-separated numbers, got {args.lrs!r}", file=sys.stderr)
        return 2
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    bad = [a for a in arms if a not in ARMS]
    if bad or not lrs or any(lr <= 0 for lr in lrs):
        print(f"error: unknown arm(s) {bad} or empty/non-positive --lrs", file=sys.stderr)
        return 2
    from privacy_audit.ground.io import atomic_write_text, dumps_json

    load = os.getloadavg()
    t0 = time.perf_counter()
    if (args.epochs is not None and args.epochs < 1) or (
        args.batch_size is not None and args.batch_size < 1
    ):
        print("error: --epochs and --batch-size must be >= 1", file=sys.stderr)
        return 2
    res = run_grid(
        args.config,
        lrs,
        arms,
        args.epsilon,
        out.with_name(out.name + ".cells.json"),
        epochs=args.epochs,
        batch_size=args.batch_size,
    )
    res["command"] = (
        f"python -m experiments.lm_lr_grid --config {args.config} --lrs {args.lrs} "
        f"--arms {args.arms} --epsilon {args.epsilon:g}"
        + (f" --epochs {args.epochs}" if args.epochs else "")
        + (f" --batch-size {args.batch_size}" if args.batch_size else "")
        + f" --out {args.out}"
    )
    res["seconds"] = time.perf_counter() - t0
    res["config_name"] = args.config
    res["json"] = args.out
    res["load_average_at_start"] = [round(x, 2) for x in load]
    res["device"] = "cpu (no GPU)"
    atomic_write_text(out, dumps_json(res))
    if args.markdown:
        atomic_write_text(Path(args.markdown), to_markdown(res))
    for r in res["table"]:
        print(
            f"{r['arm']:<16} lr {r['learning_rate']:<8g} ppl {r['perplexity']:.2f} "
            f"[{r['ci_low']:.2f}, {r['ci_high']:.2f}] below public start: "
            f"{r['below_public_start']}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
