"""Benchmarks for ``privacy-audit bench``: side-by-side cost ratios measured in one run.

Each benchmark is a function ``run(settings: BenchSettings) -> BenchResult`` registered
below as ``"module:function"`` (imported only when selected). A benchmark times every
case on the same model and batch with :func:`privacy_audit.audit.benchmarks.timing.time_cases`, which
interleaves the cases round-robin so that machine load drifts affect all of them alike,
and reports ratios against a named reference case (usually non-private training).
"""

from __future__ import annotations

BENCHMARKS: dict[str, str] = {
    "dp-sgd": "privacy_audit.audit.benchmarks.dp_sgd:run",
    "dp-forward": "privacy_audit.audit.benchmarks.dp_forward:run",
    "cost-of-privacy": "privacy_audit.audit.benchmarks.cost_of_privacy:run",
    "dp-blogs": "privacy_audit.audit.benchmarks.dp_blogs:run",
    "dp-attention": "privacy_audit.audit.benchmarks.dp_attention:run",
    "ray-scaling": "privacy_audit.audit.benchmarks.ray_scaling:run",
    "split-n-denoise": "privacy_audit.audit.benchmarks.split_n_denoise:run",
    "byo-lm": "privacy_audit.audit.benchmarks.byo_lm:run",
    "frontier": "privacy_audit.audit.benchmarks.frontier:run",
    "metrics": "privacy_audit.audit.benchmarks.metrics:run",
    "score": "privacy_audit.audit.benchmarks.score_cli:run",
    "re-attention-recsys": "privacy_audit.audit.benchmarks.re_attention_recsys:run",
    "input-hash": "privacy_audit.audit.benchmarks.input_hash:run",
    "split-check": "privacy_audit.audit.benchmarks.split_check_cost:run",
    "scale": "privacy_audit.audit.benchmarks.scale:run",
    "dp-check": "privacy_audit.audit.benchmarks.dp_check:run",
    "users": "privacy_audit.audit.benchmarks.users:run",
    "user-dp": "privacy_audit.audit.benchmarks.user_dp:run",
}

__all__ = ["BENCHMARKS"]
