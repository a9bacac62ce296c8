"""DC-PDD (Zhang et al. 2024, "Pretraining data detection for large language models: a
divergence-based calibration method", EMNLP).

Token probabilities are calibrated by the token's frequency in a reference corpus:

    f(v)  = (count(v) + 1) / (Σ_u count(u) + |V|)     (Laplace smoothing),
    α_t   = min(p(x_t | x_<t) · log(1 / f(x_t)), a)   (the paper's upper clip a),
    score = mean of α_t over the **first occurrence** of each distinct token id in x,

higher = member. Probabilities are read from the shared forward pass. The reference
corpus is the audit's public split (counts of the target tokenizer's ids, ``<bos>`` /
``<eos>`` excluded as in the paper's tokenisation of raw text), or a user file
(``frequency_file``: a JSON list of texts, or a JSON object {token id: count}).
The paper's default clip is a = 0.01 for 50k-token vocabularies where most p are small;
on a small vocabulary nearly every α_t would be clipped, so ``clip`` is an option.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from privacy_audit.attacks.base import Attack
from privacy_audit.attacks.llm_membership import token_stats
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface, TokenStats


def token_frequencies(counts: np.ndarray) -> np.ndarray:
    """Laplace-smoothed frequency distribution (count + 1) / (N + |V|)."""
    c = np.asarray(counts, dtype=np.float64)
    return (c + 1.0) / (c.sum() + c.size)


def dc_pdd_score(stats: TokenStats, freq: np.ndarray, clip: float) -> float:
    """Mean over first occurrences of min(p · log(1/f), clip)."""
    ids = np.asarray(stats.token_ids, dtype=np.int64)
    if ids.size == 0:
        return 0.0
    _, first = np.unique(ids, return_index=True)
    first = np.sort(first)
    p = np.exp(np.asarray(stats.log_probs, dtype=np.float64)[first])
    alpha = np.minimum(p * -np.log(freq[ids[first]]), clip)
    return float(alpha.mean())


class DCPDDAttack(Attack):
    name = "dc-pdd"
    target_kind = "lm"  # needs a causal LM release
    description = (
        "DC-PDD (Zhang et al. 2024): token probabilities calibrated by reference-corpus token "
        "frequencies, p·log(1/f) clipped at a, averaged over first occurrences."
    )
    requires = frozenset({Surface.PROBABILITIES})
    summary = "Token probabilities calibrated by a corpus's token frequencies (DC-PDD, Zhang et al. 2024)."
    needs = ("population",)
    cost = "none beyond the shared forward pass (+ one tokenisation of the frequency corpus)"
    OPTIONS = {"clip": (float, 1.0), "frequency_file": (str, "")}

    def __init__(self, **options) -> None:
        unknown = set(options) - set(self.OPTIONS)
        if unknown:
            raise ValueError(f"unknown option(s) {', '.join(sorted(unknown))} for dc-pdd")
        self.options = {k: options.get(k, d) for k, (_, d) in self.OPTIONS.items()}
        if not self.options["clip"] > 0:
            raise ValueError("dc-pdd clip must be positive")
        f = self.options["frequency_file"]
        if f and not Path(f).is_file():
            raise ValueError(f"dc-pdd frequency_file {f!r} is no file")
        self.public: Examples | None = None

    def prepare(self, public: Examples | None = None, seed: int = 0) -> None:
        self.public = public

    def counts(self, release) -> np.ndarray:
        tok = getattr(release, "tokenizer", None)
        if not hasattr(tok, "token_ids"):
            raise ValueError("dc-pdd needs the release's tokenizer")
        counts = np.zeros(len(tok), dtype=np.float64)
        f = self.options["frequency_file"]
        if f:
            try:
                data = json.loads(Path(f).read_text("utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise ValueError(f"dc-pdd frequency_file cannot be read: {exc}") from None
            if isinstance(data, dict):
                for k, v in data.items():
                    i = int(k)
                    if not 0 <= i < counts.size or not v >= 0:
                        raise ValueError(f"dc-pdd frequency_file: bad entry {k!r}: {v!r}")
                    counts[i] += float(v)
                return counts
            texts = data
        elif self.public is not None and len(self.public):
            texts = self.public.texts
        else:
            raise ValueError("dc-pdd needs a reference corpus: data.public or frequency_file")
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            raise ValueError("dc-pdd frequency_file must hold a list of texts or {id: count}")
        for t in texts:
            np.add.at(counts, np.asarray(tok.token_ids(t), dtype=np.int64), 1.0)
        return counts

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        freq = token_frequencies(self.counts(release))
        return np.array(
            [
                dc_pdd_score(s, freq, self.options["clip"])
                for s in token_stats(release, examples.texts)
            ]
        )
