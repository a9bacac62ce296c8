"""Text2Text-style local-DP text sanitiser (Feyisetan et al., WSDM 2020): the baseline the
Split-N-Denoise paper compares with.

Each token's public word embedding x gets dχ noise z (density ∝ exp(−η‖z‖), the same
sampler as SnD: :func:`privacy_audit.defenses.snd_noise.sample_dx_noise`) and is replaced by the
vocabulary token whose embedding is nearest (L2) to x + z. The replacement is
post-processing of an η-dχ-private release, so each token is η-dχ private in the L2 metric
on embeddings, exactly as SnD's noisy embeddings; the server then sees ordinary token ids.
Special tokens ([CLS], [SEP], padding) are structural and kept in clear, like the sequence
length in SnD.
"""

from __future__ import annotations

import numpy as np

from privacy_audit.defenses.snd_noise import check_eta, sample_dx_noise


def nearest_tokens(points: np.ndarray, vocab: np.ndarray, chunk: int = 1024) -> np.ndarray:
    """Index of the L2-nearest row of ``vocab`` for every row of ``points`` (ties: lowest
    index), by ‖v‖² − 2 v·y in chunks."""
    points = np.asarray(points, dtype=np.float32)
    vocab = np.asarray(vocab, dtype=np.float32)
    if points.ndim != 2 or vocab.ndim != 2 or points.shape[1] != vocab.shape[1]:
        raise ValueError(
            f"points {points.shape} and vocabulary {vocab.shape} must be 2-D with equal width"
        )
    sq = (vocab.astype(np.float64) ** 2).sum(1).astype(np.float32)
    out = np.empty(len(points), dtype=np.int64)
    for i in range(0, len(points), chunk):
        d = sq[None, :] - 2.0 * (points[i : i + chunk] @ vocab.T)
        out[i : i + chunk] = d.argmin(1)
    return out


def sanitize_ids(
    ids: np.ndarray,
    mask: np.ndarray,
    vocab: np.ndarray,
    eta: float,
    rng: np.random.Generator,
    special_ids: set[int] | frozenset[int] = frozenset(),
) -> tuple[np.ndarray, dict[str, float]]:
    """Token ids with every non-special, non-pad token replaced by the nearest neighbour of
    its noised embedding; also the share of tokens that stayed the same."""
    eta = check_eta(eta)
    ids = np.asarray(ids, dtype=np.int64)
    mask = np.asarray(mask, dtype=bool)
    if ids.shape != mask.shape:
        raise ValueError(f"ids {ids.shape} and mask {mask.shape} must have the same shape")
    sel = mask & ~np.isin(ids, np.fromiter(special_ids, dtype=np.int64, count=len(special_ids)))
    x = vocab[ids[sel]]
    noisy = x + sample_dx_noise(len(x), x.shape[1], eta, rng).astype(np.float32)
    out = ids.copy()
    out[sel] = nearest_tokens(noisy, vocab)
    kept = float((out[sel] == ids[sel]).mean()) if sel.any() else 1.0
    return out, {"tokens_sanitized": int(sel.sum()), "share_unchanged": kept}
