"""Utility experiments behind the paper-claims table (``privacy-audit experiment NAME``).

Unlike the timing benchmarks (``privacy-audit bench``), an experiment trains models, so it
is long: every cell (method, ε, seed) is written to ``--checkpoint-dir`` as soon as it is
done and a rerun skips finished cells, so a killed run resumes. The final JSON (``--out``)
is assembled from the cells and written atomically. Each experiment is a function
``run(settings, cells) -> dict`` registered below as ``"module:function"``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

EXPERIMENTS: dict[str, str] = {
    "dp-forward-accounting": "experiments.dp_forward_accounting:run",
    "dp-forward-matched-eps": "experiments.dp_forward_matched:run",
    "dp-forward-matched-eps-finetune": "experiments.dp_forward_matched_finetune:run",
    "dp-forward-paper-setting": "experiments.dp_forward_paper_setting:run",
    "dp-forward-table4": "experiments.dp_forward_table4:run",
    "snd-auc": "experiments.snd_auc:run",
    "dp-blogs-audit": "experiments.dp_blogs_audit:run",
    "deciding-before-release": "experiments.deciding_before_release:run",
    "split-validity": "experiments.split_validity:experiment",
    "dp-bugs": "experiments.dp_bugs:run",
}

SCHEMA = "privacy-audit-experiment/1"


@dataclass(frozen=True)
class ExperimentSettings:
    seeds: int = 3
    quick: bool = False  # tiny shapes for tests and smoke runs; never for reported figures
    n_train: int | None = None  # None: the experiment's default
    n_test: int | None = None
    threads: int | None = None


class CellStore:
    """One JSON file per finished cell under ``root`` (None: in memory only)."""

    def __init__(self, root: str | Path | None, experiment: str, settings: ExperimentSettings):
        self.root = None if root is None else Path(root) / experiment
        tag = json.dumps(asdict(settings) | {"threads": None}, sort_keys=True)
        self.tag = hashlib.sha256(tag.encode()).hexdigest()[:12]
        self.memory: dict[str, Any] = {}
        self.reused = 0
        if self.root is not None:
            self.root.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str) -> Path:
        safe = "".join(c if c.isalnum() or c in "-_.=" else "_" for c in key)
        return self.root / f"{self.tag}-{safe}.json"

    def get(self, key: str, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The cell ``key``: from the checkpoint if present, else computed and saved."""
        from privacy_audit.ground.io import atomic_write_json

        if key in self.memory:
            return self.memory[key]
        if self.root is not None and self._path(key).exists():
            self.memory[key] = json.loads(self._path(key).read_text())
            self.reused += 1
            return self.memory[key]
        print(f"  cell {key} ...", file=sys.stderr, flush=True)
        value = compute()
        self.memory[key] = value
        if self.root is not None:
            atomic_write_json(self._path(key), value)
        return value


def seed_summary(values: list[float], confidence: float = 0.95) -> dict[str, Any]:
    """Mean over seeds with a Student-t interval (assumes the seeds' values are i.i.d.
    draws of the training randomness; n = number of seeds, so the interval is wide)."""
    from scipy.stats import t

    v = np.asarray(values, dtype=np.float64)
    if v.size == 0 or not np.all(np.isfinite(v)):
        raise ValueError("seed_summary needs finite values")
    mean = float(v.mean())
    if v.size < 2:
        return {"mean": mean, "ci_low": None, "ci_high": None, "n_seeds": int(v.size)}
    half = float(t.ppf((1 + confidence) / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return {
        "mean": mean,
        "ci_low": mean - half,
        "ci_high": mean + half,
        "n_seeds": int(v.size),
        "values": [float(x) for x in v],
    }


def _binary_auc(scores: np.ndarray, positive: np.ndarray) -> np.ndarray:
    """Mann–Whitney AUC along the last axis (ties count ½), vectorised over leading axes."""
    from scipy.stats import rankdata

    ranks = rankdata(scores, axis=-1)
    n1 = positive.sum(-1)
    n0 = positive.shape[-1] - n1
    return ((ranks * positive).sum(-1) - n1 * (n1 + 1) / 2) / (n1 * n0)


def macro_auc(probs: np.ndarray, labels: np.ndarray) -> float:
    """One-vs-rest AUC averaged over the classes present (binary: the positive class's)."""
    labels = np.asarray(labels)
    probs = np.asarray(probs, dtype=np.float64)
    if probs.shape[1] == 2:
        return float(_binary_auc(probs[:, 1], labels == 1))
    present = [c for c in np.unique(labels) if 0 < (labels == c).sum() < len(labels)]
    return float(np.mean([_binary_auc(probs[:, c], labels == c) for c in present]))


def auc_estimate(probs, labels, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Macro AUC with a percentile-bootstrap CI over test examples (resamples lacking a
    class are dropped). Assumes the test examples are independent. Simulated coverage of
    the nominal 95 % interval: 0.915 at n = 200, binormal scores (percentile intervals run
    slightly short at small n); tests/defenses/test_dp_forward.py checks it stays ≥ 0.85."""
    labels = np.asarray(labels)
    probs = np.asarray(probs, dtype=np.float64)
    rng = np.random.default_rng(seed)
    value = macro_auc(probs, labels)
    classes = np.unique(labels)
    idx = rng.integers(0, len(labels), size=(n_boot, len(labels)))
    lab = labels[idx]
    keep = np.all([(lab == c).any(1) & (lab != c).any(1) for c in classes], axis=0)
    idx, lab = idx[keep], lab[keep]
    cols = [1] if probs.shape[1] == 2 else list(classes)
    per_class = [_binary_auc(probs[idx, c], lab == c) for c in cols]
    boots = np.mean(per_class, axis=0)
    lo, hi = np.quantile(boots, [0.025, 0.975])
    return {"value": value, "ci_low": float(lo), "ci_high": float(hi), "n": int(len(labels))}


def accuracy_estimate(probs, labels) -> dict[str, Any]:
    from privacy_audit.stats.estimates import proportion_estimate

    labels = np.asarray(labels)
    correct = int((np.asarray(probs).argmax(1) == labels).sum())
    return proportion_estimate(correct, len(labels))


def fixture_split(n_train: int, n_test: int, seed: int = 0):
    """Disjoint train/test subsets of the fixture's private corpus (fixed across seeds
    and methods, so every method sees the same examples) and the label names."""
    from privacy_audit import fixtures
    from privacy_audit.defenses.base import Examples

    rows = fixtures.load_corpus("private")
    labels = sorted({r["label"] for r in rows})
    order = np.random.default_rng(seed).permutation(len(rows))
    if n_train + n_test > len(rows):
        raise ValueError(f"the corpus has {len(rows)} rows, asked for {n_train + n_test}")

    def take(idx):
        sel = [rows[i] for i in idx]
        return Examples(
            [r["id"] for r in sel],
            [r["text"] for r in sel],
            np.array([labels.index(r["label"]) for r in sel]),
        )

    return take(order[:n_train]), take(order[n_train : n_train + n_test]), tuple(labels)


def run_experiment(
    name: str, settings: ExperimentSettings, checkpoint_dir: str | Path | None
) -> dict[str, Any]:
    import importlib
    import platform

    import torch

    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; allowed: {', '.join(EXPERIMENTS)}")
    module, func = EXPERIMENTS[name].split(":")
    cells = CellStore(checkpoint_dir, name, settings)
    result = getattr(importlib.import_module(module), func)(settings, cells)
    return {
        "schema": SCHEMA,
        "experiment": name,
        "command": f"privacy-audit experiment {name}"
        + (f" --seeds {settings.seeds}" if settings.seeds != 3 else "")
        + (f" --n-train {settings.n_train}" if settings.n_train else "")
        + (f" --n-test {settings.n_test}" if settings.n_test else "")
        + (" --quick" if settings.quick else ""),
        "settings": asdict(settings),
        "machine": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        },
        "cells_reused_from_checkpoint": cells.reused,
        **result,
    }


def run_to_file(
    name: str, settings: ExperimentSettings, out: str, checkpoint_dir: str | None
) -> None:
    """``privacy-audit experiment NAME`` once its flags are read (and ``python -m
    experiments.run``): the settings and outputs checked before any work (bad input raises
    AuditError, nothing written), the experiment run, its JSON written atomically."""
    import torch

    from privacy_audit.audit.commands.common import check_writable
    from privacy_audit.audit.outputs import check_outputs
    from privacy_audit.ground.errors import AuditError
    from privacy_audit.ground.io import atomic_write_text, dumps_json

    for flag, value in (
        ("--seeds", settings.seeds),
        ("--n-train", settings.n_train),
        ("--n-test", settings.n_test),
        ("--threads", settings.threads),
    ):
        if value is not None and value < 1:
            raise AuditError(f"{flag} must be at least 1, got {value}")
    cells = None if checkpoint_dir is None else Path(checkpoint_dir) / name
    check_outputs([("--out", out)], [("--checkpoint-dir", cells)])  # its finished cells
    check_writable(out, "--out")
    if checkpoint_dir is not None:
        ck = Path(checkpoint_dir)
        if ck.exists() and not ck.is_dir():
            raise AuditError(f"--checkpoint-dir {checkpoint_dir!r} is not a directory")
        check_writable(str(ck / name / "check"), "--checkpoint-dir")
    if settings.threads is not None:
        torch.set_num_threads(settings.threads)
    print(f"experiment {name} ...", file=sys.stderr, flush=True)
    payload = run_experiment(name, settings, checkpoint_dir)
    atomic_write_text(Path(out), dumps_json(payload))
    print(f"results: {out}")


def main(argv: list[str] | None = None) -> int:
    """``python -m experiments.run NAME --out FILE [...]``: ``privacy-audit experiment``
    from the checkout (the same options, checks and output; bad input: one line, exit 2).
    It does not go through the CLI, which loads this module for that command."""
    import argparse

    from privacy_audit.ground.errors import AuditError

    p = argparse.ArgumentParser(
        prog="python -m experiments.run",
        description="train and evaluate one paper-claim experiment (resumable per cell); "
        "writes JSON",
    )
    p.add_argument("name", choices=list(EXPERIMENTS), help="the experiment to run")
    p.add_argument("--out", required=True, help="JSON output file")
    p.add_argument(
        "--checkpoint-dir",
        help="directory for finished cells; a rerun with the same settings resumes from it",
    )
    p.add_argument("--seeds", type=int, default=3, help="training seeds per cell (default 3)")
    p.add_argument("--n-train", type=int, help="training examples (default: the experiment's)")
    p.add_argument("--n-test", type=int, help="test examples (default: the experiment's)")
    p.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--quick", action="store_true", help="tiny shapes (smoke run, not reported)")
    args = p.parse_args(argv)
    settings = ExperimentSettings(args.seeds, args.quick, args.n_train, args.n_test, args.threads)
    try:
        run_to_file(args.name, settings, args.out, args.checkpoint_dir)
    except AuditError as exc:
        print(f"privacy-audit: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("privacy-audit: interrupted; no partial report was written", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
