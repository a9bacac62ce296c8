"""Defense ``phantom-dp-sgd``: DP-SGD on the tied GPT-2 LM target with Phantom Clipping
(Ding et al., ICML 2024) computing the per-sample norms (:mod:`privacy_audit.defenses.phantom`).

The released mechanism is ordinary DP-SGD (per-sequence clipping to C, Gaussian noise
σC, Poisson sampling), so the guarantee is DP-SGD's: noise calibrated to the target
(ε, δ) by Opacus, ε reported as the larger of Opacus PRV (or RDP) and dp-accounting PLD.
``norms = "explicit"`` swaps in torch.func per-sample gradients (same update, slower).
"""

from __future__ import annotations

import math

from privacy_audit.defenses.base import Defense, Examples, TrainingReport

NORMS = ("phantom", "explicit")
CLIPPING = ("clip", "normalize")
ACCOUNTANTS = ("prv", "rdp")


def validate_dp_params(name: str, p: dict) -> None:
    """Shared checks of the LM DP-SGD parameters; ValueError naming the bad one."""
    eps, delta = p["epsilon"], p["delta"]
    if not (isinstance(eps, (int, float)) and eps > 0 and math.isfinite(eps)):
        raise ValueError(f"{name} epsilon must be a positive finite number, got {eps!r}")
    if not 0 < delta < 1:
        raise ValueError(f"{name} delta must be in (0, 1), got {delta!r}")
    if not p["max_grad_norm"] > 0:
        raise ValueError(f"{name} max_grad_norm must be > 0, got {p['max_grad_norm']!r}")
    sigma = p.get("noise_multiplier")
    if sigma is not None and not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"{name} noise multiplier must be a finite number >= 0, got {sigma!r}")
    if p.get("accountant", "prv") not in ACCOUNTANTS:
        raise ValueError(
            f"unknown {name} accountant {p['accountant']!r}; allowed: {', '.join(ACCOUNTANTS)}"
        )
    if p.get("clipping", "clip") not in CLIPPING:
        raise ValueError(
            f"unknown {name} clipping {p['clipping']!r}; allowed: {', '.join(CLIPPING)}"
        )
    if p.get("norms", "phantom") not in NORMS:
        raise ValueError(f"unknown {name} norms {p['norms']!r}; allowed: {', '.join(NORMS)}")


class PhantomDPSGD(Defense):
    name = "phantom-dp-sgd"
    description = (
        "DP-SGD on the tied GPT-2 LM with Phantom Clipping per-sample norms (Ding et al. 2024)."
    )
    PARAMS = {
        "epsilon": ((int, float), 8.0),
        "delta": ((int, float), 1e-5),
        "max_grad_norm": ((int, float), 1.0),
        "noise_multiplier": ((int, float), None),  # set: use it instead of calibrating to ε
        "accountant": (str, "prv"),
        "clipping": (str, "clip"),
        "norms": (str, "phantom"),
    }

    def validate(self) -> None:
        validate_dp_params(self.name, self.params)

    def fit(self, target, train: Examples, training, seed: int):
        from privacy_audit.defenses.dp_engine import fit_lm_dp
        from privacy_audit.targets.lm import is_lm_target

        if not is_lm_target(target):
            raise ValueError(
                "phantom-dp-sgd trains the causal LM target with tied embeddings; set "
                "[target] preset = 'tiny-gpt2' (or use 'dp-sgd' for classifiers)"
            )
        release, info = fit_lm_dp(target, train, training, seed, self.params, self.name)
        return release, TrainingReport(info)
