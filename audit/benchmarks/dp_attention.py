"""``privacy-audit bench dp-attention``: training step of the tiny BERT classifier with the
DP attention layer swapped into one layer and into every layer, over the non-private
step, same model, batch and optimizer."""

from __future__ import annotations

import copy

import torch

from privacy_audit.audit.benchmarks.dp_sgd import classifier_batch, plain_step
from privacy_audit.audit.benchmarks.timing import BenchResult, BenchSettings, ratios_to, time_cases


def run(settings: BenchSettings) -> BenchResult:
    from privacy_audit.defenses.dp_attention import (
        DPAttentionConfig,
        dp_modules,
        encoder_layers,
        swap_attention,
    )

    batch, seq = (8, 32) if settings.quick else (32, 64)
    model, ids, mask, y = classifier_batch(batch, seq, settings.seed)
    cfg = DPAttentionConfig(max_tokens=seq)
    n_layers = len(encoder_layers(model))
    gen = torch.Generator().manual_seed(settings.seed)

    def stepper(m):
        m.train()
        for mod in dp_modules(m):
            mod.generator = gen
        return plain_step(m, ids, mask, y)

    one = copy.deepcopy(model)
    swap_attention(one, [0], cfg)
    every = copy.deepcopy(model)
    swap_attention(every, list(range(n_layers)), cfg)
    cases = {
        "non-private": stepper(copy.deepcopy(model)),
        "dp-attention (1 layer)": stepper(one),
        f"dp-attention ({n_layers} layers)": stepper(every),
    }
    timings = time_cases(cases, settings.repeats, settings.warmup)
    return BenchResult(
        name="dp-attention",
        reference="non-private",
        cases={k: v.summary() for k, v in timings.items()},
        ratios=ratios_to(timings, "non-private"),
        setup={
            "model": "tiny BERT classifier",
            "batch_size": batch,
            "seq_len": seq,
            "k": cfg.samples,
            "mode": cfg.mode,
        },
        notes=[
            "Per sequence and head: Cholesky of the n x n Gram matrix (float64) and a Bartlett "
            "Wishart draw, O(n^3) whatever k is; gradients flow through the Cholesky factor."
        ],
    )
