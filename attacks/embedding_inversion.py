"""Embedding inversion: recover input tokens from released per-token representations.

Works on any release that exposes :attr:`Surface.TOKEN_HIDDEN` (one released row per
non-pad token, e.g. a split-inference client's upload) and the public token-embedding table
(:meth:`ReleasedModel.vocabulary_embeddings`) — not only on dp-forward.

- ``inversion-nn``: nearest neighbour (the DP-Forward paper §6.3): each released row is
  mapped to the closest row of the public table. Released rows may be normalized or pass a
  LayerNorm, so rows and table are centred and compared by cosine similarity
  (scale-invariant, shift-invariant).
- ``inversion-relaxed``: Song & Raghunathan (2020) relaxed optimisation: free logits
  Z ∈ R^{L×V}, reconstruction softmax(Z/T)·Ê fitted to the released rows by Adam, then
  argmax. Same centring and unit scaling as above.

Score: token recall = recovered tokens / target tokens, averaged per sequence with a
bootstrap interval over sequences (tokens of one sequence are not independent).
"""

from __future__ import annotations

import numpy as np

from privacy_audit.attacks.base import (
    AttackContext,
    LeakageAttack,
    LeakageResult,
    estimate,
    mean_estimate,
)
from privacy_audit.defenses.base import ReleasedModel, Surface


def _unit_centered(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    x = x - x.mean(axis=-1, keepdims=True)
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def nearest_token(rows: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Index of the most cosine-similar (centred) table row for every released row."""
    return (_unit_centered(rows) @ _unit_centered(table).T).argmax(axis=1)


def nearest_token_l2(rows: np.ndarray, table: np.ndarray, chunk: int = 2048) -> np.ndarray:
    """Index of the nearest table row in plain L2 (Split-and-Denoise Eq. 14), no centring."""
    rows = np.asarray(rows, dtype=np.float32)
    table = np.asarray(table, dtype=np.float32)
    sq = np.einsum("ij,ij->i", table, table)
    out = np.empty(len(rows), dtype=np.int64)
    for i in range(0, len(rows), chunk):  # argmin ‖w‖² − 2 w·x (‖x‖² is constant per row)
        out[i : i + chunk] = np.argmin(sq[None, :] - 2.0 * (rows[i : i + chunk] @ table.T), axis=1)
    return out


def relaxed_inversion(
    rows: np.ndarray,
    table: np.ndarray,
    temperature: float = 0.05,
    steps: int = 200,
    lr: float = 0.1,
    seed: int = 0,
) -> np.ndarray:
    """Song & Raghunathan relaxed inversion: argmax of fitted softmax(Z/T) over the vocabulary."""
    import torch

    g = torch.Generator().manual_seed(seed)
    target = torch.as_tensor(_unit_centered(rows))
    emb = torch.as_tensor(_unit_centered(table))
    z = (0.01 * torch.randn(target.shape[0], emb.shape[0], generator=g)).requires_grad_(True)
    opt = torch.optim.Adam([z], lr=lr)
    for _ in range(steps):
        opt.zero_grad()
        recon = torch.softmax(z / temperature, dim=1) @ emb
        loss = ((recon - target) ** 2).sum(dim=1).mean()
        loss.backward()
        opt.step()
    return z.detach().argmax(dim=1).numpy()


class _InversionBase(LeakageAttack):
    kind = "reconstruction"
    requires = frozenset({Surface.TOKEN_HIDDEN})
    OPTIONS = {"n_sequences": (int, 32)}

    def validate(self) -> None:
        if self.options["n_sequences"] < 1:
            raise ValueError(f"n_sequences must be >= 1, got {self.options['n_sequences']}")

    def invert(self, rows: np.ndarray, table: np.ndarray, seed: int) -> np.ndarray:
        raise NotImplementedError

    def run(self, release: ReleasedModel, context: AttackContext) -> LeakageResult:
        pool = context.members
        if len(pool) == 0:
            raise ValueError("inversion needs at least one target sequence")
        rng = np.random.default_rng(context.seed)
        n = min(self.options["n_sequences"], len(pool))
        idx = np.sort(rng.choice(len(pool), size=n, replace=False))
        texts = [pool.texts[i] for i in idx]
        released = release.token_hidden(texts)
        truth = release.token_ids(texts)
        table = release.vocabulary_embeddings()
        lengths = [len(r) for r in released]
        if any(len(r) != len(t) for r, t in zip(released, truth, strict=True)):
            raise ValueError("released rows and true token ids are not aligned")
        guess = self.invert(np.concatenate(released), table, context.seed)
        truth_all = np.concatenate(truth)
        hit = guess == truth_all
        per_seq, samples, start = [], [], 0
        for j, length in enumerate(lengths):
            h = hit[start : start + length]
            per_seq.append(float(h.mean()) if length else 0.0)
            if j < 3:
                samples.append(
                    {
                        "original": " ".join(
                            release.decode_tokens(truth_all[start : start + length])
                        ),
                        "reconstructed": " ".join(
                            release.decode_tokens(guess[start : start + length])
                        ),
                    }
                )
            start += length
        s = context.settings
        recall = mean_estimate(
            per_seq,
            s.confidence,
            s.n_boot,
            context.seed,
            tokens=int(hit.size),
            recovered=int(hit.sum()),
        )
        chance = estimate(1.0 / table.shape[0], n=int(hit.size))
        return LeakageResult(
            self.name,
            self.kind,
            headline="token_recall",
            metrics={"token_recall": recall, "uniform_guess_baseline": chance},
            details={"sequences": n, "tokens": int(hit.size), "vocabulary": int(table.shape[0])},
            samples=samples,
        )


class NearestNeighbourInversion(_InversionBase):
    """``metric = "cosine"`` (default): centred cosine, for rows that may be normalised;
    ``metric = "l2"``: plain Euclidean nearest neighbour, the attack of Split-and-Denoise
    (Eq. 14) on uploads that live in the embedding table's own space."""

    name = "inversion-nn"
    summary = "Maps released token embeddings back to tokens by nearest neighbour."
    needs = ()
    cost = "no model pass; 1 nearest-neighbour search per released token"
    description = (
        "Nearest-neighbour embedding inversion: each released token row mapped to the closest "
        "public token embedding (token recall)."
    )
    OPTIONS = {"n_sequences": (int, 32), "metric": (str, "cosine")}

    def validate(self) -> None:
        super().validate()
        if self.options["metric"] not in ("cosine", "l2"):
            raise ValueError(f"metric must be cosine or l2, got {self.options['metric']!r}")

    def invert(self, rows, table, seed):
        if self.options["metric"] == "l2":
            return nearest_token_l2(rows, table)
        return nearest_token(rows, table)


class RelaxedInversion(_InversionBase):
    name = "inversion-relaxed"
    summary = "Recovers tokens from released embeddings by relaxed-softmax optimisation (Song & Raghunathan 2020)."
    needs = ()
    cost = "hundreds of gradient steps per released sequence"
    description = (
        "Relaxed-softmax optimisation inversion (Song & Raghunathan 2020): softmax over the "
        "vocabulary times the embedding table fitted by gradient descent (token recall)."
    )
    OPTIONS = {
        "n_sequences": (int, 16),
        "steps": (int, 200),
        "temperature": ((int, float), 0.05),
    }

    def validate(self) -> None:
        super().validate()
        if self.options["steps"] < 1:
            raise ValueError(f"steps must be >= 1, got {self.options['steps']}")
        if not self.options["temperature"] > 0:
            raise ValueError(f"temperature must be > 0, got {self.options['temperature']}")

    def invert(self, rows, table, seed):
        return relaxed_inversion(
            rows,
            table,
            temperature=float(self.options["temperature"]),
            steps=int(self.options["steps"]),
            seed=seed,
        )
