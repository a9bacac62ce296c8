"""What each bundled config costs, and its ``--quick`` variant.

``COSTS[name]`` holds, for the bundled ``audit/configs/NAME.toml``:

* ``full``: the expected time of ``privacy-audit run NAME`` on a 2-core CPU, from a
  recorded figure (``source`` says which and how it was derived);
* ``quick``: the overrides of ``run NAME --quick`` (tables merged key by key into the
  TOML before it is validated; a list replaces the list), small sizes that finish within
  5 minutes on the 2-core machine, for trying a config out and for CI. Its numbers are
  not for reporting (the title says so);
* ``quick_time``: the recorded time of the quick variant.

Each figure says where it comes from: a measurement (CPU and wall time and the shared
machine's load average), a figure recorded in docs/, or an estimate and how it was derived.
On an idle 2-core machine a run's wall time is about its CPU time; under load it is longer.
The README's *Bundled configs and what they cost* table and docs/startup-and-costs.md list
the same figures.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Cost:
    """A run's expected time on a 2-core CPU, in minutes, and where the figure comes from
    (a measurement, with its CPU and wall time and the machine's load, or an estimate and
    how it was derived). On an idle 2-core machine a run's wall time is about its CPU time."""

    minutes: float
    source: str

    def text(self) -> str:
        m = self.minutes
        when = f"{m:.0f} min" if m >= 2 else f"{m * 60:.0f} s"
        return f"about {when} on a 2-core CPU"


@dataclass(frozen=True)
class ConfigCost:
    full: Cost
    quick_time: Cost
    quick: dict[str, Any] = field(default_factory=dict)


_QUICK_TITLE = " (--quick: small sizes for trying it out; numbers not for reporting)"

COSTS: dict[str, ConfigCost] = {
    "default": ConfigCost(
        full=Cost(2, "measured: 118.5 s wall, idle machine (make audit from a fresh clone)"),
        quick_time=Cost(
            0.5,
            "measured: 30 s wall at load 0.9 (25 s user CPU), 2026-11-27; earlier 27 s CPU, 63 s wall at load 4",
        ),
        quick={
            "data": {"n_members": 200, "n_nonmembers": 200, "n_test": 100},
            "target": {"public_epochs": 1},
            "train": {"epochs": 2},
            "metrics": {"bootstrap": 200},
            "epsilon": {"gradient_trials": 2000, "canaries": 40},
        },
    ),
    "dp-attention": ConfigCost(
        full=Cost(
            4,
            "estimate: the --quick run's stages scaled by examples x epochs and attack sizes; not yet measured",
        ),
        quick_time=Cost(
            0.45,
            "measured: 27 s wall at load 1.6 (25 s user CPU), 2026-11-27; earlier 31 s CPU, 241 s wall at load 8-11",
        ),
        quick={
            "data": {"n_members": 150, "n_nonmembers": 150, "n_test": 100},
            "target": {"public_epochs": 1},
            "train": {"epochs": 2},
            "attacks": {
                "options": {
                    "gradient-inversion": {"batch_sizes": [1], "sequences": 4, "steps": 5},
                    "attention-lrt": {"trials": 200},
                }
            },
            "metrics": {"bootstrap": 200},
        },
    ),
    "dp-blogs": ConfigCost(
        full=Cost(35, "recorded: about 35 min on the shared machine, docs/dp-blogs.md"),
        quick_time=Cost(
            2.0,
            "measured: 122 s wall at load 1.6-1.9 (123 s user CPU), 2026-11-27; 571 s wall at load 9; earlier 1,710 s wall at load 30-15",
        ),
        quick={
            "data": {"n_members": 300, "n_nonmembers": 100, "n_test": 100},
            "target": {"public_epochs": 1},
            "train": {"epochs": 2, "batch_size": 100},
            "attacks": {
                "options": {
                    "canary-exposure": {"candidates": 100, "canaries": 5},
                    "prompt-extraction": {"records": 10},
                }
            },
            "metrics": {"bootstrap": 200},
            "epsilon": {"gradient_trials": 1000},
            # the list replaces the bundled one: the same three arms, dp-blogs' shuffle
            # audit at 100 releases per side (its minimum) instead of 1,000
            "defenses": [
                {"name": "none", "label": "non-private"},
                {"name": "dp-sgd", "label": "dp-sgd (eps=8)", "epsilon": 8.0, "delta": 1e-5},
                {
                    "name": "dp-blogs",
                    "label": "dp-blogs (target eps=8)",
                    "batch_size": 5,
                    "learning_rate": 3e-4,
                    "epsilon": 8.0,
                    "delta": 1e-5,
                    "clip_value": 1.0,
                    "accumulation_steps": 10,
                    "max_grad_norm": 1.0,
                    "audit_trials": 100,
                    "audit_batch": 10,
                },
            ],
        },
    ),
    "dp-forward": ConfigCost(
        full=Cost(
            2.2, "recorded: 2 min 11 s CPU, 7 min wall on a loaded machine, docs/dp-forward.md"
        ),
        quick_time=Cost(
            0.92,
            "measured: 55 s wall at load 1.4 (53 s user CPU), 2026-11-27; earlier 145 s wall at load 4-8",
        ),
        quick={
            "data": {"n_members": 150, "n_nonmembers": 150, "n_test": 100},
            "target": {"public_epochs": 1},
            "train": {"epochs": 2},
            "attacks": {"options": {"inversion-relaxed": {"n_sequences": 4, "steps": 20}}},
            "metrics": {"bootstrap": 200},
        },
    ),
    "lm": ConfigCost(
        full=Cost(46, "recorded: about 46 min wall at load 3.5, docs/phantom-dp-sgd.md"),
        quick_time=Cost(
            3.7,
            "measured: 221 s wall at load 6-9 (100 s user CPU), 2026-11-27; earlier 72 s CPU, 432 s wall at load 16-27",
        ),
        quick={
            "data": {"n_members": 300, "n_nonmembers": 100, "n_test": 100},
            "target": {"public_epochs": 1},
            "train": {"epochs": 2, "batch_size": 100},
            "attacks": {
                "options": {
                    "extraction-untargeted": {"samples": 20, "new_tokens": 16},
                    "pii-extraction": {"samples": 20, "new_tokens": 16, "records": 10},
                }
            },
            "metrics": {"bootstrap": 200},
        },
    ),
    "split-n-denoise": ConfigCost(
        full=Cost(
            3,
            "estimate: 79 s CPU recorded in docs/split-n-denoise.md before the split check; the --quick run now takes 75 s CPU",
        ),
        quick_time=Cost(
            4.4,
            "measured: 264 s wall at load 3-6 (161 s user CPU on 2 threads), 2026-11-27; earlier 75 s CPU, 645 s wall at load 11-16",
        ),
        quick={
            "data": {"n_members": 60, "n_nonmembers": 60, "n_test": 60},
            "train": {"epochs": 5},
            "attacks": {
                "options": {
                    "inversion-nn": {"n_sequences": 60},
                    "attribute-inference": {"n_aux": 60},
                }
            },
            "metrics": {"bootstrap": 100},
        },
    ),
}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def quick_variant(name: str, raw: dict[str, Any]) -> dict[str, Any]:
    """The raw (parsed TOML) config of ``run NAME --quick``: ``raw`` with the quick
    overrides merged in and the title marked."""
    out = _merge(raw, COSTS[name].quick)
    out["title"] = str(out.get("title", name)) + _QUICK_TITLE
    return out


__all__ = ["COSTS", "Cost", "ConfigCost", "quick_variant"]


def bundled_name(config: str | None) -> str | None:
    """The bundled config that ``run CONFIG`` loads (None: a file of the user's)."""
    from pathlib import Path

    from privacy_audit.audit.config import bundled_configs

    if config is None:
        return "default"
    if not Path(config).is_file() and str(config) in bundled_configs():
        return str(config)
    return None


def load_quick(name: str):
    """The validated config of ``run NAME --quick``."""
    from importlib import resources

    from privacy_audit.audit.config import check_runnable, parse_config, tomllib

    text = (
        resources.files("privacy_audit.audit.configs").joinpath(f"{name}.toml").read_text("utf-8")
    )
    cfg = parse_config(quick_variant(name, tomllib.loads(text)), source=f"bundled {name} --quick")
    check_runnable(cfg)
    return cfg


def expected_time_line(name: str, quick: bool) -> str:
    """The line ``run`` prints first for a bundled config."""
    c = COSTS[name]
    if quick:
        return f"{name} --quick: expected time {c.quick_time.text()} ({c.quick_time.source})"
    return (
        f"{name}: expected time {c.full.text()} ({c.full.source}); "
        f"--quick runs a small variant in {c.quick_time.text()}"
    )
