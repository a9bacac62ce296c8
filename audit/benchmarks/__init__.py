"""Benchmarks for ``privacy-audit bench``: side-by-side cost ratios measured in one run.

Each benchmark is a function ``run(settings: BenchSettings) -> BenchResult`` registered
below as ``"module:function"`` (imported only when selected). A benchmark times every
case on the same model and batch with :func:`audit.benchmarks.timing.time_cases`, which
interleaves the cases round-robin so that machine load drifts affect all of them alike,
and reports ratios against a named reference case (usually non-private training).
"""

from __future__ import annotations

BENCHMARKS: dict[str, str] = {
    "dp-sgd": "audit.benchmarks.dp_sgd:run",
    "dp-forward": "audit.benchmarks.dp_forward:run",
    "cost-of-privacy": "audit.benchmarks.cost_of_privacy:run",
    "dp-blogs": "audit.benchmarks.dp_blogs:run",
    "dp-attention": "audit.benchmarks.dp_attention:run",
    "ray-scaling": "audit.benchmarks.ray_scaling:run",
    "split-n-denoise": "audit.benchmarks.split_n_denoise:run",
    "byo-lm": "audit.benchmarks.byo_lm:run",
    "metrics": "audit.benchmarks.metrics:run",
    "re-attention-recsys": "audit.benchmarks.re_attention_recsys:run",
}

__all__ = ["BENCHMARKS"]
