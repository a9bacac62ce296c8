"""The sampling distribution of a product's decoding settings, exactly as ``transformers``
generation builds it.

``model.generate(do_sample=True, temperature=T, top_k=K, top_p=P)`` (one beam) turns the
float32 next-token logits into a distribution with these warpers, in this order
(``GenerationMixin._get_logits_processor``, transformers 5.x):

1. ``TemperatureLogitsWarper(T)`` when ``T != 1``: logits / T;
2. ``TopKLogitsWarper(K, min_tokens_to_keep=1)`` when ``K != 0``: every logit strictly
   below the K-th largest is set to −∞, so **all tokens tied with the K-th are kept**
   (more than K tokens can survive a tie at the cut);
3. ``TopPLogitsWarper(P, min_tokens_to_keep=1)`` when ``P < 1``: logits sorted
   ascending, softmax, cumulative sum; a token is removed when the cumulative mass up to
   and including it is ``<= 1 − P``; the largest token is always kept. Among tied logits
   the order is ``torch.sort``'s, so which of them the cut removes is torch's choice, the
   same in generation and here;

then ``softmax`` and one multinomial draw. :class:`Decoding` applies the same warper
objects (imported from transformers, not re-implemented), so the probability it gives a
token is the probability generation samples it with, up to float rounding of the logits.

Defaults are transformers' generation defaults (``GenerationConfig``: temperature 1.0,
top-k 50, top-p 1.0); ``top_k = 0`` turns top-k off, ``top_p = 1`` turns top-p off.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class Decoding:
    """Sampling settings of a deployed model (one beam, ``do_sample=True``)."""

    temperature: float = 1.0
    top_k: int = 50
    top_p: float = 1.0

    def __post_init__(self) -> None:
        problem = decoding_problem(self.temperature, self.top_k, self.top_p)
        if problem is not None:
            raise ValueError(problem)

    def to_dict(self) -> dict:
        return asdict(self)

    def warpers(self) -> list:
        """The transformers warpers generation applies, in its order."""
        from transformers.generation.logits_process import (
            TemperatureLogitsWarper,
            TopKLogitsWarper,
            TopPLogitsWarper,
        )

        out = []
        if self.temperature != 1.0:
            out.append(TemperatureLogitsWarper(float(self.temperature)))
        if self.top_k != 0:
            out.append(TopKLogitsWarper(top_k=int(self.top_k), min_tokens_to_keep=1))
        if self.top_p < 1.0:
            out.append(TopPLogitsWarper(top_p=float(self.top_p), min_tokens_to_keep=1))
        return out

    def warp(self, logits: torch.Tensor) -> torch.Tensor:
        """Warped float32 scores [N, V] (−∞ for truncated tokens), as generation has them
        just before its softmax."""
        scores = logits.detach().to(torch.float32)
        for w in self.warpers():
            scores = w(None, scores)
        return scores

    def log_probs(self, logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """log P_decode(targets[i] | position i) from next-token logits [N, V]: float64,
        −∞ where truncation removed the target."""
        if logits.shape[0] == 0:
            return torch.zeros(0, dtype=torch.float64, device=logits.device)
        lp = torch.log_softmax(self.warp(logits).double(), dim=-1)
        return lp.gather(-1, targets.long().view(-1, 1).to(lp.device)).view(-1)


@dataclass(frozen=True)
class ExtractionSpec:
    """Probabilistic discoverable extraction (Hayes et al. 2024): a record's first
    ``prefix_tokens`` tokens are the prompt, the next ``suffix_tokens`` the target that
    one sampled query must reproduce verbatim under ``decoding``."""

    decoding: Decoding
    prefix_tokens: int = 32
    suffix_tokens: int = 32

    def __post_init__(self) -> None:
        for name in ("prefix_tokens", "suffix_tokens"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {v!r}")

    def to_dict(self) -> dict:
        return {
            "decoding": self.decoding.to_dict(),
            "prefix_tokens": self.prefix_tokens,
            "suffix_tokens": self.suffix_tokens,
        }


def decoding_problem(temperature, top_k, top_p) -> str | None:
    """Why these settings are not a valid sampling configuration (None when they are)."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        return f"temperature must be a number, got {temperature!r}"
    if not (math.isfinite(temperature) and temperature > 0):
        return f"temperature must be a positive finite number, got {temperature!r}"
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 0:
        return f"top_k must be an integer >= 0 (0 = off), got {top_k!r}"
    if isinstance(top_p, bool) or not isinstance(top_p, (int, float)):
        return f"top_p must be a number, got {top_p!r}"
    if not (math.isfinite(top_p) and 0 < top_p <= 1):
        return f"top_p must be in (0, 1] (1 = off), got {top_p!r}"
    return None


__all__ = ["Decoding", "ExtractionSpec", "decoding_problem"]
