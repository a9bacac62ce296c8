"""Planted DP-SGD bugs: the test-only switch behind ``privacy-audit bench dp-bugs``.

Each bug is a realistic mistake in DP-SGD code, planted in the suite's own causal-LM
trainer (:mod:`privacy_audit.defenses.dp_engine`: the clip-and-noise step, the sampling
loop and the accountant's inputs). It is switched on ONLY inside :func:`planted`, a
context manager that benchmarks and tests call; no config key, CLI flag, defense
parameter or environment variable reaches it (``tests/test_dp_bugs.py`` checks), so the
trainer users get is always the correct one.

For every bug, ``mechanism`` says what the code then releases (checked by known-answer
tests on the noise scale, clipping and sampling it produces) and ``true_epsilon`` how its
real privacy loss is obtained (an accountant run on the mechanism actually executed; see
:func:`privacy_audit.audit.benchmarks.dp_bugs.true_epsilon`).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass


@dataclass(frozen=True)
class PlantedBug:
    name: str
    bug_class: str  # noise | clipping | parameter-group | sampling | accounting
    what: str  # the mistake, as a DP engineer would write it
    mechanism: str  # what the buggy code releases
    true_epsilon: str  # how the real ε is obtained


#: Gradient accumulation factor of the ``accumulation-noise-once`` bug.
ACCUMULATION = 4
#: The ``accountant-wrong-n`` bug tells the accountant the dataset is this many times larger.
WRONG_N_FACTOR = 10

BUGS: dict[str, PlantedBug] = {
    b.name: b
    for b in (
        PlantedBug(
            "noise-divided-by-batch",
            "noise",
            "noise std written as σ·C/B (already 'averaged') and then added to the clipped SUM",
            "Σ clip(g_i) + N(0, (σC/B)²)  (noise multiplier σ/B)",
            "accountant (dp-accounting PLD) at noise multiplier σ/B, same q and T",
        ),
        PlantedBug(
            "accumulation-noise-once",
            "noise",
            f"gradient accumulation over {ACCUMULATION} micro-batches: the per-micro-batch "
            f"noise std σC/√{ACCUMULATION} is used, but noise is added once per logical batch",
            f"Σ clip(g_i) + N(0, (σC/√{ACCUMULATION})²)  (noise multiplier σ/{ACCUMULATION**0.5:g})",
            f"accountant at noise multiplier σ/√{ACCUMULATION}, same q and T",
        ),
        PlantedBug(
            "unnoised-no-decay-group",
            "parameter-group",
            "the optimizer's no-weight-decay group (biases, LayerNorm) is clipped but never noised",
            "biases and LayerNorm: Σ clip(g_i) with no noise; other parameters correct",
            "∞ (a deterministic function of the batch is released)",
        ),
        PlantedBug(
            "unclipped-no-decay-group",
            "parameter-group",
            "per-example norms and clip factors computed over the weight-decay group only; "
            "biases and LayerNorm are summed unclipped (then noised)",
            "biases and LayerNorm: Σ g_i + N(0, σ²C²) with ‖g_i‖ unbounded",
            "∞ (unbounded sensitivity)",
        ),
        PlantedBug(
            "clip-after-aggregation",
            "clipping",
            "the batch's summed gradient is clipped to C instead of each example's",
            "clip_C(Σ g_i) + N(0, σ²C²); one example moves it by up to 2C",
            "accountant at noise multiplier σ/2 (sensitivity 2C; worst case over datasets)",
        ),
        PlantedBug(
            "shuffle-as-poisson",
            "sampling",
            "batches are a shuffled partition of the data (every example once per epoch) "
            "but the accountant assumes Poisson sampling at rate q",
            "fixed-size shuffled batches, each example in exactly one step per epoch",
            "upper bound: E-fold Gaussian mechanism at σ (no amplification); lower bound: "
            "the Dirac-canary pair under shuffling (Chua et al. 2024), privacy-loss Monte Carlo",
        ),
        PlantedBug(
            "accountant-wrong-n",
            "accounting",
            f"the accountant (and the noise calibration) get N×{WRONG_N_FACTOR} (the size of "
            "the corpus before the split), so q is 10× too small",
            f"correct DP-SGD at the σ calibrated for q/{WRONG_N_FACTOR}",
            "accountant at the σ actually used and the true q and T",
        ),
        PlantedBug(
            "accountant-steps-per-epoch",
            "accounting",
            "the accountant (and the calibration) get the steps of ONE epoch, not of the run",
            "correct DP-SGD at the σ calibrated for T/epochs steps",
            "accountant at the σ actually used and the true q and T",
        ),
    )
}

_ACTIVE: str | None = None


def active() -> str | None:
    """The planted bug in force, or ``None`` (always ``None`` outside :func:`planted`)."""
    return _ACTIVE


def is_active(name: str) -> bool:
    return _ACTIVE == name


@contextlib.contextmanager
def planted(name: str | None):
    """Run the DP-SGD trainer with bug ``name`` planted (``None``: the correct trainer)."""
    global _ACTIVE
    if name is not None and name not in BUGS:
        raise ValueError(f"unknown planted bug {name!r}; allowed: {', '.join(BUGS)}")
    if _ACTIVE is not None:
        raise RuntimeError("planted bugs do not nest")
    _ACTIVE = name
    try:
        yield BUGS.get(name) if name else None
    finally:
        _ACTIVE = None
