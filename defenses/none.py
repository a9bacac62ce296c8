"""Defense ``none``: plain fine-tuning, the non-private reference point."""

from __future__ import annotations

import torch

from defenses.base import Defense, Examples, PrivacyClaim, TrainingReport
from defenses.classifier import ClassifierRelease, TrainingConfig, make_loader, train_loop


class NonPrivate(Defense):
    name = "none"
    description = "Non-private fine-tuning (reference point; no formal privacy)."
    PARAMS: dict = {}

    def fit(self, target, train: Examples, training: TrainingConfig, seed: int):
        model, tokenizer = target.build(seed)
        torch.manual_seed(seed)
        loader = make_loader(tokenizer, train, training, seed)
        optimizer = torch.optim.AdamW(
            model.parameters(), lr=training.learning_rate, weight_decay=training.weight_decay
        )
        info = train_loop(model, optimizer, loader, training, desc="train none")
        claim = PrivacyClaim.none("Non-private training: no privacy guarantee is claimed.")
        release = ClassifierRelease(
            model, tokenizer, training.max_length, claim, target.label_names, training.device
        )
        return release, TrainingReport(info)
