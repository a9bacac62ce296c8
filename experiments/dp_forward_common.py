"""Shared scaffold of the DP-Forward experiments (``dp-forward-table4``,
``dp-forward-matched-eps`` and ``dp-forward-matched-eps-finetune``): the setup presets, the
target they build, the DP-SGD σ calibration rule, the DP-Forward result cell and the
verdict on a paired accuracy difference. One copy, so that the three experiments cannot
drift apart on the rules they share."""

from __future__ import annotations

import time
from typing import Any

DELTA = 1e-5


def sized_setup(settings, preset: str, n_train: int, n_test: int, **rest: Any) -> dict[str, Any]:
    """A setup dict with the user's ``--n-train``/``--n-test`` overriding the defaults."""
    return {
        "preset": preset,
        "n_train": settings.n_train or n_train,
        "n_test": settings.n_test or n_test,
        **rest,
    }


def frozen_head_setup(settings, epsilons: list[float]) -> dict[str, Any]:
    """Setup of the frozen-encoder, linear-head experiments (quick: tiny model, ε = 8)."""
    if settings.quick:
        return sized_setup(
            settings,
            "tiny",
            64,
            64,
            epochs=3,
            batch_size=16,
            learning_rate=1e-2,
            max_length=16,
            epsilons=[8.0],
        )
    return sized_setup(
        settings,
        "minilm",
        2000,
        1000,
        epochs=3,
        batch_size=32,
        learning_rate=1e-2,
        max_length=32,
        epsilons=epsilons,
    )


def build_target(setup: dict[str, Any], labels):
    """The experiment's classifier target on CPU (preset and max length from ``setup``)."""
    from privacy_audit.targets.loading import Target, TargetSpec

    return Target(
        TargetSpec(setup["preset"], None, setup["max_length"], 0), labels, None, "cpu", False
    )


def calibrate_dp_sgd(target_eps: float, q: float, steps: int) -> tuple[float, dict[str, Any]]:
    """σ from Opacus's PRV calibration, raised by 0.5 % steps until the claimed central ε
    (max of dp-accounting PLD and Opacus PRV) is at most ``target_eps``; σ and its account."""
    from privacy_audit.defenses.dp_engine import account, calibrate_noise

    sigma = calibrate_noise(target_eps, DELTA, q, steps, "prv")
    acct = account(sigma, q, steps, DELTA, "prv")
    while acct["claimed"] > target_eps:
        sigma *= 1.005
        acct = account(sigma, q, steps, DELTA, "prv")
    return sigma, acct


def dp_forward_cell(accuracy, z: float, local: float, claim, start: float) -> dict[str, Any]:
    """One DP-Forward seed's result: accuracy, noise and the central ε of its claim."""
    d = claim.details
    return {
        "accuracy": accuracy,
        "noise_multiplier_z": z,
        "local_epsilon_per_release": local,
        "sigma": d["sigma"],
        "central_epsilon_claimed": d["central_epsilon_shuffled"],
        "central_epsilon_pld": d["central_epsilon_pld"],
        "central_epsilon_prv": d["central_epsilon_prv"],
        "central_epsilon_rdp_not_claimed": d["central_epsilon_rdp_not_claimed"],
        "claim_proven": claim.proven,
        "seconds": time.perf_counter() - start,
    }


def verdict(diff: dict[str, Any]) -> str:
    """Verdict on DP-Forward − DP-SGD accuracy from its seed t interval."""
    lo, hi = diff["ci_low"], diff["ci_high"]
    if lo is None:
        return "inconclusive (one seed)"
    if lo > 0:
        return "dp-forward better"
    if hi < 0:
        return "dp-sgd better"
    return "no significant difference"


PAPER_CLAIM_MATCHED = (
    "DP-Forward (most positions) beats DP-SGD at matched central ε "
    "(SST-2 ε≈8: Output .9055 vs DP-SGD .8759)"
)
