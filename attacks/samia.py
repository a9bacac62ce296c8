"""SaMIA (Kaneko et al. 2024, "Sampling-based pseudo-likelihood for membership inference
attacks"): membership from generated text alone, for a model served without
log-probabilities.

For a text x of W words: the prefix is its first ⌊ρ·W⌋ words (ρ = 0.5), the reference is
the remaining words. The model continues the prefix ``samples`` = 10 times (temperature 1,
top-k 50), each continuation as many tokens as the reference suffix has. Each
continuation's words c are compared with the reference words r by ROUGE-1 recall,

    R₁(c, r) = Σ_w min(#_c(w), #_r(w)) / |r|,

and the score is the mean R₁ over the samples: a memorised text is continued with its
own words. Higher = member. With ``zlib = true`` each R₁ is multiplied by the zlib-
compressed length (bytes) of the continuation (the paper's SaMIA*zlib, which discounts
repetitive continuations).

Cost: ``samples`` generations per text (no log-probability read).
"""

from __future__ import annotations

import zlib
from collections import Counter

import numpy as np

from privacy_audit.attacks.base import Attack
from privacy_audit.attacks.llm_membership import count_tokens
from privacy_audit.defenses.base import Examples, ReleasedModel, Surface


def rouge1_recall(candidate: list[str], reference: list[str]) -> float:
    """Unigram recall of ``reference`` words in ``candidate`` words (multiset overlap)."""
    if not reference or not candidate:
        return 0.0
    overlap = Counter(candidate) & Counter(reference)
    return sum(overlap.values()) / len(reference)


def split_prefix(text: str, ratio: float) -> tuple[str, list[str]]:
    """(prefix text, reference suffix words) at ⌊ratio·W⌋ words."""
    words = text.split()
    k = int(len(words) * ratio)
    return " ".join(words[:k]), words[k:]


def samia_score(candidates: list[str], reference: list[str], use_zlib: bool = False) -> float:
    vals = []
    for c in candidates:
        r = rouge1_recall(c.split(), reference)
        if use_zlib:
            r *= len(zlib.compress(c.encode("utf-8")))
        vals.append(r)
    return float(np.mean(vals)) if vals else 0.0


class SaMIAAttack(Attack):
    name = "samia"
    target_kind = "lm"
    description = (
        "SaMIA (Kaneko et al. 2024): mean ROUGE-1 recall of the text's second half in 10 "
        "sampled continuations of its first half (temperature 1, top-k 50); generation only."
    )
    summary = "SaMIA: ROUGE-1 of sampled continuations against the true suffix (generation only)"
    needs = ("generation",)
    cost = "G generations per text (G = samples, 10 by default)"
    requires = frozenset({Surface.GENERATION})
    OPTIONS = {
        "samples": (int, 10),
        "prefix_ratio": (float, 0.5),
        "temperature": (float, 1.0),
        "top_k": (int, 50),
        "zlib": (bool, False),
    }

    def __init__(
        self,
        samples: int = 10,
        prefix_ratio: float = 0.5,
        temperature: float = 1.0,
        top_k: int = 50,
        zlib: bool = False,
    ) -> None:
        if samples < 1:
            raise ValueError(f"samia samples must be at least 1, got {samples}")
        if not 0 < prefix_ratio < 1:
            raise ValueError(f"samia prefix_ratio must be in (0, 1), got {prefix_ratio}")
        if not temperature > 0:
            raise ValueError(f"samia temperature must be > 0, got {temperature}")
        if top_k < 0:
            raise ValueError(f"samia top_k must be >= 0, got {top_k}")
        self.samples, self.prefix_ratio = int(samples), float(prefix_ratio)
        self.temperature, self.top_k, self.zlib = float(temperature), int(top_k), bool(zlib)
        self.seed = 0

    def prepare(self, public=None, seed: int = 0) -> None:
        self.seed = seed

    def score(self, release: ReleasedModel, examples: Examples) -> np.ndarray:
        generate = getattr(release, "generate_ids", None)
        if generate is None:
            raise ValueError("samia needs a release that generates text")
        splits = [split_prefix(t, self.prefix_ratio) for t in examples.texts]
        out = np.zeros(len(splits))
        # one call per suffix length (max_new_tokens), every prompt repeated `samples` times
        by_len: dict[int, list[int]] = {}
        for i, (prefix, ref) in enumerate(splits):
            if prefix and ref:
                n = max(1, count_tokens(release, " " + " ".join(ref)))
                by_len.setdefault(n, []).append(i)
        for n, idx in sorted(by_len.items()):
            prompts = [splits[i][0] for i in idx for _ in range(self.samples)]
            rows = generate(
                prompts,
                max_new_tokens=n,
                greedy=False,
                temperature=self.temperature,
                top_k=self.top_k,
                seed=self.seed * 1_000_003 + n,
            )
            decode = release.tokenizer.decode
            for k, i in enumerate(idx):
                cands = [decode(r) for r in rows[k * self.samples : (k + 1) * self.samples]]
                out[i] = samia_score(cands, splits[i][1], self.zlib)
        return out
