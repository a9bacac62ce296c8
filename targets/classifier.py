"""Training loop and released surfaces shared by the classifier defenses.

Kept apart from any mechanism: the non-private and DP-SGD defenses differ only in how
gradients become updates (Opacus wraps the model and optimizer) and in what gradient
update they release.
"""

from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from privacy_audit.defenses.base import Examples, PrivacyClaim, ReleasedModel, Surface
from privacy_audit.defenses.gradient_mechanism import GaussianGradientMechanism, SamplingSchedule


@dataclass(frozen=True)
class TrainingConfig:
    epochs: int = 10
    batch_size: int = 32
    learning_rate: float = 1e-3
    weight_decay: float = 0.0
    max_length: int = 64
    device: str = "cpu"
    progress: bool = True
    # white-box one-run audit: Dirac gradient canaries inserted by DP-SGD trainers (0 = none)
    gradient_canaries: int = 0


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    return torch.device(name)


def encode(tokenizer, texts: list[str], max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    enc = tokenizer(
        list(texts),
        padding="max_length",
        truncation=True,
        max_length=max_length,
        return_tensors="pt",
    )
    return enc["input_ids"], enc["attention_mask"]


def trim_padding(input_ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Drop padding columns beyond the batch's longest sequence (attention is masked, so
    outputs are unchanged; compute falls with the padding)."""
    longest = max(int(mask.sum(dim=1).max()), 1)
    return input_ids[:, :longest], mask[:, :longest]


def make_loader(tokenizer, data: Examples, cfg: TrainingConfig, seed: int) -> DataLoader:
    ids, mask = encode(tokenizer, data.texts, cfg.max_length)
    labels = torch.as_tensor(data.labels, dtype=torch.long)
    g = torch.Generator().manual_seed(seed)
    return DataLoader(
        TensorDataset(ids, mask, labels), batch_size=cfg.batch_size, shuffle=True, generator=g
    )


def train_loop(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: DataLoader,
    cfg: TrainingConfig,
    desc: str,
    on_epoch_end=None,
) -> dict[str, Any]:
    """Plain supervised training; Opacus-wrapped model/optimizer/loader work unchanged."""
    device = resolve_device(cfg.device)
    model.to(device).train()
    start = time.perf_counter()
    steps = 0
    last_loss = math.nan
    from privacy_audit.ground.progress import progress_bar

    bar = progress_bar(cfg.epochs * len(loader), desc, cfg.progress, cfg.epochs, leave=False)
    for epoch in range(cfg.epochs):
        running, count = 0.0, 0
        for input_ids, mask, labels in loader:
            if input_ids.shape[0] == 0:  # Poisson sampling can draw an empty batch
                bar.update(1)
                continue
            loss = supervised_step(model, optimizer, (input_ids, mask, labels), device)
            running += loss * input_ids.shape[0]
            count += input_ids.shape[0]
            steps += 1
            bar.update(1)
            bar.set_postfix(epoch=epoch + 1, loss=f"{running / max(count, 1):.3f}")
        last_loss = running / max(count, 1)
        if on_epoch_end is not None:
            on_epoch_end(epoch)
    bar.close()
    return {
        "epochs": cfg.epochs,
        "steps": steps,
        "final_train_loss": last_loss,
        "seconds": time.perf_counter() - start,
    }


def supervised_step(model, optimizer, batch, device=None) -> float:
    """One step of :func:`train_loop` on a non-empty ``(input_ids, mask, labels)`` batch:
    the loop body, also what ``privacy-audit dp-check`` runs as the suite's own
    ``train_step``. Returns the batch's mean loss."""
    input_ids, mask, labels = batch
    input_ids, mask = trim_padding(input_ids, mask)
    if device is not None:
        input_ids, mask, labels = input_ids.to(device), mask.to(device), labels.to(device)
    optimizer.zero_grad(set_to_none=True)
    out = model(**forward_kwargs(model, input_ids, mask))
    loss = torch.nn.functional.cross_entropy(out.logits, labels)
    loss.backward()
    optimizer.step()
    return float(loss.detach())


def forward_kwargs(
    model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor
) -> dict:
    """Model inputs with explicit, batch-shaped ``position_ids``/``token_type_ids``.

    BERT's default position/token-type buffers have batch dimension 1; Opacus's per-sample
    gradient hooks then see a batch of 1 for those embeddings and fail. Passing them
    explicitly keeps every embedding input batch-shaped. Only arguments the model's
    ``forward`` accepts are passed, so DistilBERT-like models work too.
    """
    base = model._module if hasattr(model, "_module") else model
    accepted = inspect.signature(base.forward).parameters
    kw = {"input_ids": input_ids, "attention_mask": attention_mask}
    if "token_type_ids" in accepted:
        kw["token_type_ids"] = torch.zeros_like(input_ids)
    if "position_ids" in accepted:
        kw["position_ids"] = torch.arange(input_ids.shape[1], device=input_ids.device).expand_as(
            input_ids
        )
    return kw


class ClassifierRelease(ReleasedModel):
    """A trained sequence classifier, queried as a black box plus optional white-box views.

    Surfaces: probabilities, per-example loss, the [CLS] representation of the last
    encoder layer (hidden), and the batch gradient update the training mechanism
    releases (gradients), produced by ``gradient_mechanism`` (plain mean gradient for
    non-private training, clip + Gaussian noise for DP-SGD) under ``schedule``.
    """

    surfaces = frozenset({Surface.PROBABILITIES, Surface.LOSS, Surface.HIDDEN, Surface.GRADIENTS})

    def __init__(
        self,
        model: torch.nn.Module,
        tokenizer,
        max_length: int,
        claim: PrivacyClaim,
        label_names: list[str],
        device: str = "cpu",
        gradient_mechanism: GaussianGradientMechanism | None = None,
        schedule: SamplingSchedule | None = None,
        batch_size: int = 64,
    ) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.max_length = max_length
        self.claim = claim
        self.label_names = list(label_names)
        self.device = resolve_device(device)
        self.gradient_mechanism = gradient_mechanism or GaussianGradientMechanism(None)
        self.schedule = schedule
        self.batch_size = batch_size
        self._cache: dict[int, tuple[tuple[str, ...], np.ndarray, np.ndarray]] = {}
        self.model.to(self.device).eval()

    @torch.no_grad()
    def _forward(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Logits and [CLS] hidden states, cached for the last text list (attacks share them)."""
        key = hash(tuple(texts))
        hit = self._cache.get(key)
        if hit is not None and hit[0] == tuple(texts):
            return hit[1], hit[2]
        logits, hidden = [], []
        for i in range(0, len(texts), self.batch_size):
            ids, mask = trim_padding(
                *encode(self.tokenizer, texts[i : i + self.batch_size], self.max_length)
            )
            ids, mask = ids.to(self.device), mask.to(self.device)
            out = self.model(**forward_kwargs(self.model, ids, mask), output_hidden_states=True)
            logits.append(out.logits.double().cpu().numpy())
            hidden.append(out.hidden_states[-1][:, 0, :].float().cpu().numpy())
        result = (np.concatenate(logits), np.concatenate(hidden))
        self._cache = {key: (tuple(texts), *result)}
        return result

    def probabilities(self, texts: list[str]) -> np.ndarray:
        logits, _ = self._forward(texts)
        z = logits - logits.max(axis=1, keepdims=True)
        p = np.exp(z)
        return p / p.sum(axis=1, keepdims=True)

    def loss(self, texts: list[str], labels: np.ndarray) -> np.ndarray:
        logits, _ = self._forward(texts)
        labels = np.asarray(labels, dtype=np.int64)
        z = logits - logits.max(axis=1, keepdims=True)
        log_norm = np.log(np.exp(z).sum(axis=1))
        return log_norm - z[np.arange(len(labels)), labels]

    def hidden(self, texts: list[str]) -> np.ndarray:
        return self._forward(texts)[1]

    def gradient_update(self, texts: list[str], labels: np.ndarray, seed: int = 0) -> np.ndarray:
        params = [p for p in self.model.parameters() if p.requires_grad]
        labels = torch.as_tensor(np.asarray(labels), dtype=torch.long)
        was_training = self.model.training
        self.model.eval()  # dropout off: the update is a deterministic function of the batch
        rows = []
        for text, label in zip(texts, labels, strict=True):
            ids, mask = trim_padding(*encode(self.tokenizer, [text], self.max_length))
            ids, mask = ids.to(self.device), mask.to(self.device)
            out = self.model(**forward_kwargs(self.model, ids, mask))
            loss = torch.nn.functional.cross_entropy(out.logits, label.view(1).to(self.device))
            grads = torch.autograd.grad(loss, params)
            rows.append(torch.cat([g.reshape(-1) for g in grads]).double().cpu())
        self.model.train(was_training)
        per_example = (
            torch.stack(rows)
            if rows
            else torch.zeros(0, sum(p.numel() for p in params), dtype=torch.float64)
        )
        generator = torch.Generator().manual_seed(seed)
        return self.gradient_mechanism.release(per_example, max(len(texts), 1), generator).numpy()


def evaluate_accuracy(release: ReleasedModel, data: Examples) -> dict[str, Any]:
    """Accuracy with an exact (Clopper–Pearson) 95% interval."""
    return ReleasedModel.evaluate_utility(release, data)
