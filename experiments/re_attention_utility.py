"""Utility study: perplexity of the tied GPT-2 LM trained with phantom-dp-sgd, with and
without Re-Attention, at ε ∈ {3, 8}, over several training seeds.

    python -m experiments.re_attention_utility --seeds 3 --out reatt.json

Each (ε, seed) trains both variants from the same initialisation, Poisson batches and
noise draws (the only difference is the attention correction). Per run: test perplexity
with a 95% bootstrap CI over test sequences. Across seeds: the mean perplexity and the
mean paired difference (with − without), each with a 95% t-interval over seeds.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any

import numpy as np


def _t_interval(x: list[float]) -> dict[str, float]:
    from scipy import stats

    a = np.asarray(x, dtype=float)
    m = float(a.mean())
    if len(a) < 2:
        return {"mean": m, "ci_low": math.nan, "ci_high": math.nan, "n": len(a)}
    half = float(stats.t.ppf(0.975, len(a) - 1) * a.std(ddof=1) / math.sqrt(len(a)))
    return {"mean": m, "ci_low": m - half, "ci_high": m + half, "n": len(a)}


def study(
    epsilons=(3.0, 8.0),
    seeds=(0, 1, 2),
    n_train: int = 400,
    n_test: int = 200,
    epochs: int = 10,
    batch_size: int = 64,
    learning_rate: float = 1e-2,
    preset: str = "tiny-gpt2-word",
    max_length: int = 96,
) -> dict[str, Any]:
    from privacy_audit import fixtures
    from privacy_audit.defenses.base import Examples
    from privacy_audit.defenses.phantom_dp_sgd import PhantomDPSGD
    from privacy_audit.defenses.re_attention import ReAttentionDefense
    from privacy_audit.targets.classifier import TrainingConfig
    from privacy_audit.targets.loading import Target, TargetSpec

    rows = fixtures.load_corpus("private")
    train = Examples(
        [r["id"] for r in rows[:n_train]],
        [r["text"] for r in rows[:n_train]],
        np.zeros(n_train),
    )
    test = Examples(
        [r["id"] for r in rows[-n_test:]], [r["text"] for r in rows[-n_test:]], np.zeros(n_test)
    )
    target = Target(TargetSpec(preset, None, max_length, 0), ("x",), None, "cpu", False)
    cfg = TrainingConfig(epochs, batch_size, learning_rate, 0.0, max_length, "cpu", False)
    runs = []
    for eps in epsilons:
        for seed in seeds:
            row: dict[str, Any] = {"epsilon": eps, "seed": seed}
            for label, defense in (
                ("without", PhantomDPSGD(epsilon=eps)),
                ("with", ReAttentionDefense(epsilon=eps)),
            ):
                release, report = defense.fit(target, train, cfg, seed)
                util = release.evaluate_utility(test)
                row[label] = {
                    "perplexity": util["value"],
                    "ci_low": util["ci_low"],
                    "ci_high": util["ci_high"],
                    "epsilon_spent": report.info["epsilon_spent"],
                    "noise_multiplier": report.info["noise_multiplier"],
                }
                print(
                    f"eps={eps} seed={seed} {label:7s} ppl {util['value']:.2f} "
                    f"[{util['ci_low']:.2f}, {util['ci_high']:.2f}]",
                    file=sys.stderr,
                    flush=True,
                )
            runs.append(row)
    summary = {}
    for eps in epsilons:
        rs = [r for r in runs if r["epsilon"] == eps]
        summary[str(eps)] = {
            "without": _t_interval([r["without"]["perplexity"] for r in rs]),
            "with": _t_interval([r["with"]["perplexity"] for r in rs]),
            "difference_with_minus_without": _t_interval(
                [r["with"]["perplexity"] - r["without"]["perplexity"] for r in rs]
            ),
        }
    return {
        "setup": {
            "preset": preset,
            "n_train": n_train,
            "n_test": n_test,
            "epochs": epochs,
            "batch_size": batch_size,
            "learning_rate": learning_rate,
            "max_length": max_length,
            "delta": 1e-5,
            "seeds": list(seeds),
        },
        "runs": runs,
        "summary": summary,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--out", default="re_attention_utility.json")
    args = ap.parse_args(argv)
    if args.seeds < 1:
        print("error: --seeds must be >= 1", file=sys.stderr)
        return 2
    res = study(seeds=tuple(range(args.seeds)), epochs=args.epochs)
    with open(args.out, "w") as fh:
        json.dump(res, fh, indent=2)
    for eps, s in res["summary"].items():
        w, wo, d = s["with"], s["without"], s["difference_with_minus_without"]
        print(
            f"eps={eps}: without {wo['mean']:.2f} [{wo['ci_low']:.2f}, {wo['ci_high']:.2f}]  "
            f"with {w['mean']:.2f} [{w['ci_low']:.2f}, {w['ci_high']:.2f}]  "
            f"diff {d['mean']:+.2f} [{d['ci_low']:+.2f}, {d['ci_high']:+.2f}] (n={d['n']} seeds)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
