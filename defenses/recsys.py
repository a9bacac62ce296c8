"""Sequential recommendation, the task Re-Attention was evaluated on (Ding et al., ICML
2024, Sec. 5 and App. D: MovieLens-1M and Amazon Games, SASRec-style next-item prediction,
NDCG@10 / HIT@10, last item of each user held out).

Those data sets cannot be downloaded here, so :class:`SyntheticSequences` generates a
seeded stand-in with the two properties the paper's argument rests on:

- **long-tailed item popularity**: item ``i`` has weight ``w_i ∝ rank_i^{-s}`` (Zipf with
  exponent ``s``, ranks a seeded permutation of the items), so a few items occur in most
  sequences and most items in very few; under DP-SGD the rare items' embedding rows
  receive noise at every step and signal rarely (effective error σC/(B p_i), Claim 4.2);
- **user-specific sequential structure**: items belong to ``n_topics`` topics; user ``u``
  has topic preferences ``θ_u ~ Dirichlet(α·1)``; the first item is drawn from
  ``π_u(i) ∝ θ_u[topic(i)] · w_i``; each next item follows the current item's successor
  list (``n_successors`` items of the same topic drawn by popularity, fixed per item) with
  probability ``p_follow``, otherwise it is a fresh draw from ``π_u``. The next item is
  thus predictable from the recent items (attention) and from the user's history (topics).

Model (:func:`build_sasrec`): SASRec's shape as the paper configures it (App. D.2):
causal self-attention over item embeddings with learned positional embeddings, d = 64,
1 head, 2 blocks, and the item-embedding matrix shared between input and output (the
paper's "parameter sharing", which Phantom Clipping makes affordable). It is a GPT-2
LM-head model whose vocabulary is the items (plus four special ids), so the suite's DP
engine (:mod:`privacy_audit.defenses.dp_engine`, phantom norms) and :mod:`privacy_audit.defenses.re_attention` apply
unchanged. Differences from SASRec: full softmax cross-entropy over all items instead of
SASRec's sampled binary cross-entropy, and GPT-2's pre-LayerNorm blocks.

Evaluation (:func:`rank_metrics`): leave-one-out, as in the paper (Kang & McAuley 2018):
each user's last item is the test target, the model sees the preceding items, and every
item is ranked (full ranking, no sampled negatives; Krichene & Rendle 2020). HIT@k = 1 if
the target is among the top k, NDCG@k = 1/log2(rank + 2) for a 0-based rank < k, else 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import Tensor

N_SPECIAL = 4  # PAD, BOS, EOS, UNK of privacy_audit.targets.lm; item i has token id N_SPECIAL + i


@dataclass(frozen=True)
class SyntheticSequences:
    """Seeded item-sequence generator (see the module docstring for the model)."""

    n_users: int = 2000
    n_items: int = 500
    seq_len: int = 20
    zipf_exponent: float = 1.1
    n_topics: int = 20
    topic_concentration: float = 0.3
    n_successors: int = 3
    p_follow: float = 0.6
    seed: int = 0

    def __post_init__(self) -> None:
        if self.n_users < 1 or self.n_items < 2:
            raise ValueError("need at least 1 user and 2 items")
        if self.seq_len < 3:
            raise ValueError(
                f"seq_len must be >= 3 (train on >= 2, hold out 1), got {self.seq_len}"
            )
        if not self.zipf_exponent >= 0:
            raise ValueError(f"zipf_exponent must be >= 0, got {self.zipf_exponent}")
        if not 0 <= self.p_follow <= 1:
            raise ValueError(f"p_follow must be in [0, 1], got {self.p_follow}")
        if self.n_topics < 1 or self.n_successors < 1 or not self.topic_concentration > 0:
            raise ValueError("n_topics, n_successors and topic_concentration must be positive")

    def describe(self) -> dict:
        return asdict(self)

    def popularity(self) -> np.ndarray:
        """Zipf item weights w_i (sum 1), from the structure seed."""
        rng = np.random.default_rng([self.seed, 0])
        ranks = rng.permutation(self.n_items) + 1
        w = ranks.astype(float) ** -self.zipf_exponent
        return w / w.sum()

    def _structure(self):
        rng = np.random.default_rng([self.seed, 1])
        w = self.popularity()
        topic = rng.integers(0, self.n_topics, self.n_items)
        succ = np.zeros((self.n_items, self.n_successors), dtype=np.int64)
        for i in range(self.n_items):
            pool = np.flatnonzero(topic == topic[i])
            pool = pool[pool != i]
            if len(pool) == 0:
                pool = np.delete(np.arange(self.n_items), i)
            k = min(self.n_successors, len(pool))
            pick = rng.choice(pool, size=k, replace=False, p=w[pool] / w[pool].sum())
            succ[i] = np.resize(pick, self.n_successors)
        return w, topic, succ

    def generate(self, n_users: int | None = None, user_seed: int = 0) -> np.ndarray:
        """``[n_users, seq_len]`` item ids (0-based). ``user_seed`` draws a different set of
        users from the same item structure (e.g. a public sample)."""
        n = self.n_users if n_users is None else n_users
        w, topic, succ = self._structure()
        rng = np.random.default_rng([self.seed, 2, user_seed])
        out = np.zeros((n, self.seq_len), dtype=np.int64)
        for u in range(n):
            theta = rng.dirichlet(np.full(self.n_topics, self.topic_concentration))
            pi = theta[topic] * w
            pi /= pi.sum()
            fresh = rng.choice(self.n_items, size=self.seq_len, p=pi)
            follow = rng.random(self.seq_len) < self.p_follow
            which = rng.integers(0, self.n_successors, self.seq_len)
            x = fresh[0]
            out[u, 0] = x
            for t in range(1, self.seq_len):
                x = succ[x, which[t]] if follow[t] else fresh[t]
                out[u, t] = x
        return out


def item_frequency_summary(seqs: np.ndarray, n_items: int) -> dict:
    """How long-tailed the generated data is: share of interactions on the top 10% of items,
    fraction of items seen in fewer than 1% of sequences, Gini coefficient of item counts."""
    counts = np.bincount(seqs.ravel(), minlength=n_items).astype(float)
    srt = np.sort(counts)[::-1]
    top = max(1, n_items // 10)
    incl = np.array([len(np.unique(r)) for r in seqs])
    seen = np.zeros(n_items)
    for r in seqs:
        seen[np.unique(r)] += 1
    asc = np.sort(counts)
    cum = np.cumsum(asc)
    gini = float(1 - 2 * (cum / cum[-1]).sum() / n_items + 1 / n_items) if cum[-1] > 0 else 0.0
    return {
        "interactions": int(counts.sum()),
        "share_top_10pct_items": float(srt[:top].sum() / max(counts.sum(), 1)),
        "fraction_items_in_under_1pct_of_sequences": float(np.mean(seen < 0.01 * len(seqs))),
        "items_never_seen": int((counts == 0).sum()),
        "gini": gini,
        "mean_distinct_items_per_sequence": float(incl.mean()),
    }


def to_tokens(seqs: np.ndarray) -> tuple[Tensor, Tensor]:
    """``[BOS, item tokens...]`` ids and an all-ones mask (sequences have equal length)."""
    from privacy_audit.targets.lm import BOS

    ids = torch.as_tensor(seqs + N_SPECIAL, dtype=torch.long)
    ids = torch.cat([torch.full((len(ids), 1), BOS, dtype=torch.long), ids], 1)
    return ids, torch.ones_like(ids)


def leave_one_out(seqs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Training prefixes (all but the last item) and the held-out last items."""
    return seqs[:, :-1], seqs[:, -1]


def inclusion_probs(seqs: np.ndarray, n_items: int, smoothing: float = 1.0) -> Tensor:
    """p_i = Pr[token i in a sequence] over the token vocabulary (specials count as always
    present), add-one smoothed; Re-Attention's effective-error setup."""
    seen = np.zeros(n_items)
    for r in seqs:
        seen[np.unique(r)] += 1
    p_items = (seen + smoothing) / (len(seqs) + 2 * smoothing)
    return torch.as_tensor(np.concatenate([np.ones(N_SPECIAL), p_items]))


def build_sasrec(n_items: int, seq_len: int, seed: int, n_embd=64, n_layer=2, n_head=1):
    """The paper's next-item Transformer (App. D.2) as a tied GPT-2 LM over item tokens."""
    from privacy_audit.targets.lm import build_lm

    return build_lm(
        n_items + N_SPECIAL,
        seed=seed,
        n_embd=n_embd,
        n_layer=n_layer,
        n_head=n_head,
        n_positions=seq_len + 1,
    )


@torch.no_grad()
def next_item_scores(model, prefixes: np.ndarray, batch_size: int = 512) -> Tensor:
    """Scores of every item for the item after each prefix, ``[n, n_items]``."""
    model.eval()
    out = []
    for i in range(0, len(prefixes), batch_size):
        ids, mask = to_tokens(prefixes[i : i + batch_size])
        logits = model(input_ids=ids, attention_mask=mask).logits[:, -1, N_SPECIAL:]
        out.append(logits.float())
    model.train()
    return torch.cat(out)


def rank_metrics(scores: Tensor, targets: np.ndarray, k: int = 10) -> dict[str, np.ndarray]:
    """Per-user HIT@k and NDCG@k from full-ranking scores (ties counted pessimistically:
    items scoring equal to the target rank above it)."""
    s = scores.double()
    t = torch.as_tensor(targets, dtype=torch.long)
    tgt = s[torch.arange(len(t)), t]
    rank = (s >= tgt[:, None]).sum(1) - 1  # 0-based; the target itself counted once
    rank = rank.numpy()
    hit = (rank < k).astype(float)
    ndcg = np.where(rank < k, 1.0 / np.log2(rank + 2.0), 0.0)
    return {f"hit@{k}": hit, f"ndcg@{k}": ndcg, "rank": rank}


def bootstrap_mean_ci(x: np.ndarray, n_boot: int = 1000, seed: int = 0, level: float = 0.95):
    """Percentile bootstrap CI of a mean (resampling users)."""
    x = np.asarray(x, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(x), (n_boot, len(x)))
    means = x[idx].mean(1)
    a = (1 - level) / 2
    return {
        "mean": float(x.mean()),
        "ci_low": float(np.quantile(means, a)),
        "ci_high": float(np.quantile(means, 1 - a)),
        "n": int(len(x)),
    }


def t_interval(x, level: float = 0.95) -> dict:
    """Student-t interval of a mean over seeds (NaN bounds with fewer than 2 values)."""
    from scipy import stats

    a = np.asarray(x, dtype=float)
    m = float(a.mean()) if len(a) else math.nan
    if len(a) < 2:
        return {"mean": m, "ci_low": math.nan, "ci_high": math.nan, "n": int(len(a))}
    half = float(stats.t.ppf(0.5 + level / 2, len(a) - 1) * a.std(ddof=1) / math.sqrt(len(a)))
    return {"mean": m, "ci_low": m - half, "ci_high": m + half, "n": int(len(a))}
