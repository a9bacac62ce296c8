"""dp-check's model findings: the user's own forward and backward pass, and the state
the DP optimizer does not release.

The optimizer-level pairs (:mod:`.findings_sensitivity`) replace per-sample gradients;
these checks (:mod:`.model_checks`) run the model itself: does one example's gradient
depend on the others in its batch (cross-example), does clipping hold through the loss
(model-clipping), and does anything outside the DP optimizer change with one example
(outside-release)?
"""

from __future__ import annotations

import math
from typing import Any

from privacy_audit.audit.epsilon.dp_check.contract import Setup
from privacy_audit.audit.epsilon.dp_check.finding import EFFECT_SLACK, Finding, Ledger, eps_view
from privacy_audit.audit.epsilon.dp_check.findings_sensitivity import Pairs


def cross_example_findings(
    model: dict[str, Any], protocol: str, sigma_d: float, led: Ledger
) -> float:
    """The cross-example check: a deviation when replacing one example moved the others'
    per-sample gradients (a layer that mixes the batch). Returns the lower end of the
    release's effect it implies in noise units (half the replace-one μ; 0.0 when none)."""
    mu_model_lo = 0.0
    ce = model.get("cross_example")
    if ce is not None:
        if ce.tested:
            led.status["cross-example"] = "passed"
            if ce.rows_moved > 0:
                mu_model_lo = max(mu_model_lo, ce.mu_replace_lower / 2)
                led.status["cross-example"] = "inconclusive"
                led.findings.append(
                    Finding(
                        "cross-example",
                        "cross-example: the batch mixes examples",
                        "deviation",
                        "one example's per-sample gradient depends on the others in its batch",
                        f"{ce.rows_moved} of {ce.rows_compared} other examples' per-sample "
                        f"gradients moved (up to {ce.max_relative_change:.3g} relative) when one "
                        f"example was replaced; the release moved by μ = {ce.mu_replace:.4g}",
                        "no other example moves; the release moves by ≤ 2C (μ ≤ 2/σ = "
                        f"{2 / sigma_d:.4g})",
                        "a layer or loss that uses batch statistics (BatchNorm, functional "
                        "batch_norm, in-batch normalisation or negatives): per-sample gradients "
                        "must depend on their own example only; use GroupNorm/LayerNorm",
                    )
                )
        else:
            led.why_untested["cross-example"] = ce.reason
    elif protocol == "opacus":
        led.why_untested["cross-example"] = model.get(
            "not_tested", "budget spent before this check"
        )
    return mu_model_lo


def loss_weight_findings(
    model: dict[str, Any],
    info: dict[str, Any],
    pairs: Pairs,
    explained_by: tuple[list[str], list[tuple[str, float]]],
    mu_model_lo: float,
    led: Ledger,
) -> float:
    """The model-clipping check (one example's loss weighted by W against W = 0): a
    violation with ε = ∞ when the effect grows with W, a deviation when it exceeds 1/σ
    and what the optimizer-level pairs explain; neither is repeated when a noiseless or
    unclipped tensor (``explained_by``) or a batch-mixing layer already explains it.
    Returns ``mu_model_lo`` raised to the largest lower end measured."""
    moved_noiseless, unclipped = explained_by
    ar, expected_mu = pairs.ar, pairs.expected_mu
    ce = model.get("cross_example")
    lw = model.get("loss_weight")
    if lw is not None:
        if lw.tested:
            led.status["model-clipping"] = "passed"
            top = max(lw.mu_lower.values(), default=0.0)
            mu_model_lo = max(mu_model_lo, top)
            # effects the optimizer-level pairs or the cross-example check already name
            # (a noiseless or unclipped tensor, a batch-mixing layer) are not repeated
            explained = bool(moved_noiseless or unclipped) or (
                ce is not None and ce.tested and ce.rows_moved > 0
            )
            if explained:
                pass
            elif lw.grows:
                led.status["model-clipping"] = "violated"
                led.findings.append(
                    Finding(
                        "model-clipping",
                        "clipping: not applied through the model",
                        "violation",
                        "one example's effect grows with its loss's weight",
                        "; ".join(f"W={k}: μ={v:.4g}" for k, v in lw.mu.items()),
                        f"the same μ ≤ 1/σ = {expected_mu:.4g} for every W",
                        "the per-sample clipping in the backward pass (ghost clipping's "
                        "clipping coefficient, or the hooks' per-sample gradients)",
                        eps_view(math.inf, "sound lower bound", "sensitivity unbounded"),
                    )
                )
            elif top > max(
                expected_mu, max((e.mu for e in ar if not e.infinite_in), default=0.0)
            ) * (1 + EFFECT_SLACK):
                # beyond what the optimizer-level pairs already explain (noise scale)
                mu_pt_w = max(lw.mu.values())
                led.status["model-clipping"] = "violated"
                led.findings.append(
                    Finding(
                        "model-clipping",
                        "clipping: norm larger than claimed",
                        "deviation",
                        f"one example moves the release {mu_pt_w / expected_mu:.3g}× as far as "
                        "the claim allows",
                        f"μ = {mu_pt_w:.4g} (noise units) for one example whose loss is weighted "
                        "by W against W = 0",
                        f"μ ≤ 1/σ = {expected_mu:.4g}",
                        "the clipping norm inside the model (ghost clipping: the GradSampleModule's "
                        "max_grad_norm) must equal the optimizer's, which sets the noise",
                    )
                )
        elif info.get("ghost_clipping"):
            led.why_untested["model-clipping"] = lw.reason
    return mu_model_lo


def _idle_trainable_finding(out_rel: Any, setup: Setup, led: Ledger) -> None:
    """A finding for trainable tensors outside the DP optimizer that did not change: a
    warning when the setup's own train_step ran, inconclusive when it could not."""
    trained = {ch["name"] for ch in out_rel.changed}
    idle = [n for n in out_rel.trainable_not_released if n not in trained]
    if idle:
        led.findings.append(
            Finding(
                "coverage",
                "coverage: trainable but not in the DP optimizer",
                "warning" if setup.optional.get("train_step") else "inconclusive",
                f"{len(idle)} trainable tensor(s) are not in the DP optimizer",
                ", ".join(idle[:6]),
                "every trainable tensor in the DP optimizer, or frozen",
                "set requires_grad=False on what you do not train"
                + (
                    " (your train_step did not train them)"
                    if setup.optional.get("train_step")
                    else "; without train_step dp-check cannot see whether your loop "
                    "trains them with another optimizer: define train_step"
                ),
            )
        )


def outside_release_findings(model: dict[str, Any], setup: Setup, led: Ledger) -> None:
    """The outside-release check: for each buffer or parameter outside the DP optimizer
    that one example changes, a violation with ε = ∞ when it is a deterministic function
    of the batch, else inconclusive; then :func:`_idle_trainable_finding`."""
    out_rel = model.get("outside")
    if out_rel is not None:
        if out_rel.tested:
            led.status["outside-release"] = "passed"
            for ch in out_rel.changed:
                if not ch["depends_on_one_example"]:
                    continue
                det = ch["deterministic"]
                led.status["outside-release"] = "violated" if det else "inconclusive"
                led.findings.append(
                    Finding(
                        "outside-release",
                        f"{ch['kind']} trained outside the DP optimizer",
                        "violation" if det else "inconclusive",
                        f"{ch['kind']} `{ch['name']}` changes with one example and is not "
                        "released through the DP optimizer",
                        (
                            "a deterministic function of the batch"
                            if det
                            else "changed, with some other randomness"
                        )
                        + f" (largest change {ch['max_change']:.3g})",
                        "only the DP optimizer's noisy release changes the model",
                        (
                            "a buffer updated in the forward pass (BatchNorm running statistics): "
                            "freeze it, or replace the layer"
                            if ch["kind"] == "buffer"
                            else "a second optimizer, or a parameter outside the DP optimizer's "
                            "groups, is trained on the data: give it to the DP optimizer or freeze it"
                        ),
                        eps_view(math.inf, "sound lower bound", "released without noise")
                        if det
                        else None,
                    )
                )
            _idle_trainable_finding(out_rel, setup, led)
        else:
            led.why_untested["outside-release"] = out_rel.reason


def model_findings(
    model: dict[str, Any],
    setup: Setup,
    info: dict[str, Any],
    pairs: Pairs,
    explained_by: tuple[list[str], list[tuple[str, float]]],
    led: Ledger,
) -> float:
    """Every model finding, in report order. Returns the lower end of one example's
    effect on the release that the model checks measured (noise units; 0.0 when none)."""
    mu_model_lo = cross_example_findings(model, setup.protocol, setup.claim.noise_multiplier, led)
    mu_model_lo = loss_weight_findings(model, info, pairs, explained_by, mu_model_lo, led)
    outside_release_findings(model, setup, led)
    return mu_model_lo
