"""Scoring a large example set across Ray workers, one model replica per worker.

Data parallelism with Ray's own machinery: a :class:`ray.util.ActorPool` of scoring
actors, each loading the model once (from the same local directory and options as the
driver; one GPU per actor when the cluster has GPUs). The driver plans the length-bucketed
batches exactly as a local run does (:func:`~privacy_audit.targets.scoring.length_batches`) and
the pool maps them over the actors in order, so each batch is the same forward pass as in
a local run and the results are the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from privacy_audit.defenses.base import TokenStats


class _Scorer:
    """One model replica (a Ray actor)."""

    def __init__(self, recipe: dict[str, Any], threads: int) -> None:
        import torch

        torch.set_num_threads(threads)  # same summation order as the driver's local run
        from privacy_audit.defenses.base import PrivacyClaim
        from privacy_audit.targets.loading import load_audit_target, load_causal_lm_release

        device = recipe["device"]
        if torch.cuda.is_available() and recipe["device"] == "cuda":
            device = "cuda"
        loaded = load_audit_target(
            recipe["path"],
            "causal-lm",
            recipe.get("adapter_dir"),
            True,  # the driver already checked (or allowed) uninitialised weights
            device,
            recipe.get("dtype", "auto"),
            recipe.get("device_map", "none"),
        )
        self.release = load_causal_lm_release(
            loaded,
            recipe["max_length"],
            PrivacyClaim.none("scoring replica"),
            device,
            add_bos=recipe.get("add_bos", "auto"),  # the driver's encoding
            add_eos=recipe.get("add_eos", False),
        )

    def score(self, texts: list[str], extraction=None) -> list[tuple]:
        from privacy_audit.targets.scoring import (
            encode_lengths,
            extraction_spans,
            score_batch,
        )

        rel = self.release
        rows, _ = encode_lengths(rel.tokenizer, texts, rel.max_length)
        spans = extraction_spans(rel.tokenizer, texts, rows, extraction)
        decoding = extraction.decoding if extraction is not None else None
        stats, hidden = score_batch(rel.model, rel.tokenizer, rows, True, decoding, spans)
        return [
            (
                s.token_ids,
                s.log_probs,
                s.mean_log_prob,
                s.var_log_prob,
                hidden[k],
                s.decoding_log_probs,
                s.top1_ids,
            )
            for k, s in enumerate(stats)
        ]


def ray_token_stats(release, texts: list[str], executor) -> tuple[list[TokenStats], list]:
    """Token statistics and pooled hidden states of ``texts`` for ``release`` (an
    :class:`~privacy_audit.targets.scoring.HFLMRelease` built by ``load_causal_lm_release``),
    computed on Ray actors. ``executor`` is an ``privacy_audit.audit.scale.executors.ExecutorSpec``."""
    import torch

    from privacy_audit.audit.scale.executors import RayExecutor
    from privacy_audit.ground.errors import AuditError
    from privacy_audit.targets.scoring import encode_lengths, length_batches

    recipe = getattr(release, "recipe", None)
    if recipe is None:
        raise AuditError("--executor ray scoring needs a model loaded from a local directory")
    if not texts:
        return [], []
    _, lengths = encode_lengths(release.tokenizer, texts, release.max_length)
    batches = list(length_batches(lengths, release.batch_size, release.token_budget))
    ray_exec = RayExecutor(executor)  # ray.init as the training executor does it
    ray = ray_exec.ray
    try:
        from ray.util import ActorPool

        gpus = int(ray.cluster_resources().get("GPU", 0))
        cpus = int(ray.cluster_resources().get("CPU", 1))
        per = max(1, int(getattr(executor, "cpus_per_task", 1) or 1))
        n = executor.workers or (gpus if gpus else max(1, cpus // per))
        n = max(1, min(n, len(batches)))
        options: dict[str, Any] = {"num_cpus": per}
        if gpus and recipe["device"] == "cuda":
            options["num_gpus"] = 1
        actor_cls = ray.remote(**options)(_Scorer)
        threads = torch.get_num_threads()
        actors = [actor_cls.remote(recipe, threads) for _ in range(n)]
        pool = ActorPool(actors)
        chunks = [[texts[i] for i in b] for b in batches]
        out_stats: list[TokenStats | None] = [None] * len(texts)
        out_hidden: list[np.ndarray | None] = [None] * len(texts)
        try:
            extraction = getattr(release, "extraction", None)
            results = list(pool.map(lambda a, v: a.score.remote(v, extraction), chunks))
        except ray.exceptions.RayActorError as exc:
            raise AuditError(f"a Ray scoring worker failed: {exc}") from None
        for b, res in zip(batches, results, strict=True):
            for i, (tid, lp, mu, var, h, dec, top1) in zip(b, res, strict=True):
                out_stats[i] = TokenStats(tid, lp, mu, var, dec, top1)
                out_hidden[i] = h
        for a in actors:
            ray.kill(a)
        return out_stats, out_hidden
    finally:
        ray_exec.close()


def prefill_token_stats(release, texts: list[str], executor=None, progress: bool = True) -> str:
    """Compute every text's token statistics once, before any attack: in-process, or on
    Ray actors (one model replica each) with ``executor.kind == 'ray'``. Returns where."""
    texts = list(dict.fromkeys(texts))
    if executor is not None and getattr(executor, "kind", "local") == "ray":
        stats, hidden = ray_token_stats(release, texts, executor)
        release.__dict__.setdefault("_token_stats_cache", {}).update(zip(texts, stats, strict=True))
        release._hidden_cache.update(zip(texts, hidden, strict=True))
        return "ray"
    release.show_progress = progress  # a tqdm bar in a terminal / CI log
    try:
        release.token_stats(texts)
    finally:
        release.show_progress = False
    return "local"
