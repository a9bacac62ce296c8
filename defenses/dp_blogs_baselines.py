"""DP-SGD on the small causal LM: the DP-BloGS paper's baseline (it used fastDP; this is
Opacus), for the membership and extraction comparison of the DP-BloGS paper.

Per-example clipping of the sequence's mean next-token loss gradient and Gaussian noise with
Poisson sampling; σ calibrated to (ε, δ) by Opacus (PRV accountant), the spent ε read back
from it. The output embedding is untied from the input embedding (Opacus needs every
parameter in one module); otherwise the architecture is the shared LM target's.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import torch

from privacy_audit.defenses.base import PrivacyClaim
from privacy_audit.defenses.gradient_mechanism import GaussianGradientMechanism, SamplingSchedule
from privacy_audit.targets.lm import LMRelease, LMTokenizer, build_lm, trim


def _per_sequence_loss(gsm, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean next-token NLL per sequence (as ``privacy_audit.targets.lm.sequence_loss``), with explicit
    per-row position ids so Opacus sees the batch dimension in the position embedding."""
    pos = torch.arange(ids.shape[1]).expand(ids.shape[0], -1)
    logits = gsm(input_ids=ids, attention_mask=mask, position_ids=pos).logits[:, :-1]
    valid = mask[:, 1:].to(logits.dtype)
    nll = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1), reduction="none"
    ).view_as(valid)
    return (nll * valid).sum(1) / valid.sum(1).clamp(min=1)


def train_lm_dp_sgd(
    tokenizer: LMTokenizer,
    texts: list[str],
    epsilon: float = 8.0,
    delta: float = 1e-5,
    epochs: int = 10,
    batch_size: int = 32,
    learning_rate: float = 3e-3,
    max_length: int = 128,
    max_grad_norm: float = 1.0,
    seed: int = 0,
    model_kwargs: dict[str, Any] | None = None,
) -> tuple[LMRelease, dict[str, Any]]:
    """Train an untied copy of the LM target with Opacus DP-SGD; returns the release and
    training facts (σ, q, steps, ε spent)."""
    from opacus import PrivacyEngine
    from opacus.accountants.utils import get_noise_multiplier

    if not (epsilon > 0 and math.isfinite(epsilon)):
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    model = build_lm(tokenizer.vocab_size, seed=seed, tie=False, **(model_kwargs or {}))
    ids, mask = tokenizer.encode(texts, max_length)
    ds = torch.utils.data.TensorDataset(ids, mask)
    g = torch.Generator().manual_seed(seed)
    loader = torch.utils.data.DataLoader(ds, batch_size=batch_size, shuffle=True, generator=g)
    q = batch_size / len(ds)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sigma = get_noise_multiplier(
            target_epsilon=epsilon,
            target_delta=delta,
            sample_rate=q,
            epochs=epochs,
            accountant="prv",
        )
        opt = torch.optim.AdamW(model.parameters(), lr=learning_rate)
        engine = PrivacyEngine(accountant="prv")
        gsm, dp_opt, dp_loader = engine.make_private(
            module=model,
            optimizer=opt,
            data_loader=loader,
            noise_multiplier=sigma,
            max_grad_norm=max_grad_norm,
            poisson_sampling=True,
        )
        torch.manual_seed(seed)
        gsm.train()
        steps = 0
        for _ in range(epochs):
            for b_ids, b_mask in dp_loader:
                if len(b_ids) == 0:
                    continue
                b_ids, b_mask = trim(b_ids, b_mask)
                dp_opt.zero_grad(set_to_none=True)
                _per_sequence_loss(gsm, b_ids, b_mask).mean().backward()
                dp_opt.step()
                steps += 1
        spent = float(engine.get_epsilon(delta))
    gsm.remove_hooks()
    model = gsm._module
    claim = PrivacyClaim(
        epsilon=spent,
        delta=delta,
        unit="sequence",
        notion="central-dp",
        accountant="opacus-prv",
        proven=True,
        note=f"DP-SGD (Opacus), Poisson q={q:.4g}, σ={sigma:.4g}, C={max_grad_norm:g}, {steps} steps.",
    )
    release = LMRelease(
        model,
        tokenizer,
        max_length,
        claim,
        gradient_mechanism=GaussianGradientMechanism(max_grad_norm, sigma),
        schedule=SamplingSchedule(q, steps),
    )
    info = {
        "noise_multiplier": sigma,
        "sample_rate": q,
        "steps": steps,
        "epsilon_spent": spent,
        "seconds": time.perf_counter() - start,
    }
    return release, info
