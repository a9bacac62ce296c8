"""``privacy-audit bench dp-sgd``: Opacus DP-SGD training step over the non-private step
on the tiny BERT classifier, same model, batch and optimizer."""

from __future__ import annotations

import copy

import numpy as np
import torch

from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, ratios_to, time_cases


def classifier_batch(batch_size: int, seq_len: int, seed: int, preset: str = "tiny"):
    """A classifier target (``preset``) and one fixed batch of fixture text."""
    from privacy_audit import fixtures
    from privacy_audit.targets.classifier import encode
    from privacy_audit.targets.loading import Target, TargetSpec

    rows = fixtures.load_corpus("private")
    labels = sorted({r["label"] for r in rows})
    rows = rows[:batch_size]
    target = Target(TargetSpec(preset, None, seq_len, 0), tuple(labels), None, "cpu", False)
    model, tokenizer = target.build(seed)
    ids, mask = encode(tokenizer, [r["text"] for r in rows], seq_len)
    y = torch.as_tensor(np.array([labels.index(r["label"]) for r in rows]))
    return model, ids, mask, y


def plain_step(model, ids, mask, y):
    """One SGD step of ``model`` (trained in place) on the batch, cross-entropy loss."""
    from privacy_audit.targets.classifier import forward_kwargs

    loss_fn = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step():
        opt.zero_grad(set_to_none=True)
        loss_fn(model(**forward_kwargs(model, ids, mask)).logits, y).backward()
        opt.step()

    return step


def opacus_dp_sgd_step(model, ids, mask, y, seed: int):
    """One DP-SGD step on a copy of ``model``: Opacus per-sample gradients, clip to C = 1,
    add N(0, σ²C²) with σ = 1, average, SGD."""
    from opacus import GradSampleModule

    from privacy_audit.targets.classifier import forward_kwargs

    loss_fn = torch.nn.CrossEntropyLoss()
    private = GradSampleModule(copy.deepcopy(model).train())
    params = [p for p in private.parameters() if p.requires_grad]
    opt_private = torch.optim.SGD(params, lr=1e-3)
    gen = torch.Generator().manual_seed(seed)

    def step():
        opt_private.zero_grad(set_to_none=True)
        loss_fn(private(**forward_kwargs(private._module, ids, mask)).logits, y).backward()
        norms = torch.stack([p.grad_sample.flatten(1).norm(dim=1) for p in params]).norm(dim=0)
        scale = (1.0 / (norms + 1e-6)).clamp(max=1.0)
        for p in params:
            g = torch.einsum("b,b...->...", scale, p.grad_sample)
            p.grad = (g + torch.randn(g.shape, generator=gen)) / len(y)
            p.grad_sample = None
        opt_private.step()

    return step


def run(settings: BenchSettings) -> BenchResult:
    batch, seq = (8, 32) if settings.quick else (32, 64)
    model, ids, mask, y = classifier_batch(batch, seq, settings.seed)
    step_plain = plain_step(copy.deepcopy(model).train(), ids, mask, y)
    step_dp_sgd = opacus_dp_sgd_step(model, ids, mask, y, settings.seed)

    timings = time_cases(
        {"non-private": step_plain, "dp-sgd": step_dp_sgd}, settings.repeats, settings.warmup
    )
    return BenchResult(
        name="dp-sgd",
        reference="non-private",
        cases={k: v.summary() for k, v in timings.items()},
        ratios=ratios_to(timings, "non-private"),
        setup={"model": "tiny BERT classifier", "batch_size": batch, "seq_len": seq},
        notes=["Opacus GradSampleModule per-sample gradients; clip and noise as in DP-SGD."],
    )
