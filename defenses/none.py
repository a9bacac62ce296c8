"""Defense ``none``: plain fine-tuning, the non-private reference point."""

from __future__ import annotations

import torch

from privacy_audit.defenses.base import Defense, Examples, PrivacyClaim, TrainingReport
from privacy_audit.defenses.gradient_mechanism import GaussianGradientMechanism, SamplingSchedule
from privacy_audit.targets.classifier import (
    ClassifierRelease,
    TrainingConfig,
    make_loader,
    train_loop,
)


class NonPrivate(Defense):
    name = "none"
    description = "Non-private fine-tuning (reference point; no formal privacy)."
    PARAMS: dict = {}

    def fit(self, target, train: Examples, training: TrainingConfig, seed: int):
        from privacy_audit.targets.lm import fit_lm_nonprivate, is_lm_target

        if is_lm_target(target):
            return fit_lm_nonprivate(target, train, training, seed)
        model, tokenizer = target.build(seed)
        torch.manual_seed(seed)
        loader = make_loader(tokenizer, train, training, seed)
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=training.learning_rate, weight_decay=training.weight_decay
        )
        info = train_loop(model, optimizer, loader, training, desc="train none")
        claim = PrivacyClaim.none("Non-private training: no privacy guarantee is claimed.")
        # Shuffled minibatches: each example is in exactly one batch per epoch.
        schedule = SamplingSchedule(
            min(1.0, training.batch_size / len(train)),
            int(info["steps"]),
            appearances=training.epochs,
        )
        release = ClassifierRelease(
            model,
            tokenizer,
            training.max_length,
            claim,
            target.label_names,
            training.device,
            gradient_mechanism=GaussianGradientMechanism(None),
            schedule=schedule,
        )
        return release, TrainingReport(info)
