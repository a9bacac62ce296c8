"""The perplexity floor an LM must beat: an add-one-smoothed **unigram** model over the
LM's own tokenizer, scored on exactly the positions the LM is scored on.

An LM release's perplexity (``LMRelease.evaluate_utility``) is ``exp`` of the mean
next-token NLL over every predicted token of the test texts: ``<bos> w_1 … w_n <eos>``
predicts ``w_1 … w_n <eos>`` (truncated at ``max_length``). The unigram model predicts
each of those tokens with ``p(v) = (c_v + 1) / (Σ c + V)``, where ``c_v`` counts token
``v`` at the same positions of the fitting texts. A DP language model whose perplexity is
not clearly below this has learned no more than token frequencies, and a comparison of DP
mechanisms on it says nothing about their utility.
"""

from __future__ import annotations

import math

import numpy as np


def _targets(tokenizer, texts: list[str], max_length: int) -> list[np.ndarray]:
    ids, mask = tokenizer.encode(list(texts), max_length)
    ids, mask = ids[:, 1:].numpy(), mask[:, 1:].numpy().astype(bool)
    return [row[m] for row, m in zip(ids, mask, strict=True)]


def unigram_counts(tokenizer, texts: list[str], max_length: int) -> np.ndarray:
    """Counts of every token id at the predicted positions of ``texts``."""
    counts = np.zeros(tokenizer.vocab_size)
    for t in _targets(tokenizer, texts, max_length):
        np.add.at(counts, t, 1)
    return counts


def unigram_perplexity(
    tokenizer,
    fit_texts: list[str],
    eval_texts: list[str],
    max_length: int,
    smoothing: float = 1.0,
    n_boot: int = 1000,
    seed: int = 0,
) -> dict:
    """Perplexity of the add-``smoothing`` unigram fitted on ``fit_texts``, on
    ``eval_texts``, with a 95% bootstrap CI over sequences (as the LM's utility)."""
    if not fit_texts or not eval_texts:
        raise ValueError("unigram floor needs non-empty fitting and evaluation texts")
    counts = unigram_counts(tokenizer, fit_texts, max_length)
    logp = np.log(counts + smoothing) - math.log(counts.sum() + smoothing * len(counts))
    per_seq = _targets(tokenizer, eval_texts, max_length)
    sums = np.array([-logp[t].sum() for t in per_seq])
    n_tok = np.array([len(t) for t in per_seq], dtype=float)
    value = math.exp(sums.sum() / n_tok.sum())
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(sums), size=(n_boot, len(sums)))
    lo, hi = np.percentile(np.exp(sums[idx].sum(1) / n_tok[idx].sum(1)), [2.5, 97.5])
    return {
        "metric": "perplexity",
        "model": f"unigram (add-{smoothing:g} smoothing)",
        "value": value,
        "ci_low": float(lo),
        "ci_high": float(hi),
        "n": len(eval_texts),
        "tokens": int(n_tok.sum()),
        "fit_sequences": len(fit_texts),
        "fit_tokens": int(counts.sum()),
        "ci_method": f"bootstrap over sequences ({n_boot} resamples)",
    }


def utility_floor(tokenizer, public: list[str], train: list[str], test: list[str], max_length):
    """Unigram floors on the test texts: fitted on the public split (free for a DP
    model) and on public + the private training texts (the best unigram the data allows)."""
    out = {
        "test_sequences": len(test),
        "unigram_public": unigram_perplexity(tokenizer, public, test, max_length)
        if public
        else None,
        "unigram_public_and_train": unigram_perplexity(
            tokenizer, list(public) + list(train), test, max_length
        ),
    }
    floors = [v["value"] for k, v in out.items() if isinstance(v, dict)]
    out["floor"] = min(floors)
    out["rule"] = (
        "a model beats the floor when its perplexity CI lies entirely below the lower of "
        "the two unigram perplexities"
    )
    return out


def beats_floor(utility: dict | None, floor: float) -> bool | None:
    """True / False when the utility CI is entirely below / not below the floor;
    None when the run has no perplexity."""
    if not isinstance(utility, dict) or utility.get("metric") != "perplexity":
        return None
    hi = utility.get("ci_high", utility.get("value"))
    if hi is None or not math.isfinite(hi):
        return None
    return bool(hi < floor)
