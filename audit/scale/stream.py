"""Scoring a user's causal LM in chunks: memory bounded in the number of texts, and a run
that stops mid-scoring resumes from its last finished chunk.

What is kept per text is what the attacks read: the :class:`~privacy_audit.defenses.base.TokenStats`
of its scored tokens (O(tokens) numbers, never the V-sized logits) and its pooled hidden
state (d numbers). What is *not* kept across the run: the encodings (token rows), the
extraction spans and the batch tensors. The distinct texts are cut into chunks of
:data:`CHUNK_TEXTS` in input order; each chunk is encoded, scored in length-bucketed batches
(:func:`~privacy_audit.targets.scoring.score_texts`, the same forward pass and
statistics as the whole-set path: for n <= :data:`CHUNK_TEXTS` it *is* the whole-set path)
and dropped, so the transient memory is one chunk's encodings plus one batch's logits,
whatever n is.

Checkpoints (with a run directory): each finished chunk's per-text results are written
atomically to ``RUN_DIR/scoring/<digest>.npz`` (numpy arrays only, read back with
``allow_pickle=False``). The digest is a SHA-256 over

- the model's content (:func:`privacy_audit.audit.scale.fingerprint.content_digest` of the model
  directory and of the adapter: every file's bytes, cached per file),
- the scoring settings (the encoding convention and ``max_length``, batch size and token
  budget, extraction spec, dtype, device, torch version, the model's role), and
- the chunk's texts (each text's SHA-256, in order).

``--resume`` loads a chunk whose digest matches and scores the rest, so a resumed run skips
the finished chunks and gives the same numbers as an uninterrupted one; an edited text
changes its chunk's digest (that chunk is scored again, the others are reused), and a
changed model or setting changes every digest. A file that cannot be read or does not hold
what its name promises is scored again (never trusted). Without ``--resume`` nothing is
read back (as for the run directory's other tasks); the chunks are still written.
Inserting or deleting a text shifts the chunks after it, which are then scored again.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: Distinct texts per chunk: large enough that length bucketing inside a chunk fills its
#: batches, small enough that one chunk's encodings are a few MB at 512 tokens.
CHUNK_TEXTS = 1024
#: Scored texts between two returns of the heap's free pages to the system
#: (:func:`~privacy_audit.audit.scale.malloc.release_free_memory`): the resident memory
#: then grows by at most this many texts' fragmentation between two returns (measured in
#: docs/large-inputs-one-machine.md), and the batches' pages are faulted in again once per this many texts.
TRIM_TEXTS = 256
#: Checkpoint layout version (part of every digest: a new layout never reads an old one).
FORMAT = 1
#: The run directory's folder of chunk checkpoints.
FOLDER = "scoring"
_FIELDS = ("token_ids", "log_probs", "mean_log_prob", "var_log_prob")
_OPTIONAL = ("decoding_log_probs", "top1_ids")


def _log(msg: str, progress: bool) -> None:
    if progress:
        print(msg, file=sys.stderr, flush=True)


def text_digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


def scoring_key(release, role: str = "target") -> str:
    """SHA-256 of what decides a chunk's numbers besides its texts: the model's contents
    and the scoring settings (see the module docstring)."""
    import torch

    from privacy_audit.audit.scale.fingerprint import content_digest

    recipe = getattr(release, "recipe", None) or {}
    model = {
        k: (content_digest(recipe[k]) if recipe.get(k) else None) for k in ("path", "adapter_dir")
    }
    if model["path"] is None:  # not loaded from a directory: no content to key on
        raise ValueError("chunk checkpoints need a model loaded from a local directory")
    spec = getattr(release, "extraction", None)
    params = next(release.model.parameters(), None)
    settings = {
        "format": FORMAT,
        "role": role,
        "model": model,
        "recipe": {k: v for k, v in recipe.items() if k not in ("path", "adapter_dir")},
        "encoding": release.encoding(),
        "batch_size": int(release.batch_size),
        "token_budget": release.token_budget,
        "extraction": spec.to_dict() if hasattr(spec, "to_dict") else repr(spec),
        "dtype": str(params.dtype) if params is not None else None,
        "device": str(params.device) if params is not None else None,
        "torch": torch.__version__,
    }
    blob = json.dumps(settings, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()


def chunk_digest(key: str, texts: Sequence[str]) -> str:
    h = hashlib.sha256(key.encode())
    h.update(len(texts).to_bytes(8, "little"))
    for t in texts:
        h.update(text_digest(t))
    return h.hexdigest()


def chunks(texts: Sequence[str], size: int = CHUNK_TEXTS) -> list[list[str]]:
    if size < 1:
        raise ValueError(f"chunk size must be at least 1, got {size}")
    return [list(texts[i : i + size]) for i in range(0, len(texts), size)]


class ChunkStore:
    """The chunk checkpoints of one scoring pass (one model, one set of settings)."""

    def __init__(self, directory: str | Path, key: str) -> None:
        self.directory = Path(directory)
        self.key = key

    def path(self, digest: str) -> Path:
        return self.directory / f"{digest}.npz"

    def save(self, digest: str, stats: Sequence, hidden: np.ndarray | None) -> None:
        """Write one chunk's per-text results atomically (a reader, or a resumed run after
        a crash, sees the whole file or none)."""
        import io

        from privacy_audit.ground.io import atomic_write_bytes

        arrays: dict[str, np.ndarray] = {
            "digest": np.array(digest),
            "lengths": np.array([len(s.log_probs) for s in stats], dtype=np.int64),
        }
        for f in _FIELDS:
            arrays[f] = np.concatenate([np.asarray(getattr(s, f)) for s in stats])
        for f in _OPTIONAL:
            vals = [getattr(s, f) for s in stats]
            if all(v is not None for v in vals):
                arrays[f] = np.concatenate([np.asarray(v) for v in vals])
            elif any(v is not None for v in vals):
                raise ValueError(f"{f} is set for some texts of a chunk and not others")
        if hidden is not None:
            arrays["hidden"] = np.asarray(hidden)
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        atomic_write_bytes(self.path(digest), buf.getvalue())

    def load(self, digest: str, n: int):
        """``(stats, hidden)`` of a finished chunk of ``n`` texts, or None when there is no
        such file or it does not hold what its name promises (then the chunk is scored)."""
        from privacy_audit.defenses.base import TokenStats

        p = self.path(digest)
        if not p.is_file():
            return None
        try:
            with np.load(p, allow_pickle=False) as z:
                data = {k: z[k] for k in z.files}
            if str(data["digest"]) != digest:
                return None
            lengths = data["lengths"]
            if lengths.shape != (n,) or (lengths < 0).any():
                return None
            total = int(lengths.sum())
            ends = np.cumsum(lengths)
            starts = ends - lengths
            for f in _FIELDS + _OPTIONAL:
                if f in data and data[f].shape != (total,):
                    return None
            if any(f not in data for f in _FIELDS):
                return None
            hidden = data.get("hidden")
            if hidden is not None and (hidden.ndim != 2 or hidden.shape[0] != n):
                return None
            stats = [
                TokenStats(
                    *(data[f][a:b] for f in _FIELDS),
                    **{f: (data[f][a:b] if f in data else None) for f in _OPTIONAL},
                )
                for a, b in zip(starts.tolist(), ends.tolist(), strict=True)
            ]
            return stats, hidden
        except (OSError, ValueError, KeyError, EOFError, TypeError, zipfile.BadZipFile):
            return None  # a damaged or foreign file: score the chunk again


def stream_token_stats(
    release,
    texts: Sequence[str],
    store: ChunkStore | None = None,
    resume: bool = False,
    chunk_texts: int | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Fill ``release``'s per-text caches (token statistics and pooled hidden states, what
    :meth:`~privacy_audit.targets.scoring.HFLMRelease.token_stats` and ``hidden`` read) for
    the distinct ``texts``, one chunk of ``chunk_texts`` (default :data:`CHUNK_TEXTS`) at a
    time; with ``store``, each scored chunk is
    checkpointed and (``resume``) a finished one is loaded instead of scored.

    Returns ``{"chunks", "chunk_texts", "reused", "scored"}``."""
    from privacy_audit.audit.scale.malloc import release_free_memory, tune_malloc
    from privacy_audit.targets.scoring import score_texts

    # once per process: the batches' large buffers from a kept heap, not fresh mmaps (the
    # forward's page faults); and every TRIM_TEXTS scored texts the heap's free pages go
    # back, so that the small per-text results kept between the freed batch buffers do
    # not make the resident memory grow with n (audit/scale/malloc.py, docs/large-inputs-one-machine.md)
    tune_malloc()
    since_trim = [0]

    def on_batch(k: int) -> None:
        since_trim[0] += k
        if since_trim[0] >= TRIM_TEXTS:
            since_trim[0] = 0
            release_free_memory()
        if bar is not None:
            bar.update(k)

    chunk_texts = CHUNK_TEXTS if chunk_texts is None else int(chunk_texts)
    texts = list(dict.fromkeys(texts))
    cache = release.__dict__.setdefault("_token_stats_cache", {})
    hidden_cache = release.__dict__.setdefault("_hidden_cache", {})
    parts = chunks(texts, chunk_texts)
    reused = scored = 0
    bar = None
    if progress:
        from privacy_audit.ground.progress import progress_bar

        # a bar in a terminal, one line per tenth in a log (tqdm's \r frames pile up there)
        bar = progress_bar(
            len(texts), "scoring (one forward pass per text)", True, unit="text", leave=False
        )
    try:
        for part in parts:
            if all(t in cache and t in hidden_cache for t in part):
                if bar is not None:
                    bar.update(len(part))
                continue
            digest = chunk_digest(store.key, part) if store is not None else None
            got = store.load(digest, len(part)) if (store is not None and resume) else None
            if got is not None:
                stats, hid = got
                reused += 1
            else:
                stats, hid, used = score_texts(
                    release.model,
                    release.tokenizer,
                    part,
                    release.max_length,
                    release.batch_size,
                    release.token_budget,
                    hidden=True,
                    progress=on_batch,
                    extraction=getattr(release, "extraction", None),
                )
                release.batch_size = used  # keep what fitted (CUDA out-of-memory backoff)
                scored += 1
                if store is not None:
                    store.save(digest, stats, hid)
            if got is not None and bar is not None:
                bar.update(len(part))
            cache.update(zip(part, stats, strict=True))
            if hid is not None:
                hidden_cache.update(zip(part, hid, strict=True))
    finally:
        if bar is not None:
            bar.close()
    return {
        "chunks": len(parts),
        "chunk_texts": int(chunk_texts),
        "reused": reused,
        "scored": scored,
    }


def prefill(
    release,
    texts: Sequence[str],
    executor=None,
    progress: bool = True,
    run_dir: str | Path | None = None,
    resume: bool = False,
    role: str = "target",
) -> str:
    """Every text's token statistics once, before any attack: on Ray actors with
    ``executor.kind == 'ray'`` (no chunk checkpoints there), else in-process in chunks,
    checkpointed under ``run_dir`` and resumed from it with ``resume``. Returns where, as
    results.json's ``target.scoring`` says it."""
    if executor is not None and getattr(executor, "kind", "local") == "ray":
        from privacy_audit.audit.scale.distributed import prefill_token_stats

        return prefill_token_stats(release, list(texts), executor, progress)
    store = None
    if run_dir is not None and getattr(release, "recipe", None):
        store = ChunkStore(Path(run_dir) / FOLDER, scoring_key(release, role))
    info = stream_token_stats(release, texts, store, resume, progress=progress)
    if store is not None and info["reused"]:
        _log(
            f"  resume: {info['reused']} of {info['chunks']} scoring chunk(s) of "
            f"{role} reused from {store.directory}",
            progress,
        )
    return "local"


__all__ = [
    "CHUNK_TEXTS",
    "ChunkStore",
    "chunk_digest",
    "chunks",
    "prefill",
    "scoring_key",
    "stream_token_stats",
]
